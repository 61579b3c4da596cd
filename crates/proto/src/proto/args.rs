//! The arguments of each operation, one struct per op, with the wire's
//! field names and defaults (docs/protocol.md, "Operations").

use super::pane::PaneSpec;
use super::state::{State, Until};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `ping`: is a supervisor there, and which.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {}

/// `pane.new`: create a pane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "PaneNewWire")]
pub struct PaneNew {
    pub spec: PaneSpec,
    /// `native`, `tmux` or `herdr`; native when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Create it beside this herdr pane (herdr only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
}

/// `pane.new` as it may arrive: older clients named the backend inside
/// the spec; the request's own `backend` wins.
#[derive(Deserialize)]
struct PaneNewWire {
    spec: SpecWire,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    split: Option<Split>,
}

#[derive(Deserialize)]
struct SpecWire {
    #[serde(flatten)]
    spec: PaneSpec,
    #[serde(default)]
    backend: Option<String>,
}

impl From<PaneNewWire> for PaneNew {
    fn from(w: PaneNewWire) -> Self {
        PaneNew {
            spec: w.spec.spec,
            backend: w.backend.or(w.spec.backend),
            split: w.split,
        }
    }
}

/// Where a herdr pane goes: beside `pane`, `right` (default) or `down`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    pub pane: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
}

/// `pane.ls`: every pane, lost ones included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneLs {}

/// `pane.read`: a pane's screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneRead {
    pub pane: String,
    /// Also the rows with their SGR formatting.
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw: bool,
    /// Scrollback rows to include; a negative or fractional value is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<u64>,
}

impl PaneRead {
    /// The visible screen of `pane`.
    pub fn new(pane: impl Into<String>) -> Self {
        PaneRead {
            pane: pane.into(),
            raw: false,
            scrollback: None,
        }
    }
}

/// `pane.send`: type text into a pane, then Enter unless `enter` is false.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneSend {
    pub pane: String,
    pub text: String,
    #[serde(default = "yes")]
    pub enter: bool,
}

/// `pane.keys`: send named keys (`Enter`, `C-c`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneKeys {
    pub pane: String,
    pub keys: Vec<String>,
}

/// `pane.resize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneResize {
    pub pane: String,
    pub cols: u16,
    pub rows: u16,
}

/// `pane.kill` (or dismiss a lost pane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneKill {
    pub pane: String,
}

/// `pane.respawn`: start the pane's command again (a new generation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneRespawn {
    pub pane: String,
}

/// `wait`'s mode: every pane or any one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    #[default]
    All,
    Any,
}

/// A barrier's timeout when the request names none.
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = 30_000;

/// `wait`: a barrier on the panes' observations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    pub panes: Vec<String>,
    pub until: Vec<Until>,
    #[serde(default)]
    pub mode: WaitMode,
    /// [`DEFAULT_WAIT_TIMEOUT_MS`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Only observations classified after the request count.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fresh: bool,
}

impl Wait {
    /// A barrier until every pane of `panes` is in one of `states`.
    pub fn all(
        panes: Vec<String>,
        states: impl IntoIterator<Item = State>,
        timeout_ms: u64,
    ) -> Wait {
        Wait {
            panes,
            until: states
                .into_iter()
                .map(|state| Until { state, kind: None })
                .collect(),
            mode: WaitMode::All,
            timeout_ms: Some(timeout_ms),
            fresh: false,
        }
    }

    /// What a well-formed request must also hold.
    pub fn check(&self) -> Result<(), String> {
        if self.panes.is_empty() {
            return Err("`panes` is empty: name at least one pane".into());
        }
        if self.until.is_empty() {
            return Err("`until` is empty: the states to wait for".into());
        }
        Ok(())
    }

    /// The timeout, the default when none is named.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS))
    }
}

/// `deliver`: hand a prompt to an agent and confirm it took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deliver {
    pub pane: String,
    pub text: String,
    /// A fresh one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_timeout_ms: Option<u64>,
}

/// What `pane.answer` does to the dialog on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerAction {
    Approve,
    Deny,
    /// Pick `choice` (a number or a label).
    Answer,
}

/// `pane.answer`: answer the dialog a blocked agent shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneAnswer {
    pub pane: String,
    pub action: AnswerAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
}

/// `evidence.watch`: feed a job's pane's evidence (docs/shadow.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceWatch {
    pub job_id: String,
    pub attempt_id: String,
    pub session_id: String,
    pub pane: String,
    pub generation: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub autocomplete: bool,
}

/// What a lane's report says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Done,
    Failed,
    Blocked,
}

/// What the caller's env says about its lane: checked, never trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    #[serde(default)]
    pub lane_id: Option<String>,
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

/// `report`: a lane's agent reports its outcome (LOOP.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub claims: Claims,
}

/// `attach`: take over a pane's screen and input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attach {
    pub pane: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Watch only: no input, no size, never displacing the writer.
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
}

/// `events.follow`: the event stream after `since`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsFollow {
    #[serde(default)]
    pub since: Option<u64>,
    #[serde(default)]
    pub pane: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
}

/// `fleet.join`: join a fleet (docs/fleet.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetJoin {
    /// As in `fleet.json`.
    pub config: super::fleet::FleetConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A member of this config that is connected stays as it is
    /// (`fleet work` hands its secrets only to a supervisor not in the fleet).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rejoin: bool,
}

/// `fleet.leave`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetLeave {}

/// `signal`: an agent's hook, notify call or status line reports what
/// happened (docs/agents.md, "The agents' own signals"). The pane is the one whose process
/// tree holds the caller (its peer credentials), never a name it gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    #[serde(flatten)]
    pub note: super::signal::SignalNote,
}

/// `pane.explain`: how the pane's state was decided (read-only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneExplain {
    pub pane: String,
    /// Wait up to this long (ms, at most [`PaneExplain::SETTLE_MAX_MS`])
    /// for the agent's status line to report after its last turn end, when
    /// it has a status line and has not yet: Claude's runs a few hundred ms
    /// after `Stop`, with the turn's cost. Absent: answer at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_ms: Option<u64>,
}

impl PaneExplain {
    /// The longest `settle_ms` taken; more is this.
    pub const SETTLE_MAX_MS: u64 = 10_000;
}

/// `shutdown`: stop every pane and exit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shutdown {}
