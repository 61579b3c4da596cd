//! The watcher: repeats barriers for long-running components (docs/agents.md).
//!
//! - A timeout is healthy: reported as `transport: timeout`, nothing else changes.
//! - Only a matched snapshot becomes evidence (`observation`).
//! - A transport failure drops the cached snapshot, reports `transport: error`
//!   and backs off 1, 2, 4, 8, 16 s (ceiling); one success (match or timeout)
//!   resets the backoff. The first match after an error is preceded by
//!   `transport: ok`. Reasoning from a snapshot captured before a gap is what
//!   makes a disconnect look like a completion, hence the dropped cache.

use super::barrier::{BarrierResult, BarrierSource, Snapshot};
use crate::agent::State;
pub use crate::backoff::Backoff;
use serde::Serialize;
use std::time::{Duration, Instant};

/// First pause after a transport failure.
pub const BACKOFF_START_MS: u64 = 1_000;
/// Longest pause between retries.
pub const BACKOFF_CEILING_MS: u64 = 16_000;

/// Time for the watcher; injectable so tests need no real sleeps.
pub trait Clock {
    /// Milliseconds on a monotonic clock.
    fn now_ms(&self) -> u64;
    /// Pause.
    fn sleep(&mut self, d: Duration);
}

/// The real clock.
#[derive(Debug, Clone)]
pub struct SystemClock {
    start: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// The watcher's retry schedule after a transport failure: 1, 2, 4, 8, 16,
/// 16, … seconds.
pub const BACKOFF: Backoff = Backoff::new(
    Duration::from_millis(BACKOFF_START_MS),
    Duration::from_millis(BACKOFF_CEILING_MS),
);

/// Result of a transport round, as the policy's timeline records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportResult {
    Ok,
    Timeout,
    Error,
}

/// What the watcher reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WatchEvent {
    /// A matched barrier: evidence.
    Observation { at_ms: u64, snapshot: Snapshot },
    /// How the transport fared.
    Transport {
        at_ms: u64,
        result: TransportResult,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_in_ms: Option<u64>,
    },
}

/// Where events go.
pub trait EventSink {
    /// Take one event.
    fn emit(&mut self, e: WatchEvent);
}

impl EventSink for Vec<WatchEvent> {
    fn emit(&mut self, e: WatchEvent) {
        self.push(e);
    }
}

impl EventSink for std::sync::mpsc::Sender<WatchEvent> {
    fn emit(&mut self, e: WatchEvent) {
        // A receiver that went away wants no more events.
        let _ = self.send(e);
    }
}

/// What one round of the watcher did.
#[derive(Clone, Debug, PartialEq)]
pub enum Round {
    /// The barrier matched.
    Matched(Snapshot),
    /// Healthy timeout.
    Timeout,
    /// Transport failure; the watcher already slept this long.
    Error { slept: Duration },
}

/// Repeats one barrier.
pub struct Watcher<S, C> {
    source: S,
    clock: C,
    until: Vec<State>,
    timeout: Duration,
    backoff: Backoff,
    cached: Option<Snapshot>,
    in_error: bool,
}

impl<S: BarrierSource, C: Clock> Watcher<S, C> {
    /// A watcher of `until` states, each barrier bounded by `timeout`.
    pub fn new(source: S, clock: C, until: Vec<State>, timeout: Duration) -> Self {
        Watcher {
            source,
            clock,
            until,
            timeout,
            backoff: BACKOFF,
            cached: None,
            in_error: false,
        }
    }

    /// The last matched snapshot, dropped on any transport failure.
    pub fn cached(&self) -> Option<&Snapshot> {
        self.cached.as_ref()
    }

    /// False from a transport failure until the next successful round.
    pub fn healthy(&self) -> bool {
        !self.in_error
    }

    /// The clock (tests read the fake one back).
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Run one barrier and report it; on failure, sleep the backoff.
    pub fn step(&mut self, sink: &mut impl EventSink) -> Round {
        match self.source.wait(&self.until, self.timeout) {
            Ok(r) => {
                self.backoff.reset();
                let recovered = std::mem::replace(&mut self.in_error, false);
                let at_ms = self.clock.now_ms();
                match r {
                    BarrierResult::Matched(snapshot) => {
                        if recovered {
                            sink.emit(WatchEvent::Transport {
                                at_ms,
                                result: TransportResult::Ok,
                                error: None,
                                retry_in_ms: None,
                            });
                        }
                        self.cached = Some(snapshot.clone());
                        sink.emit(WatchEvent::Observation {
                            at_ms,
                            snapshot: snapshot.clone(),
                        });
                        Round::Matched(snapshot)
                    }
                    BarrierResult::Timeout => {
                        sink.emit(WatchEvent::Transport {
                            at_ms,
                            result: TransportResult::Timeout,
                            error: None,
                            retry_in_ms: None,
                        });
                        Round::Timeout
                    }
                }
            }
            Err(e) => {
                self.in_error = true;
                self.cached = None;
                let delay = self.backoff.next_delay();
                sink.emit(WatchEvent::Transport {
                    at_ms: self.clock.now_ms(),
                    result: TransportResult::Error,
                    error: Some(e.to_string()),
                    retry_in_ms: Some(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)),
                });
                self.clock.sleep(delay);
                Round::Error { slept: delay }
            }
        }
    }

    /// Repeat barriers until one matches, or until the clock reaches
    /// `give_up_at_ms` (then `None`).
    pub fn wait_for_match(
        &mut self,
        sink: &mut impl EventSink,
        give_up_at_ms: Option<u64>,
    ) -> Option<Snapshot> {
        loop {
            if give_up_at_ms.is_some_and(|g| self.clock.now_ms() >= g) {
                return None;
            }
            if let Round::Matched(s) = self.step(sink) {
                return Some(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::barrier::{PaneSnapshot, TransportError};
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;
    use std::rc::Rc;

    #[derive(Clone, Default)]
    struct FakeClock {
        now: Rc<Cell<u64>>,
        slept: Rc<RefCell<Vec<u64>>>,
    }

    impl Clock for FakeClock {
        fn now_ms(&self) -> u64 {
            self.now.get()
        }
        fn sleep(&mut self, d: Duration) {
            let ms = d.as_millis() as u64;
            self.slept.borrow_mut().push(ms);
            self.now.set(self.now.get() + ms);
        }
    }

    enum Next {
        Match,
        Timeout,
        Fail,
    }

    struct FakeSource {
        script: VecDeque<Next>,
        now: Rc<Cell<u64>>,
        /// Time a barrier takes (timeouts take the whole timeout).
        takes_ms: u64,
    }

    fn snap(state: State) -> Snapshot {
        Snapshot {
            panes: vec![PaneSnapshot {
                pane: "p".into(),
                generation: 1,
                state,
                kind: None,
                exit_code: None,
                since: "t".into(),
                evidence: vec![],
                screen_hash: "h".into(),
            }],
        }
    }

    impl BarrierSource for FakeSource {
        fn wait(
            &mut self,
            _until: &[State],
            timeout: Duration,
        ) -> Result<BarrierResult, TransportError> {
            match self.script.pop_front().unwrap_or(Next::Timeout) {
                Next::Match => {
                    self.now.set(self.now.get() + self.takes_ms);
                    Ok(BarrierResult::Matched(snap(State::Done)))
                }
                Next::Timeout => {
                    self.now.set(self.now.get() + timeout.as_millis() as u64);
                    Ok(BarrierResult::Timeout)
                }
                Next::Fail => Err(TransportError::Unreachable("socket refused".into())),
            }
        }
    }

    fn watcher(script: Vec<Next>) -> (Watcher<FakeSource, FakeClock>, FakeClock) {
        let clock = FakeClock::default();
        let src = FakeSource {
            script: script.into(),
            now: clock.now.clone(),
            takes_ms: 5,
        };
        let w = Watcher::new(
            src,
            clock.clone(),
            vec![State::Done, State::Blocked],
            Duration::from_secs(30),
        );
        (w, clock)
    }

    fn results(ev: &[WatchEvent]) -> Vec<String> {
        ev.iter()
            .map(|e| match e {
                WatchEvent::Observation { .. } => "observation".to_string(),
                WatchEvent::Transport { result, .. } => format!("{result:?}").to_lowercase(),
            })
            .collect()
    }

    #[test]
    fn backoff_schedule_is_1_2_4_8_16_16_and_resets_after_success() {
        use Next::*;
        let (mut w, clock) = watcher(vec![Fail, Fail, Fail, Fail, Fail, Fail, Match, Fail, Match]);
        let mut ev = Vec::new();
        let s = w.wait_for_match(&mut ev, None);
        assert!(s.is_some());
        assert_eq!(
            *clock.slept.borrow(),
            vec![1_000, 2_000, 4_000, 8_000, 16_000, 16_000]
        );
        let retry: Vec<u64> = ev
            .iter()
            .filter_map(|e| match e {
                WatchEvent::Transport { retry_in_ms, .. } => *retry_in_ms,
                _ => None,
            })
            .collect();
        assert_eq!(retry, vec![1_000, 2_000, 4_000, 8_000, 16_000, 16_000]);
        assert_eq!(results(&ev)[6..], ["ok", "observation"]);
        // One success reset the backoff: the next failure waits 1 s again.
        w.wait_for_match(&mut ev, None);
        assert_eq!(clock.slept.borrow().last(), Some(&1_000));
        assert_eq!(clock.now.get(), 47_000 + 5 + 1_000 + 5);
    }

    #[test]
    fn timeout_is_healthy_and_keeps_the_cache() {
        use Next::*;
        let (mut w, clock) = watcher(vec![Match, Timeout, Timeout]);
        let mut ev = Vec::new();
        assert!(matches!(w.step(&mut ev), Round::Matched(_)));
        assert_eq!(w.step(&mut ev), Round::Timeout);
        assert_eq!(w.step(&mut ev), Round::Timeout);
        assert!(w.cached().is_some());
        assert!(w.healthy());
        assert!(clock.slept.borrow().is_empty(), "no backoff on timeouts");
        assert_eq!(results(&ev), ["observation", "timeout", "timeout"]);
    }

    #[test]
    fn error_drops_the_cached_snapshot_until_a_new_match() {
        use Next::*;
        let (mut w, _clock) = watcher(vec![Match, Fail, Timeout, Match]);
        let mut ev = Vec::new();
        w.step(&mut ev);
        assert!(w.cached().is_some());
        assert!(matches!(w.step(&mut ev), Round::Error { .. }));
        assert!(
            w.cached().is_none(),
            "state from before the gap is not evidence"
        );
        assert!(!w.healthy());
        // A timeout is a transport success (backoff resets) but brings no snapshot.
        w.step(&mut ev);
        assert!(w.cached().is_none());
        w.step(&mut ev);
        assert!(w.cached().is_some());
        assert_eq!(
            results(&ev),
            ["observation", "error", "timeout", "observation"]
        );
        let j = serde_json::to_value(&ev[1]).unwrap();
        assert_eq!(j["kind"], "transport");
        assert_eq!(j["result"], "error");
        assert_eq!(j["retry_in_ms"], 1000);
        assert!(j["error"].as_str().unwrap().contains("socket refused"));
    }

    #[test]
    fn wait_for_match_gives_up_at_the_deadline() {
        let (mut w, clock) = watcher(vec![]);
        let mut ev = Vec::new();
        assert_eq!(w.wait_for_match(&mut ev, Some(90_000)), None);
        assert_eq!(clock.now.get(), 90_000);
        assert_eq!(ev.len(), 3);
    }

    #[test]
    fn backoff_never_overflows() {
        let mut b = BACKOFF;
        for _ in 0..100 {
            assert!(b.next_delay() <= Duration::from_millis(BACKOFF_CEILING_MS));
        }
    }
}
