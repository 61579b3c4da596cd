//! Fusing the screen with the agents' own signals (docs/agents.md, "Fusing
//! the screen with the agents' signals"), typed: what a pane's signals add
//! up to ([`SignalView`]), an open disagreement between them and the screen
//! ([`Disagreement`]), and `pane.explain`'s answer ([`Explained`]).

use super::signal::{Limits, Source, TurnError, Usage};
use super::state::Observation;
use serde::{Deserialize, Serialize};

/// When a signal was taken, and from where.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// When the supervisor took it (ms since the epoch).
    pub at_ms: u64,
    pub source: Source,
}

/// A permission or question the agent said it waits on, not yet answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latch {
    pub at: Mark,
    /// `permission` or `question`.
    pub kind: super::state::BlockedKind,
    /// The tool that asked, when the signal named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// A tool call started and not finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRun {
    pub at: Mark,
    pub tool: String,
}

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndHow {
    /// It finished (`Stop`, `agent-turn-complete`, `task_complete`).
    Ended,
    /// It failed (`StopFailure`, a `task_complete` with an error).
    Failed,
    /// It was interrupted (`turn_aborted`).
    Aborted,
}

impl EndHow {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            EndHow::Ended => "ended",
            EndHow::Failed => "failed",
            EndHow::Aborted => "aborted",
        }
    }
}

/// How the last turn ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnEnd {
    pub at: Mark,
    pub how: EndHow,
    /// With `failed`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TurnError>,
    /// With `ended`: the last assistant message's sha256, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_sha256: Option<String>,
}

/// What a pane's signals add up to: the ledger folded, oldest to newest,
/// from the pane's current generation on. Empty when the agent sent none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SignalView {
    /// How many signals were folded.
    pub notes: usize,
    /// The session the newest signal named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The last prompt submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Mark>,
    /// A turn open: a prompt submitted and no end, failure or abort since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_open: Option<Mark>,
    /// The last turn's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_end: Option<TurnEnd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latch: Option<Latch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolRun>,
    /// Subagents started and not stopped.
    #[serde(default)]
    pub subagents_open: u32,
    /// The newest usage limits, when the agent reported any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<(Mark, Limits)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The screen and the signals give different states.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disagreement {
    /// The state the screen alone gives (`idle`, `blocked:permission`, …).
    pub screen: String,
    /// The state the signals alone give.
    pub signals: String,
    /// Since when (ms since the epoch).
    pub since_ms: u64,
}

/// The newest signal of one source, as `pane.explain` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignalSeen {
    pub source: Source,
    /// Its kind (`turn_ended`, …).
    pub signal: String,
    pub at_ms: u64,
    pub age_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// `pane.explain`: how a pane's state was decided.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explained {
    pub pane: String,
    pub generation: u64,
    /// The screen's own observation (null before the first classification).
    pub screen: Option<Observation>,
    pub screen_hash: String,
    /// The newest signal of each source that sent one.
    pub signals: Vec<SignalSeen>,
    pub view: SignalView,
    /// The pane's state (`.source`: who decided it).
    pub fused: Observation,
    /// The fusion rule that decided it (`screen` when the screen alone did).
    pub rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<Disagreement>,
    /// Whether the open disagreement was published as `signal.disagree`.
    #[serde(default)]
    pub disagreement_reported: bool,
    /// What the pane's agent used across all its sessions (`view.usage` is
    /// the current session's alone); absent when it reported no usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}
