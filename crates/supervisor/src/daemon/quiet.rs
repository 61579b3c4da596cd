//! A pane's detector wake-up, and when its output last came.
//!
//! The detector classifies a burst once its output has been quiet for
//! `BURST_QUIET`. Woken by every chunk of a flood, it would wake thousands of
//! times a second (a tmux pane's pipe brings a few KiB per read) and re-arm
//! a timer each time. Instead the reader stamps the time of its output here
//! and the detector, once awake, sleeps until `BURST_QUIET` after the last
//! stamp it sees: output during that sleep only stores the notification's
//! permit, and costs the reader an atomic store.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The instant the stamps count from.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    u64::try_from(base().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Wakes a pane's detector; remembers when the pane last had output.
#[derive(Debug, Default)]
pub(super) struct Wake {
    notify: Notify,
    /// Nanoseconds from `base()` to the last output, plus one (0: none yet).
    last_output: AtomicU64,
}

impl Wake {
    /// The pane had output: stamp it, then wake the detector (the stamp is
    /// stored first, so a detector woken by this sees it).
    pub(super) fn output(&self) {
        self.last_output
            .store(now_ns().saturating_add(1), Ordering::Release);
        self.notify.notify_one();
    }

    /// Something else changed (an exit, a kill, a respawn): wake the detector.
    pub(super) fn notify_one(&self) {
        self.notify.notify_one();
    }

    /// Wait for a wake-up.
    pub(super) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// Drop a wake-up that came while the detector was not waiting: what it
    /// announced is in the stamp (or on the screen about to be read). Call
    /// before reading the stamp.
    pub(super) fn clear(&self) {
        use std::future::Future;
        let woken = std::pin::pin!(self.notify.notified());
        let _ = woken.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    }

    /// How long ago the pane last had output (`None`: never).
    pub(super) fn since_output(&self) -> Option<Duration> {
        match self.last_output.load(Ordering::Acquire) {
            0 => None,
            at => Some(Duration::from_nanos(now_ns().saturating_sub(at - 1))),
        }
    }
}

/// How much longer a burst lasts: `None` once the output has been quiet for
/// `window`, else the time left until it will have been if nothing more
/// comes. Quiet is counted from the last output, or from the wake-up when
/// that came later (a wake-up without output: an exit, a kill).
pub(super) fn burst_left(
    since_output: Option<Duration>,
    since_woke: Duration,
    window: Duration,
) -> Option<Duration> {
    let quiet = since_output.map_or(since_woke, |s| s.min(since_woke));
    window.checked_sub(quiet).filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_lasts_until_its_last_output_is_a_window_old() {
        let ms = Duration::from_millis;
        let w = ms(2);
        // Output half a window ago: the other half is left.
        assert_eq!(burst_left(Some(ms(1)), ms(5), w), Some(ms(1)));
        // Quiet for the window since the last output: over.
        assert_eq!(burst_left(Some(ms(2)), ms(5), w), None);
        assert_eq!(burst_left(Some(ms(30)), ms(40), w), None);
        // Woken without output since (an exit): counted from the wake-up.
        assert_eq!(burst_left(Some(ms(30)), Duration::ZERO, w), Some(w));
        assert_eq!(burst_left(None, ms(1), w), Some(ms(1)));
        assert_eq!(burst_left(None, ms(3), w), None);
    }

    #[test]
    fn output_is_stamped_and_a_stored_wake_up_is_cleared() {
        let w = Wake::default();
        assert_eq!(w.since_output(), None);
        w.output();
        let since = w.since_output().expect("stamped");
        assert!(since < Duration::from_secs(5), "{since:?}");
        // The permit stored by `output` is taken by `clear`: a wait now
        // does not return at once.
        w.clear();
        let woken = std::pin::pin!(w.notified());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(std::future::Future::poll(woken, &mut cx).is_pending());
    }

    #[test]
    fn a_wake_up_without_output_leaves_the_stamp() {
        let w = Wake::default();
        w.notify_one();
        assert_eq!(w.since_output(), None);
        let woken = std::pin::pin!(w.notified());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(std::future::Future::poll(woken, &mut cx).is_ready());
    }
}
