//! Nothing lost overnight, pass 2: the red-team defects that lost or
//! corrupted a user's work, each reproduced with sim agents in real panes,
//! real git worktrees and a real board — duplicate task ids, a board edited
//! mid-run, a run that must stop, a crash right after a landing.

use crate::common;
use crate::loop_common;

use common::{Drover, wait_until};
use drover::loopctl::night::guards::Guards;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::run::runner::{self, Phase, RunStatus};
use loop_common::{REVIEWER_PASS, in_phase, run_json, spawn_loop, trailers, wait_exit};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(300);

/// TASK-k's implementer turns: work `ms`, write `f<k>.txt`, report, finish.
fn implementer(n: u32, ms: u64) -> String {
    (1..=n)
        .map(|k| {
            format!(
                "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = {ms} }}, {{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
            )
        })
        .collect()
}

fn decisions(d: &Drover) -> String {
    std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap_or_default()
}

fn closeout(d: &Drover) -> String {
    std::fs::read_to_string(d.state.join("loop1/closeout.md")).unwrap_or_default()
}

fn phase(st: &RunStatus, id: &str) -> Option<Phase> {
    st.tasks.iter().find(|t| t.id == id).map(|t| t.kind())
}

/// Guards issue 24 item 1: two files saying `id: TASK-1` and one saying
/// `task_1` (same lane, worktree and job names) are refused when the board
/// is read, naming the files; the rest runs, and nothing loops.
#[test]
fn duplicate_and_colliding_task_ids_are_refused_and_the_rest_runs() {
    let d = Drover::new();
    let (repo, charter) = loop_common::board_repo(&d, 2, "- lanes: 4\n- pool: 2\n- gate: `true`\n");
    let tasks = repo.join("backlog/tasks");
    let t1 = std::fs::read_to_string(tasks.join("task-1 - Task-1.md")).unwrap();
    std::fs::write(tasks.join("task-1 - Copy.md"), &t1).unwrap();
    std::fs::write(
        tasks.join("task_1 - Other.md"),
        t1.replace("id: TASK-1", "id: task_1"),
    )
    .unwrap();
    let mut ops = loop_common::sim_lanes(&d, implementer(2, 100), REVIEWER_PASS.into());
    // Bounded, so the old code (which parks TASK-1 over and over) ends too.
    let u = Unattended {
        guards: Guards {
            wall_clock: Some(Duration::from_secs(60)),
            ..Guards::default()
        },
        ..Default::default()
    };
    let cfg = loop_common::run_config(&d, &repo, &charter, 1, Duration::from_secs(60), u);
    let st = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}")).unwrap();
    let dec = decisions(&d);
    assert_eq!(st.state.as_str(), "closed", "{dec}");
    assert_eq!(phase(&st, "TASK-2"), Some(Phase::Landed), "{dec}");
    assert!(
        st.tasks.iter().all(|t| t.id == "TASK-2"),
        "no colliding task is worked: {:?}",
        st.tasks
    );
    assert!(
        dec.lines().count() < 30,
        "DECISIONS.md grew to {} lines",
        dec.lines().count()
    );
    let close = closeout(&d);
    for f in [
        "task-1 - Task-1.md",
        "task-1 - Copy.md",
        "task_1 - Other.md",
    ] {
        assert!(dec.contains(f), "DECISIONS.md names {f}: {dec}");
        assert!(close.contains(f), "the close-out names {f}: {close}");
    }
    assert_eq!(trailers(&repo, 2), vec![(1, 0), (2, 1)]);
}

/// Runs the loop on `repo` while `during` acts on the board once TASK-1 is
/// implementing; returns the run's result.
fn run_while(
    d: &Drover,
    repo: &Path,
    charter: &Path,
    imp: String,
    during: impl FnOnce(&Path) + Send + 'static,
) -> Result<RunStatus, drover::loopctl::LoopError> {
    let mut ops = loop_common::sim_lanes(d, imp, REVIEWER_PASS.into());
    let cfg = loop_common::run_config(
        d,
        repo,
        charter,
        1,
        Duration::from_secs(60),
        Unattended::default(),
    );
    let state = d.state.clone();
    let repo2 = repo.to_path_buf();
    let h = std::thread::spawn(move || {
        let started = wait_until(LONG, || {
            let v: serde_json::Value = std::fs::read_to_string(state.join("loop1/run.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            in_phase(&v, "implementing").contains(&"TASK-1".to_string())
        });
        assert!(started, "TASK-1 was never implementing");
        during(&repo2);
    });
    let r = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}"));
    h.join().unwrap();
    r
}

/// Guards issue 24 item 2: renaming a task file (as `backlog task edit`
/// does on a title change) while it is worked, and adding a malformed task
/// file, neither stops the run: the task lands, its renamed file is marked
/// Done, the malformed file is reported and skipped.
#[test]
fn a_task_file_renamed_mid_run_lands_and_a_malformed_one_is_skipped() {
    let d = Drover::new();
    let (repo, charter) = loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let tasks = repo.join("backlog/tasks");
    let st = run_while(&d, &repo, &charter, implementer(1, 2500), |repo| {
        let tasks = repo.join("backlog/tasks");
        std::fs::rename(
            tasks.join("task-1 - Task-1.md"),
            tasks.join("task-1 - A-better-title.md"),
        )
        .unwrap();
        std::fs::write(tasks.join("task-9 - Broken.md"), "no front matter at all\n").unwrap();
    })
    .unwrap();
    let dec = decisions(&d);
    assert_eq!(st.state.as_str(), "closed", "{dec}");
    assert_eq!(phase(&st, "TASK-1"), Some(Phase::Landed), "{dec}");
    let renamed = std::fs::read_to_string(tasks.join("task-1 - A-better-title.md")).unwrap();
    assert!(renamed.contains("status: Done"), "{renamed}");
    assert!(
        !tasks.join("task-1 - Task-1.md").exists(),
        "the old name is not written again"
    );
    let close = closeout(&d);
    assert!(close.contains("- TASK-1 (Task 1), "), "{close}");
    assert!(
        close.contains("task-9 - Broken.md") && dec.contains("task-9 - Broken.md"),
        "the malformed file is reported: {close}\n{dec}"
    );
}

/// Guards issue 24 item 2: a run that must stop (here: its integration
/// worktree vanished under it) stays resumable and says why — `stopped_by`,
/// a decision line, the close-out — and `--resume` then lands the task.
#[test]
fn a_run_that_must_stop_stays_resumable_and_records_its_cause() {
    let d = Drover::new();
    let (repo, charter) = loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let wt = d.state.join("worktrees/loop1-integration");
    let wt2 = wt.clone();
    let r = run_while(&d, &repo, &charter, implementer(1, 2000), move |_| {
        std::fs::remove_dir_all(&wt2).unwrap();
    });
    assert!(r.is_err(), "the run could not land: {r:?}");
    let v = run_json(&d);
    assert_eq!(v["state"], "interrupted", "{v}");
    assert!(v["finished_at"].is_null(), "{v}");
    let by = v["stopped_by"].as_str().unwrap_or_default().to_string();
    assert!(by.contains("loop1-integration"), "{v}");
    let dec = decisions(&d);
    assert!(
        dec.lines()
            .any(|l| l.contains(" interrupted: ") && l.contains("loop1-integration")),
        "{dec}"
    );
    assert!(
        closeout(&d).contains("loop1-integration"),
        "{}",
        closeout(&d)
    );
    // The run resumes: the integration worktree is made again, the task lands.
    let mut ops = loop_common::sim_lanes(&d, implementer(1, 100), REVIEWER_PASS.into());
    let cfg = loop_common::run_config(
        &d,
        &repo,
        &charter,
        1,
        Duration::from_secs(60),
        Unattended::default(),
    );
    let st =
        drover::loopctl::run::resume::resume(&mut ops, cfg, 1, |m| eprintln!("loop: {m}")).unwrap();
    assert_eq!(st.state.as_str(), "closed");
    assert_eq!(
        phase(&st, "TASK-1"),
        Some(Phase::Landed),
        "{}",
        decisions(&d)
    );
    assert_eq!(trailers(&repo, 1), vec![(1, 1)]);
}

/// The integration branch's commits, oldest first: (sha, Task trailer).
fn landed_commits(repo: &Path) -> Vec<(String, String)> {
    let out = std::process::Command::new("git")
        .args([
            "log",
            "--reverse",
            "--format=%H %(trailers:key=Task,valueonly,separator=)",
            "drover/integration/loop1",
        ])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (sha, task) = l.split_once(' ')?;
            (!task.trim().is_empty()).then(|| (sha.to_string(), task.trim().to_string()))
        })
        .collect()
}

/// How many times the agent-mix ledger counts `task`.
fn ledger_count(d: &Drover, task: &str) -> usize {
    let p = d.state.join("registry/agent_mix.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_default()).unwrap_or_default();
    v["ledger"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["task"] == task)
        .count()
}

struct Crash {
    d: Drover,
    repo: PathBuf,
    log: PathBuf,
    args: Vec<String>,
}

/// `loop run` on one task with `--ship-cmd 'sleep 8'`, killed with SIGKILL
/// right after it said the task landed.
fn killed_after_landing() -> Crash {
    let d = Drover::new().native();
    let (repo, charter) = loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let root = d.scratch();
    let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp, implementer(1, 200)).unwrap();
    std::fs::write(&rev, REVIEWER_PASS).unwrap();
    let args: Vec<String> = [
        "--sim-implementer",
        imp.to_str().unwrap(),
        "--sim-reviewer",
        rev.to_str().unwrap(),
        "--ship-cmd",
        "sleep 8",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let log = root.join("loop.log");
    let mut first = vec![
        "loop".to_string(),
        "run".into(),
        "--repo".into(),
        repo.display().to_string(),
        "--charter".into(),
        charter.display().to_string(),
    ];
    first.extend(args.iter().cloned());
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let mut child = spawn_loop(&d, &first, &log);
    assert!(
        wait_until(LONG, || std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("TASK-1: landed as ")),
        "TASK-1 never landed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    child.kill().unwrap();
    child.wait().unwrap();
    Crash { d, repo, log, args }
}

impl Crash {
    fn resume(&self) -> std::process::ExitStatus {
        let mut a = vec![
            "loop".to_string(),
            "run".into(),
            "--resume".into(),
            "1".into(),
        ];
        a.extend(self.args.iter().cloned());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let mut child = spawn_loop(&self.d, &a, &self.log);
        wait_exit(&mut child, LONG).expect("the resume finished")
    }
}

/// Guards issue 24 item 4: a kill -9 right after a landing, even before
/// `run.json` says so (simulated by putting back the run.json of before the
/// landing), then `--resume`: the task is recognised on the integration
/// branch by its `Task:` trailer and never lands again; the agent-mix
/// ledger counts it once.
#[test]
fn a_crash_right_after_a_landing_never_lands_again() {
    let c = killed_after_landing();
    let before = landed_commits(&c.repo);
    assert_eq!(before.len(), 1, "{before:?}");
    // The crash came right after the branch moved, before run.json did.
    let p = c.d.state.join("loop1/run.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["integration_head"] = v["base_sha"].clone();
    v["landings"] = 0.into();
    for t in v["tasks"].as_array_mut().unwrap() {
        t["phase"] = "landing".into();
        t["sha"] = serde_json::Value::Null;
    }
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let status = c.resume();
    let log = std::fs::read_to_string(&c.log).unwrap_or_default();
    assert!(status.success(), "{status:?}: {log}");
    assert_eq!(
        landed_commits(&c.repo),
        before,
        "TASK-1 landed once, as the same commit: {log}"
    );
    assert_eq!(ledger_count(&c.d, "TASK-1"), 1, "the ledger counts it once");
    let v = run_json(&c.d);
    assert_eq!(in_phase(&v, "landed"), ["TASK-1"], "{v}");
    assert_eq!(v["tasks"][0]["sha"], before[0].0.as_str(), "{v}");
}

/// Guards issue 24 item 4: an emergency stop still set when a run killed
/// right after a landing resumes never resets the integration branch that
/// holds the landed work.
#[test]
fn an_emergency_stop_at_resume_keeps_the_landed_work() {
    let c = killed_after_landing();
    let before = landed_commits(&c.repo);
    assert_eq!(before.len(), 1, "{before:?}");
    drover::loopctl::night::control::write(
        &c.d.state.join("loop1"),
        drover::loopctl::night::control::Control::EmergencyStop,
        "fire",
    )
    .unwrap();
    c.resume();
    assert_eq!(landed_commits(&c.repo), before, "the landed work stays");
    let v = run_json(&c.d);
    assert_eq!(in_phase(&v, "landed"), ["TASK-1"], "{v}");
    assert_eq!(v["integration_head"], before[0].0.as_str(), "{v}");
}
