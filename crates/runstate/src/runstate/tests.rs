//! `run.json` as the loop writes it reads through the types `loop status`,
//! `top` and `drover web` use; an older file reads too; every word is the
//! word the files and the page always held; a control is refused on a run
//! nobody works.

use crate::runstate::cause::{HoldCause, TaskCause};
use crate::runstate::control::{self, Control, ControlError, Requested};
use crate::runstate::records::Role;
use crate::runstate::status::{self, LoopProcess, RunStatus};
use crate::runstate::{Phase, RunState};
use crate::statedir::StateDir;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The `run.json` files a `loop run --sim` wrote at each change.
fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/run-json");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

fn word<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|w| w.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A run written by the loop reads through the typed reader and writes
/// back the same document, key for key.
#[test]
fn a_run_json_the_loop_wrote_round_trips_through_the_typed_reader() {
    let files = fixtures();
    assert!(files.len() >= 10, "{files:?}");
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let state = StateDir::new(tmp.path());
    let mut phases: Vec<Phase> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let n = u32::try_from(i).unwrap_or(0) + 1;
        std::fs::create_dir_all(state.run_dir(n)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::copy(f, state.run_file(n)).unwrap_or_else(|e| panic!("{e}"));
        let st: RunStatus = status::read(state, n)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
            .unwrap_or_else(|| panic!("{}: missing", f.display()));
        phases.extend(st.tasks.iter().map(|t| t.kind()));
        let written: Value = serde_json::from_slice(&std::fs::read(f).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        let again = serde_json::to_value(&st).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again, written, "{}", f.display());
    }
    assert_eq!(
        status::runs(state),
        (1..=files.len() as u32).collect::<Vec<_>>()
    );
    assert!(phases.contains(&Phase::Landed) && phases.contains(&Phase::Parked));
}

/// A `run.json` of an older loop, before the fields added since (mode,
/// questions, process, resumes, budgets, autotune, simulated lanes, a
/// task's cause, findings and rebase rounds), still reads.
#[test]
fn an_old_run_json_without_newer_fields_still_reads() {
    let old = json!({
        "schema_version": 1, "run": 4, "state": "closed", "repo": "/r",
        "charter": "/r/CHARTER.md", "charter_sha256": "ab", "base": "main",
        "base_sha": "cd", "integration_branch": "drover/integration/loop4",
        "integration_worktree": "/r/wt", "pool": 2, "lanes_cap": 4,
        "landings": 1, "started_at": "2026-11-30T10:00:00Z",
        "finished_at": "2026-11-30T11:00:00Z", "closeout": "/s/loop4/closeout.md",
        "tasks": [{
            "id": "T-1", "title": "One", "phase": "landed", "tier": null,
            "agent": "claude", "reviewer": "codex", "round": 1, "lane": "l4-impl-t-1",
            "job": "loop4-t-1-i1", "worktree": "/r/.wt/t-1", "branch": "drover/t-1",
            "candidate_sha256": "ef", "sha": "0123", "reason": null, "resume": null,
            "limit_parks": 0, "stall": null
        }],
        "notes": [], "stopped_by": null, "iterations": 1
    });
    let st: RunStatus = serde_json::from_value(old).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(st.state, RunState::Closed);
    assert_eq!(st.mode, "");
    assert!(st.questions.is_empty() && st.process.is_none() && st.sim.is_none());
    assert_eq!(st.tasks[0].kind(), Phase::Landed);
    assert_eq!(st.tasks[0].sha(), Some("0123"));
    assert_eq!(st.tasks[0].cause(), None);
    // Closed is closed, whatever process it had.
    assert_eq!(st.live_state(), RunState::Closed);
    assert!(!st.is_live());
}

/// Every word the types write is the word the files, `loop status` and
/// the page always held.
#[test]
fn each_word_serialized_is_the_old_word() {
    let run_states = [
        "running",
        "pausing",
        "paused",
        "interrupted",
        "blocked",
        "closed",
        "stopped",
    ];
    for (s, w) in RunState::ALL.into_iter().zip(run_states) {
        assert_eq!((word(s), s.to_string()), (w.to_string(), w.to_string()));
    }
    let phases = [
        "held",
        "ready",
        "implementing",
        "reviewing",
        "landing",
        "landed",
        "parked",
    ];
    for (p, w) in Phase::ALL.into_iter().zip(phases) {
        assert_eq!((word(p), p.to_string()), (w.to_string(), w.to_string()));
        let back: Option<Phase> = serde_json::from_value(json!(w)).ok();
        assert_eq!(back, Some(p));
    }
    for (c, w) in [
        (Control::EmergencyStop, "emergency-stop"),
        (Control::Pause, "pause"),
        (Control::CloseOut, "close-out"),
        (Control::Resume, "resume"),
    ] {
        assert_eq!((word(c), c.as_str()), (w.to_string(), w));
        assert_eq!(Control::parse(w), Some(c));
    }
    assert_eq!(word(Role::Implementer), "implementer");
    assert_eq!(word(Role::Reviewer), "reviewer");
    assert_eq!(word(TaskCause::LeaseRefused), "lease-refused");
    assert_eq!(word(TaskCause::LimitWait), "limit-wait");
    assert_eq!(
        serde_json::to_value(TaskCause::Held(HoldCause::NeedsOwner)).ok(),
        Some(json!({"held": "needs-owner"}))
    );
    assert_eq!(word(HoldCause::NoFiles), "no-files");
}

/// A run dir with this `run.json` (its loop process: `process`).
fn run_at(state: &StateDir, n: u32, st: RunState, finished: bool, process: Option<LoopProcess>) {
    let doc = json!({
        "schema_version": 1, "run": n, "state": st, "repo": "/r",
        "charter": "/r/CHARTER.md", "charter_sha256": "", "base": "main",
        "base_sha": "", "integration_branch": "b", "integration_worktree": "/r/wt",
        "pool": 1, "lanes_cap": 2, "landings": 0, "started_at": "2026-12-05T00:00:00Z",
        "finished_at": if finished { json!("2026-12-05T01:00:00Z") } else { Value::Null },
        "closeout": null, "tasks": [], "notes": [], "stopped_by": null, "iterations": 0,
        "process": process,
    });
    std::fs::create_dir_all(state.run_dir(n)).unwrap_or_else(|e| panic!("{e}"));
    crate::store::write_json_atomic(&state.run_file(n), &doc).unwrap_or_else(|e| panic!("{e}"));
}

/// `loop control`'s checks, as `top` and the page get them: no such run,
/// a closed run (named by its state), a run whose process is gone, a
/// close-out the caller carries out, and a control set on a live run.
#[test]
fn a_control_is_set_only_on_a_run_a_loop_process_works() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let state = StateDir::new(tmp.path());
    let gone = Some(LoopProcess {
        pid: u32::MAX,
        start_time: 1,
    });
    run_at(state, 1, RunState::Stopped, true, gone);
    run_at(state, 2, RunState::Running, false, gone);
    run_at(state, 3, RunState::Running, false, LoopProcess::this());
    let e = control::request(state, 9, Control::Pause, "r").err();
    assert!(matches!(e, Some(ControlError::NoRun { n: 9 })), "{e:?}");
    let e = control::request(state, 1, Control::Pause, "r").err();
    assert_eq!(
        e.as_ref().map(ToString::to_string).unwrap_or_default(),
        "loop1 is stopped (closed); nothing runs it"
    );
    assert_eq!(e.map(|e| e.exit_code()), Some(crate::exit::REFUSED));
    let e = control::request(state, 2, Control::Pause, "r").err();
    assert!(
        matches!(e, Some(ControlError::NotRunning { n: 2 })),
        "{e:?}"
    );
    let r = control::request(state, 2, Control::CloseOut, "r").ok();
    assert_eq!(r, Some(Requested::CloseWithoutResume));
    match control::request(state, 3, Control::Pause, "lunch") {
        Ok(Requested::Set(c)) => assert_eq!(c.ruling(), Some((Control::Pause, "lunch"))),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        control::read(&state.run_dir(3)).ok().and_then(|c| c.pause),
        Some("lunch".to_string())
    );
}
