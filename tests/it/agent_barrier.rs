//! Barriers and confirmed delivery against sim agents in real PTYs, through the CLI.

use crate::common;

use common::Drover;
use std::process::Output;

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

#[test]
fn deliver_confirms_and_barriers_follow_a_turn_on_both_profiles() {
    let s = Drover::new();
    s.sim("c", "claude", None);
    s.sim("x", "codex", None);
    let out = s.ok(&[
        "wait",
        "c",
        "x",
        "--until",
        "idle",
        "--timeout-ms",
        "10000",
        "--json",
    ]);
    let snaps: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(snaps.as_array().unwrap().len(), 2);
    for pane in ["c", "x"] {
        let out = s.ok(&["send", pane, "please refactor the parser", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["delivered"], true);
        assert_eq!(v["attempts"], 1, "no retry needed: {v}");
        assert_eq!(v["prompt_visible"], true);
        assert!(
            matches!(v["state"].as_str(), Some("working" | "done")),
            "{v}"
        );
    }
    let out = s.ok(&["wait", "c", "x", "--until", "done", "--timeout-ms", "10000"]);
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["state"], "done");
        assert_eq!(v["generation"], 1);
        assert!(!v["evidence"].as_array().unwrap().is_empty());
    }
    let status = s.ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    for p in v["panes"].as_array().unwrap() {
        assert_eq!(p["observation"]["state"], "done");
    }
}

#[test]
fn permission_prompt_blocks_and_approval_finishes_the_turn() {
    let s = Drover::new();
    let script = s.scratch().join("ask.toml");
    std::fs::write(
        &script,
        "[[turn]]\nsteps = [{ ask = \"touch made.txt\" }, { write = { path = \"made.txt\", content = \"x\" } }, \"finish\"]\n",
    )
    .unwrap();
    s.sim("c", "claude", Some(&script));
    s.ok(&["wait", "c", "--until", "idle", "--timeout-ms", "10000"]);
    s.ok(&["send", "c", "make the file"]);
    let out = s.ok(&[
        "wait",
        "c",
        "--until",
        "blocked:permission",
        "--timeout-ms",
        "10000",
    ]);
    assert!(out.contains("\"permission\""), "{out}");
    // Prose elsewhere on screen does not matter; the dialog does. Approve it.
    s.ok(&["pane", "keys", "c", "1"]);
    s.ok(&["wait", "c", "--until", "done", "--timeout-ms", "10000"]);
    assert!(s.scratch().join("made.txt").exists());
}

#[test]
fn barrier_exit_codes_timeout_gone_and_any() {
    let s = Drover::new();
    s.sim("c", "claude", None);
    s.ok(&["wait", "c", "--until", "idle", "--timeout-ms", "10000"]);
    let out = s.run(&["wait", "c", "--until", "working", "--timeout-ms", "200"]);
    assert_eq!(code(&out), 4, "timeout is exit 4");
    assert!(out.stdout.is_empty(), "timeout prints nothing on stdout");
    assert!(String::from_utf8_lossy(&out.stderr).contains("c=idle"));
    let out = s.run(&["wait", "nope", "--until", "idle", "--timeout-ms", "200"]);
    assert_eq!(code(&out), 5, "a missing pane is a transport failure");
    let out = s.run(&["wait", "c", "--until", "sleeping", "--timeout-ms", "200"]);
    assert_eq!(code(&out), 2, "an unknown state is a usage error");
    let out = s.run(&["wait", "c"]);
    assert_eq!(code(&out), 2, "--until is required");
    s.ok(&["pane", "new", "sh", "--", "sh", "-c", "sleep 100"]);
    let out = s.ok(&[
        "wait",
        "c",
        "sh",
        "--any",
        "--until",
        "idle",
        "--timeout-ms",
        "5000",
    ]);
    assert!(out.contains("\"matched\":true"));
}

#[test]
fn delivery_to_an_agent_that_never_becomes_ready_is_refused() {
    let s = Drover::new();
    s.ok(&[
        "pane", "new", "mute", "--agent", "sim", "--", "sleep", "100",
    ]);
    let out = s.run(&["send", "mute", "hello", "--ready-timeout-ms", "300"]);
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not delivered"));
}

#[test]
fn respawn_starts_a_new_generation_that_old_states_cannot_satisfy() {
    let s = Drover::new();
    s.ok(&["pane", "new", "p", "--", "sh", "-c", "exit 3"]);
    let out = s.ok(&["wait", "p", "--until", "exited", "--timeout-ms", "5000"]);
    assert!(out.contains("\"exit_code\":3"), "{out}");
    s.ok(&["pane", "respawn", "p"]);
    let out = s.run(&["wait", "p", "--until", "exited", "--timeout-ms", "5000"]);
    assert_eq!(code(&out), 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["generation"], 2,
        "the match comes from the new generation"
    );
}

/// Regression: a frame that matches no rule after the agent was ready read
/// as `starting` again (the classifier's startup grace); it is `unknown`,
/// and a re-check of that frame still says what it came after (the CI
/// failure where a re-check had rewritten it to `after:unknown`).
#[test]
fn an_unmatched_frame_after_ready_is_unknown_not_starting() {
    let s = Drover::new();
    let screen = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/screens/claude/startup-1.txt"
    );
    let script = format!("cat '{screen}'; read x; printf '\\033[2J\\033[H'; exec sleep 100");
    s.ok(&[
        "pane", "new", "c", "--agent", "claude", "--", "sh", "-c", &script,
    ]);
    s.ok(&["wait", "c", "--until", "idle", "--timeout-ms", "10000"]);
    s.ok(&["pane", "keys", "c", "Enter"]);
    let out = s.ok(&["wait", "c", "--until", "unknown", "--timeout-ms", "10000"]);
    assert!(out.contains("after:idle"), "{out}");
}
