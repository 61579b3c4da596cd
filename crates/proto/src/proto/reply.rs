//! The reply of each operation, one struct per op (docs/protocol.md).

use super::error::ErrorBody;
use super::pane::PaneView;
use super::snapshot::Snapshot;
use super::state::State;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

fn is_false(b: &bool) -> bool {
    !*b
}

/// `ping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    /// The supervisor's drover version.
    pub version: String,
    /// Its protocol version.
    pub protocol: u32,
    pub pid: u32,
    pub state_dir: PathBuf,
}

/// `pane.read`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PaneText {
    pub pane: String,
    pub generation: u64,
    pub cols: u16,
    pub rows: u16,
    /// The rows (scrollback first) joined with newlines.
    pub text: String,
    pub lines: Vec<String>,
    /// With `raw`: the rows with their SGR formatting; null otherwise.
    pub formatted: Option<Vec<String>>,
    pub title: Option<String>,
    pub observation: Snapshot,
}

/// `pane.send`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    pub pane: String,
    pub bytes: usize,
    pub enter: bool,
    pub agent: String,
}

/// `pane.keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysSent {
    pub pane: String,
    /// How many keys were sent.
    pub keys: usize,
}

/// `pane.resize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resized {
    pub pane: String,
    pub cols: u16,
    pub rows: u16,
}

/// `pane.kill`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Killed {
    pub pane: String,
    pub killed: bool,
    /// A lost pane was dismissed (nothing was running to kill).
    #[serde(default, skip_serializing_if = "is_false")]
    pub dismissed: bool,
}

/// `pane.respawn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    pub pane: String,
    pub generation: u64,
}

/// `attach`'s answer before the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attached {
    pub pane: String,
    pub generation: u64,
    /// A watch: no input, no size.
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
}

/// A pane's snapshot in a `wait` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WaitSnapshot {
    #[serde(flatten)]
    pub snapshot: Snapshot,
    /// When the barrier matched: whether this pane met it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<bool>,
}

/// `wait`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Waited {
    pub matched: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub timed_out: bool,
    pub snapshots: Vec<WaitSnapshot>,
}

/// `deliver`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    pub pane: String,
    pub delivered: bool,
    pub nonce: String,
    pub attempts: u32,
    pub generation: u64,
    pub state: State,
    pub prompt_visible: bool,
}

/// `pane.answer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answered {
    pub pane: String,
    /// The dialog answered first.
    pub dialog: String,
    /// Every dialog answered (Claude's auto-mode asks twice).
    pub dialogs: Vec<String>,
    pub title: String,
    pub keys: Vec<String>,
    pub attempts: u32,
    pub left: bool,
    /// The first classified state after the dialog left.
    pub state: State,
}

/// `evidence.watch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watching {
    pub job_id: String,
    pub pane: String,
    pub watching: bool,
}

/// The report a lane's supervisor wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportWritten {
    pub lane: String,
    pub path: PathBuf,
    pub job_id: String,
    pub replaced: bool,
    /// The report document as written (its file format, docs/operators.md).
    pub report: serde_json::Value,
}

/// `report`: every answer of the caller's own lane's supervisor is one of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reported {
    /// The caller is in none of this supervisor's panes.
    Foreign {
        foreign: bool,
    },
    /// The lane's supervisor refused (`usage`, `refused`, `internal`).
    Refused {
        refused: ErrorBody,
    },
    Written(ReportWritten),
}

/// `events.follow`, before the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Following {
    pub last_seq: u64,
    pub since: Option<u64>,
    pub pid: u32,
}

/// `fleet.join`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    pub fleet: String,
    pub host: String,
    pub slots: usize,
    pub ttl_ms: Option<u64>,
    /// A `rejoin` that found this member connected and left it as it was.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already: bool,
}

/// `fleet.leave`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Left {
    /// It left: the heartbeat stopped, `fleet.json` is forgotten.
    Left {
        /// Always true.
        left: bool,
        fleet: String,
        host: String,
        /// Whether the host's key went now (else its TTL expires it).
        removed_now: bool,
        /// Why the key could not be removed now, or null.
        error: Option<String>,
    },
    /// It was in no fleet.
    NotIn {
        /// Always false.
        left: bool,
        /// Whether a `fleet.json` was found and removed.
        config_removed: bool,
    },
}

/// `signal`: the pane the signal was taken for, or none when the caller is
/// in none of this supervisor's panes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalTaken {
    pub pane: Option<String>,
}

/// `shutdown`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopping {
    pub stopping: bool,
}

/// `pane.new`'s answer: the new pane.
pub type Created = PaneView;
