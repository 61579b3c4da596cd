//! The loop's clock: every timing of the runner (guards, turn timeouts,
//! waits until a usage limit resets, stalls, the tripwire) reads it, so a
//! test or a rehearsal can run hours of loop in seconds.
//!
//! [`RealClock`] is the wall clock. [`FastClock`] runs `scale` times faster
//! than the wall clock from a given start and can be advanced by hand: a
//! sleep of one hour on a clock of scale 3600 takes one real second.

use chrono::{DateTime, Utc};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the loop reads the time and waits.
pub trait Clock: std::fmt::Debug + Send + Sync {
    /// Now, on this clock.
    fn now(&self) -> DateTime<Utc>;
    /// Wait this long, on this clock.
    fn sleep(&self, d: Duration);
    /// How long a wait of `d` on this clock takes on the wall clock.
    fn real(&self, d: Duration) -> Duration {
        d
    }
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// A clock `scale` times faster than the wall clock, advanced by hand too.
#[derive(Debug)]
pub struct FastClock {
    start: DateTime<Utc>,
    real_start: Instant,
    scale: u32,
    skipped: Mutex<Duration>,
}

impl FastClock {
    /// A clock that reads `start` now and runs `scale` (≥ 1) times faster.
    pub fn new(start: DateTime<Utc>, scale: u32) -> FastClock {
        FastClock {
            start,
            real_start: Instant::now(),
            scale: scale.max(1),
            skipped: Mutex::new(Duration::ZERO),
        }
    }

    /// Jump ahead by `d` without waiting.
    pub fn advance(&self, d: Duration) {
        if let Ok(mut s) = self.skipped.lock() {
            *s += d;
        }
    }
}

impl Clock for FastClock {
    fn now(&self) -> DateTime<Utc> {
        let run = self.real_start.elapsed() * self.scale;
        let skipped = self.skipped.lock().map(|s| *s).unwrap_or_default();
        let total = chrono::Duration::from_std(run + skipped).unwrap_or(chrono::Duration::MAX);
        self.start + total
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(self.real(d));
    }
    fn real(&self, d: Duration) -> Duration {
        d / self.scale
    }
}

/// `d` of this clock from `from` to `to` (zero when `to` is earlier).
pub fn since(from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
    (to - from).to_std().unwrap_or_default()
}

/// RFC 3339 with seconds, as the loop's run files print times.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_clock_runs_scale_times_faster_and_advances() {
        let start = Utc::now();
        let c = FastClock::new(start, 3600);
        c.sleep(Duration::from_secs(3600)); // one real second
        let after = since(start, c.now());
        assert!(after >= Duration::from_secs(3600), "{after:?}");
        c.advance(Duration::from_secs(7200));
        assert!(since(start, c.now()) >= Duration::from_secs(3 * 3600));
        assert_eq!(c.real(Duration::from_secs(3600)), Duration::from_secs(1));
    }

    #[test]
    fn since_is_zero_backwards() {
        let t = Utc::now();
        assert_eq!(since(t, t - chrono::Duration::seconds(5)), Duration::ZERO);
    }
}
