//! Watching lanes for their stall class ([`crate::loopctl::night::stall`]):
//! one `stall` decision per change of class, and the one interrupt of a
//! lane stalled past `--stall-kill-after`.

use crate::loopctl::LoopError;
use crate::loopctl::night::stall::class;
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::runner::Runner;

impl<O: LaneOps> Runner<'_, O> {
    /// Look at every lane with a job in flight: record a change of stall
    /// class (one `stall` decision), and interrupt a stalled lane once past
    /// `--stall-kill-after`.
    pub(in crate::loopctl) fn watch_stalls(&mut self) -> Result<(), LoopError> {
        let tasks: Vec<String> = self
            .run
            .slots
            .jobs
            .values()
            .map(|(t, _)| t.clone())
            .collect();
        let now = self.run.now();
        let stall_after = self.run.cfg.unattended.stall_after;
        let kill_after = self.run.cfg.unattended.stall_kill_after;
        let mut changed = false;
        for task in tasks {
            let Some(lane) = self.run.slots.lanes.get(&task).cloned() else {
                continue;
            };
            let Some(obs) = self.ops.observe(&lane)? else {
                continue;
            };
            let entry = self
                .run
                .slots
                .quiet
                .entry(task.clone())
                .or_insert((obs.output, now, false));
            if entry.0 != obs.output {
                *entry = (obs.output, now, entry.2);
            }
            let quiet_for = crate::loopctl::night::clock::since(entry.1, now);
            let interrupted = entry.2;
            let class = class(&obs, quiet_for, stall_after).map(str::to_string);
            let prior = self.run.task(&task).and_then(|t| t.stall.clone());
            if class != prior {
                changed = true;
                if let Some(c) = &class {
                    let why = match c.as_str() {
                        "stalled" => format!(
                            "working with no output change for {} s",
                            quiet_for.as_secs()
                        ),
                        _ => format!("observed {}", observed_word(&obs)),
                    };
                    self.run.decide(
                        "stall",
                        &format!("{task}: lane {} is {c}: {why}; not killed", lane.id),
                    )?;
                    crate::registry::events::emit_quiet(
                        self.run.cfg.state(),
                        "loop.stall",
                        serde_json::json!({"run": self.run.dir.n, "task": task, "lane": lane.id, "class": c}),
                    );
                    self.say(&format!("{task}: lane {} is {c}", lane.id));
                }
                if let Some(t) = self.run.task_mut(&task) {
                    t.stall = class.clone();
                }
            }
            if class.as_deref() == Some("stalled")
                && !interrupted
                && kill_after.is_some_and(|k| quiet_for >= k)
            {
                self.ops.interrupt(&lane)?;
                if let Some(e) = self.run.slots.quiet.get_mut(&task) {
                    e.2 = true;
                }
                self.run.decide(
                    "stall",
                    &format!(
                        "{task}: lane {} interrupted once after {} s stalled",
                        lane.id,
                        quiet_for.as_secs()
                    ),
                )?;
            }
        }
        if changed {
            self.run.persist()?;
        }
        Ok(())
    }
}

/// What a lane not progressing was seen doing, for the decisions log: its
/// blocked kind, else its state (nothing for a lane not reached).
fn observed_word(obs: &crate::loopctl::ops::LaneObs) -> &'static str {
    match (obs.kind, obs.reachable) {
        (Some(k), _) => k.as_str(),
        (None, true) => obs.state.as_str(),
        (None, false) => "",
    }
}
