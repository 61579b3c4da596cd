//! The runner's side of lane autotune (`--lane-autotune`, `LOOP.md` "Lane
//! autotune"): each finished turn is timed on the loop's clock, the pure
//! tuner of [`crate::loopctl::night::autotune`] runs before each iteration starts, every
//! recommendation is one `autotune` entry in `DECISIONS.md` and one
//! `loop.autotune` event, and a lane brought up gets the effort set for its
//! (role, agent). Off, none of this runs and no lane gets an effort.

use crate::loopctl::LoopError;
use crate::loopctl::night::autotune::Sample;
use crate::loopctl::ops::{LaneHandle, LaneOps, LaneSpec, Role};
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::{Phase, Runner};
use chrono::{DateTime, Utc};

impl<O: LaneOps> Runner<'_, O> {
    /// Bring a lane up at the effort the tuner set for its (role, agent).
    pub(in crate::loopctl) fn lane_up(
        &mut self,
        mut spec: LaneSpec,
    ) -> Result<LaneHandle, LoopError> {
        if self.run.cfg.unattended.autotune {
            spec.effort = self
                .run
                .tuning
                .state
                .effort((spec.role, spec.agent))
                .map(str::to_string);
        }
        // A new worktree of an implementer is set up before its agent starts.
        let setup = (spec.worktree.is_some() && spec.role == Role::Implementer)
            .then(|| self.setup_for(&spec.lane_dir, "setup.log"))
            .flatten();
        let lane = match setup {
            Some(s) => self.ops.up_set(&spec, &s),
            None => self.ops.up(&spec),
        }?;
        self.run.usage_fresh(&lane);
        Ok(lane)
    }

    /// Before iteration `next` starts: run the tuner over the turns so far
    /// and record what it recommends.
    pub(in crate::loopctl) fn autotune(&mut self, next: u32) -> Result<(), LoopError> {
        if !self.run.cfg.unattended.autotune {
            return Ok(());
        }
        let k = self.run.cfg.unattended.autotune_k;
        let recs = self.run.tuning.tune(next, k);
        for r in recs {
            let line = r.describe(k);
            self.run
                .decide("autotune", &format!("before iteration {next}: {line}"))?;
            self.say(&format!("autotune: {line}"));
            crate::registry::events::emit_quiet(
                self.run.cfg.state(),
                "loop.autotune",
                serde_json::json!({
                    "run": self.run.dir.n,
                    "iteration": next,
                    "role": r.role.as_str(),
                    "agent": r.agent.as_str(),
                    "direction": r.direction.map(|d| d.as_str()),
                    "elapsed_s": r.elapsed.as_secs_f64(),
                    "median_s": r.median.map(|m| m.as_secs_f64()),
                    "failed": r.failed,
                    "observed": r.observed,
                    "effort_from": r.from,
                    "effort_to": r.to,
                    "actuated": r.actuated,
                    "held": (!r.actuated).then_some(r.held.as_str()),
                }),
            );
        }
        Ok(())
    }
}

impl Run {
    /// Note a finished turn of `task`'s lane, dispatched at `at`.
    pub(in crate::loopctl) fn time_turn(&mut self, task: &str, at: DateTime<Utc>, failed: bool) {
        if !self.cfg.unattended.autotune {
            return;
        }
        let (Some(t), Some(lane)) = (self.task(task), self.slots.lanes.get(task)) else {
            return;
        };
        let role = match t.kind() {
            Phase::Implementing => Role::Implementer,
            Phase::Reviewing => Role::Reviewer,
            _ => return,
        };
        let iteration = self
            .tuning
            .iteration_of
            .get(task)
            .copied()
            .unwrap_or(self.status.iterations);
        let sample = Sample {
            iteration,
            role,
            agent: lane.agent,
            elapsed: crate::loopctl::night::clock::since(at, self.now()),
            failed,
            fresh: true,
        };
        self.tuning.record(sample);
    }
}
