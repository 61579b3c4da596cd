//! Errors that said the wrong thing: wait targets that can never match, a
//! prompt over the frame limit, a socket dir of another user, and raw socket
//! requests that the supervisor accepted without the CLI's checks.

use crate::common;

use common::*;
use drover::daemon::{Client, ClientError, protocol::ErrorCode};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

/// Guards `wait --until` targets that can never match: they waited out their
/// timeout and exited 4; they are usage errors naming the states and kinds.
#[test]
fn wait_targets_that_cannot_match_are_usage_errors() {
    let d = Drover::new();
    for target in ["blocked:bogus", "idle:permission", "blocked:Permission"] {
        let o = d.run(&[
            "--no-autostart",
            "wait",
            "p",
            "--until",
            target,
            "--timeout-ms",
            "60000",
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{target}: {err}");
        assert!(err.contains(target), "{target}: {err}");
        assert!(
            err.contains("exited") && err.contains("usage_limit"),
            "names the valid states and kinds: {err}"
        );
    }
}

fn remote_usage(c: &mut Client, op: &str, args: Value) -> String {
    match c.call_raw(op, args.clone()) {
        Err(ClientError::Remote {
            code: ErrorCode::Usage,
            message,
        }) => message,
        other => panic!("{op} {args}: expected a usage error, got {other:?}"),
    }
}

/// Guards raw socket requests the supervisor took without the CLI's rules: an
/// unknown agent, a bogus barrier mode, a negative scrollback, a job id that
/// walks out of the evidence dir.
#[test]
fn raw_requests_are_validated_like_the_cli() {
    let d = Drover::new();
    d.new_pane("p", &[], &["sh"]);
    let mut c = Client::connect(&d.socket()).expect("connect");
    let spec = json!({"name": "q", "argv": ["sh"], "env": [], "cwd": null,
                      "cols": 120, "rows": 40, "agent": "bogus"});
    let m = remote_usage(&mut c, "pane.new", json!({ "spec": spec }));
    assert!(m.contains("bogus") && m.contains("claude"), "{m}");
    assert!(d.pane("q").is_none(), "no pane was made");
    let m = remote_usage(
        &mut c,
        "wait",
        json!({"panes": ["p"], "until": ["idle"], "mode": "bogus", "timeout_ms": 1}),
    );
    assert!(m.contains("bogus") && m.contains("any"), "{m}");
    let m = remote_usage(
        &mut c,
        "wait",
        json!({"panes": ["p"], "until": ["blocked:bogus"], "timeout_ms": 60000}),
    );
    assert!(m.contains("usage_limit"), "{m}");
    let m = remote_usage(&mut c, "pane.read", json!({"pane": "p", "scrollback": -1}));
    assert!(m.contains("-1"), "{m}");
    let m = remote_usage(
        &mut c,
        "evidence.watch",
        json!({"job_id": "../../etc/passwd", "attempt_id": "A", "session_id": "s",
               "pane": "p", "generation": 1}),
    );
    assert!(m.contains("job id"), "{m}");
    // The valid forms still work.
    c.call_raw("pane.read", json!({"pane": "p", "scrollback": 10}))
        .expect("a valid read");
}

/// Guards `dispatch --prompt-file` over the frame limit: it claimed the job,
/// then failed it with "Broken pipe". It is refused before the claim, saying the limit.
#[test]
fn prompt_over_the_frame_limit_is_refused_before_the_claim() {
    let d = Drover::new();
    d.new_pane("p", &[], &["sh"]);
    d.ok(&["job", "create", "J1"]);
    let big = d.scratch().join("prompt.txt");
    std::fs::write(&big, "x".repeat(drover::daemon::protocol::MAX_FRAME + 1)).expect("write");
    let o = d.run(&[
        "dispatch",
        "J1",
        "--pane",
        "p",
        "--prompt-file",
        big.to_str().expect("utf-8"),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&drover::daemon::protocol::MAX_FRAME.to_string()),
        "{err}"
    );
    let rec: Value = serde_json::from_str(&d.ok(&["job", "show", "J1", "--json"])).expect("json");
    assert_eq!(rec["status"], "pending", "not claimed: {rec}");
    assert_eq!(rec["transition_seq"], 1);
}

/// Guards a socket dir owned by another user: the refusal said "not private
/// (mode 700)" — true of the mode, silent about the owner that is the problem.
#[test]
#[ignore = "needs root (chowns a dir to another user); .ci/run runs it"]
fn socket_dir_of_another_user_is_refused_naming_the_owner() {
    let d = Drover::new();
    let run = d.scratch().join("run");
    let sock_dir = run.join("drover");
    std::fs::create_dir_all(&sock_dir).expect("mkdir");
    std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let other = nix::unistd::Uid::from_raw(65534);
    nix::unistd::chown(&sock_dir, Some(other), None)
        .expect("this test needs root to give a dir to another user");
    let o = d
        .cmd()
        .env("XDG_RUNTIME_DIR", &run)
        .args(["--no-autostart", "pane", "ls"])
        .output()
        .expect("run");
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("uid 65534"), "names the owner: {err}");
}

/// A raw `signal` request is input like any other: a field out of its bounds
/// (a tool name too long or holding escapes, a percentage over 100, a hash
/// that is no sha256, an unknown signal) is a usage error, whoever sends it.
#[test]
fn raw_signals_out_of_bounds_are_usage_errors() {
    let d = Drover::new();
    d.serve();
    let mut c = Client::connect(&d.socket()).expect("connect");
    let long = "x".repeat(4096);
    for (args, names) in [
        (
            json!({"source": "hook", "signal": "tool_started", "tool": long}),
            "tool",
        ),
        (
            json!({"source": "hook", "signal": "tool_started", "tool": "a\u{1b}[2J"}),
            "tool",
        ),
        (
            json!({"source": "status", "signal": "limits",
                   "short": {"used_percent": 140.0}}),
            "used_percent",
        ),
        (
            json!({"source": "hook", "signal": "turn_ended", "message_sha256": "abc"}),
            "message_sha256",
        ),
        (json!({"source": "hook", "signal": "rm_rf"}), "rm_rf"),
        (json!({"source": "mail", "signal": "turn_aborted"}), "mail"),
    ] {
        let m = remote_usage(&mut c, "signal", args.clone());
        assert!(m.contains(names), "{args}: {m}");
    }
}
