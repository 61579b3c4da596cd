//! The run's state: what it was given, its directory, the board as last
//! read, its recorded state (`run.json`) and the parts the steps work on
//! ([`parts`](super::parts)). Nothing here touches a lane: the steps
//! ([`Runner`](super::runner::Runner)'s methods) do that through
//! [`LaneOps`](crate::loopctl::ops::LaneOps) and change this state as they go.

use crate::loopctl::LoopError;
use crate::loopctl::night::notify::Notifier;
use crate::loopctl::run::parts::{BoardView, Clocks, Controls, Locks, Queues, Slots, Tuning};
use crate::loopctl::run::rundir::{LaneRow, RunDir};
use crate::loopctl::run::runner::RunConfig;
use crate::loopctl::run::task::{Phase, TaskState};
use crate::runstate::status::RunStatus;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// A run's state, owned by its [`Runner`](super::runner::Runner).
pub(in crate::loopctl) struct Run {
    pub(in crate::loopctl) cfg: RunConfig,
    /// Its directory (`<state>/loop<N>/`).
    pub(in crate::loopctl) dir: RunDir,
    /// The board as last read, and its problems already recorded.
    pub(in crate::loopctl) board: BoardView,
    /// What `run.json` records: the run's and every task's phase.
    pub(in crate::loopctl) status: RunStatus,
    /// The lanes and the jobs in them.
    pub(in crate::loopctl) slots: Slots,
    /// Tasks waiting between steps.
    pub(in crate::loopctl) queues: Queues,
    pub(in crate::loopctl) clocks: Clocks,
    pub(in crate::loopctl) locks: Locks,
    pub(in crate::loopctl) tuning: Tuning,
    /// What stops, pauses or steers it.
    pub(in crate::loopctl) controls: Controls,
    pub(in crate::loopctl) notifier: Notifier,
    /// Appended to job ids after a resume (`-k<resume>`), so none is reused.
    pub(in crate::loopctl) resume_tag: String,
}

impl Run {
    /// Now, on the loop's clock.
    pub(in crate::loopctl) fn now(&self) -> DateTime<Utc> {
        self.cfg.unattended.clock.now()
    }

    /// The wall-clock budget spent: before a resume and since.
    pub(in crate::loopctl) fn elapsed(&self) -> Duration {
        self.clocks.spent(self.now())
    }

    pub(in crate::loopctl) fn decide(
        &mut self,
        kind: &str,
        text: &str,
    ) -> Result<String, LoopError> {
        let at = crate::loopctl::night::clock::rfc3339(self.now());
        self.dir.decide_at(kind, text, &at)
    }

    /// Task `id` as the board has it.
    pub(in crate::loopctl) fn board_task(
        &self,
        id: &str,
    ) -> Result<crate::loopctl::board::Task, LoopError> {
        self.board
            .view
            .task(id)
            .cloned()
            .ok_or_else(|| LoopError::usage("task", format!("{id} is not on the board")))
    }

    pub(in crate::loopctl) fn task(&self, id: &str) -> Option<&TaskState> {
        self.status.tasks.iter().find(|t| t.id == id)
    }

    pub(in crate::loopctl) fn task_mut(&mut self, id: &str) -> Option<&mut TaskState> {
        self.status.tasks.iter_mut().find(|t| t.id == id)
    }

    /// Write QUEUE.md, LANES.md, STATE.md and run.json from the state.
    pub(in crate::loopctl) fn persist(&mut self) -> Result<(), LoopError> {
        let rows = |p: Phase| -> Vec<(String, String)> {
            self.status
                .tasks
                .iter()
                .filter(|t| t.kind() == p)
                .map(|t| (t.id.clone(), t.title.clone()))
                .collect()
        };
        let hold: Vec<(String, String)> = self
            .status
            .tasks
            .iter()
            .filter(|t| matches!(t.kind(), Phase::Held | Phase::Parked))
            .map(|t| (t.id.clone(), t.note().reason.clone().unwrap_or_default()))
            .collect();
        self.dir
            .write_queue(&rows(Phase::Ready), &hold, &rows(Phase::Landing))?;
        let lanes: Vec<LaneRow> = self
            .slots
            .lanes
            .values()
            .map(|l| LaneRow {
                id: l.id.clone(),
                task: l.task.clone(),
                agent: l.agent.as_str().to_string(),
                worktree: l.cwd.display().to_string(),
                stall: self.task(&l.task).and_then(|t| t.stall.clone()),
            })
            .collect();
        self.dir.write_lanes(&lanes)?;
        let mut live: Vec<String> = self
            .controls
            .rulings
            .iter()
            .map(|(r, _)| r.clone())
            .collect();
        for t in &self.status.tasks {
            if t.kind() == Phase::Parked {
                live.push(format!(
                    "{} parked: {}",
                    t.id,
                    t.note().reason.as_deref().unwrap_or("")
                ));
            }
        }
        self.status.mode = self.controls.mode.label();
        self.status.rulings = self.controls.rulings.clone();
        self.status.clock_at = Some(crate::time::to_secs(self.now()));
        self.status.spent_ms = u64::try_from(self.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.status.consecutive_blockers = self.controls.consecutive_blockers;
        self.status.autotune = self.tuning.state.save();
        self.clocks.persisted = std::time::Instant::now();
        self.dir
            .write_state(&self.status.mode, self.status.landings + 1, &live)?;
        crate::loopctl::run::rundir::write_json_shown(&self.dir.file("run.json"), &self.status)?;
        Ok(())
    }
}
