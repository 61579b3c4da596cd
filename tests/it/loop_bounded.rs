//! The loop's own child processes are bounded: the charter's gate
//! (`gate-timeout:`, the wall-clock budget, an emergency stop) and
//! `--ship-cmd` (`--ship-timeout`) end on time and take their whole
//! process group with them, and a SIGTERM of the loop ends them too. Sim
//! agents in real panes, real git worktrees and a real board.

use crate::common;
use crate::loop_common;

use common::{Drover, wait_until};
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::night::guards::Guards;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::ops::{LaneSpec, Role};
use drover::loopctl::run::runner::{self, Phase, RunConfig, RunStatus};
use loop_common::REVIEWER_PASS;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longer than any bounded run here needs; the old code took 30 minutes.
const BOUND: Duration = Duration::from_secs(90);

const IMPLEMENTER: &str = "[[turn]]\nmatch = \"task=TASK-1 \"\nsteps = [{ work = 100 }, { write = { path = \"f1.txt\", content = \"1\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n";

/// A gate (or ship command) that records its shell's pid in `pids`, leaves
/// a `sleep` in the background, then sleeps itself.
fn sleeper(pids: &Path) -> String {
    format!("echo $$ >> {}; sleep 600 & sleep 600", pids.display())
}

/// The process groups recorded in `pids` still have a live member.
fn live_groups(pids: &Path) -> Vec<i32> {
    let text = std::fs::read_to_string(pids).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|g: &i32| {
            !wait_until(Duration::from_secs(5), || {
                common::group_members(*g).iter().all(|m| m.state == 'Z')
            })
        })
        .collect()
}

/// Run the loop on a thread; `None` when it did not finish within [`BOUND`].
fn run_bounded(
    d: &Drover,
    repo: &Path,
    charter: &Path,
    u: Unattended,
    ship: Option<String>,
) -> (Option<RunStatus>, Duration) {
    let mut cfg: RunConfig =
        loop_common::run_config(d, repo, charter, 1, Duration::from_secs(60), u);
    cfg.ship_cmd = ship;
    let (state, socket) = (d.state.clone(), d.socket());
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let exe = PathBuf::from(common::BIN);
        let client = drover::daemon::Client::connect_or_start(
            drover::statedir::StateDir::new(&state),
            &socket,
            Some(&exe),
        )
        .unwrap();
        let scripts = |s: &LaneSpec| match s.role {
            Role::Implementer => IMPLEMENTER.to_string(),
            Role::Reviewer => REVIEWER_PASS.to_string(),
        };
        let mut ops = SimLanes::new(
            drover::statedir::StateDir::new(&state),
            client,
            &exe,
            Box::new(scripts),
        );
        let r = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}"));
        let _ = tx.send(r);
    });
    let st = rx.recv_timeout(BOUND).ok().map(|r| r.unwrap());
    (st, t0.elapsed())
}

fn decisions(d: &Drover) -> String {
    std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap_or_default()
}

/// Guards issue 24 item 5: `gate-timeout:` in the charter ends a gate that
/// runs past it, with everything it started.
#[test]
fn a_gate_past_its_charter_timeout_is_ended_with_its_group() {
    let d = Drover::new();
    let pids = d.scratch().join("gate.pids");
    let (repo, charter) = loop_common::board_repo(
        &d,
        1,
        &format!(
            "- lanes: 4\n- pool: 1\n- gate: `{}`\n- gate-timeout: 2\n",
            sleeper(&pids)
        ),
    );
    let (st, took) = run_bounded(&d, &repo, &charter, Unattended::default(), None);
    let st = st.unwrap_or_else(|| panic!("still waiting on the gate: {}", decisions(&d)));
    let t = &st.tasks[0];
    assert_eq!(t.kind(), Phase::Parked, "{t:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert!(live_groups(&pids).is_empty(), "a gate group outlived it");
}

/// Guards issue 24 item 5: the wall-clock budget ends a gate running when
/// it runs out.
#[test]
fn the_wall_clock_budget_ends_a_running_gate() {
    let d = Drover::new();
    let pids = d.scratch().join("gate.pids");
    let (repo, charter) = loop_common::board_repo(
        &d,
        1,
        &format!("- lanes: 4\n- pool: 1\n- gate: `{}`\n", sleeper(&pids)),
    );
    let u = Unattended {
        guards: Guards {
            wall_clock: Some(Duration::from_secs(10)),
            ..Guards::default()
        },
        ..Default::default()
    };
    let (st, took) = run_bounded(&d, &repo, &charter, u, None);
    let st = st.unwrap_or_else(|| panic!("still waiting on the gate: {}", decisions(&d)));
    assert_ne!(st.tasks[0].kind(), Phase::Landed);
    assert!(took < Duration::from_secs(40), "{took:?}");
    assert!(
        live_groups(&pids).is_empty(),
        "a gate group outlived the budget"
    );
}

/// Guards issue 24 item 5: an emergency stop ends the gate under way.
#[test]
fn an_emergency_stop_ends_a_running_gate() {
    let d = Drover::new();
    let pids = d.scratch().join("gate.pids");
    let (repo, charter) = loop_common::board_repo(
        &d,
        1,
        &format!("- lanes: 4\n- pool: 1\n- gate: `{}`\n", sleeper(&pids)),
    );
    let (run, p2) = (d.state.join("loop1"), pids.clone());
    std::thread::spawn(move || {
        if wait_until(BOUND, || p2.exists()) {
            drover::loopctl::night::control::write(
                &run,
                drover::loopctl::night::control::Control::EmergencyStop,
                "fire",
            )
            .unwrap();
        }
    });
    let (st, took) = run_bounded(&d, &repo, &charter, Unattended::default(), None);
    let st = st.unwrap_or_else(|| panic!("the stop did not end the gate: {}", decisions(&d)));
    assert_eq!(st.state.as_str(), "stopped", "{}", decisions(&d));
    assert!(took < Duration::from_secs(40), "{took:?}");
    assert!(
        live_groups(&pids).is_empty(),
        "a gate group outlived the stop"
    );
}

/// Guards issue 24 item 5: `--ship-cmd 'exec sleep 600'` is ended at its
/// timeout, with its group; the landing stands and the exit is recorded.
#[test]
fn a_ship_command_past_its_timeout_is_ended_with_its_group() {
    let d = Drover::new();
    let pids = d.scratch().join("ship.pids");
    let (repo, charter) = loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let u = Unattended {
        ship_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let ship = format!("echo $$ >> {}; sleep 600 & exec sleep 600", pids.display());
    let (st, _) = run_bounded(&d, &repo, &charter, u, Some(ship));
    let st = st.unwrap_or_else(|| panic!("still waiting on the ship command: {}", decisions(&d)));
    assert_eq!(st.tasks[0].kind(), Phase::Landed);
    let dec = decisions(&d);
    assert!(
        dec.contains("ship command for ") && dec.contains("timed out after 2 s"),
        "{dec}"
    );
    assert!(live_groups(&pids).is_empty(), "a ship group outlived it");
}

/// Guards issue 24 item 5: a SIGTERM of `loop run` ends the gate it runs
/// (nothing is left running under pid 1).
#[test]
fn a_sigterm_of_the_loop_ends_its_gate() {
    let d = Drover::new().native();
    let pids = d.scratch().join("gate.pids");
    let (repo, charter) = loop_common::board_repo(
        &d,
        1,
        &format!("- lanes: 4\n- pool: 1\n- gate: `{}`\n", sleeper(&pids)),
    );
    let root = d.scratch();
    let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp, IMPLEMENTER).unwrap();
    std::fs::write(&rev, REVIEWER_PASS).unwrap();
    let log = root.join("loop.log");
    let (r, c, i, v) = (
        repo.display().to_string(),
        charter.display().to_string(),
        imp.display().to_string(),
        rev.display().to_string(),
    );
    let mut child = loop_common::spawn_loop(
        &d,
        &[
            "loop",
            "run",
            "--repo",
            &r,
            "--charter",
            &c,
            "--sim-implementer",
            &i,
            "--sim-reviewer",
            &v,
        ],
        &log,
    );
    assert!(
        wait_until(BOUND, || pids.exists()),
        "the gate never ran: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(loop_common::wait_exit(&mut child, Duration::from_secs(20)).is_some());
    assert!(live_groups(&pids).is_empty(), "the gate outlived the loop");
}

/// Guards issue 24 item 5: what a gate started outlives a `kill -9` of the
/// loop (only its shell gets the parent-death signal); the resume ends it
/// before it resets the worktrees, then goes on.
#[test]
fn a_resume_after_kill_9_ends_what_the_gate_left_running() {
    let d = Drover::new().native();
    let pids = d.scratch().join("gate.pids");
    let (repo, charter) = loop_common::board_repo(
        &d,
        1,
        &format!(
            "- lanes: 4\n- pool: 1\n- gate: `{}`\n- gate-timeout: 3\n",
            sleeper(&pids)
        ),
    );
    let root = d.scratch();
    let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp, IMPLEMENTER).unwrap();
    std::fs::write(&rev, REVIEWER_PASS).unwrap();
    let log = root.join("loop.log");
    let (r, c, i, v) = (
        repo.display().to_string(),
        charter.display().to_string(),
        imp.display().to_string(),
        rev.display().to_string(),
    );
    let sims = ["--sim-implementer", &i, "--sim-reviewer", &v];
    let mut first = vec!["loop", "run", "--repo", &r, "--charter", &c];
    first.extend(sims);
    let mut child = loop_common::spawn_loop(&d, &first, &log);
    assert!(wait_until(BOUND, || pids.exists()), "the gate never ran");
    child.kill().unwrap();
    child.wait().unwrap();
    let first_gate: i32 = std::fs::read_to_string(&pids)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || !common::group_members(
            first_gate
        )
        .is_empty()),
        "the background sleep is still there after the kill"
    );
    let mut resume = vec!["loop", "run", "--resume", "1"];
    resume.extend(sims);
    let mut child = loop_common::spawn_loop(&d, &resume, &log);
    assert!(loop_common::wait_exit(&mut child, BOUND).is_some());
    assert!(
        live_groups(&pids).is_empty(),
        "the killed loop's gate outlived the resume: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let dec = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(dec.contains("left running were ended"), "{dec}");
}
