//! `drover report done|failed|blocked`, run as an agent runs it: typed
//! into a shell in a real pane the supervisor started, with the lane's
//! `DROVER_*` env. The command only asks; the supervisor finds the lane
//! from the caller's process tree and writes the report, the side effects
//! computed from a real git worktree; and each bad input (outside a lane, a
//! finished job, an unknown state, a lane dir nothing can be written in)
//! exits non-zero with a sentence and writes nothing.

use crate::common;

use common::{Drover, git};
use drover::engine::{Action, Actor, Engine, Request};
use drover::evidence::{Evidence, EvidenceStore};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// A supervisor with job `J1` running on pane `lane-a` (a shell, in the
/// lane's worktree, with the lane's env), dispatched to report in
/// `report`, working in a worktree holding one new file.
pub(crate) struct Lane {
    pub d: Drover,
    pub state: PathBuf,
    pub wt: PathBuf,
    pub report: PathBuf,
    pub attempt: String,
    runs: std::cell::Cell<u32>,
}

/// A git worktree with one commit and one new file.
pub(crate) fn worktree(wt: &Path) {
    std::fs::create_dir_all(wt).unwrap();
    git(wt, &["init", "-q", "-b", "main"]);
    std::fs::write(wt.join("README.md"), "x\n").unwrap();
    git(wt, &["add", "-A"]);
    git(wt, &["commit", "-q", "-m", "base"]);
    std::fs::write(wt.join("notes.md"), "new\n").unwrap();
}

/// Job `job` running on `pane`, its dispatch naming `report` and `wt`.
pub(crate) fn running_job(state: &Path, job: &str, pane: &str, report: &Path, wt: &Path) -> String {
    let engine = Engine::open(drover::statedir::StateDir::new(state)).unwrap();
    engine
        .transition(&Request::new(
            job,
            Action::Create { deadline: None },
            Actor::operator(),
        ))
        .unwrap();
    let applied = engine
        .transition(&Request::new(
            job,
            Action::Claim {
                session: "implementer".into(),
            },
            Actor::operator(),
        ))
        .unwrap();
    let attempt = applied.record().attempt_id.clone().unwrap();
    EvidenceStore::new(drover::statedir::StateDir::new(state))
        .append(
            job,
            &Evidence::Dispatch {
                t_ms: 1,
                job_id: job.into(),
                attempt_id: attempt.clone(),
                session_id: "implementer".into(),
                pane: pane.into(),
                pane_generation: 1,
                nonce: "n".into(),
                report_path: Some(report.display().to_string()),
                worktree: Some(wt.display().to_string()),
            },
        )
        .unwrap();
    attempt
}

/// A shell pane `name` in `cwd` with a lane's env, ready for commands.
pub(crate) fn shell_pane(d: &Drover, name: &str, cwd: &Path, lane_id: &str) {
    let lane = format!("DROVER_LANE_ID={lane_id}");
    let state = format!("DROVER_STATE_DIR={}", d.state.display());
    d.new_pane(
        name,
        &[
            "--cwd",
            cwd.to_str().unwrap(),
            "--env",
            &lane,
            "--env",
            "DROVER_SESSION_ID=implementer",
            "--env",
            &state,
        ],
        &["bash", "--norc", "--noprofile"],
    );
}

pub(crate) fn lane_with_report_at(report: Option<PathBuf>) -> Lane {
    let d = Drover::new();
    let root = d.scratch();
    let state = d.state.clone();
    let wt = root.join("wt");
    worktree(&wt);
    let report =
        report.unwrap_or_else(|| state.join("lanes").join("lane-a").join("report-i1.json"));
    if let Some(dir) = report.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let attempt = running_job(&state, "J1", "lane-a", &report, &wt);
    shell_pane(&d, "lane-a", &wt, "lane-a");
    Lane {
        d,
        state,
        wt,
        report,
        attempt,
        runs: std::cell::Cell::new(0),
    }
}

/// What a command typed into a pane's shell did.
pub(crate) struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Type `line` into the shell of `pane` (its output and exit status go to
/// files in `dir`) and wait for it to finish.
pub(crate) fn in_pane(d: &Drover, pane: &str, dir: &Path, n: u32, line: &str) -> Ran {
    let (out, err, rc) = (
        dir.join(format!("out-{n}")),
        dir.join(format!("err-{n}")),
        dir.join(format!("rc-{n}")),
    );
    let cmd = format!(
        "{line} >{} 2>{}; echo $? >{}.tmp && mv {}.tmp {}",
        out.display(),
        err.display(),
        rc.display(),
        rc.display(),
        rc.display()
    );
    d.ok(&["pane", "send", pane, &cmd]);
    assert!(
        common::wait_until(T, || rc.exists()),
        "{line}: no exit status"
    );
    Ran {
        code: std::fs::read_to_string(&rc).unwrap().trim().parse().ok(),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    }
}

/// The shell words of `args`, single-quoted.
pub(crate) fn words(args: &[&str]) -> String {
    args.iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Lane {
    /// `drover report ARGS…` as the agent in `lane-a` runs it.
    pub fn report(&self, args: &[&str]) -> Ran {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let line = format!("{} report {}", common::BIN, words(args));
        in_pane(&self.d, "lane-a", &self.d.scratch(), n, &line)
    }
}

/// `drover report` run by the test itself: outside every lane's tree.
fn report_outside(lane: Option<&Lane>, args: &[&str]) -> Output {
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
    let o = l.report(&["done", "--summary", "added notes"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let out = &o.stdout;
    assert!(out.contains("report for job J1 written to"), "{out}");
    let rep = drover::shadow::report::read_report(&l.report).expect("a report the policy reads");
    assert_eq!(rep.state.as_str(), "finalized");
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

    let o = l.report(&["failed", "--reason", "the build is broken"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("replaced at"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&l.report).unwrap()).unwrap();
    assert_eq!(
        (v["outcome"].as_str(), v["reason"].as_str()),
        (Some("failed"), Some("the build is broken"))
    );
}

/// Outside every lane's process tree (the test process itself, with or
/// without the lane's env) the supervisor refuses: exit 3.
#[test]
fn outside_a_lane_it_exits_3_with_a_sentence_and_writes_nothing() {
    let l = lane_with_report_at(None);
    for lane in [None, Some(&l)] {
        let o = report_outside(lane, &["done"]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("drover report runs inside a drover lane"),
            "{}",
            stderr(&o)
        );
    }
    assert!(!l.report.exists());
}

#[test]
fn an_unknown_state_exits_2_and_writes_nothing() {
    let l = lane_with_report_at(None);
    let o = l.report(&["completed"]);
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("completed"), "{}", o.stderr);
    let o = l.report(&["failed"]);
    assert_eq!(o.code, Some(2), "failed needs --reason");
    let o = l.report(&["blocked", "--reason", "  "]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(!l.report.exists());
}

#[test]
fn a_finished_job_is_refused_with_exit_3_and_its_report_is_kept() {
    let l = lane_with_report_at(None);
    assert_eq!(l.report(&["done"]).code, Some(0));
    let before = std::fs::read(&l.report).unwrap();
    let engine = Engine::open(drover::statedir::StateDir::new(&l.state)).unwrap();
    engine
        .transition(
            &Request::new("J1", Action::Complete { reason: None }, Actor::supervisor())
                .expect_attempt(l.attempt.clone()),
        )
        .unwrap();
    let o = l.report(&["failed", "--reason", "changed my mind"]);
    assert_eq!(o.code, Some(3));
    assert!(
        o.stderr.contains("job J1 is already completed"),
        "{}",
        o.stderr
    );
    assert_eq!(std::fs::read(&l.report).unwrap(), before, "nothing written");
}

/// A report path the record names outside the state dir (here /sys, which
/// no process may write) is refused before anything is tried: exit 1, a
/// sentence naming it, nothing written.
#[test]
fn a_report_path_outside_the_state_dir_exits_1_and_writes_nothing() {
    let target = Path::new("/sys/drover-report-i1.json").to_path_buf();
    let l = lane_with_report_at(Some(target.clone()));
    let o = l.report(&["done"]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "names the report file /sys/drover-report-i1.json, which is not inside the state dir"
        ),
        "{}",
        o.stderr
    );
    assert!(!target.exists());
}

#[test]
fn nothing_changed_is_refused_naming_what_to_do() {
    let l = lane_with_report_at(None);
    std::fs::remove_file(l.wt.join("notes.md")).unwrap();
    let o = l.report(&["done"]);
    assert_eq!(o.code, Some(3));
    assert!(
        o.stderr.contains("nothing changed in the worktree"),
        "{}",
        o.stderr
    );
    assert!(!l.report.exists());
}
