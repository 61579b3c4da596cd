//! `agent::signals::parse` on what the real agents sent (Claude Code
//! 2.1.197 and 2.1.332, Codex 0.171.0; tests/fixtures/signals): each
//! payload is the signal drover reads, with its session, and no body.

use drover::agent::signals::parse;
use drover::proto::signal::{Notice, Signal, SignalNote, Source, TurnError};
use serde_json::Value;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/signals")
}

/// What the agent handed over: a capture's `payload` (stdin, or the last
/// argv for notify), or the file itself (a rollout line).
fn payload(rel: &str) -> Value {
    let p = dir().join(rel);
    let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    if v.get("argv").is_some() {
        v["payload"].clone()
    } else {
        v
    }
}

fn bytes(rel: &str) -> Vec<u8> {
    payload(rel).to_string().into_bytes()
}

fn one(notes: Vec<SignalNote>, rel: &str) -> SignalNote {
    assert_eq!(notes.len(), 1, "{rel}: {notes:?}");
    notes.into_iter().next().unwrap()
}

#[test]
fn every_captured_claude_hook_is_its_signal_with_its_session() {
    let cases: &[(&str, &str)] = &[
        ("SessionStart", "session_started"),
        ("UserPromptSubmit", "prompt_submitted"),
        ("PreToolUse", "tool_started"),
        ("PermissionRequest", "permission_asked"),
        ("Notification", "notified"),
        ("PostToolUse", "tool_finished"),
        ("PostToolUseFailure", "tool_finished"),
        ("Stop", "turn_ended"),
    ];
    for version in ["claude-2.1.197", "claude-2.1.332"] {
        for (event, kind) in cases {
            let rel = format!("{version}/{event}.json");
            let p = payload(&rel);
            let n = one(parse::claude_hook(&bytes(&rel)).unwrap(), &rel);
            assert_eq!(n.source, Source::Hook, "{rel}");
            assert_eq!(n.signal.kind(), *kind, "{rel}");
            assert_eq!(n.session.as_deref(), p["session_id"].as_str(), "{rel}");
            assert!(n.check().is_ok(), "{rel}");
        }
        let rel = format!("{version}/PermissionRequest.json");
        let n = one(parse::claude_hook(&bytes(&rel)).unwrap(), &rel);
        assert_eq!(
            n.signal,
            Signal::PermissionAsked {
                tool: "Bash".into()
            }
        );
        let rel = format!("{version}/Notification.json");
        let n = one(parse::claude_hook(&bytes(&rel)).unwrap(), &rel);
        assert_eq!(
            n.signal,
            Signal::Notified {
                notice: Notice::PermissionPrompt
            }
        );
        let rel = format!("{version}/PostToolUseFailure.json");
        let n = one(parse::claude_hook(&bytes(&rel)).unwrap(), &rel);
        assert!(matches!(
            n.signal,
            Signal::ToolFinished { failed: true, .. }
        ));
        // The turn's last message: only its sha256 leaves the parser.
        let rel = format!("{version}/Stop.json");
        let p = payload(&rel);
        let msg = p["last_assistant_message"].as_str().unwrap();
        let n = one(parse::claude_hook(&bytes(&rel)).unwrap(), &rel);
        assert_eq!(
            n.signal,
            Signal::TurnEnded {
                message_sha256: Some(parse::sha256_hex(msg))
            }
        );
        assert!(!serde_json::to_string(&n).unwrap().contains(msg));
    }
    // Auto mode's approval asks with a Notification of its own type and no
    // PermissionRequest: it must still read as a permission prompt.
    let rel = "claude-2.1.332/Notification.agent-needs-input.json";
    assert_eq!(
        one(parse::claude_hook(&bytes(rel)).unwrap(), rel).signal,
        Signal::Notified {
            notice: Notice::PermissionPrompt
        }
    );
    for (event, kind) in [
        ("SubagentStart", "subagent_started"),
        ("SubagentStop", "subagent_stopped"),
        ("SessionEnd", "session_ended"),
    ] {
        let rel = format!("claude-2.1.197/{event}.json");
        assert_eq!(
            one(parse::claude_hook(&bytes(&rel)).unwrap(), &rel)
                .signal
                .kind(),
            kind
        );
    }
}

/// The real StopFailure says `"error": "rate_limit"` (not `error_type`).
#[test]
fn a_captured_stop_failure_is_a_rate_limit() {
    let rel = "claude-2.1.197/StopFailure.json";
    let n = one(parse::claude_hook(&bytes(rel)).unwrap(), rel);
    assert_eq!(
        n.signal,
        Signal::TurnFailed {
            error: TurnError::RateLimit
        }
    );
}

#[test]
fn a_captured_status_line_is_usage_and_no_limits_without_them() {
    for rel in [
        "claude-2.1.197/status-line.json",
        "claude-2.1.197/status-line.after-limit-apikey.json",
        "claude-2.1.332/status-line.json",
    ] {
        let p = payload(rel);
        let n = one(parse::claude_status(&bytes(rel)).unwrap(), rel);
        assert_eq!(n.source, Source::Status);
        let Signal::Usage(u) = n.signal else {
            panic!("{rel}: {n:?}")
        };
        assert_eq!(u.cost_usd, p["cost"]["total_cost_usd"].as_f64(), "{rel}");
        assert_eq!(
            u.input_tokens,
            p["context_window"]["total_input_tokens"].as_u64()
        );
    }
}

#[test]
fn codex_notify_takes_the_users_turn_and_skips_the_title_turn() {
    let rel = "codex-0.171.0/notify.agent-turn-complete.json";
    let p = payload(rel);
    let n = one(parse::codex_notify(&bytes(rel)).unwrap(), rel);
    assert_eq!(n.source, Source::Notify);
    assert_eq!(n.session.as_deref(), p["thread-id"].as_str());
    assert_eq!(
        n.signal,
        Signal::TurnEnded {
            message_sha256: Some(parse::sha256_hex(
                p["last-assistant-message"].as_str().unwrap()
            ))
        }
    );
    // Codex's hidden thread-title turn (another thread id) is no turn of the user's.
    let rel = "codex-0.171.0/notify.agent-turn-complete.title-side-turn.json";
    assert!(parse::codex_notify(&bytes(rel)).unwrap().is_empty());
}

#[test]
fn codex_rollout_lines_are_turns_usage_and_limits() {
    let kind = |rel: &str| {
        let n = one(parse::codex_rollout_line(&bytes(rel)).unwrap(), rel);
        assert_eq!(n.source, Source::Transcript);
        n.signal
    };
    assert_eq!(
        kind("codex-0.171.0/rollout-task_started.json"),
        Signal::PromptSubmitted
    );
    assert!(matches!(
        kind("codex-0.171.0/rollout-task_complete.json"),
        Signal::TurnEnded {
            message_sha256: Some(_)
        }
    ));
    assert_eq!(
        kind("codex-0.171.0/rollout-task_complete-error.json"),
        Signal::TurnFailed {
            error: TurnError::RateLimit
        }
    );
    assert_eq!(
        kind("codex-0.171.0/rollout-turn_aborted.json"),
        Signal::TurnAborted
    );
    let rel = "codex-0.171.0/rollout-token_count.at-limit.json";
    let notes = parse::codex_rollout_line(&bytes(rel)).unwrap();
    assert_eq!(notes.len(), 2, "{notes:?}");
    let Signal::Usage(u) = notes[0].signal else {
        panic!("{notes:?}")
    };
    assert_eq!((u.input_tokens, u.output_tokens), (Some(96), Some(64)));
    let Signal::Limits(l) = notes[1].signal else {
        panic!("{notes:?}")
    };
    let short = l.short.unwrap();
    assert_eq!(
        (short.used_percent, short.window_minutes, short.resets_at),
        (100.0, Some(300), Some(1_796_550_008))
    );
    let long = l.long.unwrap();
    assert_eq!((long.used_percent, long.resets_at), (40.0, None));
    assert!(
        parse::codex_rollout_line(&bytes("codex-0.171.0/rollout-session_meta.json"))
            .unwrap()
            .is_empty()
    );
}
