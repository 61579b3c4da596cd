//! `drover loop run --resume` after crashes other than a `kill -9` of the
//! loop alone (that one is `loop_resume.rs`), with sim agents in real native
//! panes, real worktrees and a real board: the supervisor holding the panes
//! killed mid-run, a simulated reboot (loop, supervisor and every pane
//! process killed), a crash after a turn finished but before the loop took
//! its result, and what a resume carries over (the blocker streak, the
//! wall-clock budget spent).

use crate::common;
use crate::loop_common;

use common::Drover;
use drover::engine::Engine;
use loop_common::{in_phase, run_json, spawn_loop, trailers, wait_exit};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::time::Duration;

/// Long enough for a loaded machine; the runs take seconds.
const LONG: Duration = Duration::from_secs(300);

/// TASK-k's implementer: `pre` steps, write its file (and a stray file out
/// of its claim when `stray`), report, finish.
fn turn(k: u32, pre: &str, stray: bool) -> String {
    let extra = if stray {
        "{ write = { path = \"stray.txt\", content = \"x\\n\" } }, "
    } else {
        ""
    };
    format!(
        "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{pre}{{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {extra}{{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
    )
}

struct Night {
    d: Drover,
    repo: PathBuf,
    first: Vec<String>,
    resume: Vec<String>,
    log: PathBuf,
}

/// A board of `n` tasks with the implementer script `imp`, and the
/// command lines of its first run and its resume (`extra` flags on both).
fn night(n: u32, pool: u32, imp: &str, extra: &[&str]) -> Night {
    let d = Drover::new().native();
    let (repo, charter) = loop_common::board_repo(
        &d,
        n,
        &format!("- lanes: 4\n- pool: {pool}\n- gate: `true`\n"),
    );
    let root = d.scratch();
    let (imp_p, rev_p) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp_p, imp).unwrap();
    std::fs::write(&rev_p, loop_common::REVIEWER_PASS).unwrap();
    let mut common: Vec<String> = vec![
        "--sim-implementer".into(),
        imp_p.display().to_string(),
        "--sim-reviewer".into(),
        rev_p.display().to_string(),
        "--backend".into(),
        "native".into(),
    ];
    common.extend(extra.iter().map(|s| s.to_string()));
    let mut first: Vec<String> = ["loop", "run", "--repo"].map(String::from).to_vec();
    first.extend([
        repo.display().to_string(),
        "--charter".into(),
        charter.display().to_string(),
    ]);
    first.extend(common.clone());
    let mut resume: Vec<String> = ["loop", "run", "--resume", "1"].map(String::from).to_vec();
    resume.extend(common);
    let log = root.join("loop.log");
    Night {
        d,
        repo,
        first,
        resume,
        log,
    }
}

impl Night {
    fn spawn(&self, args: &[String]) -> std::process::Child {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        spawn_loop(&self.d, &a, &self.log)
    }

    fn decisions(&self) -> String {
        std::fs::read_to_string(self.d.state.join("loop1/DECISIONS.md")).unwrap_or_default()
    }

    /// Resume run 1 and wait for its close-out.
    fn resume_to_the_end(&self) -> serde_json::Value {
        let mut child = self.spawn(&self.resume);
        let status = wait_exit(&mut child, LONG).expect("the resumed run did not finish");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(status.success(), "{status:?}: {log}");
        run_json(&self.d)
    }

    /// Every task landed exactly once, and no lane of the run is left.
    fn all_landed_once(&self, n: u32) {
        assert_eq!(
            trailers(&self.repo, n),
            (1..=n).map(|k| (k, 1)).collect::<Vec<_>>(),
            "every task landed exactly once:\n{}",
            self.decisions()
        );
        let v = run_json(&self.d);
        assert_eq!(v["state"], "closed", "{v}");
        assert_eq!(in_phase(&v, "landed").len(), n as usize, "{v}");
        let panes: Vec<serde_json::Value> =
            serde_json::from_str(&self.d.ok(&["pane", "ls", "--json"])).unwrap();
        assert!(
            panes
                .iter()
                .all(|p| !p["exit"].is_null()
                    || !p["name"].as_str().unwrap_or("").starts_with("l1-")),
            "a lane of the run is left: {panes:?}"
        );
    }

    /// Jobs of the run, by id.
    fn jobs(&self) -> Vec<String> {
        Engine::open(drover::statedir::StateDir::new(&self.d.state))
            .unwrap()
            .list()
            .unwrap()
            .into_iter()
            .map(|j| j.job_id)
            .filter(|j| j.starts_with("loop1-"))
            .collect()
    }

    /// No task that had landed before the crash got a job after it.
    fn nothing_landed_redone(&self, landed: &[String]) {
        for id in landed {
            let slug = id.to_lowercase();
            let again: Vec<String> = self
                .jobs()
                .into_iter()
                .filter(|j| j.starts_with(&format!("loop1-{slug}-")) && j.contains("-k"))
                .collect();
            assert!(
                again.is_empty(),
                "{id} landed before the crash yet ran again: {again:?}"
            );
        }
    }

    /// The loop, its supervisor lost, stops on its own: not a success, the
    /// run unclosed (for `--resume`), an `interrupted` decision.
    fn stops_unclosed(&self, child: &mut std::process::Child) {
        let status = wait_exit(child, LONG);
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the loop waited on lanes lost with its supervisor:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        assert!(
            !status.unwrap().success(),
            "a lost supervisor is not a success"
        );
        assert!(
            run_json(&self.d)["finished_at"].is_null(),
            "the run is not closed"
        );
        assert!(
            self.decisions().contains(" interrupted: "),
            "the stop is an interrupted decision:\n{}",
            self.decisions()
        );
    }

    fn wait_mid_run(&self) -> Vec<String> {
        let mut landed = Vec::new();
        let ok = common::wait_until(LONG, || {
            let v = run_json(&self.d);
            landed = in_phase(&v, "landed");
            !landed.is_empty()
                && (!in_phase(&v, "implementing").is_empty()
                    || !in_phase(&v, "reviewing").is_empty())
        });
        assert!(ok, "the run never got mid-way:\n{}", self.decisions());
        landed
    }
}

fn sigkill(pid: i32) {
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
}

fn pane_pids(d: &Drover) -> Vec<i32> {
    let panes: Vec<serde_json::Value> =
        serde_json::from_str(&d.ok(&["pane", "ls", "--json"])).unwrap_or_default();
    panes
        .iter()
        .filter_map(|p| p["pid"].as_i64())
        .map(|p| p as i32)
        .collect()
}

fn six_tasks() -> String {
    (1..=6)
        .map(|k| turn(k, "{ work = 1500 }, ", false))
        .collect()
}

/// Guards resume after `kill -9` of the supervisor holding the lanes' native
/// panes: the loop stops (its transport is gone), the panes are lost, and
/// `--resume` reconciles: no task landed before the crash runs again, every
/// task lands exactly once.
#[test]
fn kill_9_of_the_supervisor_then_resume_lands_every_task_once() {
    let n = night(6, 2, &six_tasks(), &[]);
    let mut child = n.spawn(&n.first);
    let landed = n.wait_mid_run();
    n.d.kill_supervisor();
    // The loop notices its supervisor is gone and stops unclosed.
    n.stops_unclosed(&mut child);
    n.resume_to_the_end();
    n.all_landed_once(6);
    n.nothing_landed_redone(&landed);
    assert!(n.decisions().contains(" recover: resume #1"));
}

/// Guards the race that hung the loop 1 CI run in 3: the supervisor dies
/// while every lane is in flight and nothing is left to start, so the loop
/// only waits on its jobs and reads its lanes' screens. A read that got no
/// answer counted as an `unreachable` lane, a stall that is waited out, so
/// the loop waited forever. The loop is frozen (SIGSTOP) with both lanes in
/// flight while the supervisor is killed and a new one started (as any
/// other command would), then let go: it must stop unclosed, and resume.
#[test]
fn a_supervisor_lost_while_every_lane_is_in_flight_stops_the_loop_for_resume() {
    let n = night(6, 2, &six_tasks(), &[]);
    let mut child = n.spawn(&n.first);
    let loop_pid = Pid::from_raw(child.id() as i32);
    n.wait_mid_run();
    let engine = Engine::open(drover::statedir::StateDir::new(&n.d.state)).unwrap();
    let mut landed = Vec::new();
    let frozen = common::wait_until(LONG, || {
        kill(loop_pid, Signal::SIGSTOP).unwrap();
        let v = run_json(&n.d);
        landed = in_phase(&v, "landed");
        let in_flight = v["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["phase"] == "implementing" || t["phase"] == "reviewing")
            .filter_map(|t| t["job"].as_str())
            .filter(|j| engine.show(j).is_ok_and(|r| !r.status.is_terminal()))
            .count();
        if in_flight == 2 {
            return true;
        }
        kill(loop_pid, Signal::SIGCONT).unwrap();
        false
    });
    assert!(frozen, "never both lanes in flight:\n{}", n.decisions());
    n.d.kill_supervisor();
    n.d.serve();
    kill(loop_pid, Signal::SIGCONT).unwrap();
    n.stops_unclosed(&mut child);
    n.resume_to_the_end();
    n.all_landed_once(6);
    n.nothing_landed_redone(&landed);
}

/// Guards resume after a simulated reboot: the loop, the supervisor and
/// every pane process are killed with SIGKILL at once; `--resume` starts a
/// new supervisor, lands every task exactly once and reruns nothing landed.
#[test]
fn a_simulated_reboot_then_resume_lands_every_task_once() {
    let n = night(6, 2, &six_tasks(), &[]);
    let mut child = n.spawn(&n.first);
    let landed = n.wait_mid_run();
    let panes = pane_pids(&n.d);
    assert!(!panes.is_empty(), "lanes are up mid-run");
    let sup = n.d.server_pid().unwrap();
    sigkill(child.id() as i32);
    sigkill(sup);
    for p in &panes {
        sigkill(*p);
    }
    let _ = child.wait();
    assert!(
        common::wait_until(LONG, || common::all_threads_gone(sup)
            && panes.iter().all(|p| common::all_threads_gone(*p))),
        "a process survived SIGKILL"
    );
    n.resume_to_the_end();
    n.all_landed_once(6);
    n.nothing_landed_redone(&landed);
}

/// Guards using a finished turn: the loop is frozen (SIGSTOP) right after
/// TASK-1's implementer job is dispatched, the turn finishes and its job
/// completes meanwhile, then the loop is killed; `--resume` takes that
/// result (a `recover` entry says so) and dispatches no new implementer job
/// for TASK-1.
#[test]
fn a_turn_finished_before_the_crash_is_used_not_redone() {
    let n = night(1, 1, &turn(1, "{ work = 2000 }, ", false), &[]);
    let mut child = n.spawn(&n.first);
    let pid = Pid::from_raw(child.id() as i32);
    let job = "loop1-task-1-i1";
    let dispatched = common::wait_until(LONG, || run_json(&n.d)["tasks"][0]["job"] == job);
    assert!(dispatched, "{}", n.decisions());
    kill(pid, Signal::SIGSTOP).unwrap();
    let engine = Engine::open(drover::statedir::StateDir::new(&n.d.state)).unwrap();
    let done = common::wait_until(LONG, || {
        engine
            .show(job)
            .is_ok_and(|r| r.status == drover::engine::Status::Completed)
    });
    let _ = kill(pid, Signal::SIGKILL);
    let _ = child.wait();
    assert!(done, "the turn never completed");
    assert_eq!(
        in_phase(&run_json(&n.d), "implementing"),
        ["TASK-1"],
        "the loop was frozen before it took the outcome"
    );
    n.resume_to_the_end();
    n.all_landed_once(1);
    let dec = n.decisions();
    assert!(
        dec.contains(&format!(
            "recover: TASK-1: its implementer turn (job {job}) finished before the stop: its result is used"
        )),
        "{dec}"
    );
    let jobs = n.jobs();
    assert!(
        !jobs
            .iter()
            .any(|j| j.starts_with("loop1-task-1-i") && j != job),
        "the implementer turn was re-run: {jobs:?}"
    );
}

/// Guards carrying the blocker streak: TASK-1 parks (a stray file), the
/// loop is killed while TASK-2 works; after `--resume` TASK-2 parks too —
/// the second blocker in a row trips `--max-consecutive-blockers 2`, so
/// TASK-3 never starts (without the carried streak it would land).
#[test]
fn resume_carries_the_blocker_streak() {
    let imp = format!(
        "{}{}{}",
        turn(1, "{ work = 100 }, ", true),
        turn(2, "{ work = 3000 }, ", true),
        turn(3, "{ work = 100 }, ", false)
    );
    let n = night(3, 1, &imp, &["--max-consecutive-blockers", "2"]);
    let mut child = n.spawn(&n.first);
    let at_two = common::wait_until(LONG, || {
        let v = run_json(&n.d);
        in_phase(&v, "parked") == ["TASK-1"] && in_phase(&v, "implementing") == ["TASK-2"]
    });
    sigkill(child.id() as i32);
    let _ = child.wait();
    assert!(at_two, "{}", n.decisions());
    assert_eq!(run_json(&n.d)["consecutive_blockers"], 1);
    let v = n.resume_to_the_end();
    assert_eq!(v["state"], "blocked", "{v}");
    assert_eq!(in_phase(&v, "parked"), ["TASK-1", "TASK-2"]);
    assert_eq!(in_phase(&v, "ready"), ["TASK-3"], "TASK-3 never starts");
    assert!(
        n.decisions()
            .contains("blocked: guard max-consecutive-blockers: 2 blockers in a row"),
        "{}",
        n.decisions()
    );
}

/// Guards carrying the wall-clock budget: with `--wall-clock-s 600` on a
/// 60× clock, the loop is killed once at least 300 s of the budget are
/// spent (run.json says so); the resumed run trips the guard within what is
/// left — less than a whole budget after its resume, on the loop's clock.
#[test]
fn resume_carries_the_wall_clock_budget_spent() {
    let imp: String = (1..=3)
        .map(|k| turn(k, "{ work = 60000 }, ", false))
        .collect();
    let n = night(
        3,
        1,
        &imp,
        &[
            "--wall-clock-s",
            "600",
            "--clock-scale",
            "60",
            "--max-consecutive-blockers",
            "0",
        ],
    );
    let mut child = n.spawn(&n.first);
    let half = common::wait_until(LONG, || {
        run_json(&n.d)["spent_ms"].as_u64().unwrap_or(0) >= 300_000
    });
    sigkill(child.id() as i32);
    let _ = child.wait();
    assert!(half, "{}", n.decisions());
    let spent = run_json(&n.d)["spent_ms"].as_u64().unwrap();
    assert!(
        spent < 600_000,
        "the budget ran out before the kill: {spent}"
    );
    let v = n.resume_to_the_end();
    assert_eq!(v["state"], "blocked", "{v}");
    let dec = n.decisions();
    let at = |needle: &str| -> chrono::DateTime<chrono::Utc> {
        let l = dec
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{dec}"));
        let t = l.split(' ').nth(2).unwrap();
        chrono::DateTime::parse_from_rfc3339(t).unwrap().into()
    };
    let resumed = at(" recover: resume #1");
    let tripped = at(" blocked: guard wall-clock");
    let after = (tripped - resumed).num_seconds();
    assert!(
        after < 600,
        "the resumed run spent {after} s more: the budget started again\n{dec}"
    );
    assert!(v["spent_ms"].as_u64().unwrap() >= 600_000, "{v}");
}
