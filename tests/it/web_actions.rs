//! `drover web --allow-actions` against real sim panes and a real sim loop
//! run: an action for a state the page no longer shows is refused with 409,
//! one for the state it shows is exactly `drover approve` or `drover loop
//! control`, and every one is audited; without the flag, 403.

use crate::common::{Drover, wait_until};
use crate::web_common::{blocked_asker, pane_of, start_web};
use serde_json::Value;
use std::time::Duration;

/// Read-only: an action is refused with 403 and audited; the snapshot says
/// read-only.
#[test]
fn a_read_only_page_refuses_actions() {
    let d = Drover::new();
    d.serve();
    let w = start_web(&d, &[]);
    assert_eq!(w.view()["read_only"], true);
    let r = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "p", "action": "approve", "choice": null, "since_ms": 1}),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let e: Value = serde_json::from_str(&r.body).unwrap();
    assert!(
        e["error"]
            .as_str()
            .unwrap_or_default()
            .contains("--allow-actions"),
        "{e}"
    );
    let r = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "pause", "state": "running"}),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = w.call(
        "POST",
        "/api/answer",
        &[("Cookie", &w.cookie()), ("Content-Type", "text/plain")],
        "{}",
    );
    assert_eq!(r.status, 415, "{r:?}");
    let audit = std::fs::read_to_string(d.state.join("web/audit.jsonl")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{audit}");
    assert_eq!(lines[0]["outcome"], "refused");
    assert_eq!(lines[0]["action"], "approve");
    assert_eq!(lines[1]["target"], "loop1");
    assert_eq!(lines[0]["token_id"], w.view()["token_id"]);
}

/// With `--allow-actions`: an answer for a state the page no longer shows
/// (a stale `since_ms`) is refused with 409; with the one it shows, the
/// blocked sim lane is approved and goes on; both are audited.
#[test]
fn an_answer_to_a_state_that_moved_on_is_refused_and_a_fresh_one_approves() {
    let d = Drover::new();
    let (w, since) = blocked_asker(&d, &["--allow-actions"]);
    assert_eq!(w.mode, "actions allowed");
    let v = w.view();
    let p = pane_of(&v, "asker");
    assert_eq!(p["attention"], "blocked");
    assert_eq!(p["blocked_kind"], "permission", "{p}");
    let options = p["options"].as_array().cloned().unwrap_or_default();
    assert!(
        options.iter().any(|o| o == "Yes"),
        "the dialog's options: {p}"
    );
    assert_eq!(v["panes"][0]["name"], "asker", "blocked first");
    let stale = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "asker", "action": "approve", "choice": null, "since_ms": since - 1}),
    );
    assert_eq!(stale.status, 409, "{stale:?}");
    assert!(
        stale
            .body
            .contains("the state moved on: asker is now blocked"),
        "{stale:?}"
    );
    let ok = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "asker", "action": "approve", "choice": null, "since_ms": since}),
    );
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(ok.body.contains("answered the permission dialog"), "{ok:?}");
    assert_eq!(
        d.wait_state(&["asker"], "done", 30_000).status.code(),
        Some(0)
    );
    let again = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "asker", "action": "approve", "choice": null, "since_ms": since}),
    );
    assert_eq!(again.status, 409, "{again:?}");
    let audit = std::fs::read_to_string(d.state.join("web/audit.jsonl")).unwrap();
    let outcomes: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["outcome"].to_string())
        .collect();
    assert_eq!(
        outcomes,
        ["\"refused\"", "\"ok\"", "\"refused\""],
        "{audit}"
    );
}

/// With `--allow-actions`, a real sim loop run: its tasks with their titles
/// on the page; a pause for a state the page no longer shows is refused
/// with 409; a pause and a resume for the state it shows are `loop
/// control`'s (recorded in DECISIONS.md as `drover web <token id>`), and
/// the run goes on to close.
#[test]
fn run_controls_check_the_state_the_page_saw() {
    use crate::loop_common::{run_json, wait_exit};
    let d = Drover::new().native();
    let (mut child, _log) = crate::top_loop::start_sim_run(&d, 3, crate::top_loop::IMPLEMENTER);
    let task2 = |v: &Value| {
        v["tasks"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["id"] == "TASK-2"))
            .cloned()
            .unwrap_or_default()
    };
    let long = Duration::from_secs(180);
    assert!(
        wait_until(long, || task2(&run_json(&d))["phase"] == "implementing"),
        "TASK-2 never started"
    );
    let w = start_web(&d, &["--allow-actions"]);
    let mut run = Value::Null;
    assert!(
        wait_until(long, || {
            run = w.view()["runs"][0].clone();
            run["state"] == "running" && run["live"] == true
        }),
        "the page never showed the run running: {run}"
    );
    let t = run["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["id"] == "TASK-2"))
        .cloned()
        .unwrap_or_default();
    assert!(!t["title"].as_str().unwrap_or_default().is_empty(), "{run}");
    let stale = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "pause", "state": "paused"}),
    );
    assert_eq!(stale.status, 409, "{stale:?}");
    assert!(
        stale
            .body
            .contains("the state moved on: loop1 is now running"),
        "{stale:?}"
    );
    let pause = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "pause", "state": "running"}),
    );
    assert_eq!(pause.status, 200, "{pause:?}");
    let status = || {
        let v: Value =
            serde_json::from_str(&d.ok(&["loop", "status", "1", "--json"])).unwrap_or_default();
        v["state"].as_str().unwrap_or_default().to_string()
    };
    assert!(wait_until(long, || status() == "paused"), "never paused");
    let id = w.view()["token_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let decisions = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(
        decisions.contains(&format!("control: pause: drover web {id}")),
        "{decisions}"
    );
    let resume = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "resume", "state": "paused"}),
    );
    assert_eq!(resume.status, 200, "{resume:?}");
    assert!(wait_exit(&mut child, long).is_some(), "the run never ended");
    let audit = std::fs::read_to_string(d.state.join("web/audit.jsonl")).unwrap();
    let outcomes: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["outcome"].to_string())
        .collect();
    assert_eq!(outcomes, ["\"refused\"", "\"ok\"", "\"ok\""], "{audit}");
}
