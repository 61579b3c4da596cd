//! `run.json` files written by the loop before tasks held their phases as
//! enums load and save byte for byte; records no phase can hold are refused.

use super::{Phase, TaskPhase, TaskRecordError, TaskState};
use crate::loopctl::run::runner::RunStatus;
use serde_json::{Value, json};
use std::path::Path;

/// The fixtures: a `loop run --sim` (a task landed, one parked after its
/// rounds, two held) saved at each change of its `run.json`.
fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/run-json");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the run.json fixtures")
        .map(|e| e.expect("a fixture").path())
        .collect();
    files.sort();
    files
}

#[test]
fn run_json_written_before_loads_and_saves_byte_identical() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let mut phases = std::collections::BTreeSet::new();
    let files = fixtures();
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        let before = std::fs::read(&f).expect("a fixture");
        let st: RunStatus = crate::store::read_json(&f)
            .expect("it loads")
            .expect("it is there");
        phases.extend(st.tasks.iter().map(|t| format!("{:?}", t.kind())));
        let out = tmp.path().join("run.json");
        // As the runner saves it.
        crate::loopctl::run::rundir::write_json_shown(&out, &st).expect("it saves");
        let after = std::fs::read(&out).expect("the saved file");
        assert!(
            before == after,
            "{} changed on load and save:\n{}",
            f.display(),
            String::from_utf8_lossy(&after)
        );
    }
    assert_eq!(
        phases.into_iter().collect::<Vec<_>>(),
        [
            "Held",
            "Implementing",
            "Landed",
            "Landing",
            "Parked",
            "Ready",
            "Reviewing"
        ],
        "the fixtures hold every phase"
    );
}

/// A task record as the loop writes it, with `over` set on it.
fn record(over: Value) -> Value {
    let mut t = json!({
        "id": "TASK-1", "title": "T", "phase": "implementing", "tier": "routine",
        "agent": "claude", "reviewer": "codex", "round": 1, "lane": "l1-impl-task-1",
        "job": "loop1-task-1-i1", "worktree": "/w", "branch": "drover/task-1",
        "candidate_sha256": null, "sha": null, "reason": null, "resume": null,
        "limit_parks": 0, "stall": null, "first_dispatch": "2026-12-05T10:00:00Z",
        "excluded_s": 0, "findings": {}, "candidate_base": null, "onto": null,
        "rebases": 0, "rebase": null, "prior_candidate": null
    });
    for (k, v) in over.as_object().expect("an object") {
        t[k] = v.clone();
    }
    t
}

fn load(over: Value) -> Result<TaskState, String> {
    serde_json::from_value(record(over)).map_err(|e| e.to_string())
}

#[test]
fn a_started_task_carries_its_work_in_its_phase() {
    let t = load(json!({})).expect("it loads");
    assert_eq!(t.kind(), Phase::Implementing);
    assert_eq!(t.lane(), Some("l1-impl-task-1"));
    assert_eq!(t.round(), 1);
    assert_eq!(
        t.first_dispatch,
        Some(crate::time::parse("2026-12-05T10:00:00Z").expect("a time"))
    );
    let landed = load(json!({"phase": "landed", "sha": "abc", "lane": null, "job": null}))
        .expect("it loads");
    assert!(matches!(&landed.phase, TaskPhase::Landed { sha, .. } if sha == "abc"));
    assert_eq!(landed.worktree(), Some(&"/w".into()));
}

#[test]
fn an_unreadable_first_dispatch_is_refused_not_reset() {
    let e = load(json!({"first_dispatch": "yesterday"})).expect_err("refused");
    assert!(
        e.contains(
            &TaskRecordError::FirstDispatch {
                id: "TASK-1".into(),
                value: "yesterday".into()
            }
            .to_string()
        ),
        "{e}"
    );
}

#[test]
fn a_record_no_phase_can_hold_is_refused_with_what_is_wrong() {
    let e = load(json!({"phase": "landed"})).expect_err("no sha");
    assert!(e.contains("task TASK-1: landed with no sha"), "{e}");
    let e = load(json!({"sha": "abc"})).expect_err("a sha while implementing");
    assert!(e.contains("a sha, but it is Implementing"), "{e}");
    let e = load(json!({"phase": "ready"})).expect_err("work before its start");
    assert!(e.contains("Ready with a lane"), "{e}");
    let held = load(json!({
        "phase": "held", "tier": null, "agent": null, "reviewer": null, "round": 0,
        "lane": null, "job": null, "worktree": null, "branch": null,
        "first_dispatch": null, "reason": "depends on TASK-9"
    }))
    .expect("a held task loads");
    assert_eq!(held.note().reason.as_deref(), Some("depends on TASK-9"));
    assert!(held.work().is_none());
}
