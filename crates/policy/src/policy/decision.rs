//! The policy's verdicts: [`DecisionKind`] names them, [`Decision`] adds the reason.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The name of a decision, without its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Transport doubt: an error with no observation since.
    HoldReconnect,
    /// No observation, or the newest is too old.
    HoldStale,
    /// The agent waits for a human.
    EscalateBlocked,
    /// The agent's state is unknown, or it exited.
    HoldUnknown,
    /// The evidence cannot be tied to this attempt.
    HoldUnattributed,
    /// The agent is still working or starting.
    HoldBusy,
    /// No report, or the newest report is not finalized.
    HoldUnfinalized,
    /// A side-effect check said the side effect is not there.
    HoldUnproven,
    /// The attempt finished.
    Complete,
}

impl DecisionKind {
    /// Every decision, in the order `decide` checks them.
    pub const ORDER: [DecisionKind; 9] = [
        DecisionKind::HoldReconnect,
        DecisionKind::HoldStale,
        DecisionKind::EscalateBlocked,
        DecisionKind::HoldUnknown,
        DecisionKind::HoldUnattributed,
        DecisionKind::HoldBusy,
        DecisionKind::HoldUnfinalized,
        DecisionKind::HoldUnproven,
        DecisionKind::Complete,
    ];

    /// The snake_case name (`hold_reconnect`).
    pub fn name(self) -> &'static str {
        match self {
            DecisionKind::HoldReconnect => "hold_reconnect",
            DecisionKind::HoldStale => "hold_stale",
            DecisionKind::EscalateBlocked => "escalate_blocked",
            DecisionKind::HoldUnknown => "hold_unknown",
            DecisionKind::HoldUnattributed => "hold_unattributed",
            DecisionKind::HoldBusy => "hold_busy",
            DecisionKind::HoldUnfinalized => "hold_unfinalized",
            DecisionKind::HoldUnproven => "hold_unproven",
            DecisionKind::Complete => "complete",
        }
    }

    /// The decision with this snake_case name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ORDER.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The policy's verdict about an attempt, with a reason naming what was seen.
/// Serializes as `{"decision": "hold_stale", "reason": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Transport doubt: an error with no observation since.
    HoldReconnect { reason: String },
    /// No observation, or the newest is too old.
    HoldStale { reason: String },
    /// The agent waits for a human; never complete.
    EscalateBlocked { reason: String },
    /// The agent's state is unknown, or it exited.
    HoldUnknown { reason: String },
    /// The evidence cannot be tied to this attempt.
    HoldUnattributed { reason: String },
    /// The agent is still working or starting.
    HoldBusy { reason: String },
    /// No report, or the newest report is not finalized.
    HoldUnfinalized { reason: String },
    /// A side-effect check said the side effect is not there.
    HoldUnproven { reason: String },
    /// The attempt finished.
    Complete { reason: String },
}

impl Decision {
    /// A decision of `kind` with `reason`.
    pub fn new(kind: DecisionKind, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        match kind {
            DecisionKind::HoldReconnect => Decision::HoldReconnect { reason },
            DecisionKind::HoldStale => Decision::HoldStale { reason },
            DecisionKind::EscalateBlocked => Decision::EscalateBlocked { reason },
            DecisionKind::HoldUnknown => Decision::HoldUnknown { reason },
            DecisionKind::HoldUnattributed => Decision::HoldUnattributed { reason },
            DecisionKind::HoldBusy => Decision::HoldBusy { reason },
            DecisionKind::HoldUnfinalized => Decision::HoldUnfinalized { reason },
            DecisionKind::HoldUnproven => Decision::HoldUnproven { reason },
            DecisionKind::Complete => Decision::Complete { reason },
        }
    }

    /// Which decision this is.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::HoldReconnect { .. } => DecisionKind::HoldReconnect,
            Decision::HoldStale { .. } => DecisionKind::HoldStale,
            Decision::EscalateBlocked { .. } => DecisionKind::EscalateBlocked,
            Decision::HoldUnknown { .. } => DecisionKind::HoldUnknown,
            Decision::HoldUnattributed { .. } => DecisionKind::HoldUnattributed,
            Decision::HoldBusy { .. } => DecisionKind::HoldBusy,
            Decision::HoldUnfinalized { .. } => DecisionKind::HoldUnfinalized,
            Decision::HoldUnproven { .. } => DecisionKind::HoldUnproven,
            Decision::Complete { .. } => DecisionKind::Complete,
        }
    }

    /// What was seen that made this the decision.
    pub fn reason(&self) -> &str {
        match self {
            Decision::HoldReconnect { reason }
            | Decision::HoldStale { reason }
            | Decision::EscalateBlocked { reason }
            | Decision::HoldUnknown { reason }
            | Decision::HoldUnattributed { reason }
            | Decision::HoldBusy { reason }
            | Decision::HoldUnfinalized { reason }
            | Decision::HoldUnproven { reason }
            | Decision::Complete { reason } => reason,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind(), self.reason())
    }
}
