//! `drover loop control <run> close-out` on a run whose loop process is
//! gone (a kill, a crash, a Ctrl-C): the run is closed without resuming it.
//! Its lanes still up are stopped and its open jobs cancelled; what its
//! integration branch holds is landed (its `Task:` trailers), nothing else
//! is started or re-run; the close-out lists the rest as not finished and
//! releases the run's leases.

use crate::loopctl::LoopError;
use crate::loopctl::land;
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::runner::{Phase, RunConfig, RunStatus, Runner};

/// Close run `n` (stopped unclosed) without resuming it; `why` is the
/// operator's reason.
pub fn close_unresumed<'a, O: LaneOps>(
    ops: &'a mut O,
    cfg: RunConfig,
    n: u32,
    why: &str,
    say: impl FnMut(&str) + 'a,
) -> Result<RunStatus, LoopError> {
    let mut r = Runner::reopen(ops, cfg, n, Box::new(say))?;
    // Not a resume: nothing of the run goes on.
    r.run.status.resumes = r.run.status.resumes.saturating_sub(1);
    r.settle_unresumed(why)?;
    r.close_out()
}

impl<O: LaneOps> Runner<'_, O> {
    fn settle_unresumed(&mut self, why: &str) -> Result<(), LoopError> {
        let n = self.run.dir.n;
        let reaped = self.ops.reap(&format!("l{n}-"))?;
        crate::loopctl::child::end_marked(&self.run.dir.path.display().to_string());
        let cancelled = self.cancel_open_jobs()?;
        let head = self.integration_worktree_back()?;
        self.run.status.integration_head = Some(head.clone());
        let found = land::landed_on(
            &self.run.status.integration_worktree,
            &self.run.status.base_sha,
            &self.run.status.integration_branch,
        )?;
        for (id, sha) in found {
            let landed = self
                .run
                .task(&id)
                .is_some_and(|t| t.kind() == Phase::Landed && t.sha() == Some(&sha));
            if self.run.task(&id).is_some() && !landed {
                self.landed(&id, &sha)?;
            }
        }
        self.run.status.stopped_by = Some(format!("close-out ({why})"));
        self.run.decide(
            "closeout",
            &format!(
                "loop{n} closed without a resume after its loop process stopped ({why}): {} lane(s) stopped, {} job(s) cancelled, integration at {head}",
                reaped.len(),
                cancelled
            ),
        )?;
        self.say(&format!(
            "loop{n}: closing without a resume; {} lane(s) of the run stopped, integration at {head}",
            reaped.len()
        ));
        Ok(())
    }
}
