//! A lane whose pane or backend is gone while its job runs is known at
//! once: the task parks within seconds (never at the turn timeout) with a
//! reason naming the pane's end and, for herdr, the server gone. Sim agents
//! in real panes (native, and the real herdr), `drover loop run` as a child
//! process, a real board and real worktrees.

use crate::common;
use crate::herdr_common;
use crate::loop_common;

use common::{Drover, wait_until};
use herdr_common::Server;
use loop_common::{REVIEWER_PASS, in_phase, run_json, wait_exit};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(180);
/// The run's turn timeout: the park must come well before it.
const TURN_S: u64 = 300;
/// How soon after the end the task must be parked.
const PROMPTLY: Duration = Duration::from_secs(60);

/// TASK-1's implementer works for ten minutes before it writes anything.
const IMPLEMENTER: &str = "[[turn]]\nmatch = \"task=TASK-1 \"\nsteps = [{ work = 600000 }, { write = { path = \"f1.txt\", content = \"1\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n";

struct Run {
    d: Drover,
    child: std::process::Child,
    log: PathBuf,
}

impl Run {
    /// `loop run` on a one-task board with panes on `backend`, `env` set
    /// for it (and its supervisor, started first).
    fn start(backend: &str, env: Vec<(&'static str, std::ffi::OsString)>) -> Run {
        let d = Drover::new().native();
        let (repo, charter) =
            loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
        let root = d.scratch();
        let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
        std::fs::write(&imp, IMPLEMENTER).unwrap();
        std::fs::write(&rev, REVIEWER_PASS).unwrap();
        let out = d
            .cmd()
            .envs(env.clone())
            .args(["serve", "--daemon"])
            .output()
            .unwrap();
        assert!(out.status.success(), "serve: {}", common::stderr(&out));
        let log = root.join("loop.log");
        let err = std::fs::File::create(&log).unwrap();
        let turn = TURN_S.to_string();
        let child = d
            .cmd()
            .envs(env)
            .args(["loop", "run", "--repo"])
            .arg(&repo)
            .arg("--charter")
            .arg(&charter)
            .arg("--sim-implementer")
            .arg(&imp)
            .arg("--sim-reviewer")
            .arg(&rev)
            .args(["--backend", backend, "--turn-timeout-s", &turn])
            .stdout(std::process::Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        let r = Run { d, child, log };
        assert!(
            wait_until(LONG, || !in_phase(&run_json(&r.d), "implementing")
                .is_empty()
                && r.lane_pid().is_some()),
            "TASK-1 never started: {}",
            r.logs()
        );
        r
    }

    /// The pid of the implementer's live pane.
    fn lane_pid(&self) -> Option<i32> {
        let out = self.d.run(&["pane", "ls", "--json"]);
        let panes: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).ok()?;
        panes
            .iter()
            .find(|p| p["exit"].is_null() && p["agent"] == "sim")
            .and_then(|p| p["pid"].as_i64())
            .and_then(|p| i32::try_from(p).ok())
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait for TASK-1 parked; its park reason, and how long it took.
    fn parked(&mut self, since: Instant) -> (String, Duration) {
        let seen = wait_until(PROMPTLY, || {
            !in_phase(&run_json(&self.d), "parked").is_empty()
        });
        let took = since.elapsed();
        let v = run_json(&self.d);
        let decisions =
            std::fs::read_to_string(self.d.state.join("loop1/DECISIONS.md")).unwrap_or_default();
        assert!(
            seen,
            "TASK-1 was not parked within {PROMPTLY:?} of its lane's end: {v}\n{decisions}\n{}",
            self.logs()
        );
        let _ = wait_exit(&mut self.child, LONG);
        eprintln!("{decisions}");
        (decisions, took)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Guards issue 36 item 13: a native lane killed by SIGHUP waited out the
/// turn timeout and parked with a generic "no outcome".
#[test]
fn a_lane_killed_by_sighup_parks_its_task_at_once_naming_the_hangup() {
    let mut r = Run::start("native", Vec::new());
    let pid = r.lane_pid().unwrap();
    let at = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let (decisions, took) = r.parked(at);
    assert!(
        decisions.contains("signal Hangup") && !decisions.contains("no outcome"),
        "{decisions}"
    );
    assert!(took < PROMPTLY, "{took:?}");
}

/// Guards issue 36 item 13: with the herdr server killed mid-run the sim
/// lane "exited 0" and the task parked at the turn timeout with "no
/// outcome"; now it parks at once, naming herdr gone.
#[test]
#[ignore = "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH"]
fn a_herdr_server_killed_mid_run_parks_the_task_at_once_naming_herdr() {
    let mut h = herdr_common::Real::require();
    let mut r = Run::start("herdr", h.env());
    let at = Instant::now();
    h.kill();
    let (decisions, took) = r.parked(at);
    assert!(
        decisions.contains("herdr pane")
            && decisions.contains("herdr's server went away")
            && !decisions.contains("no outcome"),
        "{decisions}"
    );
    assert!(took < PROMPTLY, "{took:?}");
}
