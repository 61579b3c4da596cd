//! The runner's parts: the state a [`Runner`](super::runner::Runner) owns,
//! grouped by concern so each step reads the part it works on — the lanes
//! and the jobs in them, the queues between steps, the run's clocks, what
//! stops, pauses or steers it, its locks, and lane autotune.

use crate::loopctl::night::nudge::Nudge;
use crate::loopctl::night::{autotune, clock};
use crate::loopctl::ops::LaneHandle;
use crate::loopctl::run::drive::{LimitPark, Stop};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The lanes the run holds and what is known of each (all keyed by task,
/// except `jobs` and `held`, keyed by job id).
#[derive(Default)]
pub(in crate::loopctl) struct Slots {
    /// Live lanes by task (at most one per task at a time).
    pub(in crate::loopctl) lanes: BTreeMap<String, LaneHandle>,
    /// Dispatched jobs: job id → (task, when, on the loop's clock).
    pub(in crate::loopctl) jobs: BTreeMap<String, (String, DateTime<Utc>)>,
    /// Lanes parked at a usage limit, by task.
    pub(in crate::loopctl) limited: BTreeMap<String, LimitPark>,
    /// Per task: the lane's output counter and since when it has not moved.
    pub(in crate::loopctl) quiet: BTreeMap<String, (u64, DateTime<Utc>, bool)>,
    /// Jobs whose lane is held for the owner (an escalation, owner present),
    /// and since when (the owner's wait ends at the turn timeout).
    pub(in crate::loopctl) held: BTreeMap<String, DateTime<Utc>>,
    /// Implementer jobs at the end of their turn with no report: what was
    /// said to them ([`crate::loopctl::run::nudge`]).
    pub(in crate::loopctl) nudges: BTreeMap<String, Nudge>,
    /// Lanes' tasks and usage tallies as last read, by lane id, and
    /// dispatched jobs' lanes, by job id ([`crate::loopctl::run::cost`]).
    pub(in crate::loopctl) usage_lanes: BTreeMap<String, super::cost::LaneRead>,
    pub(in crate::loopctl) usage_jobs: BTreeMap<String, LaneHandle>,
}

/// The board as the run last read it, and the problems of it this process
/// already recorded (each is said once).
pub(in crate::loopctl) struct BoardView {
    pub(in crate::loopctl) view: crate::loopctl::board::Board,
    pub(in crate::loopctl) reported: std::collections::BTreeSet<String>,
}

impl BoardView {
    /// The board `view`, nothing of it recorded yet.
    pub(in crate::loopctl) fn new(view: crate::loopctl::board::Board) -> BoardView {
        BoardView {
            view,
            reported: Default::default(),
        }
    }
}

impl Slots {
    /// The tasks whose lane is held for the owner.
    pub(in crate::loopctl) fn held_tasks(&self) -> Vec<String> {
        self.jobs
            .iter()
            .filter(|(j, _)| self.held.contains_key(*j))
            .map(|(_, (t, _))| t.clone())
            .collect()
    }

    /// The tasks whose lane is parked at a usage limit.
    pub(in crate::loopctl) fn limited_tasks(&self) -> Vec<String> {
        self.limited.keys().cloned().collect()
    }
}

/// Tasks waiting between steps.
#[derive(Default)]
pub(in crate::loopctl) struct Queues {
    /// Accepted tasks, in the order they land.
    pub(in crate::loopctl) landing: Vec<String>,
    /// Captured candidates waiting for their reviewer lane: (task, patch).
    pub(in crate::loopctl) reviews: Vec<(String, PathBuf)>,
    /// Tasks whose passed review stands after a rebase round, waiting for
    /// their reviewer to be free (`rounds.rs`).
    pub(in crate::loopctl) carried: Vec<String>,
}

/// The run's time: its start and budget on the loop's clock, and when
/// `run.json` was last written.
#[derive(Clone, Copy)]
pub(in crate::loopctl) struct Clocks {
    pub(in crate::loopctl) started: DateTime<Utc>,
    /// Budget spent before `started` (by the run before its resume).
    pub(in crate::loopctl) spent_before: Duration,
    /// When `run.json` was last written (wall clock; see
    /// [`CHECKPOINT`](super::runner::CHECKPOINT)).
    pub(in crate::loopctl) persisted: Instant,
    /// The previous pass, on the loop's clock (the tripwire's accounting).
    pub(in crate::loopctl) last_pass: DateTime<Utc>,
}

impl Clocks {
    /// A run starting `started`, with `spent_before` of its budget spent.
    pub(in crate::loopctl) fn new(started: DateTime<Utc>, spent_before: Duration) -> Clocks {
        Clocks {
            started,
            spent_before,
            persisted: Instant::now(),
            last_pass: started,
        }
    }

    /// The wall-clock budget spent by `now` (the loop's clock): before a
    /// resume and since.
    pub(in crate::loopctl) fn spent(&self, now: DateTime<Utc>) -> Duration {
        self.spent_before + clock::since(self.started, now)
    }

    /// Seconds since the previous pass, which is now `now`.
    pub(in crate::loopctl) fn pass(&mut self, now: DateTime<Utc>) -> u64 {
        let dt = clock::since(self.last_pass, now).as_secs();
        self.last_pass = now;
        dt
    }

    /// Whether `run.json` is due ([`CHECKPOINT`](super::runner::CHECKPOINT)).
    pub(in crate::loopctl) fn checkpoint_due(&self) -> bool {
        self.persisted.elapsed() >= super::runner::CHECKPOINT
    }
}

/// What stops, pauses or steers the run: the guards' streak, a stop
/// decided, a pause, the mode, and the rulings listed for ratification.
pub(in crate::loopctl) struct Controls {
    /// Parks since the last landing (the guard's streak).
    pub(in crate::loopctl) consecutive_blockers: u32,
    /// Why the run stops, once decided.
    pub(in crate::loopctl) stop: Option<Stop>,
    /// Set while paused: the reason, and whether `PAUSED:` was printed.
    pub(in crate::loopctl) paused: Option<(String, bool)>,
    /// Owner present or overnight, now.
    pub(in crate::loopctl) mode: crate::loopctl::night::overnight::Mode,
    /// Rulings listed for ratification: (ruling, recommendation).
    pub(in crate::loopctl) rulings: Vec<(String, String)>,
}

impl Controls {
    /// Whether nothing new may start whatever the guards say: a stop is
    /// decided or the run is paused.
    pub(in crate::loopctl) fn holds_starts(&self) -> bool {
        self.stop.is_some() || self.paused.is_some()
    }
}

/// The locks held while the process works the run.
#[derive(Default)]
pub(in crate::loopctl) struct Locks {
    /// This process runs the run (held until it ends; a crash lets it go).
    pub(in crate::loopctl) run: Option<crate::store::LockGuard>,
    /// The run's board is worked by this process alone (see `rundir::lock_board`).
    pub(in crate::loopctl) board: Option<crate::store::LockGuard>,
}

/// Turns kept for the tuner (older ones are far outside its window).
const MAX_SAMPLES: usize = 256;

/// Lane autotune: the efforts set and cooldowns, the finished turns (oldest
/// first) and each task's iteration.
pub(in crate::loopctl) struct Tuning {
    pub(in crate::loopctl) state: autotune::State,
    pub(in crate::loopctl) samples: Vec<autotune::Sample>,
    pub(in crate::loopctl) iteration_of: BTreeMap<String, u32>,
}

impl Tuning {
    /// Autotune going on from `state`.
    pub(in crate::loopctl) fn new(state: autotune::State) -> Tuning {
        Tuning {
            state,
            samples: Vec::new(),
            iteration_of: BTreeMap::new(),
        }
    }

    /// A finished turn, the oldest dropped past [`MAX_SAMPLES`].
    pub(in crate::loopctl) fn record(&mut self, sample: autotune::Sample) {
        self.samples.push(sample);
        let over = self.samples.len().saturating_sub(MAX_SAMPLES);
        self.samples.drain(..over);
    }

    /// Before iteration `next`: the tuner over the turns so far (which are
    /// then no longer fresh), and what it recommends.
    pub(in crate::loopctl) fn tune(&mut self, next: u32, k: f64) -> Vec<autotune::Recommendation> {
        let (state, recs) = autotune::tune(&self.state, &self.samples, next, k);
        self.state = state;
        for s in &mut self.samples {
            s.fresh = false;
        }
        recs
    }
}
