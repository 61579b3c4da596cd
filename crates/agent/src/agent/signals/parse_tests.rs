use super::*;
use serde_json::json;

fn hook(v: Value) -> Vec<SignalNote> {
    claude_hook(v.to_string().as_bytes()).unwrap()
}

fn one(notes: Vec<SignalNote>) -> SignalNote {
    assert_eq!(notes.len(), 1, "{notes:?}");
    notes.into_iter().next().unwrap()
}

#[test]
fn every_claude_hook_event_is_its_signal_with_the_session() {
    let cases = [
        (
            json!({"hook_event_name":"SessionStart","source":"startup"}),
            Signal::SessionStarted,
        ),
        (
            json!({"hook_event_name":"UserPromptSubmit","prompt":"x"}),
            Signal::PromptSubmitted,
        ),
        (
            json!({"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}),
            Signal::ToolStarted {
                tool: "Bash".into(),
            },
        ),
        (
            json!({"hook_event_name":"PermissionRequest","tool_name":"Write"}),
            Signal::PermissionAsked {
                tool: "Write".into(),
            },
        ),
        (
            json!({"hook_event_name":"PostToolUse","tool_name":"Read","tool_response":{}}),
            Signal::ToolFinished {
                tool: "Read".into(),
                failed: false,
            },
        ),
        (
            json!({"hook_event_name":"PostToolUseFailure","tool_name":"Bash","error":"exit 1"}),
            Signal::ToolFinished {
                tool: "Bash".into(),
                failed: true,
            },
        ),
        (
            json!({"hook_event_name":"Notification","notification_type":"permission_prompt","message":"m"}),
            Signal::Notified {
                notice: Notice::PermissionPrompt,
            },
        ),
        (
            json!({"hook_event_name":"Notification","notification_type":"idle_prompt"}),
            Signal::Notified {
                notice: Notice::IdlePrompt,
            },
        ),
        (
            json!({"hook_event_name":"Notification","notification_type":"elicitation_dialog"}),
            Signal::Notified {
                notice: Notice::ElicitationDialog,
            },
        ),
        (
            json!({"hook_event_name":"Notification","notification_type":"something_new"}),
            Signal::Notified {
                notice: Notice::Other,
            },
        ),
        (
            json!({"hook_event_name":"Stop","stop_hook_active":false}),
            Signal::TurnEnded {
                message_sha256: None,
            },
        ),
        (
            json!({"hook_event_name":"StopFailure","error_type":"rate_limit"}),
            Signal::TurnFailed {
                error: TurnError::RateLimit,
            },
        ),
        (
            json!({"hook_event_name":"SubagentStart"}),
            Signal::SubagentStarted,
        ),
        (
            json!({"hook_event_name":"SubagentStop"}),
            Signal::SubagentStopped,
        ),
        (
            json!({"hook_event_name":"PreCompact","trigger":"auto"}),
            Signal::Compacting,
        ),
        (
            json!({"hook_event_name":"SessionEnd","reason":"exit"}),
            Signal::SessionEnded,
        ),
    ];
    for (mut input, want) in cases {
        input["session_id"] = json!("0b6c-session");
        input["transcript_path"] = json!("/somewhere/t.jsonl");
        let n = one(hook(input.clone()));
        assert_eq!(n.source, Source::Hook, "{input}");
        assert_eq!(n.session.as_deref(), Some("0b6c-session"), "{input}");
        assert_eq!(n.signal, want, "{input}");
    }
}

#[test]
fn a_stop_keeps_only_the_messages_sha256() {
    let body = "the secret answer is 42";
    let n = one(hook(
        json!({"hook_event_name":"Stop","session_id":"s","last_assistant_message":body}),
    ));
    let want = sha256_hex(body);
    assert_eq!(want.len(), 64);
    // sha256("abc"), the standard's test vector: the digest is the real one.
    assert_eq!(
        sha256_hex("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        n.signal,
        Signal::TurnEnded {
            message_sha256: Some(want)
        }
    );
    let j = serde_json::to_string(&n).unwrap();
    assert!(!j.contains("secret"), "{j}");
}

#[test]
fn stop_failure_words_map_to_their_error() {
    for (w, e) in [
        ("rate_limit", TurnError::RateLimit),
        ("usage_limit_reached", TurnError::RateLimit),
        ("authentication_failed", TurnError::Auth),
        ("unauthorized", TurnError::Auth),
        ("billing_error", TurnError::Billing),
        ("insufficient_credit", TurnError::Billing),
        ("server_error", TurnError::Other),
        ("", TurnError::Other),
    ] {
        assert_eq!(turn_error(w), e, "{w}");
    }
}

#[test]
fn unknown_events_and_wrong_types_give_nothing_and_no_error() {
    assert!(hook(json!({"hook_event_name":"SomethingNew","session_id":"s"})).is_empty());
    assert!(hook(json!({"session_id":"s"})).is_empty());
    assert!(hook(json!({"hook_event_name":42})).is_empty());
    // A tool name of the wrong type is an unknown tool, not a failure.
    let n = one(hook(json!({"hook_event_name":"PreToolUse","tool_name":7})));
    assert_eq!(n.signal, Signal::ToolStarted { tool: "?".into() });
    // A session of the wrong type or out of bounds is dropped, not cut.
    let n = one(hook(
        json!({"hook_event_name":"SessionStart","session_id":"x".repeat(MAX_SESSION + 1)}),
    ));
    assert_eq!(n.session, None);
    let n = one(hook(
        json!({"hook_event_name":"SessionStart","session_id":"a\nb"}),
    ));
    assert_eq!(n.session, None);
}

#[test]
fn a_long_or_hostile_tool_name_is_cut_to_bounds() {
    let long = "é".repeat(MAX_TOOL);
    let n = one(hook(
        json!({"hook_event_name":"PreToolUse","tool_name":long}),
    ));
    let Signal::ToolStarted { tool } = &n.signal else {
        panic!("{n:?}")
    };
    assert!(
        tool.len() <= MAX_TOOL && tool.chars().all(|c| c == 'é'),
        "{tool}"
    );
    let n = one(hook(
        json!({"hook_event_name":"PreToolUse","tool_name":"mcp__x\u{1b}[2J\u{7}"}),
    ));
    assert_eq!(
        n.signal,
        Signal::ToolStarted {
            tool: "mcp__x[2J".into()
        }
    );
    assert!(n.check().is_ok());
}

#[test]
fn garbage_and_oversized_input_is_an_error_that_names_no_content() {
    for bad in [
        &b""[..],
        b"not json",
        b"[1,2]",
        b"\"str\"",
        b"{\"a\":",
        b"\xff\xfe",
    ] {
        assert_eq!(claude_hook(bad), Err(ParseError::NotAnObject), "{bad:?}");
        assert_eq!(claude_status(bad), Err(ParseError::NotAnObject));
        assert_eq!(codex_notify(bad), Err(ParseError::NotAnObject));
        assert_eq!(codex_rollout_line(bad), Err(ParseError::NotAnObject));
    }
    let mut big = br#"{"hook_event_name":"Stop","x":""#.to_vec();
    big.resize(MAX_INPUT + 1, b'a');
    let e = claude_hook(&big).unwrap_err();
    assert_eq!(e, ParseError::TooLarge { len: MAX_INPUT + 1 });
    assert!(!e.to_string().contains("Stop"));
}

fn status(v: Value) -> Vec<SignalNote> {
    claude_status(v.to_string().as_bytes()).unwrap()
}

#[test]
fn the_status_line_gives_limits_and_usage() {
    let notes = status(json!({
        "session_id": "s1",
        "model": {"id": "m", "display_name": "M"},
        "cost": {"total_cost_usd": 0.25, "total_duration_ms": 10},
        "context_window": {"total_input_tokens": 1200, "total_output_tokens": 300, "used_percentage": 12},
        "rate_limits": {
            "five_hour": {"used_percentage": 41.5, "resets_at": 1765000000},
            "seven_day": {"used_percentage": 9, "resets_at": "2026-12-10T00:00:00Z"}
        }
    }));
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes
            .iter()
            .all(|n| n.source == Source::Status && n.session.as_deref() == Some("s1"))
    );
    assert_eq!(
        notes[0].signal,
        Signal::Limits(Limits {
            short: Some(LimitWindow {
                used_percent: 41.5,
                resets_at: Some(1_765_000_000),
                window_minutes: None
            }),
            long: Some(LimitWindow {
                used_percent: 9.0,
                resets_at: Some(1_796_860_800),
                window_minutes: None
            }),
        })
    );
    assert_eq!(
        notes[1].signal,
        Signal::Usage(Usage {
            input_tokens: Some(1200),
            output_tokens: Some(300),
            cached_tokens: None,
            cost_usd: Some(0.25)
        })
    );
}

#[test]
fn a_status_line_without_limits_or_cost_gives_nothing_and_percentages_are_clamped() {
    assert!(status(json!({"session_id":"s","model":{"id":"m"}})).is_empty());
    let n = one(status(
        json!({"rate_limits":{"five_hour":{"used_percentage":100.4}}}),
    ));
    let Signal::Limits(l) = n.signal else {
        panic!()
    };
    assert_eq!(l.short.map(|w| w.used_percent), Some(100.0));
    assert_eq!(l.long, None);
    // A negative cost is not a cost.
    assert!(status(json!({"cost":{"total_cost_usd":-1}})).is_empty());
}

#[test]
fn resets_at_takes_seconds_milliseconds_strings_and_rfc3339() {
    assert_eq!(resets_at(&json!(1765000000)), Some(1_765_000_000));
    assert_eq!(resets_at(&json!(1765000000.7)), Some(1_765_000_000));
    assert_eq!(resets_at(&json!(1765000000123u64)), Some(1_765_000_000));
    assert_eq!(resets_at(&json!("1765000000")), Some(1_765_000_000));
    assert_eq!(
        resets_at(&json!("2026-12-06T09:20:00+01:00")),
        Some(1_796_545_200)
    );
    assert_eq!(resets_at(&json!("tomorrow")), None);
    assert_eq!(resets_at(&json!(null)), None);
}

#[test]
fn a_codex_notify_turn_end_keeps_the_thread_and_a_hash() {
    let v = json!({
        "type": "agent-turn-complete",
        "thread-id": "019a-thread",
        "turn-id": "t1",
        "cwd": "/w",
        "input-messages": ["do the secret thing"],
        "last-assistant-message": "done"
    });
    let n = one(codex_notify(v.to_string().as_bytes()).unwrap());
    assert_eq!(n.source, Source::Notify);
    assert_eq!(n.session.as_deref(), Some("019a-thread"));
    assert_eq!(
        n.signal,
        Signal::TurnEnded {
            message_sha256: Some(sha256_hex("done"))
        }
    );
    assert!(!serde_json::to_string(&n).unwrap().contains("secret"));
    let other = json!({"type": "something-else", "thread-id": "x"});
    assert!(
        codex_notify(other.to_string().as_bytes())
            .unwrap()
            .is_empty()
    );
}

fn rollout(v: Value) -> Vec<SignalNote> {
    codex_rollout_line(v.to_string().as_bytes()).unwrap()
}

#[test]
fn codex_rollout_lines_give_turns_usage_and_limits() {
    let ev =
        |p: Value| json!({"timestamp":"2026-12-06T08:00:00.000Z","type":"event_msg","payload":p});
    assert_eq!(
        one(rollout(ev(
            json!({"type":"task_started","model_context_window":1000})
        )))
        .signal,
        Signal::PromptSubmitted
    );
    assert_eq!(
        one(rollout(ev(
            json!({"type":"task_complete","last_agent_message":"ok"})
        )))
        .signal,
        Signal::TurnEnded {
            message_sha256: Some(sha256_hex("ok"))
        }
    );
    let failed = json!({"type":"task_complete","last_agent_message":null,
        "error":{"message":"You've hit your usage limit.","codex_error_info":"usage_limit_exceeded"}});
    assert_eq!(
        one(rollout(ev(failed))).signal,
        Signal::TurnFailed {
            error: TurnError::RateLimit
        }
    );
    assert_eq!(
        one(rollout(ev(
            json!({"type":"turn_aborted","reason":"interrupted"})
        )))
        .signal,
        Signal::TurnAborted
    );
    let notes = rollout(ev(json!({
        "type": "token_count",
        "info": {
            "total_token_usage": {"input_tokens": 5000, "cached_input_tokens": 4000, "output_tokens": 70, "total_tokens": 5070},
            "last_token_usage": {"input_tokens": 1, "output_tokens": 1}
        },
        "rate_limits": {
            "primary": {"used_percent": 12.0, "window_minutes": 300, "resets_at": 1765010000},
            "secondary": {"used_percent": 3.5, "window_minutes": 10080, "resets_at": "2026-12-12T00:00:00Z"}
        }
    })));
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes.iter().all(|n| n.source == Source::Transcript));
    assert_eq!(
        notes[0].signal,
        Signal::Usage(Usage {
            input_tokens: Some(5000),
            output_tokens: Some(70),
            cached_tokens: Some(4000),
            cost_usd: None
        })
    );
    let Signal::Limits(l) = &notes[1].signal else {
        panic!()
    };
    assert_eq!(l.short.and_then(|w| w.window_minutes), Some(300));
    assert_eq!(l.long.and_then(|w| w.resets_at), Some(1_797_033_600));
    // A token count before any usage (info null) and without limits: nothing.
    assert!(
        rollout(ev(
            json!({"type":"token_count","info":null,"rate_limits":null})
        ))
        .is_empty()
    );
    // Other line types and event kinds are skipped.
    assert!(rollout(json!({"type":"session_meta","payload":{"id":"x"}})).is_empty());
    assert!(rollout(ev(json!({"type":"agent_message","message":"hi"}))).is_empty());
    assert!(rollout(json!({"type":"event_msg"})).is_empty());
}
