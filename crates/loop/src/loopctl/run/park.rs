//! Parking a task: its lease and loaned agent given back, its phase and
//! note set, the guards' streak counted, and the park decided, said and
//! notified.

use crate::loopctl::LoopError;
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::cause::TaskCause;
use crate::loopctl::run::runner::Runner;
use crate::loopctl::run::task::Note;
use crate::registry::{lease, lend};
use chrono::Utc;

impl<O: LaneOps> Runner<'_, O> {
    /// Park task `id`, saying why and what resumes it.
    pub(in crate::loopctl) fn park(
        &mut self,
        id: &str,
        reason: &str,
        resume: &str,
    ) -> Result<(), LoopError> {
        self.park_because(id, None, reason, resume)
    }

    /// [`Self::park`] with the cause the run decides on later.
    pub(in crate::loopctl) fn park_because(
        &mut self,
        id: &str,
        cause: Option<TaskCause>,
        reason: &str,
        resume: &str,
    ) -> Result<(), LoopError> {
        let now = Utc::now();
        if let Some(a) = self.run.task(id).and_then(|t| t.agent) {
            let _ = lend::give_back(self.run.cfg.state(), id, a, now);
        }
        let _ = lease::release(self.run.cfg.state(), id, false, now);
        if let Some(t) = self.run.task_mut(id) {
            t.phase.enter_parked();
            *t.note_mut() = Note {
                reason: Some(reason.to_string()),
                resume: Some(resume.to_string()),
                cause,
            };
            if let Some(w) = t.work_mut() {
                w.job = None;
            }
        }
        // A park is a blocker for the guards; a landing resets the streak.
        self.run.controls.consecutive_blockers += 1;
        self.run
            .decide("park", &format!("{id}: {reason}; resume: {resume}"))?;
        self.say(&format!("{id}: parked: {reason}"));
        let round = self.run.task(id).map_or(0, |t| t.round());
        self.run.notify(
            "park",
            Some(id),
            &format!("round {round}"),
            &format!("{id} parked: {reason}; resume: {resume}"),
        );
        crate::registry::events::emit_quiet(
            self.run.cfg.state(),
            "loop.park",
            serde_json::json!({"run": self.run.dir.n, "task": id}),
        );
        self.run.persist()
    }
}
