//! How a run stops and what it leaves: an emergency stop releases the write
//! leases it holds, Ctrl-C (SIGINT) is a controlled stop that leaves a
//! resumable run, `loop status` and `loop control` tell a live run from a
//! dead one, and a run kept from every task by an earlier run's stale lease
//! is not a success. Sim agents in real native panes, real worktrees, a
//! real board, `drover loop run` as a child process.

use crate::common;
use crate::loop_common;

use common::{Drover, stderr, wait_until};
use loop_common::{REVIEWER_PASS, in_phase, run_json, spawn_loop, wait_exit};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(180);

/// TASK-1 works `ms` before it writes its file and reports.
fn implementer(ms: u32) -> String {
    format!(
        "[[turn]]\nmatch = \"task=TASK-1 \"\nsteps = [{{ work = {ms} }}, {{ write = {{ path = \"f1.txt\", content = \"1\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
    )
}

struct Run {
    d: Drover,
    repo: PathBuf,
    charter: PathBuf,
    imp: PathBuf,
    rev: PathBuf,
    log: PathBuf,
}

impl Run {
    fn new(ms: u32) -> Run {
        let d = Drover::new().native();
        let (repo, charter) =
            loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
        let root = d.scratch();
        let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
        std::fs::write(&imp, implementer(ms)).unwrap();
        std::fs::write(&rev, REVIEWER_PASS).unwrap();
        let log = root.join("loop.log");
        Run {
            d,
            repo,
            charter,
            imp,
            rev,
            log,
        }
    }

    fn args(&self, resume: Option<u32>) -> Vec<String> {
        let mut a: Vec<String> = vec!["loop".into(), "run".into()];
        match resume {
            Some(n) => a.extend(["--resume".into(), n.to_string()]),
            None => a.extend([
                "--repo".into(),
                self.repo.display().to_string(),
                "--charter".into(),
                self.charter.display().to_string(),
            ]),
        }
        a.extend([
            "--sim-implementer".into(),
            self.imp.display().to_string(),
            "--sim-reviewer".into(),
            self.rev.display().to_string(),
            "--backend".into(),
            "native".into(),
        ]);
        a
    }

    fn spawn(&self, resume: Option<u32>) -> std::process::Child {
        let a = self.args(resume);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        spawn_loop(&self.d, &a, &self.log)
    }

    fn wait_implementing(&self) {
        assert!(
            wait_until(LONG, || !in_phase(&run_json(&self.d), "implementing")
                .is_empty()),
            "TASK-1 never started: {}",
            self.logs()
        );
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn decisions(&self, n: u32) -> String {
        std::fs::read_to_string(self.d.state.join(format!("loop{n}/DECISIONS.md")))
            .unwrap_or_default()
    }

    /// The write leases held now (`lease ls --json`), by task.
    fn leases(&self) -> Vec<String> {
        let v: serde_json::Value =
            serde_json::from_str(&self.d.ok(&["lease", "ls", "--json"])).unwrap();
        v.as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["state"] == "active")
            .filter_map(|l| l["task_id"].as_str().map(str::to_string))
            .collect()
    }

    fn no_live_lane(&self) -> bool {
        let panes: Vec<serde_json::Value> =
            serde_json::from_str(&self.d.ok(&["pane", "ls", "--json"])).unwrap();
        panes
            .iter()
            .all(|p| !p["exit"].is_null() || !p["name"].as_str().unwrap_or("").starts_with("l"))
    }
}

/// Guards issue 28 item 2: an emergency stop left TASK-1's write lease held
/// and borrowed, so the next `loop run` parked every task and exited 0; and
/// its close-out said "kept with its unlanded work" of a clean worktree.
#[test]
fn an_emergency_stop_releases_its_leases_and_the_next_run_lands() {
    let r = Run::new(60_000);
    let mut child = r.spawn(None);
    r.wait_implementing();
    assert_eq!(r.leases(), ["TASK-1"], "the running task holds its lease");
    r.d.ok(&["loop", "control", "1", "emergency-stop", "--reason", "test"]);
    let status = wait_exit(&mut child, LONG).expect("the stopped run exits");
    assert!(status.success(), "{status:?}: {}", r.logs());
    assert!(r.leases().is_empty(), "the stop released: {:?}", r.leases());
    let closeout = std::fs::read_to_string(r.d.state.join("loop1/closeout.md")).unwrap();
    assert!(
        closeout.contains("kept (no changes in it)")
            && !closeout.contains("kept with its unlanded work"),
        "{closeout}"
    );
    // A new run on the same board is not refused by a stale hold.
    std::fs::write(&r.imp, implementer(100)).unwrap();
    let a = r.args(None);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = r.d.run(&a);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        r.decisions(2).contains("landing 1: 1 landed"),
        "{}",
        r.decisions(2)
    );
}

/// Guards issue 28 item 3: Ctrl-C of `loop run` died silently, `loop
/// status` kept saying `running`, and `loop control … close-out` was
/// accepted with nothing running the loop.
#[test]
fn sigint_is_a_controlled_stop_that_resume_finishes() {
    let r = Run::new(60_000);
    let mut child = r.spawn(None);
    r.wait_implementing();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = wait_exit(&mut child, LONG).expect("SIGINT ends the loop");
    assert_eq!(status.code(), Some(130), "{}", r.logs());
    let v = run_json(&r.d);
    assert_eq!(v["state"], "interrupted", "{v}");
    assert_eq!(v["stopped_by"], "signal SIGINT", "{v}");
    assert!(
        r.decisions(1).contains(" interrupted: stopped by SIGINT"),
        "{}",
        r.decisions(1)
    );
    assert!(r.no_live_lane(), "the stop took its lanes down");
    let human = r.d.ok(&["loop", "status", "1"]);
    assert!(human.starts_with("loop1 · interrupted · "), "{human}");
    // (close-out now closes such a run without a resume: night_pass3.)
    let out = r.d.run(&["loop", "control", "1", "pause"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("loop1 is not running") && stderr(&out).contains("--resume 1"),
        "{}",
        stderr(&out)
    );
    std::fs::write(&r.imp, implementer(100)).unwrap();
    let mut child = r.spawn(Some(1));
    let status = wait_exit(&mut child, LONG).expect("the resumed run finishes");
    assert!(status.success(), "{}", r.logs());
    assert_eq!(in_phase(&run_json(&r.d), "landed"), ["TASK-1"]);
    assert!(r.leases().is_empty(), "{:?}", r.leases());
}

/// Guards issue 28 items 2 and 3 after a crash: with the loop killed (-9)
/// its run reads `interrupted` in `loop status`, controls are refused, and
/// a new run on the board, which the dead run's lease would keep from its
/// only task, is refused naming the dead run and how to resume it.
#[test]
fn a_stale_lease_of_a_dead_run_is_not_a_success() {
    let r = Run::new(60_000);
    let mut child = r.spawn(None);
    r.wait_implementing();
    child.kill().unwrap();
    child.wait().unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&r.d.ok(&["loop", "status", "1", "--json"])).unwrap();
    assert_eq!(
        (v["state"].as_str(), v["live"].as_bool()),
        (Some("interrupted"), Some(false))
    );
    let out = r.d.run(&["loop", "control", "1", "pause"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let a = r.args(None);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = r.d.run(&a);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // Refused before anything is created, naming the dead run (issue 42
    // item 4; the lease it holds is its).
    assert!(
        stderr(&out).contains("loop1 on this repository stopped unclosed")
            && stderr(&out).contains("`drover loop run --resume 1`"),
        "{}",
        stderr(&out)
    );
    assert!(!r.d.state.join("loop2").exists());
}
