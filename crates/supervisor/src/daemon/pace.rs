//! How often a pane is classified while its output floods: a token bucket.
//! A pane that changes now and then (an agent's TUI: a frame, a pause) is
//! classified at the end of every burst, as before; a pane whose output keeps
//! coming with short gaps (a build log, a `cat` of a large file, tmux passing
//! a flood on in paced writes) would otherwise be classified after every
//! 2 ms gap — up to 500 times a second, each rendering and matching its
//! screen under the pane lock — and is instead classified at most once per
//! [`CLASSIFY_EVERY`] once its [`CLASSIFY_BURST`] quick classifications are
//! spent. What the flood's last frame shows is still classified: only when
//! is bounded, by [`CLASSIFY_EVERY`].

use std::time::{Duration, Instant};

/// Classifications a pane may have back to back before pacing starts.
pub const CLASSIFY_BURST: u32 = 4;
/// While a pane floods, at most one classification per this long.
pub const CLASSIFY_EVERY: Duration = Duration::from_millis(20);

/// A token bucket of classifications for one pane.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Tokens as of `at` (one token per classification).
    tokens: f64,
    at: Instant,
}

impl Pacer {
    /// A full bucket at `now`.
    pub fn new(now: Instant) -> Self {
        Pacer {
            tokens: f64::from(CLASSIFY_BURST),
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let gained =
            now.saturating_duration_since(self.at).as_secs_f64() / CLASSIFY_EVERY.as_secs_f64();
        self.tokens = (self.tokens + gained).min(f64::from(CLASSIFY_BURST));
        self.at = now;
    }

    /// How long to wait at `now` before the next classification may run
    /// (zero when a token is there).
    pub fn delay(&mut self, now: Instant) -> Duration {
        self.refill(now);
        // (A token refilled over a computed wait may be a rounding short.)
        if self.tokens >= 1.0 - 1e-6 {
            return Duration::ZERO;
        }
        CLASSIFY_EVERY.mul_f64(1.0 - self.tokens)
    }

    /// Spend a token for a classification at `now`.
    pub fn take(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens - 1.0).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_classifications_are_not_delayed_until_the_bucket_is_spent() {
        let t = Instant::now();
        let mut p = Pacer::new(t);
        for _ in 0..CLASSIFY_BURST {
            assert_eq!(p.delay(t), Duration::ZERO);
            p.take(t);
        }
        let d = p.delay(t);
        assert!(d > Duration::ZERO && d <= CLASSIFY_EVERY, "{d:?}");
    }

    #[test]
    fn a_flood_is_classified_once_per_interval() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0);
        let mut t = t0;
        let mut runs = 0;
        // Bursts end every 2 ms for a second: classify when a token is there.
        for _ in 0..500 {
            t += Duration::from_millis(2);
            if p.delay(t).is_zero() {
                p.take(t);
                runs += 1;
            }
        }
        let most = CLASSIFY_BURST as usize + 1000 / CLASSIFY_EVERY.as_millis() as usize;
        assert!(runs <= most && runs >= most - 2, "{runs} classifications");
    }

    #[test]
    fn a_quiet_pane_gets_its_bucket_back() {
        let t = Instant::now();
        let mut p = Pacer::new(t);
        for _ in 0..10 {
            p.take(t);
        }
        let later = t + CLASSIFY_EVERY * CLASSIFY_BURST;
        for _ in 0..CLASSIFY_BURST {
            assert_eq!(p.delay(later), Duration::ZERO);
            p.take(later);
        }
    }
}
