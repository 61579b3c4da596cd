//! What a task cost (LOOP.md, "What a task cost"): when a job is
//! dispatched, its lane's usage tally as the supervisor has it is the job's
//! baseline; when the job ends (its outcome, a timeout, a cancel), the
//! tally's growth since is added to the task's `usage` in `run.json`. Every
//! round and every review of a task adds to it. A lane whose agent reports
//! no usage gives no figure, and a task none of whose jobs got one has
//! none: absent, never zero. A job dispatched before a resume has no
//! baseline in this process and adds nothing.

use crate::loopctl::ops::{LaneHandle, LaneOps};
use crate::loopctl::run::runner::Runner;
use crate::proto::usage::Usage;

/// A dispatched job's task, its lane and the lane's tally at dispatch
/// (`None`: none yet).
pub(in crate::loopctl) type Baseline = (String, LaneHandle, Option<Usage>);

impl<O: LaneOps> Runner<'_, O> {
    /// The lane's tally now, to be `job`'s baseline once it is dispatched.
    pub(in crate::loopctl) fn usage_before(&mut self, lane: &LaneHandle) -> Option<Usage> {
        self.ops.usage(lane)
    }

    /// `job` is dispatched to `lane`, whose tally was `before`.
    pub(in crate::loopctl) fn usage_dispatched(
        &mut self,
        id: &str,
        job: &str,
        lane: &LaneHandle,
        before: Option<Usage>,
    ) {
        self.slots
            .usage_base
            .insert(job.to_string(), (id.to_string(), lane.clone(), before));
    }

    /// `job` ended: its lane's growth since dispatch is added to its task's
    /// figure (once: the baseline goes with it).
    pub(in crate::loopctl) fn usage_ended(&mut self, job: &str) {
        let Some((id, lane, before)) = self.slots.usage_base.remove(job) else {
            return;
        };
        let Some(now) = self.ops.usage(&lane) else {
            return;
        };
        let spent = now.since(&before.unwrap_or_default());
        if let Some(t) = self.task_mut(&id) {
            t.usage = Some(t.usage.unwrap_or_default().plus(&spent));
        }
    }
}
