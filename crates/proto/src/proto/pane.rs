//! What the supervisor says about a pane: its spec as `pane.new` takes it,
//! its info as `pane ls` lists it, and a lost pane's entry.

use super::snapshot::{LostObservation, Snapshot};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A pane to create (`pane.new`'s `spec`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PaneSpec {
    pub name: String,
    pub argv: Vec<String>,
    /// Set on the child at creation; values are never logged.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    pub cols: u16,
    pub rows: u16,
    /// The agent kind (`shell`, `claude`, `codex`, `sim`): how the screen is read.
    pub agent: String,
}

/// How a pane's process ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExitInfo {
    /// Exit code; `None` when killed by a signal.
    pub code: Option<i32>,
    /// The signal's name when killed by one.
    pub signal: Option<String>,
    pub at_ms: u64,
}

impl ExitInfo {
    /// An exit seen now.
    pub fn now(code: Option<i32>, signal: Option<String>) -> Self {
        ExitInfo {
            code,
            signal,
            at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }
}

/// What `pane ls` shows about a pane.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PaneInfo {
    pub name: String,
    pub backend: super::Backend,
    pub pid: u32,
    pub generation: u64,
    pub cols: u16,
    pub rows: u16,
    pub agent: String,
    pub argv: Vec<String>,
    pub env_names: Vec<String>,
    pub env_verified: bool,
    /// The working directory the command started in.
    pub cwd: Option<std::path::PathBuf>,
    pub started_at_ms: u64,
    pub bytes: u64,
    pub exit: Option<ExitInfo>,
    pub attached: bool,
}

/// A live pane as `pane ls`, `pane.new` and `lane` report it: its info, how
/// its backend reaches it, and its latest observation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PaneView {
    #[serde(flatten)]
    pub info: PaneInfo,
    /// The backend's own id of the pane (tmux `%3`, herdr's id), if any.
    #[serde(default)]
    pub backend_pane_id: Option<String>,
    /// How to attach with the backend's own client (tmux).
    #[serde(default)]
    pub attach_command: Option<String>,
    /// Why the pane cannot be reached now, or null.
    #[serde(default)]
    pub transport_error: Option<String>,
    /// The backend's view of the pane, when it has one (herdr).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_state: Option<String>,
    pub observation: Snapshot,
    /// What the pane's agent used across its sessions, as its own signals
    /// reported it (docs/agents.md, "What a task cost"); absent when it
    /// reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::usage::Usage>,
}

/// A pane a previous supervisor left behind and this one did not re-adopt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LostPane {
    pub name: String,
    pub backend: super::Backend,
    pub pid: u32,
    pub generation: u64,
    pub agent: String,
    /// Always null: a lost pane has no screen.
    pub cols: Option<u16>,
    /// Always null.
    pub rows: Option<u16>,
    /// Always true.
    pub lost: bool,
    /// What became of its processes.
    pub note: String,
    /// How many of its processes are still running.
    pub left_running: usize,
    pub observation: LostObservation,
}

/// One row of `pane ls`: a live pane or a lost one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PaneEntry {
    Lost(LostPane),
    Live(Box<PaneView>),
}

impl PaneEntry {
    /// The pane's name.
    pub fn name(&self) -> &str {
        match self {
            PaneEntry::Lost(l) => &l.name,
            PaneEntry::Live(v) => &v.info.name,
        }
    }

    /// The live pane, unless it is lost.
    pub fn live(&self) -> Option<&PaneView> {
        match self {
            PaneEntry::Lost(_) => None,
            PaneEntry::Live(v) => Some(v),
        }
    }

    /// Whether the pane is lost.
    pub fn is_lost(&self) -> bool {
        matches!(self, PaneEntry::Lost(_))
    }

    /// Whether the pane is live and its agent blocked on a dialog.
    pub fn is_blocked(&self) -> bool {
        self.live()
            .is_some_and(|v| v.observation.state == super::state::State::Blocked)
    }
}
