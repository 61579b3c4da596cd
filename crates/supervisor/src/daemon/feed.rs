//! The supervisor's event feed: every pane state change, pane lifecycle
//! event, job transition, shadow decision and registry event, numbered in the
//! order the supervisor saw them, in a bounded ring buffer.
//!
//! A subscriber gets a replay of what the ring still holds after a given
//! `seq`, then live events, with no gap and no repeat between the two (both
//! happen under the ring's lock). Live events go through a broadcast channel:
//! publishing never waits for a subscriber, and one that falls behind is told
//! how many events it missed (a `missed` record) instead of slowing anyone.

use crate::proto::event::{Event, EventLine};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// Events the ring holds for `--since` replays.
pub const RING_CAP: usize = 4096;
/// Live events a subscriber may fall behind by before it is told it missed some.
pub const LAG_CAP: usize = 1024;

/// One event as the feed holds it: its line is serialised once for every subscriber.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedEvent {
    pub seq: u64,
    pub kind: String,
    pub pane: Option<String>,
    /// The JSON object, one line (`seq`, `at`, `kind`, then the fields).
    pub line: String,
}

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only events about this pane.
    pub pane: Option<String>,
    /// Only this kind, or (without a dot at its end) any kind under it:
    /// `job` matches `job.transition` and `job.refused`.
    pub kind: Option<String>,
}

impl Filter {
    /// Whether an event passes the filter.
    pub fn matches(&self, ev: &FeedEvent) -> bool {
        if let Some(p) = &self.pane
            && ev.pane.as_deref() != Some(p.as_str())
        {
            return false;
        }
        match &self.kind {
            None => true,
            Some(k) => {
                ev.kind == *k
                    || (ev.kind.len() > k.len()
                        && ev.kind.starts_with(k.as_str())
                        && ev.kind.as_bytes()[k.len()] == b'.')
            }
        }
    }
}

struct Ring {
    next_seq: u64,
    buf: VecDeque<Arc<FeedEvent>>,
}

/// The feed of one supervisor.
pub struct Feed {
    ring: Mutex<Ring>,
    tx: broadcast::Sender<Arc<FeedEvent>>,
    cap: usize,
}

/// What a new subscriber gets: how many requested events are no longer
/// held, the replay, then the live receiver.
pub struct Subscription {
    /// Events after `since` that the ring no longer holds (0 when none).
    pub missed: u64,
    /// The seq of the last event not held (meaningful when `missed > 0`).
    pub missed_through: u64,
    pub replay: Vec<Arc<FeedEvent>>,
    pub live: broadcast::Receiver<Arc<FeedEvent>>,
    /// The seq of the newest event at subscription time (0 when none).
    pub last_seq: u64,
}

impl Default for Feed {
    fn default() -> Self {
        Feed::with_capacity(RING_CAP, LAG_CAP)
    }
}

impl Feed {
    /// A feed holding `ring` events, letting subscribers lag by `lag` events.
    pub fn with_capacity(ring: usize, lag: usize) -> Self {
        let (tx, _) = broadcast::channel(lag.max(1));
        Feed {
            ring: Mutex::new(Ring {
                next_seq: 1,
                buf: VecDeque::with_capacity(ring.min(RING_CAP)),
            }),
            tx,
            cap: ring.max(1),
        }
    }

    /// Number and publish an event; returns its seq. Never blocks on subscribers.
    pub fn publish(&self, event: Event) -> u64 {
        let mut ring = super::server::lock(&self.ring);
        let seq = ring.next_seq;
        ring.next_seq += 1;
        let line = EventLine {
            seq,
            at: crate::paths::now_rfc3339(),
            event,
        };
        let ev = Arc::new(FeedEvent {
            seq,
            kind: line.event.kind().to_string(),
            pane: line.event.pane().map(str::to_string),
            line: line.to_line(),
        });
        if ring.buf.len() >= self.cap {
            ring.buf.pop_front();
        }
        ring.buf.push_back(ev.clone());
        // No receivers is fine: nobody is listening.
        let _ = self.tx.send(ev);
        seq
    }

    /// Subscribe; with `since`, replay every held event after it first.
    pub fn subscribe(&self, since: Option<u64>) -> Subscription {
        let ring = super::server::lock(&self.ring);
        let last_seq = ring.next_seq - 1;
        let live = self.tx.subscribe();
        let Some(since) = since else {
            return Subscription {
                missed: 0,
                missed_through: 0,
                replay: Vec::new(),
                live,
                last_seq,
            };
        };
        // A seq from the future comes from an earlier supervisor: replay all.
        let since = if since > last_seq { 0 } else { since };
        let oldest = ring.buf.front().map_or(ring.next_seq, |e| e.seq);
        let missed = oldest.saturating_sub(since + 1);
        let replay = ring.buf.iter().filter(|e| e.seq > since).cloned().collect();
        Subscription {
            missed,
            missed_through: oldest.saturating_sub(1),
            replay,
            live,
            last_seq,
        }
    }
}

/// The record a subscriber gets instead of `n` events it fell behind on:
/// its `seq` is the last one missed, `first` the first.
pub fn missed_line(first: u64, n: u64) -> String {
    EventLine {
        seq: first + n - 1,
        at: crate::paths::now_rfc3339(),
        event: Event::Missed { missed: n, first },
    }
    .to_line()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::event::RegistryEvent;
    use serde_json::{Value, json};

    /// A registry-sourced event of `kind` with `fields`.
    fn reg(kind: &str, pane: Option<&str>, fields: Value) -> Event {
        let Value::Object(fields) = fields else {
            return reg(kind, pane, json!({}));
        };
        Event::Registry(RegistryEvent {
            kind: kind.into(),
            pane: pane.map(str::to_string),
            fields,
        })
    }

    fn seqs(v: &[Arc<FeedEvent>]) -> Vec<u64> {
        v.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn since_replays_exactly_what_followed_and_live_continues_without_a_gap() {
        let f = Feed::with_capacity(8, 8);
        for i in 0..5 {
            f.publish(reg("x", None, json!({"i": i})));
        }
        let mut s = f.subscribe(Some(2));
        assert_eq!(s.missed, 0);
        assert_eq!(seqs(&s.replay), [3, 4, 5]);
        f.publish(reg("y", Some("p"), Value::Null));
        let live = s.live.try_recv().unwrap();
        assert_eq!(live.seq, 6);
        assert!(live.line.contains(r#""pane":"p""#), "{}", live.line);
    }

    #[test]
    fn a_since_older_than_the_ring_says_how_many_are_gone() {
        let f = Feed::with_capacity(4, 4);
        for _ in 0..10 {
            f.publish(reg("x", None, Value::Null));
        }
        let s = f.subscribe(Some(0));
        assert_eq!(s.missed, 6);
        assert_eq!(s.missed_through, 6);
        assert_eq!(seqs(&s.replay), [7, 8, 9, 10]);
    }

    #[test]
    fn a_slow_subscriber_lags_and_the_publisher_never_waits() {
        let f = Feed::with_capacity(4, 4);
        let mut s = f.subscribe(None);
        for _ in 0..20 {
            f.publish(reg("x", None, Value::Null));
        }
        match s.live.try_recv() {
            Err(broadcast::error::TryRecvError::Lagged(n)) => assert_eq!(n, 16),
            other => panic!("expected a lag, got {other:?}"),
        }
        assert_eq!(s.live.try_recv().unwrap().seq, 17);
    }

    #[test]
    fn kind_filter_matches_exactly_or_a_dotted_prefix() {
        let ev = |kind: &str| FeedEvent {
            seq: 1,
            kind: kind.into(),
            pane: Some("a".into()),
            line: String::new(),
        };
        let f = Filter {
            pane: None,
            kind: Some("job".into()),
        };
        assert!(f.matches(&ev("job")));
        assert!(f.matches(&ev("job.transition")));
        assert!(!f.matches(&ev("jobs.x")));
        let p = Filter {
            pane: Some("b".into()),
            kind: None,
        };
        assert!(!p.matches(&ev("pane.state")));
    }

    #[test]
    fn reserved_fields_cannot_be_overwritten() {
        let f = Feed::default();
        f.publish(reg("k", None, json!({"seq": 99, "kind": "evil", "x": 1})));
        let s = f.subscribe(Some(0));
        let v: Value = serde_json::from_str(&s.replay[0].line).unwrap();
        assert_eq!(v["seq"], 1);
        assert_eq!(v["kind"], "k");
        assert_eq!(v["x"], 1);
    }
}
