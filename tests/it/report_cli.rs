//! `drover report done|failed|blocked`, run as an agent runs it in its
//! lane: everything from the lane's `DROVER_*` env and the state dir, the
//! side effects computed from a real git worktree; and each bad input
//! (outside a lane, a finished job, an unknown state, a lane dir nothing
//! can be written in) exits non-zero with a sentence and writes nothing.

use crate::common;

use common::git;
use drover::engine::{Action, Actor, Engine, Request};
use drover::evidence::{Evidence, EvidenceStore};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A state dir with job `J1` running on pane `lane-a`, dispatched to
/// report in `report`, working in a worktree holding one new file.
struct Lane {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    report: PathBuf,
    attempt: String,
}

fn lane_with_report_at(report: Option<PathBuf>) -> Lane {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let state = root.join("state");
    let wt = root.join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    git(&wt, &["init", "-q", "-b", "main"]);
    std::fs::write(wt.join("README.md"), "x\n").unwrap();
    git(&wt, &["add", "-A"]);
    git(&wt, &["commit", "-q", "-m", "base"]);
    std::fs::write(wt.join("notes.md"), "new\n").unwrap();
    let report = report.unwrap_or_else(|| root.join("lane-dir").join("report-i1.json"));
    let engine = Engine::open(&state).unwrap();
    engine
        .transition(&Request::new(
            "J1",
            Action::Create { deadline: None },
            Actor::operator(),
        ))
        .unwrap();
    let applied = engine
        .transition(&Request::new(
            "J1",
            Action::Claim {
                session: "implementer".into(),
            },
            Actor::operator(),
        ))
        .unwrap();
    let attempt = applied.record().attempt_id.clone().unwrap();
    EvidenceStore::new(&state)
        .append(
            "J1",
            &Evidence::Dispatch {
                t_ms: 1,
                job_id: "J1".into(),
                attempt_id: attempt.clone(),
                session_id: "implementer".into(),
                pane: "lane-a".into(),
                pane_generation: 1,
                nonce: "n".into(),
                report_path: Some(report.display().to_string()),
                worktree: Some(wt.display().to_string()),
            },
        )
        .unwrap();
    Lane {
        _tmp: tmp,
        state,
        report,
        attempt,
    }
}

fn report(lane: Option<&Lane>, args: &[&str]) -> Output {
    let mut cmd = Command::new(common::BIN);
    cmd.arg("report").args(args).env_remove("DROVER_STATE_DIR");
    cmd.env_remove("DROVER_LANE_ID")
        .env_remove("DROVER_SESSION_ID");
    if let Some(l) = lane {
        cmd.env("DROVER_LANE_ID", "lane-a")
            .env("DROVER_SESSION_ID", "implementer")
            .env("DROVER_STATE_DIR", &l.state);
    }
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn done_writes_the_report_the_policy_reads_and_replaces_it_while_running() {
    let l = lane_with_report_at(None);
    let o = report(Some(&l), &["done", "--summary", "added notes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("report for job J1 written to"), "{out}");
    let rep = drover::shadow::report::read_report(&l.report).expect("a report the policy reads");
    assert_eq!(rep.state, "finalized");
    assert_eq!(rep.attempt_id.as_deref(), Some(l.attempt.as_str()));
    assert_eq!(rep.session_id.as_deref(), Some("implementer"));
    let bytes = std::fs::read(&l.report).unwrap();
    let expect = drover::report::schema::Expect {
        attempt_id: &l.attempt,
        session_id: "implementer",
    };
    assert!(drover::report::schema::check(&bytes, &expect).is_empty());
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        v["side_effects"],
        serde_json::json!([{"kind": "file", "path": "notes.md", "change": "added"}])
    );
    assert_eq!(v["summary"], "added notes");

    let o = report(Some(&l), &["failed", "--reason", "the build is broken"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("replaced at"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&l.report).unwrap()).unwrap();
    assert_eq!(
        (v["outcome"].as_str(), v["reason"].as_str()),
        (Some("failed"), Some("the build is broken"))
    );
}

#[test]
fn outside_a_lane_it_exits_2_with_a_sentence_and_writes_nothing() {
    let l = lane_with_report_at(None);
    let o = report(None, &["done"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("drover report runs inside a drover lane"),
        "{}",
        stderr(&o)
    );
    assert!(!l.report.exists());
}

#[test]
fn an_unknown_state_exits_2_and_writes_nothing() {
    let l = lane_with_report_at(None);
    let o = report(Some(&l), &["completed"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("completed"), "{}", stderr(&o));
    let o = report(Some(&l), &["failed"]);
    assert_eq!(o.status.code(), Some(2), "failed needs --reason");
    let o = report(Some(&l), &["blocked", "--reason", "  "]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!l.report.exists());
}

#[test]
fn a_finished_job_is_refused_with_exit_3_and_its_report_is_kept() {
    let l = lane_with_report_at(None);
    assert!(report(Some(&l), &["done"]).status.success());
    let before = std::fs::read(&l.report).unwrap();
    let engine = Engine::open(&l.state).unwrap();
    engine
        .transition(
            &Request::new("J1", Action::Complete { reason: None }, Actor::supervisor())
                .expect_attempt(l.attempt.clone()),
        )
        .unwrap();
    let o = report(Some(&l), &["failed", "--reason", "changed my mind"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("job J1 is already completed"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&l.report).unwrap(), before, "nothing written");
}

#[test]
fn a_lane_dir_that_cannot_be_written_exits_1_and_writes_nothing() {
    // /sys takes no new file from any process, root included (a chmod
    // would not stop root).
    let target = Path::new("/sys/drover-report-i1.json").to_path_buf();
    let l = lane_with_report_at(Some(target.clone()));
    let o = report(Some(&l), &["done"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("cannot write the report /sys/drover-report-i1.json"),
        "{e}"
    );
    assert!(e.contains("the lane dir must be writable"), "{e}");
    assert!(!target.exists());
}

#[test]
fn nothing_changed_is_refused_naming_what_to_do() {
    let l = lane_with_report_at(None);
    let wt = l.state.parent().unwrap().join("wt");
    std::fs::remove_file(wt.join("notes.md")).unwrap();
    let o = report(Some(&l), &["done"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("nothing changed in the worktree"),
        "{}",
        stderr(&o)
    );
    assert!(!l.report.exists());
}
