//! The attach stream's JSON messages (docs/protocol.md, "Attach stream"):
//! controls from the client, events from the supervisor. Pane output and
//! keyboard input travel as frames of their own kinds, not here.

use super::pane::ExitInfo;
use serde::{Deserialize, Serialize};

/// What an attached client may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AttachControl {
    /// Its terminal's new size (ignored outside 1..=1000 and for a watcher).
    Resize {
        #[serde(default)]
        cols: u64,
        #[serde(default)]
        rows: u64,
    },
    /// End the attach; the supervisor answers [`AttachEvent::Detached`].
    Detach,
}

impl AttachControl {
    /// A control frame's payload; `None` when it is no control.
    pub fn parse(payload: &[u8]) -> Option<AttachControl> {
        serde_json::from_slice(payload).ok()
    }

    /// The size asked, when it is one a pane can have.
    pub fn size(&self) -> Option<(u16, u16)> {
        match *self {
            AttachControl::Resize { cols, rows }
                if (1..=1000).contains(&cols) && (1..=1000).contains(&rows) =>
            {
                Some((cols as u16, rows as u16))
            }
            _ => None,
        }
    }
}

/// What the supervisor tells an attached client; each ends the attach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AttachEvent {
    /// It asked to detach.
    Detached,
    /// Another client attached.
    Kicked,
    /// The pane's process ended (null when the pane was killed).
    Exited { exit: Option<ExitInfo> },
}
