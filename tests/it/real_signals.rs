//! The agents' own signals on the real TUIs (tests/fixtures/signals/README.md):
//! Claude Code's hooks and status line from `--settings`, Codex's `notify`
//! and rollout, each run on every supported version of its agent against the
//! mock model, with the agent's cwd a git repository as a lane's is.
//!
//! Every hook, status line and notify call here is a capture command: a shell
//! script writing what it got (stdin, or the last argument for Codex's
//! notify) and its pane's `DROVER_PANE` to a new file, named by the time so
//! the files sort in call order. Ignored by plain `cargo test` (they need the
//! agents from `scripts/install-agents.sh`).
use crate::real_agents::{Agent, Run};
use crate::real_signals_common::{
    Call, POLL, SIGNAL_TIMEOUT, claude, clear_composer, codex, deliver, in_order, signals_script,
    started,
};

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A plain turn: SessionStart at launch, then UserPromptSubmit → Stop with
/// the reply as `last_assistant_message`; every call carries the lane's pane.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_hooks_fire_in_order_for_a_plain_turn() {
    for v in Agent::Claude.versions() {
        let (mut r, cap) = claude(&v, "sig-plain", &[], &signals_script(""));
        cap.wait_event(0, "SessionStart");
        let m = started(&mut r, &cap);
        r.prompt("say hello");
        let calls = cap.wait_event(m, "Stop");
        let events = cap.events_from(m);
        assert_eq!(events, ["UserPromptSubmit", "Stop"], "claude {v}");
        let stop = calls.iter().find(|c| c.event() == "Stop").expect("Stop");
        assert_eq!(
            stop.json["last_assistant_message"],
            "Hello from the mock model."
        );
        assert_eq!(stop.json["stop_hook_active"], false);
        let all = cap.calls();
        assert!(
            all.iter().all(|c| c.came_from(&r.pane)),
            "claude {v}: {all:?}"
        );
        for c in all.iter().filter(|c| c.kind == "hook") {
            for k in ["session_id", "transcript_path", "cwd", "hook_event_name"] {
                assert!(c.json[k].is_string(), "claude {v}: {} lacks {k}", c.event());
            }
        }
        r.expect_state("done");
    }
}

/// A Bash call approved on screen: PreToolUse and PermissionRequest arrive
/// while the dialog waits; nothing marks the approval; PostToolUse, Stop follow.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_permission_approved_on_screen() {
    for v in Agent::Claude.versions() {
        let (mut r, cap) = claude(&v, "sig-approve", &[], &signals_script(""));
        let m = started(&mut r, &cap);
        r.prompt("run the command");
        r.expect_state("blocked:permission");
        let calls = cap.wait_event(m, "PermissionRequest");
        let asked = calls
            .iter()
            .find(|c| c.event() == "PermissionRequest")
            .expect("asked");
        assert_eq!(asked.json["tool_name"], "Bash", "claude {v}");
        assert_eq!(asked.json["tool_input"]["command"], "touch bashed.txt");
        // Still waiting on screen: the hook ran while the dialog waits.
        r.expect_state("blocked:permission");
        r.answer(&["approve"]);
        cap.wait_event(m, "Stop");
        let events: Vec<String> = cap
            .events_from(m)
            .into_iter()
            .filter(|e| e != "Notification")
            .collect();
        assert_eq!(
            events,
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PermissionRequest",
                "PostToolUse",
                "PostToolBatch",
                "Stop"
            ],
            "claude {v}"
        );
        assert!(r.file("bashed.txt").is_file());
    }
}

/// A Bash call denied on screen ends the turn with no hook at all after
/// PermissionRequest: the next turn's UserPromptSubmit comes with no Stop,
/// PostToolUse or PermissionDenied before it.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_permission_denied_is_silent() {
    for v in Agent::Claude.versions() {
        let (mut r, cap) = claude(&v, "sig-deny", &[], &signals_script(""));
        let m = started(&mut r, &cap);
        r.prompt("run the command");
        r.expect_state("blocked:permission");
        cap.wait_event(m, "PermissionRequest");
        r.answer(&["deny"]);
        r.expect_state("idle");
        clear_composer(&mut r);
        deliver(&mut r, "say hello");
        cap.wait("the next turn's Stop", m, |c| {
            c.iter().filter(|c| c.event() == "UserPromptSubmit").count() == 2
                && c.iter().any(|c| c.event() == "Stop")
        });
        let events: Vec<String> = cap
            .events_from(m)
            .into_iter()
            .filter(|e| e != "Notification")
            .collect();
        assert_eq!(
            events,
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PermissionRequest",
                "UserPromptSubmit",
                "Stop"
            ],
            "claude {v}"
        );
        assert!(!r.file("bashed.txt").exists(), "a denied Bash ran");
    }
}

/// Esc during a reply: no Stop and no other hook for the interrupted turn.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_interrupted_turn_is_silent() {
    for v in Agent::Claude.versions() {
        let (mut r, cap) = claude(&v, "sig-esc", &[], &signals_script(""));
        let m = started(&mut r, &cap);
        r.prompt("take your time");
        r.expect_state("working");
        r.expect_text("This reply");
        r.keys(&["Esc"]);
        r.expect_text("Interrupted");
        r.expect_state("idle");
        clear_composer(&mut r);
        deliver(&mut r, "say hello");
        cap.wait("the next turn's Stop", m, |c| {
            c.iter().filter(|c| c.event() == "UserPromptSubmit").count() == 2
                && c.iter().any(|c| c.event() == "Stop")
        });
        assert_eq!(
            cap.events_from(m),
            ["UserPromptSubmit", "UserPromptSubmit", "Stop"],
            "claude {v}"
        );
    }
}

/// A long tool call (Bash `sleep 3`, allowed without a dialog): PreToolUse,
/// then nothing until PostToolUse at least the sleep later, then Stop.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_long_tool_call() {
    for v in Agent::Claude.versions() {
        let (mut r, cap) = claude(&v, "sig-long", &[], &signals_script(""));
        let m = started(&mut r, &cap);
        r.prompt("sleep a while");
        let calls = cap.wait_event(m, "Stop");
        let events = cap.events_from(m);
        assert_eq!(
            events,
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "PostToolBatch",
                "Stop"
            ],
            "claude {v}"
        );
        let at = |e: &str| {
            calls
                .iter()
                .find(|c| c.event() == e)
                .map(|c| c.at_ns)
                .expect(e)
        };
        let ran = Duration::from_nanos((at("PostToolUse") - at("PreToolUse")) as u64);
        assert!(ran >= Duration::from_millis(2900), "claude {v}: {ran:?}");
        let post = calls
            .iter()
            .find(|c| c.event() == "PostToolUse")
            .expect("post");
        assert_eq!(post.json["tool_name"], "Bash");
    }
}

/// A subagent (the `Agent` tool): SubagentStart then SubagentStop (its own
/// transcript under the session's `subagents/`), then the turn's Stop.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_subagent_turn() {
    for v in Agent::Claude.versions() {
        let (mut r, cap) = claude(&v, "sig-sub", &[], &signals_script(""));
        let m = started(&mut r, &cap);
        r.prompt("use a subagent");
        let calls = cap.wait("SubagentStop then Stop", m, |c| {
            let e: Vec<String> = c.iter().map(Call::event).collect();
            in_order(&e, &["SubagentStop", "Stop"])
        });
        let events = cap.events_from(m);
        assert!(
            in_order(
                &events,
                &[
                    "UserPromptSubmit",
                    "PreToolUse",
                    "SubagentStart",
                    "SubagentStop",
                    "Stop"
                ]
            ),
            "claude {v}: {events:?}"
        );
        let stop = calls
            .iter()
            .find(|c| c.event() == "SubagentStop")
            .expect("stop");
        assert_eq!(stop.json["agent_type"], "general-purpose");
        assert_eq!(
            stop.json["last_assistant_message"],
            "Hello from the subagent."
        );
        let sub = stop.json["agent_transcript_path"]
            .as_str()
            .unwrap_or_default();
        assert!(sub.contains("/subagents/"), "claude {v}: {sub}");
    }
}

/// Signed in as a subscription, the status line's `rate_limits` carry the
/// mock's rate-limit headers (`[usage]` of the script).
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_status_line_rate_limits_from_the_mock() {
    let head = "[usage]\nshort = { used_percent = 42.0, resets_in_s = 3600 }\n\
                long = { used_percent = 7.5, resets_in_s = 500000 }\n";
    for v in Agent::Claude.versions() {
        let (mut r, cap) = claude(&v, "sig-rl", &["--subscription"], &signals_script(head));
        let m = started(&mut r, &cap);
        let t0 = chrono::Utc::now().timestamp();
        r.prompt("say hello");
        let calls = cap.wait("a status line with rate_limits", m, |c| {
            c.iter()
                .any(|c| c.kind == "status" && c.json["rate_limits"].is_object())
        });
        let rl = &calls
            .iter()
            .find(|c| c.kind == "status" && c.json["rate_limits"].is_object())
            .expect("status")
            .json["rate_limits"];
        assert_eq!(
            rl["five_hour"]["used_percentage"].as_f64(),
            Some(42.0),
            "claude {v}: {rl}"
        );
        assert_eq!(
            rl["seven_day"]["used_percentage"].as_f64(),
            Some(7.5),
            "claude {v}: {rl}"
        );
        let reset = rl["five_hour"]["resets_at"].as_i64().unwrap_or(0);
        assert!((reset - (t0 + 3600)).abs() < 120, "claude {v}: {rl}");
    }
}

/// Two lanes: the hooks of lane A's turn reach only A's capture; B's holds
/// only B's own calls.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_hooks_of_one_lane_never_reach_another() {
    for v in Agent::Claude.versions() {
        let (mut a, cap_a) = claude(&v, "sig-lane-a", &[], &signals_script(""));
        let (mut b, cap_b) = claude(&v, "sig-lane-b", &[], &signals_script(""));
        a.expect_state("idle");
        b.expect_state("idle");
        a.prompt("say hello");
        cap_a.wait_event(0, "Stop");
        b.prompt("say hello");
        cap_b.wait_event(0, "Stop");
        for (cap, r) in [(&cap_a, &a), (&cap_b, &b)] {
            let calls = cap.calls();
            assert!(
                calls.iter().all(|c| c.came_from(&r.pane)),
                "claude {v}: {calls:?}"
            );
            let prompts = calls
                .iter()
                .filter(|c| c.event() == "UserPromptSubmit")
                .count();
            assert_eq!(prompts, 1, "claude {v}: {}", r.pane);
            let cwd = r.cwd.display().to_string();
            assert!(
                calls.iter().all(|c| c.json["cwd"] == cwd.as_str()),
                "claude {v}"
            );
        }
    }
}

/// The first rollout file under a run's state dir.
fn rollout(r: &Run) -> Option<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&r.state.join("rehearse"), &mut out);
    out.sort();
    out.into_iter().next()
}

/// The rollout's lines of `event_msg` type `kind`.
fn rollout_events(r: &Run, kind: &str) -> Vec<Value> {
    let Some(p) = rollout(r) else {
        return Vec::new();
    };
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["type"] == "event_msg" && l["payload"]["type"] == kind)
        .map(|l| l["payload"].clone())
        .collect()
}

/// Codex's notify: one `agent-turn-complete` per completed turn of the
/// session's thread (the JSON as the last argument), none for a turn
/// interrupted or an escalation denied; the first prompt's title turn
/// notifies too, on another thread.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn codex_notify_fires_per_turn() {
    for v in Agent::Codex.versions() {
        let (mut r, cap) = codex(&v, "sig-notify", &signals_script(""));
        r.expect_state("idle");
        r.prompt("say hello");
        r.expect_state("done");
        let calls = cap.wait("the turn's notify", 0, |c| {
            c.iter()
                .any(|c| c.json["last-assistant-message"] == "Hello from the mock model.")
        });
        let turn = calls
            .iter()
            .find(|c| c.json["last-assistant-message"] == "Hello from the mock model.")
            .expect("notify");
        assert_eq!(turn.json["type"], "agent-turn-complete", "codex {v}");
        assert_eq!(turn.json["input-messages"], json!(["say hello"]));
        assert_eq!(turn.json["cwd"], r.cwd.display().to_string().as_str());
        let thread = turn.json["thread-id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let session = rollout(&r).expect("rollout file");
        assert!(
            session
                .to_string_lossy()
                .ends_with(&format!("{thread}.jsonl")),
            "{session:?}"
        );

        // An escalation denied, then a turn interrupted: neither notifies.
        r.prompt("run the command");
        r.expect_state("blocked:permission");
        r.answer(&["deny"]);
        r.expect_state("idle");
        r.prompt("take your time");
        r.expect_state("working");
        r.expect_text("This reply");
        r.keys(&["Esc"]);
        let aborted = |r: &Run| rollout_events(r, "turn_aborted").len() == 2;
        let deadline = Instant::now() + SIGNAL_TIMEOUT;
        while !aborted(&r) {
            assert!(Instant::now() < deadline, "codex {v}: two turn_aborted");
            std::thread::sleep(POLL);
        }
        r.expect_state("idle");
        r.prompt("say hello");
        let on_thread = |c: &[Call]| -> usize {
            c.iter()
                .filter(|c| c.json["thread-id"] == thread.as_str())
                .count()
        };
        cap.wait("the last turn's notify", 0, |c| on_thread(c) >= 2);
        r.expect_state("done");
        // The turns between notified nothing: two on the thread, one per
        // completed turn, the last naming the last turn.
        let calls = cap.calls();
        assert_eq!(on_thread(&calls), 2, "codex {v}: {calls:?}");
        assert!(cap.calls().iter().all(|c| c.came_from(&r.pane)));
    }
}

/// Codex's rollout `token_count.rate_limits` carry the mock's `x-codex-*` headers.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn codex_rollout_rate_limits_from_the_mock() {
    let head = "[usage]\nshort = { used_percent = 42.0, resets_in_s = 3600 }\n\
                long = { used_percent = 7.5 }\n";
    for v in Agent::Codex.versions() {
        let (mut r, _cap) = codex(&v, "sig-rl", &signals_script(head));
        r.expect_state("idle");
        let t0 = chrono::Utc::now().timestamp();
        r.prompt("say hello");
        r.expect_state("done");
        let deadline = Instant::now() + SIGNAL_TIMEOUT;
        let rl = loop {
            let with = rollout_events(&r, "token_count")
                .into_iter()
                .find(|p| p["rate_limits"]["primary"].is_object());
            if let Some(p) = with {
                break p["rate_limits"].clone();
            }
            assert!(
                Instant::now() < deadline,
                "codex {v}: no token_count with rate_limits"
            );
            std::thread::sleep(POLL);
        };
        assert_eq!(
            rl["primary"]["used_percent"].as_f64(),
            Some(42.0),
            "codex {v}: {rl}"
        );
        assert_eq!(
            rl["primary"]["window_minutes"].as_u64(),
            Some(300),
            "codex {v}: {rl}"
        );
        assert_eq!(
            rl["secondary"]["used_percent"].as_f64(),
            Some(7.5),
            "codex {v}: {rl}"
        );
        assert_eq!(rl["secondary"]["window_minutes"].as_u64(), Some(10080));
        let reset = rl["primary"]["resets_at"].as_i64().unwrap_or(0);
        assert!((reset - (t0 + 3600)).abs() < 120, "codex {v}: {rl}");
    }
}
