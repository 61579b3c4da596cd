//! The watcher library over a real supervisor's socket: a matched snapshot is
//! evidence; when the supervisor goes away the watcher reports transport
//! errors and backs off 1 s, 2 s, …; a new supervisor brings it back.

use crate::common;

use common::Drover;
use drover::agent::State;
use drover::daemon::SocketBarrier;
use drover::watch::{BarrierMode, Clock, Round, WatchEvent, Watcher};
use std::time::Duration;

/// A clock that records sleeps instead of sleeping.
#[derive(Default)]
struct FakeClock {
    now: u64,
    slept: Vec<Duration>,
}

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.now
    }
    fn sleep(&mut self, d: Duration) {
        self.now += d.as_millis() as u64;
        self.slept.push(d);
    }
}

#[test]
fn watcher_over_the_socket_matches_then_backs_off_when_the_supervisor_is_gone() {
    let d = Drover::new();
    d.sim("a", "codex", None);
    let state = d.state.clone();
    let socket = drover::paths::socket_path(drover::statedir::StateDir::new(&state)).unwrap();
    let src = SocketBarrier::new(socket, vec!["a".into()], BarrierMode::All);
    let mut w = Watcher::new(
        src,
        FakeClock::default(),
        vec![State::Idle],
        Duration::from_secs(10),
    );
    let mut events: Vec<WatchEvent> = Vec::new();
    match w.step(&mut events) {
        Round::Matched(s) => {
            assert_eq!(s.panes[0].pane, "a");
            assert_eq!(s.panes[0].state, State::Idle);
        }
        other => panic!("expected a match, got {other:?}"),
    }
    assert!(w.cached().is_some());
    d.ok(&["kill-server"]);
    let mut slept = Vec::new();
    for _ in 0..3 {
        match w.step(&mut events) {
            Round::Error { slept: d } => slept.push(d),
            other => panic!("expected a transport error, got {other:?}"),
        }
    }
    assert_eq!(
        slept,
        [1, 2, 4].map(Duration::from_secs).to_vec(),
        "the watcher's backoff"
    );
    assert!(
        w.cached().is_none(),
        "a transport error drops the cached snapshot"
    );
    // A supervisor again (the pane is new): one success resets everything.
    d.sim("a", "claude", None);
    assert!(matches!(w.step(&mut events), Round::Matched(_)));
}
