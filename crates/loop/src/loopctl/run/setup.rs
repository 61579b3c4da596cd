//! The runner's side of the charter's `setup:` ([`crate::loopctl::land::setup`]):
//! the setup of a task's new worktree (before its implementer's agent), of
//! the gate's checkout of a candidate (before its gate) and of the
//! integration worktree (once, before its first landing gate), each bounded
//! by `setup-timeout:` and the run's stops; and the lane's port base given
//! to the gate run for its task.

use crate::loopctl::LoopError;
use crate::loopctl::land::setup::{SETUP_TIMEOUT, Setup};
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::Runner;
use std::path::Path;
use std::time::Duration;

/// The run dir's file saying the integration worktree was set up.
const INTEGRATION_DONE: &str = "integration-setup.done";

impl<O: LaneOps> Runner<'_, O> {
    /// The charter's setup, its output in `dir/name`; `None` without one.
    pub(in crate::loopctl) fn setup_for(&self, dir: &Path, name: &str) -> Option<Setup> {
        let cmd = self.run.cfg.charter.setup.clone()?;
        Some(Setup {
            cmd,
            log: dir.join(name),
            bounds: self.child_bounds(self.run.setup_timeout()),
        })
    }

    /// Set the integration worktree up once per run, before its first
    /// landing gate. `false` when the setup failed: the tasks `ids` are
    /// parked with its reason.
    pub(in crate::loopctl) fn integration_set_up(
        &mut self,
        ids: &[String],
    ) -> Result<bool, LoopError> {
        let done = self.run.dir.file(INTEGRATION_DONE);
        let Some(setup) = self.setup_for(&self.run.dir.path, "integration-setup.log") else {
            return Ok(true);
        };
        if done.exists() {
            return Ok(true);
        }
        let wt = self.run.status.integration_worktree.clone();
        match setup.run(&wt, &[])? {
            Ok(()) => {
                crate::store::write_bytes_atomic(&done, b"")?;
                Ok(true)
            }
            Err(failed) => {
                let e = LoopError::Setup {
                    lane: String::new(),
                    reason: failed.reason("the integration worktree"),
                };
                for id in ids {
                    self.park_for_setup(id, &e, &setup.log)?;
                }
                Ok(false)
            }
        }
    }

    /// Park task `id` for a failed setup `e`, its output in `log`.
    pub(in crate::loopctl) fn park_for_setup(
        &mut self,
        id: &str,
        e: &LoopError,
        log: &Path,
    ) -> Result<(), LoopError> {
        let fix = format!(
            "fix the charter's `setup:` (its log: {}), then rerun the task",
            log.display()
        );
        self.park(id, &e.to_string(), &fix)
    }
}

impl Run {
    /// The setup's own timeout: the charter's `setup-timeout:`, else the default.
    fn setup_timeout(&self) -> Duration {
        self.cfg.charter.setup_timeout.unwrap_or(SETUP_TIMEOUT)
    }

    /// The env a gate for `lane`'s task runs with: the lane's port base,
    /// while the lane is recorded.
    pub(in crate::loopctl) fn lane_port_env(&self, lane: &str) -> Vec<(String, String)> {
        crate::lane::load(self.cfg.state())
            .ok()
            .and_then(|doc| doc.get(lane).and_then(crate::lane::ports::port_base))
            .map(|b| (crate::lane::ports::PORT_ENV.to_string(), b.to_string()))
            .into_iter()
            .collect()
    }
}
