//! A pane's observation as barriers, `pane ls` and `pane read` report it.

use super::state::{BlockedKind, State};
use serde::{Deserialize, Serialize};

/// A pane's latest classified state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    pub pane: String,
    pub generation: u64,
    pub state: State,
    /// Set when `state` is blocked.
    pub kind: Option<BlockedKind>,
    pub exit_code: Option<i32>,
    /// When the pane entered this state (ms since the epoch).
    pub since_ms: u64,
    /// The same instant, RFC 3339.
    pub since: String,
    /// Rule names and signals that produced the state.
    pub evidence: Vec<String>,
    /// FNV-1a of the visible text, as 16 hex digits.
    pub screen_hash: String,
    /// How many times this pane has been classified (changed or not): a
    /// `--fresh` barrier counts only observations numbered after its start.
    #[serde(default)]
    pub seq: u64,
    /// Which source decided the state: `screen`, unless an agent's own
    /// signal did (docs/agents.md, "Fusing the screen with the agents'
    /// signals").
    #[serde(default)]
    pub source: super::signal::Source,
}

impl Snapshot {
    /// Whether the state (and kind) are the same as `other`'s.
    pub fn same_state(&self, other: &Snapshot) -> bool {
        self.generation == other.generation
            && self.state == other.state
            && self.kind == other.kind
            && self.exit_code == other.exit_code
    }

    /// `blocked:permission`, `idle`, …: the state as `wait --until` names it.
    pub fn label(&self) -> String {
        match self.kind {
            Some(k) if self.state == State::Blocked => format!("blocked:{k}"),
            _ => self.state.to_string(),
        }
    }
}

/// The observation of a lost pane (its record was found at startup, its
/// processes are being or were ended): `state` is always `lost`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LostObservation {
    pub pane: String,
    pub state: LostState,
    pub generation: u64,
    pub since_ms: u64,
}

/// The one state of a lost pane.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LostState {
    Lost,
}
