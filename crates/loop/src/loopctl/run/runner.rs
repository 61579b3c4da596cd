//! The runner (`drover loop run`): the board's Ready tasks worked through
//! lanes over [`LaneOps`] — implement, capture, review by the other agent,
//! gate check, land on the integration branch, close out. The run's state is
//! a `Run` (`state.rs`); the runner moves it through its steps (`steps.rs`,
//! `rounds.rs`, `landing.rs`, ...). This file holds the runner, its setup and
//! the start of tasks.
//!
//! Hooks for unattended runs: every wait goes through `Runner::wait_slice`,
//! every stop through [`Runner::close_out`], and every park records a reason
//! and a resume condition, so guards, controls and usage-limit parking can
//! decide there.

use crate::loopctl::board::charter::Charter;
use crate::loopctl::board::{self, Board};
use crate::loopctl::night::settings::Unattended;
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::parts::{BoardView, Clocks, Controls, Locks, Queues, Slots, Tuning};
use crate::loopctl::run::run_state::RunState;
use crate::loopctl::run::rundir::RunDir;
pub(in crate::loopctl) use crate::loopctl::run::state::Run;
pub use crate::loopctl::run::task::{Phase, TaskState};
use crate::loopctl::{LoopError, board::ready, land::git};
use crate::statedir::StateDir;

use std::path::PathBuf;
use std::time::Duration;

/// Longest one wait for outcomes before the loop looks at its queue again.
pub const WAIT_SLICE: Duration = Duration::from_millis(500);
/// Longest one agent turn may go without an outcome before its task is parked.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long the close-out waits for notifications still being delivered.
pub const NOTIFY_DRAIN: Duration = Duration::from_secs(10);
/// The intents of the run's delivered notifications (`notify.rs`).
pub const NOTIFIED: &str = "notified.json";
/// Longest the loop goes without writing `run.json` (so a crash loses at
/// most this much of the budget spent).
pub const CHECKPOINT: Duration = Duration::from_secs(5);
/// Repair rounds a task gets before it is parked (the convergence tripwire's floor).
pub const DEFAULT_REPAIR_ROUNDS: u32 = 2;

/// What a run is given.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub state_dir: PathBuf,
    pub repo: PathBuf,
    /// The Backlog.md dir (default `<repo>/backlog`).
    pub board_dir: PathBuf,
    pub charter: Charter,
    /// The base ref (default: `main`, else `master`, else HEAD's branch).
    pub base: Option<String>,
    /// The task pool size as given (`--pool`), overriding the charter's `pool:`.
    pub pool: Option<String>,
    /// Run once per green landing (`--ship-cmd`); drover itself never pushes.
    pub ship_cmd: Option<String>,
    /// Complete through the engine when the shadow policy says `complete`.
    pub autocomplete: bool,
    pub repair_rounds: u32,
    pub turn_timeout: Duration,
    /// Clock, guards, usage limits and stalls (`LOOP.md`, "Unattended runs").
    pub unattended: Unattended,
}

impl RunConfig {
    /// The state dir, with its layout.
    pub fn state(&self) -> &StateDir {
        StateDir::new(&self.state_dir)
    }
}

pub use crate::runstate::status::{LoopProcess, Question, RunStatus};

/// A running loop: the run's state (`Run`, `state.rs`), the lanes it works through
/// ([`LaneOps`]) and its console. The steps that move the run's tasks from
/// phase to phase are its methods, one file per part of the pipeline
/// (`steps`, `rounds`, `landing`, `finish`, ...); what needs no lane is
/// `Run`'s.
pub struct Runner<'a, O: LaneOps> {
    pub(in crate::loopctl) ops: &'a mut O,
    /// The run's state.
    pub(in crate::loopctl) run: Run,
    say: Box<dyn FnMut(&str) + 'a>,
}

/// A lane or pane name from a task id: lowercase `[a-z0-9-]` (the board
/// refuses two ids with the same one, [`board::id_key`]).
pub fn slug(id: &str) -> String {
    board::id_key(id)
}

fn locks_available(state: &StateDir) -> bool {
    matches!(
        crate::store::LockGuard::try_exclusive(&state.loop_probe_lock()),
        Ok(Some(_))
    )
}

/// Run a loop to its close-out. `say` gets one line per step.
pub fn run<'a, O: LaneOps>(
    ops: &'a mut O,
    cfg: RunConfig,
    say: impl FnMut(&str) + 'a,
) -> Result<RunStatus, LoopError> {
    let mut r = Runner::setup(ops, cfg, Box::new(say))?;
    let result = r.drive();
    r.finish(result)
}

impl<'a, O: LaneOps> Runner<'a, O> {
    fn setup(
        ops: &'a mut O,
        cfg: RunConfig,
        say: Box<dyn FnMut(&str) + 'a>,
    ) -> Result<Self, LoopError> {
        let Some(_) = cfg.charter.gate else {
            return Err(LoopError::Refused(format!(
                "{} names no `gate:` command; landing needs one",
                cfg.charter.path.display()
            )));
        };
        let reg = crate::registry::init(
            StateDir::new(&cfg.state_dir),
            &crate::registry::InitRequest {
                topology: crate::registry::Topology::FourRole,
                agent_mix: None,
                force: false,
            },
        );
        if let Err(e) = reg
            && crate::registry::load(StateDir::new(&cfg.state_dir))?.is_none()
        {
            return Err(e.into());
        }
        let base = match &cfg.base {
            Some(b) => b.clone(),
            None => git::default_base(&cfg.repo)?,
        };
        let base_sha = git::rev(&cfg.repo, &base)?;
        let head_is_base = git::rev(&cfg.repo, "HEAD").is_ok_and(|h| h == base_sha);
        let raw_pool = cfg.pool.clone().or_else(|| cfg.charter.pool.clone());
        let (pool, why) = ready::pool_size(
            raw_pool.as_deref(),
            locks_available(cfg.state()),
            head_is_base,
        );
        let board = board::load(&cfg.board_dir)?;
        let board_lock = crate::loopctl::run::rundir::lock_board(cfg.state(), &cfg.board_dir)?;
        // A repository may hold an integration branch (or a worktree) of a
        // run this state dir no longer has: its N is skipped.
        let wts = StateDir::new(&cfg.state_dir).worktrees_dir();
        let run = RunDir::create_free(cfg.state(), |n| {
            git::rev(&cfg.repo, &format!("refs/heads/drover/integration/loop{n}")).is_ok()
                || wts.join(format!("loop{n}-integration")).exists()
        })?;
        crate::loopctl::run::rundir::note_board_holder(&board_lock, run.n);
        let integ_wt = StateDir::new(&cfg.state_dir)
            .worktrees_dir()
            .join(format!("loop{}-integration", run.n));
        git::add_worktree(&cfg.repo, &integ_wt, &run.integration_branch(), &base_sha)?;
        let tasks = crate::loopctl::run::boardsync::initial_tasks(&board, &cfg.charter);
        let status = RunStatus {
            schema_version: 1,
            run: run.n,
            state: RunState::Running,
            repo: cfg.repo.clone(),
            charter: cfg.charter.path.clone(),
            charter_sha256: cfg.charter.sha256.clone(),
            base,
            base_sha: base_sha.clone(),
            integration_branch: run.integration_branch(),
            integration_worktree: integ_wt,
            pool,
            lanes_cap: cfg.charter.lanes,
            landings: 0,
            gate_runs: 0,
            started_at: crate::time::to_secs(cfg.unattended.clock.now()),
            finished_at: None,
            closeout: None,
            tasks,
            notes: Vec::new(),
            stopped_by: None,
            iterations: 0,
            mode: cfg.unattended.mode.label(),
            questions: Vec::new(),
            integration_head: Some(base_sha.clone()),
            resumes: 0,
            board_dir: Some(cfg.board_dir.clone()),
            rulings: Vec::new(),
            clock_at: None,
            spent_ms: 0,
            consecutive_blockers: 0,
            autotune: Vec::new(),
            process: None,
            sim: cfg.unattended.sim.clone(),
        };
        let mode = cfg.unattended.mode;
        let lock = crate::loopctl::run::resume::lock_run(&run)?;
        let mut r = Runner::assemble(ops, cfg, run, board, status, say);
        r.run.locks.run = Some(lock);
        r.run.locks.board = Some(board_lock);
        r.run.decide(
            "launch",
            &format!(
                "charter {} sha256 {}; base {} at {}; task pool {pool}; lanes cap {}",
                r.run.cfg.charter.path.display(),
                r.run.status.charter_sha256,
                r.run.status.base,
                r.run.status.base_sha,
                r.run.status.lanes_cap
            ),
        )?;
        if let crate::loopctl::night::overnight::Mode::Overnight { until } = mode {
            let until = until.map_or(
                "the end of the run".to_string(),
                crate::loopctl::night::clock::rfc3339,
            );
            r.run.decide(
                "overnight",
                &format!("overnight mode until {until}: ask nothing; escalations go to QUESTIONS.md and their tasks are parked"),
            )?;
        }
        if let Some(why) = why {
            let id = r.run.decide("ruling", &why)?;
            r.run
                .controls
                .rulings
                .push((format!("{id} {why}"), "keep for this run".into()));
        }
        crate::registry::events::emit_quiet(
            StateDir::new(&r.run.cfg.state_dir),
            "loop.start",
            serde_json::json!({"run": r.run.dir.n, "pool": pool, "charter_sha256": r.run.status.charter_sha256}),
        );
        let line = crate::loopctl::run::boardsync::on_the_board(
            r.run.status.tasks.len(),
            &r.run.board.view,
        );
        r.say(&format!(
            "loop{}: {line}, pool {pool}, lanes cap {}",
            r.run.dir.n, r.run.status.lanes_cap
        ));
        r.report_board()?;
        r.run.persist()?;
        Ok(r)
    }

    /// A runner over a run dir and its recorded state (new or resumed).
    pub(in crate::loopctl) fn assemble(
        ops: &'a mut O,
        cfg: RunConfig,
        run: RunDir,
        board: Board,
        status: RunStatus,
        say: Box<dyn FnMut(&str) + 'a>,
    ) -> Self {
        let mut status = status;
        status.process = LoopProcess::this();
        let started = cfg.unattended.clock.now();
        let notify = cfg.unattended.notify.clone();
        let mode = cfg.unattended.mode;
        let rulings = status.rulings.clone();
        let (notifier, unreadable) =
            crate::loopctl::night::notify::Notifier::start_recorded(notify, &run.file(NOTIFIED));
        let spent_before = Duration::from_millis(status.spent_ms);
        let consecutive_blockers = status.consecutive_blockers;
        let tuner = crate::loopctl::night::autotune::State::restore(&status.autotune);
        let mut r = Runner {
            ops,
            run: Run {
                cfg,
                dir: run,
                board: BoardView::new(board),
                status,
                slots: Slots::default(),
                queues: Queues::default(),
                clocks: Clocks::new(started, spent_before),
                locks: Locks::default(),
                tuning: Tuning::new(tuner),
                controls: Controls {
                    consecutive_blockers,
                    stop: None,
                    paused: None,
                    rulings,
                    mode,
                },
                notifier,
                resume_tag: String::new(),
            },
            say,
        };
        if let Some(why) = unreadable {
            r.say(&format!("notifications: {why}"));
        }
        r
    }

    pub(in crate::loopctl) fn say(&mut self, msg: &str) {
        (self.say)(&crate::loopctl::run::rundir::shown(msg));
    }

    /// Whether the supervisor holding the lanes is gone. A lane that could
    /// not start for that reason is not its task's fault: the error stops
    /// the run unclosed, for `--resume`, instead of parking the task.
    pub(in crate::loopctl) fn supervisor_lost(&mut self) -> bool {
        self.ops.live().is_err()
    }

    /// Start Ready tasks while the pool and the lanes cap allow.
    pub(in crate::loopctl) fn start_ready(&mut self) -> Result<(), LoopError> {
        while self.run.status.in_flight() < self.run.status.pool {
            let Some(id) = self
                .run
                .status
                .tasks
                .iter()
                .find(|t| t.kind() == Phase::Ready)
                .map(|t| t.id.clone())
            else {
                return Ok(());
            };
            if self.guard_before_start()? {
                return Ok(());
            }
            // The cap counts the live listing, never memory.
            if self.ops.live()?.len() >= self.run.status.lanes_cap {
                return Ok(());
            }
            self.autotune(self.run.status.iterations + 1)?;
            self.run.status.iterations += 1;
            self.run
                .tuning
                .iteration_of
                .insert(id.clone(), self.run.status.iterations);
            if let Err(e) = self.start_task(&id) {
                if let LoopError::Setup { lane, .. } = &e {
                    let log = self.run.dir.path.join(lane).join("setup.log");
                    self.park_for_setup(&id, &e, &log)?;
                    continue;
                }
                if self.supervisor_lost() {
                    return Err(e);
                }
                self.park_because(
                    &id,
                    crate::loopctl::run::cause::of_error(&e),
                    &format!("could not start: {e}"),
                    "fix the cause, then rerun",
                )?;
            }
        }
        Ok(())
    }
}
