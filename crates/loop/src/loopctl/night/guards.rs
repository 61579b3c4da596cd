//! Guards for unattended runs (`LOOP.md`, "Guards"): `--max-iterations`,
//! `--max-consecutive-blockers`, `--wall-clock-s`, as a pure decision over
//! the run's counters. A guard that trips stops the run with decision
//! `blocked` (not success): nothing new starts, in-flight work settles, then
//! the close-out.

use std::time::Duration;

/// Consecutive blockers that stop a run by default.
pub const DEFAULT_MAX_CONSECUTIVE_BLOCKERS: u32 = 3;

/// The guards as given (0 turns each off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guards {
    /// Most tasks started (0 = until the queue drains).
    pub max_iterations: u32,
    /// Most parks in a row without a landing in between (0 = off).
    pub max_consecutive_blockers: u32,
    /// The run's wall-clock budget (`None` = off).
    pub wall_clock: Option<Duration>,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            max_iterations: 0,
            max_consecutive_blockers: DEFAULT_MAX_CONSECUTIVE_BLOCKERS,
            wall_clock: None,
        }
    }
}

/// What the guards count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Tasks started so far.
    pub iterations: u32,
    /// Parks since the last landing (usage-limit parks do not count).
    pub consecutive_blockers: u32,
    /// Time since the run started, on the loop's clock.
    pub elapsed: Duration,
}

/// A guard that tripped, and why (the text of its `blocked` decision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trip {
    pub guard: &'static str,
    pub why: String,
}

/// The guard that forbids starting another task, if any.
pub fn check_start(g: &Guards, c: &Counters) -> Option<Trip> {
    if g.max_iterations > 0 && c.iterations >= g.max_iterations {
        return Some(Trip {
            guard: "max-iterations",
            why: format!(
                "{} task(s) started, --max-iterations {}",
                c.iterations, g.max_iterations
            ),
        });
    }
    check_running(g, c)
}

/// The guard that stops the run now, whatever is about to start.
pub fn check_running(g: &Guards, c: &Counters) -> Option<Trip> {
    if g.max_consecutive_blockers > 0 && c.consecutive_blockers >= g.max_consecutive_blockers {
        return Some(Trip {
            guard: "max-consecutive-blockers",
            why: format!(
                "{} blockers in a row, --max-consecutive-blockers {}",
                c.consecutive_blockers, g.max_consecutive_blockers
            ),
        });
    }
    if let Some(budget) = g.wall_clock
        && c.elapsed >= budget
    {
        return Some(Trip {
            guard: "wall-clock",
            why: format!(
                "{} s elapsed, --wall-clock-s {}",
                c.elapsed.as_secs(),
                budget.as_secs()
            ),
        });
    }
    None
}

/// What is left of the wall-clock budget (`None` when it is off).
pub fn remaining(g: &Guards, elapsed: Duration) -> Option<Duration> {
    g.wall_clock.map(|b| b.saturating_sub(elapsed))
}

/// `d`, bounded by the remaining budget.
pub fn bound(g: &Guards, elapsed: Duration, d: Duration) -> Duration {
    remaining(g, elapsed).map_or(d, |r| d.min(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(iterations: u32, blockers: u32, secs: u64) -> Counters {
        Counters {
            iterations,
            consecutive_blockers: blockers,
            elapsed: Duration::from_secs(secs),
        }
    }

    #[test]
    fn each_guard_trips_at_its_limit_and_zero_is_off() {
        let g = Guards {
            max_iterations: 2,
            max_consecutive_blockers: 3,
            wall_clock: Some(Duration::from_secs(60)),
        };
        assert_eq!(check_start(&g, &c(1, 2, 59)), None);
        assert_eq!(
            check_start(&g, &c(2, 0, 0)).map(|t| t.guard),
            Some("max-iterations")
        );
        assert_eq!(
            check_running(&g, &c(2, 0, 0)),
            None,
            "iterations only stop starts"
        );
        assert_eq!(
            check_running(&g, &c(0, 3, 0)).map(|t| t.guard),
            Some("max-consecutive-blockers")
        );
        assert_eq!(
            check_running(&g, &c(0, 0, 60)).map(|t| t.guard),
            Some("wall-clock")
        );
        let off = Guards {
            max_iterations: 0,
            max_consecutive_blockers: 0,
            wall_clock: None,
        };
        assert_eq!(check_start(&off, &c(1000, 1000, 1_000_000)), None);
    }

    #[test]
    fn the_budget_bounds_every_wait() {
        let g = Guards {
            wall_clock: Some(Duration::from_secs(10)),
            ..Guards::default()
        };
        assert_eq!(
            bound(&g, Duration::from_secs(8), Duration::from_secs(30)),
            Duration::from_secs(2)
        );
        assert_eq!(
            bound(&g, Duration::from_secs(12), Duration::from_secs(30)),
            Duration::ZERO
        );
        assert_eq!(
            bound(
                &Guards::default(),
                Duration::from_secs(8),
                Duration::from_secs(30)
            ),
            Duration::from_secs(30)
        );
    }
}
