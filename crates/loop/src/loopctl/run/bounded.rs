//! What bounds the run's own child processes — the charter's gate and
//! `--ship-cmd`: each its own timeout, cut to the wall-clock budget left,
//! and ended early by an emergency stop set on the run or the budget
//! running out (`LOOP.md`, "Unattended runs").

use crate::loopctl::child::Bounds;
use crate::loopctl::night::control::{self, Control};
use crate::loopctl::night::guards;
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::Runner;
use std::time::Duration;

impl<O: LaneOps> Runner<'_, O> {
    /// Asked while a child runs: why it must end now (an emergency stop
    /// set on the run, the wall-clock budget run out), if it must.
    pub(in crate::loopctl) fn child_stop(&self) -> impl Fn() -> Option<String> + 'static {
        let run_dir = self.run.dir.path.clone();
        let clock = self.run.cfg.unattended.clock.clone();
        let g = self.run.cfg.unattended.guards;
        let clocks = self.run.clocks;
        move || {
            if let Ok(c) = control::read(&run_dir)
                && let Some((Control::EmergencyStop, r)) = c.ruling()
            {
                return Some(format!("emergency stop: {r}"));
            }
            let elapsed = clocks.spent(clock.now());
            (guards::remaining(&g, elapsed) == Some(Duration::ZERO))
                .then(|| "the wall-clock budget ran out".to_string())
        }
    }

    /// The bounds of a child of the run started now, its own timeout `own`
    /// ([`Runner::child_timeout`], [`Runner::child_stop`]), marked with the
    /// run dir so a resume after a `kill -9` ends what it left.
    pub(in crate::loopctl) fn child_bounds(&self, own: Duration) -> Bounds<'static> {
        Bounds {
            timeout: self.run.child_timeout(own),
            stop: Box::new(self.child_stop()),
            mark: Some(self.run.dir.path.display().to_string()),
        }
    }
}

impl Run {
    /// How long a child started now may run: `own`, cut to what is left of
    /// the wall-clock budget (in real time; at least a second, so a child
    /// started at the edge still gets its stop asked).
    pub(in crate::loopctl) fn child_timeout(&self, own: Duration) -> Duration {
        match guards::remaining(&self.cfg.unattended.guards, self.elapsed()) {
            Some(left) => own
                .min(self.cfg.unattended.clock.real(left))
                .max(Duration::from_secs(1)),
            None => own,
        }
    }

    /// The gate's own timeout: the charter's `gate-timeout:`, else the default.
    pub(in crate::loopctl) fn gate_timeout(&self) -> Duration {
        self.cfg
            .charter
            .gate_timeout
            .unwrap_or(crate::loopctl::land::GATE_TIMEOUT)
    }
}
