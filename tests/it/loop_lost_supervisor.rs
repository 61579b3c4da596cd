//! A supervisor lost at the moment a lane starts is not the task's fault:
//! the run stops unclosed (for `--resume`) and nothing is parked. Sim agents
//! in real panes of a real supervisor, killed with SIGKILL at the exact
//! point, real git worktrees and a real board.

use crate::common;
use crate::loop_common;

use common::Drover;
use drover::loopctl::LoopError;
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::ops::{JobSpec, LaneHandle, LaneOps, LaneSpec, Outcome, Role};
use drover::loopctl::run::runner::{self, Phase};
use loop_common::REVIEWER_PASS;
use std::path::{Path, PathBuf};
use std::time::Duration;

const IMPLEMENTER: &str = "[[turn]]\nmatch = \"task=TASK-1 \"\nsteps = [{ write = { path = \"f1.txt\", content = \"1\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n";

/// Sim lanes whose supervisor is killed (SIGKILL, all its threads gone)
/// just before the first lane of `role` is brought up.
struct KillBefore {
    inner: SimLanes,
    role: Role,
    state: PathBuf,
    killed: bool,
}

impl KillBefore {
    fn kill(&mut self) {
        let pid: i32 = std::fs::read_to_string(self.state.join("supervisor.lock"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(
            common::wait_until(Duration::from_secs(60), || common::all_threads_gone(pid)),
            "the supervisor survived SIGKILL"
        );
        self.killed = true;
    }
}

impl LaneOps for KillBefore {
    fn up(&mut self, spec: &LaneSpec) -> Result<LaneHandle, LoopError> {
        if spec.role == self.role && !self.killed {
            self.kill();
        }
        self.inner.up(spec)
    }
    fn live(&mut self) -> Result<Vec<String>, LoopError> {
        self.inner.live()
    }
    fn dispatch(&mut self, lane: &LaneHandle, job: &JobSpec) -> Result<String, LoopError> {
        self.inner.dispatch(lane, job)
    }
    fn wait_decision(
        &mut self,
        jobs: &[String],
        timeout: Duration,
    ) -> Result<Vec<(String, Outcome)>, LoopError> {
        self.inner.wait_decision(jobs, timeout)
    }
    fn down(&mut self, lane: &LaneHandle) -> Result<(), LoopError> {
        self.inner.down(lane)
    }
}

/// Run a one-task board with the supervisor killed before the first lane
/// of `role` comes up; the run's result and its tasks' phases.
fn run_killing_before(role: Role) -> (Result<(), LoopError>, Vec<Phase>, String) {
    let d = Drover::new();
    let (repo, charter) = loop_common::board_repo(&d, 1, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let cfg = loop_common::run_config(
        &d,
        &repo,
        &charter,
        1,
        Duration::from_secs(60),
        Unattended::default(),
    );
    let (state, socket) = (d.state.clone(), d.socket());
    let (tx, rx) = std::sync::mpsc::channel();
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
        let mut ops = KillBefore {
            inner: SimLanes::new(
                drover::statedir::StateDir::new(&state),
                client,
                &exe,
                Box::new(scripts),
            ),
            role,
            state: state.clone(),
            killed: false,
        };
        let r = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}"));
        let _ = tx.send(r.map(|_| ()));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(180))
        .expect("the loop waited on a supervisor that is gone");
    let phases = run_phases(&d.state);
    let decisions = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap_or_default();
    (r, phases, decisions)
}

fn run_phases(state: &Path) -> Vec<Phase> {
    let text = std::fs::read_to_string(state.join("loop1/run.json")).unwrap();
    let v: runner::RunStatus = serde_json::from_str(&text).unwrap();
    v.tasks.into_iter().map(|t| t.kind()).collect()
}

/// The run stopped interrupted (for `--resume`) and nothing was parked.
fn interrupted_and_nothing_parked(role: Role) {
    let (r, phases, decisions) = run_killing_before(role);
    assert!(
        matches!(r, Err(LoopError::Interrupted { .. })),
        "{r:?}\n{decisions}"
    );
    assert!(!phases.contains(&Phase::Parked), "{phases:?}\n{decisions}");
    assert!(!decisions.contains(" park: "), "{decisions}");
}

/// Guards the CI failure where the supervisor died while a review was
/// starting: "review could not start: … Connection reset by peer" parked
/// the task, and after `--resume` it never landed.
#[test]
fn a_supervisor_lost_as_a_review_starts_interrupts_the_run_and_parks_nothing() {
    interrupted_and_nothing_parked(Role::Reviewer);
}

/// Guards the same race at an implementer's start ("could not start: …").
#[test]
fn a_supervisor_lost_as_a_task_starts_interrupts_the_run_and_parks_nothing() {
    interrupted_and_nothing_parked(Role::Implementer);
}
