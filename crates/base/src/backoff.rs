//! The one retry schedule: a pause that starts at `first` and doubles after
//! each failure up to `max`. Every wait-and-retry loop in drover (a
//! transport round, a lock, a process that has not exec'd yet, a limit
//! without a reset time) is this schedule with its own two numbers.

use std::time::Duration;

/// A doubling schedule and how far along it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// A schedule of `first`, `2 × first`, … capped at `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            failures: 0,
        }
    }

    /// The pause after `n` earlier failures (`n = 0`: `first`), without
    /// moving along the schedule. Never overflows.
    pub fn delay(&self, n: u32) -> Duration {
        self.first.saturating_mul(1u32 << n.min(31)).min(self.max)
    }

    /// The pause the next retry waits, without moving along the schedule.
    pub fn current(&self) -> Duration {
        self.delay(self.failures)
    }

    /// The pause before the next retry; each call doubles it up to `max`.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.delay(self.failures);
        self.failures = self.failures.saturating_add(1);
        d
    }

    /// After a success: the next pause is `first` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn doubles_up_to_the_ceiling_and_resets() {
        let mut b = Backoff::new(MS(1), MS(5));
        assert_eq!(b.current(), MS(1));
        let got: Vec<Duration> = (0..5).map(|_| b.next_delay()).collect();
        assert_eq!(got, [MS(1), MS(2), MS(4), MS(5), MS(5)]);
        assert_eq!(b.current(), MS(5), "looking does not move it");
        b.reset();
        assert_eq!(b.next_delay(), MS(1));
    }

    #[test]
    fn never_overflows() {
        let mut b = Backoff::new(Duration::from_secs(3600), Duration::MAX);
        for _ in 0..100 {
            assert!(b.next_delay() >= Duration::from_secs(3600));
        }
        assert_eq!(b.delay(u32::MAX), b.delay(31));
    }
}
