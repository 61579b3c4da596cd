//! What a task cost (LOOP.md, "What a task cost"): a lane is one task's, so
//! what its agent used while the loop held it is the task's. The lane's
//! usage tally, as the supervisor keeps it, is read when a job is dispatched
//! to it, when the job ends (its outcome, a timeout, a cancel) and before
//! the lane goes down; each read adds the tally's growth since the lane's
//! last read to the task's `usage` in `run.json`. A figure the agent reports
//! after its job ended (Claude's status line runs after the turn, often
//! after the report that ended the job) is taken by the next read; the
//! last read, as the lane goes down, waits for it (bounded,
//! [`USAGE_SETTLE`](crate::loopctl::ops::USAGE_SETTLE)). A lane
//! this process started counts from nothing; one it did not (a resumed
//! run's) counts from its first read. A lane whose agent reports no usage
//! adds nothing, and a task none of whose lanes reported has no figure:
//! absent, never zero.

use crate::loopctl::ops::{LaneHandle, LaneOps};
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::Runner;
use crate::proto::usage::Usage;

/// A lane's task and its tally as last read (`None`: nothing read yet).
pub(in crate::loopctl) type LaneRead = (String, Option<Usage>);

impl<O: LaneOps> Runner<'_, O> {
    /// Read `lane`'s tally and add its growth since the last read to its
    /// task; a lane not read before and not started here starts from now.
    pub(in crate::loopctl) fn usage_read(&mut self, lane: &LaneHandle) {
        let now = self.ops.usage(lane);
        self.usage_add(lane, now);
    }

    /// Add `now`, `lane`'s tally as just read, to its task.
    fn usage_add(&mut self, lane: &LaneHandle, now: Option<Usage>) {
        let Some(now) = now else {
            return;
        };
        let Some((task, last)) = self.run.slots.usage_lanes.get_mut(&lane.id) else {
            self.run
                .slots
                .usage_lanes
                .insert(lane.id.clone(), (lane.task.clone(), Some(now)));
            return;
        };
        let spent = now.since(&last.unwrap_or_default());
        *last = Some(now);
        let task = task.clone();
        // A read that knows no figure adds none: the task's usage stays
        // absent, never an empty figure.
        if spent.is_empty() {
            return;
        }
        if let Some(t) = self.run.task_mut(&task) {
            t.usage = Some(t.usage.unwrap_or_default().plus(&spent));
        }
    }

    /// `job` went to `lane`: read it, and remember whose lane the job is.
    pub(in crate::loopctl) fn usage_dispatched(&mut self, job: &str, lane: &LaneHandle) {
        self.usage_read(lane);
        self.run
            .slots
            .usage_jobs
            .insert(job.to_string(), lane.clone());
    }

    /// `job` ended: read its lane (once: the job is forgotten).
    pub(in crate::loopctl) fn usage_ended(&mut self, job: &str) {
        if let Some(lane) = self.run.slots.usage_jobs.remove(job) {
            self.usage_read(&lane);
        }
    }

    /// `lane` goes down: its last read, then it is forgotten.
    pub(in crate::loopctl) fn usage_down(&mut self, lane: &LaneHandle) {
        let now = self.ops.usage_final(lane);
        self.usage_add(lane, now);
        self.run.slots.usage_lanes.remove(&lane.id);
    }
}

impl Run {
    /// `lane` was just started: all its agent uses is its task's.
    pub(in crate::loopctl) fn usage_fresh(&mut self, lane: &LaneHandle) {
        self.slots
            .usage_lanes
            .insert(lane.id.clone(), (lane.task.clone(), None));
    }
}
