//! The watch hub: the latest observation of every pane, and one epoch counter
//! that moves whenever any observation changes. Barriers sleep on the epoch;
//! nothing polls.

use serde::{Deserialize, Serialize};

/// A pane's observation as barriers and `pane ls` report it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    pub pane: String,
    pub generation: u64,
    pub state: String,
    pub kind: Option<String>,
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
}

impl Snapshot {
    /// Whether the state (and kind) are the same as `other`'s.
    pub fn same_state(&self, other: &Snapshot) -> bool {
        self.generation == other.generation
            && self.state == other.state
            && self.kind == other.kind
            && self.exit_code == other.exit_code
    }
}
