//! The scenario: what drover saw about one attempt, in the file format of docs/policy.md.
//!
//! Serializing a scenario gives that format back, so the shadow runner can log the
//! scenario it decided on and `drover policy eval` can replay it.

use super::decision::DecisionKind;
use serde::Serialize;

/// The staleness window a scenario builder should use when it has no better figure:
/// an observation older than this at `now_ms` no longer says what the agent is doing.
pub const DEFAULT_STALENESS_MS: u64 = 30_000;

/// The widest staleness window a scenario may ask for. A larger window would quietly
/// switch the staleness check off, so the validator refuses it.
pub const MAX_STALENESS_MS: u64 = 600_000;

/// Everything seen about one attempt, plus (in fixtures) the decision expected of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scenario {
    /// What this scenario guards; in a fixture, the file's name without `.json`.
    pub name: String,
    /// Why the scenario exists, for a reader (optional, ignored by the policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The moment of the decision, on the timeline's clock.
    pub now_ms: u64,
    /// How old the newest observation may be at `now_ms` before it is stale.
    pub staleness_ms: u64,
    /// The dispatch record: the attempt this decision is about.
    pub dispatch: Dispatch,
    /// The evidence, oldest first.
    pub timeline: Vec<Event>,
    /// The decision a fixture expects (`drover policy check` compares against it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_policy: Option<ExpectedPolicy>,
}

/// The dispatch record: which attempt went to which session on which pane generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dispatch {
    /// The job the attempt belongs to.
    pub job_id: String,
    /// The attempt being judged.
    pub attempt_id: String,
    /// The session (role) the attempt was dispatched to.
    pub session_id: String,
    /// The pane generation the prompt was delivered to.
    pub pane_generation: u64,
}

/// What a fixture expects `decide` to say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpectedPolicy {
    /// The expected decision.
    pub decision: DecisionKind,
    /// Optionally, a fragment the reason must contain, to pin which sub-rule fired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_contains: Option<String>,
}

/// One piece of evidence at a time on the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// When it was seen, in milliseconds on the scenario's clock.
    pub t_ms: u64,
    /// The identifiers it carried; every one present counts for attribution.
    #[serde(flatten)]
    pub ids: Ids,
    /// What kind of evidence it is.
    #[serde(flatten)]
    pub body: EventBody,
    /// Why the event is there, for a reader (optional, ignored by the policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Identifiers an event may carry. Absent ones say nothing; present ones must agree
/// with the dispatch record (`manifest_attempt_id` with its attempt).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Ids {
    /// The attempt the event claims to belong to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_id: Option<String>,
    /// The session the event came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The pane generation the event came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pane_generation: Option<u64>,
    /// The attempt a report's manifest of side effects was written for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_attempt_id: Option<String>,
}

/// The kinds of evidence, with what each carries beyond its identifiers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// A prompt was dispatched (and acknowledged) — not evidence that it ran.
    Dispatch,
    /// Evidence that the attempt actually ran: the nonce seen, the agent went working.
    ExecutionAnchor,
    /// A matched snapshot of the agent's state.
    Observation {
        /// The agent state.
        state: AgentState,
        /// A refinement of the state (`permission` for `blocked`, an exit code for
        /// `exited`). Named `state_kind` because `kind` names the event's kind.
        #[serde(skip_serializing_if = "Option::is_none")]
        state_kind: Option<String>,
    },
    /// How a watcher's request to the transport ended.
    Transport {
        /// `ok`, `timeout` or `error`.
        result: TransportResult,
    },
    /// The lane's own account (`report.json`).
    Report {
        /// `writing`, `paused` or `finalized`.
        state: ReportState,
    },
    /// A check of a declared side effect.
    SideEffect {
        /// Whether the side effect was shown to exist.
        proven: bool,
    },
    /// The agent's own word that its turn ended: Claude Code's `Stop` or
    /// `StopFailure` hook, Codex's `agent-turn-complete` notify or its
    /// rollout's `task_complete` / `turn_aborted`.
    TurnEnd {
        /// `ended`, `failed` or `aborted`.
        how: TurnHow,
        /// Which of the agent's channels said so.
        source: TurnSource,
        /// With `failed`: why, when the agent said.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<TurnFailure>,
        /// With `ended`: the last assistant message's sha256 (never its text).
        #[serde(skip_serializing_if = "Option::is_none")]
        message_sha256: Option<String>,
    },
}

impl EventBody {
    /// The `kind` name used in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            EventBody::Dispatch => "dispatch",
            EventBody::ExecutionAnchor => "execution_anchor",
            EventBody::Observation { .. } => "observation",
            EventBody::Transport { .. } => "transport",
            EventBody::Report { .. } => "report",
            EventBody::SideEffect { .. } => "side_effect",
            EventBody::TurnEnd { .. } => "turn_end",
        }
    }
}

/// An agent state as observed (docs/agents.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// The agent is launching.
    Starting,
    /// The agent waits for input.
    Idle,
    /// The agent is working.
    Working,
    /// The agent waits for a human (permission, question, …).
    Blocked,
    /// The agent says it is done.
    Done,
    /// The agent's process exited.
    Exited,
    /// The classifier could not tell.
    Unknown,
}

impl AgentState {
    /// Every state, in the order of docs/agents.md.
    pub const ALL: [AgentState; 7] = [
        AgentState::Starting,
        AgentState::Idle,
        AgentState::Working,
        AgentState::Blocked,
        AgentState::Done,
        AgentState::Exited,
        AgentState::Unknown,
    ];

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            AgentState::Starting => "starting",
            AgentState::Idle => "idle",
            AgentState::Working => "working",
            AgentState::Blocked => "blocked",
            AgentState::Done => "done",
            AgentState::Exited => "exited",
            AgentState::Unknown => "unknown",
        }
    }
}

/// How a transport request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportResult {
    /// The transport answered.
    Ok,
    /// The transport answered that nothing changed in time — healthy, but no snapshot.
    Timeout,
    /// The transport failed: what the agent did since is unknown.
    Error,
}

impl TransportResult {
    /// Every result.
    pub const ALL: [TransportResult; 3] = [
        TransportResult::Ok,
        TransportResult::Timeout,
        TransportResult::Error,
    ];

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            TransportResult::Ok => "ok",
            TransportResult::Timeout => "timeout",
            TransportResult::Error => "error",
        }
    }
}

/// The state of a lane's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportState {
    /// The lane is still writing it.
    Writing,
    /// The lane stopped writing for a while (a debounce fired) — not an ending.
    Paused,
    /// The lane declared it final.
    Finalized,
}

impl ReportState {
    /// Every report state.
    pub const ALL: [ReportState; 3] = [
        ReportState::Writing,
        ReportState::Paused,
        ReportState::Finalized,
    ];

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            ReportState::Writing => "writing",
            ReportState::Paused => "paused",
            ReportState::Finalized => "finalized",
        }
    }
}

/// How an agent's turn ended, by its own word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnHow {
    /// The turn finished.
    Ended,
    /// The turn failed (an API error, a usage limit, a login, billing).
    Failed,
    /// The turn was interrupted.
    Aborted,
}

impl TurnHow {
    /// Every way a turn ends.
    pub const ALL: [TurnHow; 3] = [TurnHow::Ended, TurnHow::Failed, TurnHow::Aborted];

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            TurnHow::Ended => "ended",
            TurnHow::Failed => "failed",
            TurnHow::Aborted => "aborted",
        }
    }
}

/// The agent's channel a turn's end came through (docs/agents.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnSource {
    /// A Claude Code hook.
    Hook,
    /// Codex's `notify` program.
    Notify,
    /// A transcript or rollout file the agent writes.
    Transcript,
}

impl TurnSource {
    /// Every source of a turn's end.
    pub const ALL: [TurnSource; 3] = [TurnSource::Hook, TurnSource::Notify, TurnSource::Transcript];

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            TurnSource::Hook => "hook",
            TurnSource::Notify => "notify",
            TurnSource::Transcript => "transcript",
        }
    }
}

/// Why a turn failed, as the agent said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnFailure {
    /// The account's usage or rate limit.
    RateLimit,
    /// Authentication failed.
    Auth,
    /// Billing (no credit).
    Billing,
    /// Anything else.
    Other,
}

impl TurnFailure {
    /// Every failure.
    pub const ALL: [TurnFailure; 4] = [
        TurnFailure::RateLimit,
        TurnFailure::Auth,
        TurnFailure::Billing,
        TurnFailure::Other,
    ];

    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            TurnFailure::RateLimit => "rate_limit",
            TurnFailure::Auth => "auth",
            TurnFailure::Billing => "billing",
            TurnFailure::Other => "other",
        }
    }

    /// A failure only a human (or the limit's reset) can end: nothing the
    /// agent retries by itself.
    pub fn needs_a_human(self) -> bool {
        !matches!(self, TurnFailure::Other)
    }
}
