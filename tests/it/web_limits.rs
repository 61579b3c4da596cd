//! The last corners of `drover web`'s guard and actions, against a real
//! supervisor with sim panes and a real sim loop run: a POST over the body
//! limit answers nothing, `--allow-host` names match any port, and a
//! close-out of a run whose loop process is gone closes it.

use crate::common::{Drover, wait_until};
use crate::web_common::{LONG, blocked_asker, pane_of, start_web};
use serde_json::Value;
use std::time::Duration;

/// A POST body over 16 KiB is refused with 413 before it is read as an
/// answer: the blocked lane stays blocked and nothing is audited. The same
/// answer under the limit then approves it.
#[test]
fn a_body_over_the_limit_is_413_and_answers_nothing() {
    let d = Drover::new();
    let (w, since) = blocked_asker(&d, &["--allow-actions"]);
    // A valid answer padded with whitespace past the limit: read whole, it
    // would approve the dialog.
    let answer = serde_json::json!({"pane": "asker", "action": "approve", "choice": null, "since_ms": since})
        .to_string();
    let big = format!("{answer}{}", " ".repeat(16 * 1024));
    let c = w.cookie();
    let r = w.call(
        "POST",
        "/api/answer",
        &[("Cookie", &c), ("Content-Type", "application/json")],
        &big,
    );
    assert_eq!(r.status, 413, "{r:?}");
    let v = w.view();
    assert_eq!(pane_of(&v, "asker")["state"], "blocked", "{v}");
    assert_eq!(pane_of(&v, "asker")["since_ms"], since, "{v}");
    let audit = std::fs::read_to_string(d.state.join("web/audit.jsonl")).unwrap_or_default();
    assert!(audit.is_empty(), "nothing was acted on: {audit}");
    let ok = w.post(
        "/api/answer",
        &serde_json::from_str::<Value>(&answer).unwrap(),
    );
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(
        d.wait_state(&["asker"], "done", 30_000).status.code(),
        Some(0)
    );
}

/// `--allow-host NAME` admits `NAME` with any port in the `Host` header;
/// given as `name:port` the port is dropped (as from a `Host` header), so
/// the name is admitted with any port; other names stay refused.
#[test]
fn allow_host_names_match_with_any_port() {
    let d = Drover::new();
    d.serve();
    let w = start_web(
        &d,
        &["--allow-host", "box.lan", "--allow-host", "Night.LAN:7878"],
    );
    let c = w.cookie();
    let with_host = |host: &str| {
        w.raw(&format!(
            "GET /api/view HTTP/1.0\r\nHost: {host}\r\nCookie: {c}\r\n\r\n"
        ))
    };
    for ok in [
        "box.lan:7878",
        "BOX.lan:1",
        "night.lan",
        "night.lan:7878",
        "night.lan:9",
    ] {
        let r = with_host(ok);
        assert_eq!(r.status, 200, "{ok}: {r:?}");
    }
    for bad in [
        "other.lan:7878",
        "box.lan.evil:7878",
        "night.lan7878",
        "7878",
    ] {
        let r = with_host(bad);
        assert_eq!(r.status, 403, "{bad}: {r:?}");
        assert!(r.body.contains("unknown Host"), "{bad}: {r:?}");
    }
}

/// A close-out from the API of a run whose loop process was killed
/// (SIGKILL): 202, the run closes as `loop control … close-out` closes it,
/// `finished_at` set, `DECISIONS.md` naming `drover web <token id>`.
#[test]
fn a_close_out_of_a_run_whose_loop_is_gone_closes_it() {
    use crate::loop_common::run_json;
    let d = Drover::new().native();
    let slow = crate::top_loop::IMPLEMENTER.replace("work = 6000", "work = 60000");
    let (mut child, _log) = crate::top_loop::start_sim_run(&d, 2, &slow);
    let long = Duration::from_secs(180);
    let phase2 = |v: &Value| {
        v["tasks"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["id"] == "TASK-2"))
            .map(|t| t["phase"].clone())
            .unwrap_or_default()
    };
    assert!(
        wait_until(long, || phase2(&run_json(&d)) == "implementing"),
        "TASK-2 never started"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let w = start_web(&d, &["--allow-actions"]);
    let mut run = Value::Null;
    assert!(
        wait_until(LONG, || {
            run = w.view()["runs"][0].clone();
            run["state"] == "interrupted"
        }),
        "the page never showed the run interrupted: {run}"
    );
    let r = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "close-out", "state": "interrupted"}),
    );
    assert_eq!(r.status, 202, "{r:?}");
    assert!(r.body.contains("its loop process is gone"), "{r:?}");
    let status = || -> Value {
        serde_json::from_str(&d.ok(&["loop", "status", "1", "--json"])).unwrap_or_default()
    };
    let mut s = Value::Null;
    assert!(
        wait_until(long, || {
            s = status();
            s["state"] == "closed" && s["finished_at"].is_string()
        }),
        "the run never closed: {s}"
    );
    let id = w.view()["token_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let decisions = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(
        decisions.contains(&format!("drover web {id}")),
        "{decisions}"
    );
}
