//! The `drover job` command line beyond the table: usage and I/O exit codes,
//! JSON reads, unknown requests.

use crate::engine_support as support;

use drover::engine::{Engine, EngineError, Request};
use serde_json::Value;
use support::*;

const FUTURE: &str = "2999-01-01T00:00:00Z";

#[test]
fn usage_errors_exit_2_and_touch_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    for args in [
        vec!["job", "create", "../escape"],
        vec!["job", "create", ".hidden"],
        vec!["job", "create", "J", "--deadline", "tomorrow"],
        vec!["job", "claim", "J"],
        vec!["job", "claim", "J", "--session", "has space"],
        vec!["job", "progress", "J", "--set", "novalue"],
        vec!["job", "progress", "J"],
        vec!["job", "complete", "J", "--expected-status", "done"],
        vec!["job", "complete", "J", "--as", "root"],
        vec!["job", "complete", "J", "--reason", "two\nlines"],
        vec!["job", "redispatch", "J", "--iteration", "-1"],
        vec!["job", "frobnicate", "J"],
        vec!["job", "show", "nope"],
    ] {
        let o = run({
            let mut c = drover(st);
            c.args(&args);
            c
        });
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
    }
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    assert!(engine.list().expect("list").is_empty());
    assert!(engine.audit(None).expect("audit").is_empty());
}

#[test]
fn corrupt_record_is_exit_1_and_never_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let o = run({
        let mut c = drover(st);
        c.args(["job", "create", "J"]);
        c
    });
    assert_eq!(code(&o), 0);
    let p = Engine::open(drover::statedir::StateDir::new(st))
        .expect("engine")
        .record_path("J");
    std::fs::write(&p, b"{\"job_id\": ").expect("write");
    for args in [
        vec!["job", "cancel", "J"],
        vec!["job", "show", "J"],
        vec!["job", "ls"],
    ] {
        let o = run({
            let mut c = drover(st);
            c.args(&args);
            c
        });
        assert_eq!(code(&o), 1, "{args:?}");
        assert!(stderr(&o).contains("J.job.json"), "names the file");
    }
    assert_eq!(std::fs::read(&p).expect("read"), b"{\"job_id\": ");
}

#[test]
fn show_ls_audit_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let go = |args: &[&str]| {
        let mut c = drover(st);
        c.args(args);
        run(c)
    };
    assert_eq!(code(&go(&["job", "create", "B", "--deadline", FUTURE])), 0);
    assert_eq!(code(&go(&["job", "create", "A"])), 0);
    let att = stdout(&go(&[
        "job",
        "claim",
        "A",
        "--session",
        "s",
        "--as",
        "agent",
    ]));
    assert_eq!(code(&go(&["job", "complete", "B"])), 3);
    let show: Value = serde_json::from_str(&stdout(&go(&["job", "show", "A", "--json"])))
        .expect("show --json parses");
    for f in [
        "job_id",
        "status",
        "iteration",
        "attempt_id",
        "session_id",
        "deadline",
        "metadata",
        "created_at",
        "updated_at",
        "transition_seq",
    ] {
        assert!(show.get(f).is_some(), "show --json has {f}");
    }
    assert_eq!(show["attempt_id"], att.trim());
    assert_eq!(show["deadline"], Value::Null);
    assert_eq!(show["status"], "running");
    let ls: Value =
        serde_json::from_str(&stdout(&go(&["job", "ls", "--json"]))).expect("ls --json parses");
    let ids: Vec<&str> = ls
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|r| r["job_id"].as_str())
        .collect();
    assert_eq!(ids, ["A", "B"]);
    let audit: Value = serde_json::from_str(&stdout(&go(&["job", "audit", "B", "--json"])))
        .expect("audit --json parses");
    let a = audit.as_array().expect("array");
    assert_eq!(a.len(), 2);
    assert_eq!(a[1]["outcome"], "refused");
    assert_eq!(a[1]["rule"], "from-status");
    let text = stdout(&go(&["job", "ls"]));
    assert!(text.contains("running") && text.contains("pending"));
    assert!(stdout(&go(&["job", "audit", "B"])).contains("rule from-status"));
}

#[test]
fn unknown_request_is_refused_by_name() {
    let v = serde_json::json!({
        "job_id": "J", "action": {"request": "resurrect"},
        "actor": {"authority": "operator"}
    });
    let e = Request::from_json(&v).expect_err("unknown");
    assert!(matches!(e, EngineError::UnknownRequest { .. }), "{e}");
    let ok = serde_json::json!({
        "job_id": "J", "action": {"request": "finalize"},
        "actor": {"authority": "operator"}
    });
    assert!(Request::from_json(&ok).is_ok());
}
