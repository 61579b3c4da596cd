//! What the runner needs from lanes and dispatch, as a trait, so the runner
//! stays the same whichever lanes carry it (the simulated panes of
//! [`crate::loopctl::lanes::simlanes`] today; `drover lane` lanes when they exist).
//!
//! A lane is one agent in one pane with one working directory, for one task
//! (an implementer lane, writing in its own worktree) or one review (a
//! read-only lane). Lanes are counted from the live listing, never from
//! memory.

use crate::loopctl::LoopError;
use crate::registry::Agent;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::runstate::records::Role;

/// The longest a lane going down waits for its agent's last usage report
/// ([`LaneOps::usage_final`]): Claude's status line ran 0.23–0.52 s after
/// `Stop` on a quiet machine; more under load.
pub const USAGE_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// A worktree the lane is to get: a new branch from the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeSpec {
    pub repo: PathBuf,
    pub path: PathBuf,
    pub branch: String,
    pub base: String,
}

/// What lane to bring up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneSpec {
    /// The lane id (also its pane name): `[a-z0-9-]+`.
    pub id: String,
    pub role: Role,
    pub agent: Agent,
    pub task: String,
    /// The lane's own directory under the run dir (brief, report, patch, logs).
    pub lane_dir: PathBuf,
    /// For an implementer: the worktree to create. A reviewer works in `cwd`.
    pub worktree: Option<WorktreeSpec>,
    /// Where a reviewer runs (read-only); ignored when `worktree` is set.
    pub cwd: PathBuf,
    /// The effort level the agent starts at (`--lane-autotune`; `None`: the
    /// agent's own default, and no flag in its launch).
    pub effort: Option<String>,
    /// Whether the lane's step may run on a fleet host: all it is told can
    /// be built there (a task's first round, a review, a repair round for a
    /// failed review). A round told what only this host has (a red gate's
    /// output, a merge of the integration branch) runs here.
    pub portable: bool,
}

/// A lane that is up.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaneHandle {
    pub id: String,
    pub role: Role,
    pub agent: Agent,
    pub task: String,
    pub pane: String,
    pub cwd: PathBuf,
    pub lane_dir: PathBuf,
}

/// A job for a lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub job_id: String,
    pub prompt: String,
    /// Where the lane writes its report (outside the worktree).
    pub report_path: PathBuf,
    /// Complete through the engine when the shadow policy says `complete`.
    pub autocomplete: bool,
    /// The files the task claims: the trailer's report example lists them
    /// (an implementer's job; a reviewer reports by its verdict).
    pub report_files: Vec<String>,
    /// What else the lane's brief was built from: a fleet host builds it
    /// again, from the board at the base (docs/fleet.md).
    pub brief: BriefFacts,
}

/// What a lane's brief was built from besides the board's task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BriefFacts {
    /// The task's round.
    pub round: u32,
    /// `routine` or `guarded`.
    pub tier: Option<String>,
    /// The files other live lanes work in (an implementer's Scope).
    pub others: Vec<String>,
    /// A review's candidate before its rebase round (its shown copy).
    pub before_rebase: Option<PathBuf>,
    /// A repair round's evidence (a failed review's): the round is told
    /// `Repair: <evidence>` after the brief.
    pub repair: Option<String>,
}

/// How a dispatched job ended, as far as the loop is concerned.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Completed through the engine.
    Completed,
    /// The policy escalated: a human is needed (a permission, a question, a
    /// usage limit). `decision` and `reason` are the policy's.
    Escalated { decision: String, reason: String },
    /// The job failed, timed out or was cancelled.
    Failed { status: String, reason: String },
}

/// What the runner needs from lanes and dispatch.
pub trait LaneOps {
    /// Bring a lane up and wait until its agent is ready.
    fn up(&mut self, spec: &LaneSpec) -> Result<LaneHandle, LoopError>;
    /// Bring a lane up with `setup` run in its new worktree before its agent
    /// starts; a failed setup is [`LoopError::Setup`] and no lane stays up.
    /// Lanes whose worktrees are not made on this host (the simulated
    /// carrier's) start as [`LaneOps::up`] does.
    fn up_set(
        &mut self,
        spec: &LaneSpec,
        setup: &crate::loopctl::land::setup::Setup,
    ) -> Result<LaneHandle, LoopError> {
        let _ = setup;
        self.up(spec)
    }
    /// The ids of the live lanes, from the live listing.
    fn live(&mut self) -> Result<Vec<String>, LoopError>;
    /// Create the job and dispatch its prompt with confirmed delivery; returns
    /// the attempt id.
    fn dispatch(&mut self, lane: &LaneHandle, job: &JobSpec) -> Result<String, LoopError>;
    /// Wait until at least one of `jobs` has an outcome, or `timeout` passes;
    /// returns the outcomes that are known (possibly none).
    fn wait_decision(
        &mut self,
        jobs: &[String],
        timeout: Duration,
    ) -> Result<Vec<(String, Outcome)>, LoopError>;
    /// Stop a lane (its worktree is the runner's to keep or remove).
    fn down(&mut self, lane: &LaneHandle) -> Result<(), LoopError>;
    /// The lane's current observation (`None`: not known). The default knows
    /// nothing, so a carrier that cannot observe never parks or stalls a lane.
    fn observe(&mut self, _lane: &LaneHandle) -> Result<Option<LaneObs>, LoopError> {
        Ok(None)
    }
    /// What the lane's agent has used so far, as the supervisor tallies its
    /// usage signals (`None`: not known, or no usage reported). The default
    /// knows nothing. Never an error: a figure missing costs the run nothing.
    fn usage(&mut self, _lane: &LaneHandle) -> Option<crate::proto::usage::Usage> {
        None
    }
    /// [`LaneOps::usage`] as the lane goes down: its agent's last report
    /// included. Claude's status line brings a turn's cost a few hundred ms
    /// after the turn ends, so this waits for it (at most [`USAGE_SETTLE`]).
    fn usage_final(&mut self, lane: &LaneHandle) -> Option<crate::proto::usage::Usage> {
        self.usage(lane)
    }
    /// Choose the row of the menu the lane shows by its label; false when no
    /// such menu shows.
    fn answer(&mut self, _lane: &LaneHandle, _label: &str) -> Result<bool, LoopError> {
        Ok(false)
    }
    /// Stop every lane whose id starts with `prefix`, whoever started it (a
    /// resumed run's lanes left from before a crash); returns their ids.
    fn reap(&mut self, _prefix: &str) -> Result<Vec<String>, LoopError> {
        Ok(Vec::new())
    }
    /// Interrupt the lane's turn once (a stalled lane past `--stall-kill-after`).
    fn interrupt(&mut self, _lane: &LaneHandle) -> Result<(), LoopError> {
        Ok(())
    }
    /// Type `text` into the lane as a new prompt of the job in flight (a
    /// reminder, an answer about its report); false when it could not be
    /// delivered. The default delivers nothing.
    fn prompt(&mut self, _lane: &LaneHandle, _text: &str) -> Result<bool, LoopError> {
        Ok(false)
    }
    /// Whether a lane waiting for a human stays up here for the owner to
    /// answer (false: it is gone — a fleet host's lane, taken down by its
    /// host — so its task is parked instead of held).
    fn holds_for_owner(&self, _lane: &LaneHandle) -> bool {
        true
    }
    /// How the lane runs `drover` (the brief names `<this> report done`):
    /// the running binary's absolute path ([`crate::report::command_word`]).
    fn report_command(&self) -> String {
        crate::report::own_command_word()
    }
}

/// What the live listing says of a lane's agent right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneObs {
    /// The classified state (`working`, `idle`, `blocked`, …).
    pub state: crate::agent::State,
    /// The blocked kind (`usage_limit`, `permission`, `question`, `setup`).
    pub kind: Option<crate::agent::BlockedKind>,
    /// When a usage limit resets, as the observation carries it (RFC 3339;
    /// absent when the screen gave no time or the classifier cannot read one).
    pub resets_at: Option<String>,
    /// A value that changes whenever the lane's output changes (an animated
    /// spinner or timer is not output).
    pub output: u64,
    /// False when the lane's pane could not be reached.
    pub reachable: bool,
}

impl Default for LaneObs {
    /// A lane nothing is known of: `unknown`, unreachable.
    fn default() -> Self {
        LaneObs {
            state: crate::agent::State::Unknown,
            kind: None,
            resets_at: None,
            output: 0,
            reachable: false,
        }
    }
}
