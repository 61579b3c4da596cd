//! Barriers: the matching rule, the snapshot a matched barrier answers with,
//! and the trait a watcher uses to ask for one (docs/agents.md).

use crate::agent::{BlockedKind, State};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Whether every pane or any one pane must reach an `until` state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BarrierMode {
    /// Every pane (`--all`, the default).
    #[default]
    All,
    /// At least one pane (`--any`).
    Any,
}

/// Is the barrier met? No panes never meets a barrier.
pub fn barrier_met<P>(states: &[(P, State)], until: &[State], mode: BarrierMode) -> bool {
    if states.is_empty() || until.is_empty() {
        return false;
    }
    let hit = |(_, s): &(P, State)| until.contains(s);
    match mode {
        BarrierMode::All => states.iter().all(hit),
        BarrierMode::Any => states.iter().any(hit),
    }
}

/// One pane's part of a matched barrier, as `drover wait --json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PaneSnapshot {
    /// Pane name.
    pub pane: String,
    /// The pane's generation (respawn counter).
    pub generation: u64,
    /// Its state when the barrier matched.
    pub state: State,
    /// Set for `blocked`.
    pub kind: Option<BlockedKind>,
    /// Set for `exited` with a code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// When the pane entered this state (RFC 3339).
    pub since: String,
    /// Rule names and signals behind the state.
    pub evidence: Vec<String>,
    /// A hash of the screen text the state was classified from.
    pub screen_hash: String,
}

/// What a matched barrier answers: one snapshot per pane.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The panes of the barrier, in the order they were asked for.
    pub panes: Vec<PaneSnapshot>,
}

/// The healthy outcomes of a barrier.
#[derive(Clone, Debug, PartialEq)]
pub enum BarrierResult {
    /// The barrier matched; the snapshot is evidence.
    Matched(Snapshot),
    /// It ran out of time: healthy, and carries no snapshot.
    Timeout,
}

/// The supervisor (or tmux, or herdr) could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Nobody answers on the socket / the backend is down.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The pane no longer exists.
    #[error("pane {0} is gone")]
    PaneGone(String),
    /// An answer that does not parse.
    #[error("protocol: {0}")]
    Protocol(String),
    /// An I/O error on the way.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Something that runs one barrier: `drover wait` over the socket, or a fake.
pub trait BarrierSource {
    /// Wait until the barrier's panes reach one of `until`, or `timeout` passes.
    fn wait(&mut self, until: &[State], timeout: Duration)
    -> Result<BarrierResult, TransportError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::*;

    #[test]
    fn all_and_any() {
        let s = [("a", Idle), ("b", Working)];
        assert!(!barrier_met(&s, &[Idle, Done], BarrierMode::All));
        assert!(barrier_met(&s, &[Idle, Done], BarrierMode::Any));
        assert!(barrier_met(&s, &[Idle, Working], BarrierMode::All));
        assert!(!barrier_met(&s, &[Blocked], BarrierMode::Any));
    }

    #[test]
    fn empty_never_matches() {
        let none: [(&str, State); 0] = [];
        assert!(!barrier_met(&none, &[Idle], BarrierMode::All));
        assert!(!barrier_met(&none, &[Idle], BarrierMode::Any));
        assert!(!barrier_met(&[("a", Idle)], &[], BarrierMode::All));
    }

    #[test]
    fn snapshot_json_shape() {
        let p = PaneSnapshot {
            pane: "impl-claude".into(),
            generation: 2,
            state: Blocked,
            kind: Some(BlockedKind::Permission),
            exit_code: None,
            since: "2026-11-30T01:00:00Z".into(),
            evidence: vec!["rule:claude.permission".into()],
            screen_hash: "ab12".into(),
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["state"], "blocked");
        assert_eq!(v["kind"], "permission");
        assert!(v.get("exit_code").is_none());
        let back: PaneSnapshot = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }
}
