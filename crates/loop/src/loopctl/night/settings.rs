//! What an unattended run is given beyond the pipeline's own settings: the
//! clock, the guards, usage-limit and stall handling (`LOOP.md`).

use crate::loopctl::night::clock::{Clock, RealClock};
use crate::loopctl::night::guards::Guards;
use std::sync::Arc;
use std::time::Duration;

/// Longest `--ship-cmd` may run once (`--ship-timeout`).
pub const DEFAULT_SHIP_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// A lane that works with no output change this long is `stalled`.
pub const DEFAULT_STALL_AFTER: Duration = Duration::from_secs(15 * 60);
/// How long an implementer may sit at the end of its turn with no report
/// before it is reminded once (`--report-grace-s`).
pub const DEFAULT_REPORT_GRACE: Duration = Duration::from_secs(60);

/// The unattended part of a run's configuration.
#[derive(Debug, Clone)]
pub struct Unattended {
    /// Every timing of the run reads this clock.
    pub clock: Arc<dyn Clock>,
    pub guards: Guards,
    /// Park a lane at a usage limit and leave it (no resume) for the whole run.
    pub no_resume_on_limit: bool,
    /// Lanes (by task id) that are never resumed after a usage limit.
    pub no_resume_tasks: Vec<String>,
    /// `working` with no output change this long is `stalled`.
    pub stall_after: Duration,
    /// Interrupt a stalled lane once after this long (`None`: never).
    pub stall_kill_after: Option<Duration>,
    /// `--notify-cmd`, `--notify-url`.
    pub notify: crate::loopctl::night::notify::Targets,
    /// Owner present (the default) or overnight (`--overnight [--until HH:MM]`).
    pub mode: crate::loopctl::night::overnight::Mode,
    /// Tune each (role, agent)'s effort from its lanes' times and failures
    /// (`--lane-autotune`).
    pub autotune: bool,
    /// A lane is slow past this many times its agent's median (`--autotune-k`).
    pub autotune_k: f64,
    /// An implementer done on screen with no report this long is reminded
    /// once; as long again after the reminder, its task is parked.
    pub report_grace: Duration,
    /// Longest one run of `--ship-cmd` (`--ship-timeout`), cut to the budget left.
    pub ship_timeout: Duration,
    /// Most queued candidates one landing gates as one tree (`--land-batch`;
    /// a red batch is bisected). At least 1.
    pub land_batch: usize,
    /// The lanes are simulated (`--sim`, `--sim-implementer`,
    /// `--sim-reviewer`): recorded in run.json, so `--resume` runs them again.
    pub sim: Option<SimLanesRecord>,
}

pub use crate::runstate::records::SimLanesRecord;

/// Candidates a landing gates as one batch unless `--land-batch` says otherwise.
pub const DEFAULT_LAND_BATCH: usize = 4;

impl Default for Unattended {
    fn default() -> Self {
        Unattended {
            clock: Arc::new(RealClock),
            guards: Guards::default(),
            no_resume_on_limit: false,
            no_resume_tasks: Vec::new(),
            stall_after: DEFAULT_STALL_AFTER,
            stall_kill_after: None,
            notify: Default::default(),
            mode: Default::default(),
            autotune: false,
            autotune_k: crate::loopctl::night::autotune::DEFAULT_K,
            report_grace: DEFAULT_REPORT_GRACE,
            ship_timeout: DEFAULT_SHIP_TIMEOUT,
            land_batch: DEFAULT_LAND_BATCH,
            sim: None,
        }
    }
}
