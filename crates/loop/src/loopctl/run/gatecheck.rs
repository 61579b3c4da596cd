//! The pre-land check of a candidate: the charter's gate on a checkout of
//! the candidate of its own (reported as the CI/Eval Auditor), then `gate
//! check --task`.

use crate::loopctl::LoopError;
use crate::loopctl::land;
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::runner::{Runner, slug};
use crate::registry::heartbeat::{self, HeartbeatRequest};
use chrono::Utc;

/// The CI/Eval Auditor's session: the loop reports the pre-land gate run as it.
const CI_SESSION: &str = "ci-eval-auditor";

impl<O: LaneOps> Runner<'_, O> {
    /// The pre-land check: the charter's gate on the candidate's tree (reported
    /// as the CI/Eval Auditor), then `gate check --task`.
    pub(in crate::loopctl) fn gate_check(&mut self, id: &str) -> Result<(), LoopError> {
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(());
        };
        let (Some(wt), Some(gate)) = (t.worktree().cloned(), self.run.cfg.charter.gate.clone())
        else {
            return Ok(());
        };
        let lane_dir = self.run.dir.lane_dir(t.lane().unwrap_or(id))?;
        let bounds = self.child_bounds(self.run.gate_timeout());
        // The gate runs on a checkout of the candidate of its own, so what
        // it writes never enters the task's worktree (and its next capture).
        let patch = self
            .run
            .dir
            .path
            .join(format!("l{}-impl-{}", self.run.dir.n, slug(id)))
            .join("candidate.patch");
        let base = t
            .work()
            .and_then(|w| w.candidate_base.clone())
            .unwrap_or_else(|| self.run.status.base_sha.clone());
        let setup = self.setup_for(&lane_dir, "gate-setup.log");
        let env = self.run.lane_port_env(t.lane().unwrap_or(id));
        let g = match land::gate_checkout::run_gate_on_candidate(
            &wt,
            &base,
            &patch,
            &gate,
            &lane_dir.join("gate.log"),
            &bounds,
            (setup.as_ref(), &env),
        ) {
            Ok(g) => g,
            Err(e @ LoopError::Setup { .. }) => {
                return self.park_for_setup(id, &e, &lane_dir.join("gate-setup.log"));
            }
            Err(e @ LoopError::Git { .. }) => {
                return self.park(
                    id,
                    &format!("its gate could not run on a checkout of its candidate: {e}"),
                    "fix the cause, then rerun the task",
                );
            }
            Err(e) => return Err(e),
        };
        if g.stopped {
            let why = g.ended.unwrap_or_default();
            return self.park(id, &format!("its gate was ended: {why}"), "rerun the task");
        }
        heartbeat::heartbeat(
            self.run.cfg.state(),
            &HeartbeatRequest {
                session_id: CI_SESSION.into(),
                task: Some(id.to_string()),
                status: if g.green { "pass" } else { "fail" }.into(),
                ..Default::default()
            },
            Utc::now(),
        )?;
        if !g.green {
            let how = crate::loopctl::land::gate_ending(&g);
            let tail = crate::loopctl::land::tail_in_order(&g.log_tail, 5);
            self.say(&format!(
                "{id}: gate red on the candidate ({how}); its log: {}",
                lane_dir.join("gate.log").display()
            ));
            return self.repair(
                id,
                &format!("the gate is red on the candidate ({how}): {tail}"),
                "gate",
                false,
            );
        }
        let report = crate::gate::check(
            self.run.cfg.state(),
            Some(id),
            t.tier.as_deref() == Some("guarded"),
            Utc::now(),
        )?;
        if report.verdict != crate::gate::Verdict::Ready {
            let why: Vec<String> = report.reasons.iter().map(|r| r.message.clone()).collect();
            return self.park(
                id,
                &format!("gate check blocked: {}", why.join("; ")),
                "clear the gate's reasons, then rerun",
            );
        }
        if let Some(t) = self.run.task_mut(id) {
            t.phase.enter_landing();
        }
        self.run.queues.landing.push(id.to_string());
        self.say(&format!("{id}: gate ready, queued for landing"));
        self.run.persist()
    }
}
