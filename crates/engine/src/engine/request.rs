//! Requests: the only way to ask for a status change.

use super::EngineError;
use super::record::{Status, parse_time, validate_job_id, validate_name, validate_text};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who is asking. Operator authority may make every request; agent authority only
/// the agent rows; the supervisor the agent rows and `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    Agent,
    Operator,
    Supervisor,
}

impl Authority {
    /// The name used on disk and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Authority::Agent => "agent",
            Authority::Operator => "operator",
            Authority::Supervisor => "supervisor",
        }
    }
}

/// The lane a request comes from (`DROVER_LANE_ID`, `DROVER_SESSION_ID`), if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    pub lane_id: String,
    pub session_id: Option<String>,
}

/// Authority plus, inside a lane, the lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub authority: Authority,
    #[serde(default)]
    pub lane: Option<Lane>,
}

impl Actor {
    /// An operator outside any lane.
    pub fn operator() -> Self {
        Actor {
            authority: Authority::Operator,
            lane: None,
        }
    }
    /// An agent outside any lane.
    pub fn agent() -> Self {
        Actor {
            authority: Authority::Agent,
            lane: None,
        }
    }
    /// The supervisor (e.g. the deadline watcher).
    pub fn supervisor() -> Self {
        Actor {
            authority: Authority::Supervisor,
            lane: None,
        }
    }
}

/// The named requests of the table (docs/state-transitions.md). The set is closed: a name outside
/// it is `EngineError::UnknownRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Action {
    Create { deadline: Option<String> },
    Claim { session: String },
    Started { session: String },
    Progress { set: Map<String, Value> },
    Complete { reason: Option<String> },
    Fail { reason: Option<String> },
    Cancel { reason: Option<String> },
    Timeout,
    Redispatch { iteration: u64 },
    Finalize,
}

/// Every request name, in table order.
pub const REQUEST_NAMES: [&str; 10] = [
    "create",
    "claim",
    "started",
    "progress",
    "complete",
    "fail",
    "cancel",
    "timeout",
    "redispatch",
    "finalize",
];

impl Action {
    /// The request's name.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Create { .. } => "create",
            Action::Claim { .. } => "claim",
            Action::Started { .. } => "started",
            Action::Progress { .. } => "progress",
            Action::Complete { .. } => "complete",
            Action::Fail { .. } => "fail",
            Action::Cancel { .. } => "cancel",
            Action::Timeout => "timeout",
            Action::Redispatch { .. } => "redispatch",
            Action::Finalize => "finalize",
        }
    }

    /// The terminal this request owns, if any: repeating it is an idempotent ACK.
    pub fn terminal(&self) -> Option<Status> {
        match self {
            Action::Complete { .. } => Some(Status::Completed),
            Action::Fail { .. } | Action::Finalize => Some(Status::Failed),
            Action::Cancel { .. } => Some(Status::Cancelled),
            Action::Timeout => Some(Status::TimedOut),
            _ => None,
        }
    }

    /// Whether `authority` may make this request at all.
    pub fn allowed_for(&self, authority: Authority) -> bool {
        let agent_row = matches!(
            self,
            Action::Claim { .. }
                | Action::Started { .. }
                | Action::Progress { .. }
                | Action::Complete { .. }
                | Action::Fail { .. }
        );
        match authority {
            Authority::Operator => true,
            Authority::Agent => agent_row,
            Authority::Supervisor => agent_row || matches!(self, Action::Timeout),
        }
    }
}

/// One request to `Engine::transition`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub job_id: String,
    pub action: Action,
    #[serde(default)]
    pub expected_attempt: Option<String>,
    #[serde(default)]
    pub expected_status: Option<Status>,
    pub actor: Actor,
}

impl Request {
    /// A request with no preconditions.
    pub fn new(job_id: impl Into<String>, action: Action, actor: Actor) -> Self {
        Request {
            job_id: job_id.into(),
            action,
            expected_attempt: None,
            expected_status: None,
            actor,
        }
    }

    /// Add an `expected_attempt` precondition.
    pub fn expect_attempt(mut self, a: impl Into<String>) -> Self {
        self.expected_attempt = Some(a.into());
        self
    }

    /// Add an `expected_status` precondition.
    pub fn expect_status(mut self, s: Status) -> Self {
        self.expected_status = Some(s);
        self
    }

    /// Parse a request from JSON (e.g. a socket frame). A request name outside the
    /// table is `UnknownRequest`, never a guess.
    pub fn from_json(v: &Value) -> Result<Request, EngineError> {
        let name = v
            .get("action")
            .and_then(|a| a.get("request"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !REQUEST_NAMES.contains(&name) {
            return Err(EngineError::UnknownRequest { name: name.into() });
        }
        serde_json::from_value(v.clone())
            .map_err(|e| EngineError::invalid("request", &v.to_string(), e.to_string()))
    }

    /// Check every name and value before anything touches the disk.
    pub fn validate(&self) -> Result<(), EngineError> {
        validate_job_id(&self.job_id)?;
        if let Some(a) = &self.expected_attempt {
            validate_name("expected attempt", a)?;
        }
        if let Some(l) = &self.actor.lane {
            validate_name("lane id", &l.lane_id)?;
            if let Some(s) = &l.session_id {
                validate_name("lane session id", s)?;
            }
        }
        match &self.action {
            Action::Create { deadline } => {
                if let Some(d) = deadline {
                    parse_time("deadline", d)?;
                }
            }
            Action::Claim { session } | Action::Started { session } => {
                validate_name("session", session)?;
            }
            Action::Progress { set } => {
                if set.is_empty() {
                    return Err(EngineError::invalid(
                        "progress",
                        "",
                        "needs at least one KEY=VALUE",
                    ));
                }
                for k in set.keys() {
                    if k.is_empty() || k.len() > 128 || k.chars().any(char::is_control) {
                        return Err(EngineError::invalid(
                            "metadata key",
                            k,
                            "must be 1 to 128 bytes without control characters",
                        ));
                    }
                }
            }
            Action::Complete { reason } | Action::Fail { reason } | Action::Cancel { reason } => {
                if let Some(r) = reason {
                    validate_text("reason", r)?;
                }
            }
            Action::Timeout | Action::Redispatch { .. } | Action::Finalize => {}
        }
        Ok(())
    }
}
