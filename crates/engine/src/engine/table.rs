//! The transition table as one pure function (`docs/state-transitions.md`).
//!
//! `decide` is what runs while the jobs lock is held. It sees the record, the
//! request and inputs computed before the lock (the time, a fresh attempt id) and
//! returns a verdict. It reads no clock, touches no file, spawns nothing, sleeps
//! never: this module imports nothing that could (a test greps it), and the engine
//! only accepts it as a plain `fn` pointer, which cannot capture anything.

use super::record::{JobRecord, Status, format_time, parse_time};
use super::request::{Action, Authority, Request};
use chrono::{DateTime, Utc};

/// What the table needs besides the record and the request, fixed before the lock.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    /// The request's time (millisecond precision, so it replays exactly from the audit log).
    pub at: DateTime<Utc>,
    /// The attempt id a `claim` would assign.
    pub new_attempt_id: String,
}

/// A named rule of the table; its name appears in every refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// Inside a lane only agent authority is allowed.
    LaneAgentOnly,
    /// The request needs more authority than the caller has.
    Authority,
    /// `create` needs an id that does not exist yet.
    IdNew,
    /// Every request but `create` needs an existing job.
    JobExists,
    /// Inside a lane, a request may touch only the job that lane claimed.
    LaneOwnJob,
    /// Inside a lane, a claim must name the lane's session.
    LaneSession,
    /// `expected_attempt` must equal the record's attempt; no attempt fails closed.
    ExpectedAttempt,
    /// `expected_status` must equal the record's status.
    ExpectedStatus,
    /// `status` is set only by the request that owns it; `progress` cannot carry it.
    StatusOwned,
    /// After a terminal: only its repeat (ACK), `redispatch` or nothing.
    Terminal,
    /// The request's row does not start from the record's status.
    FromStatus,
    /// `started` only from the session the attempt was assigned to.
    AssignedSession,
    /// `timeout` only once the deadline has passed.
    DeadlinePassed,
    /// `redispatch` must carry `iteration = current + 1`.
    IterationAdvance,
}

impl Rule {
    /// The rule's name as printed and audited.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::LaneAgentOnly => "lane-agent-only",
            Rule::Authority => "authority",
            Rule::IdNew => "id-new",
            Rule::JobExists => "job-exists",
            Rule::LaneOwnJob => "lane-own-job",
            Rule::LaneSession => "lane-session",
            Rule::ExpectedAttempt => "expected-attempt",
            Rule::ExpectedStatus => "expected-status",
            Rule::StatusOwned => "status-owned",
            Rule::Terminal => "terminal",
            Rule::FromStatus => "from-status",
            Rule::AssignedSession => "assigned-session",
            Rule::DeadlinePassed => "deadline-passed",
            Rule::IterationAdvance => "iteration-advance",
        }
    }
}

/// The table's verdict.
// One per transition, moved once: boxing the record would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Write this record (it carries the new `transition_seq`).
    Accept(JobRecord),
    /// The record already has the terminal the request owns: no write, no seq.
    Ack,
    /// Refused by `rule`; audited, no write, no seq.
    Refuse { rule: Rule, reason: String },
}

fn refuse(rule: Rule, reason: impl Into<String>) -> Decision {
    Decision::Refuse {
        rule,
        reason: reason.into(),
    }
}

/// The signature of the critical section's decision: a plain function pointer,
/// so it cannot close over a socket, a child process or anything else.
pub type Decider = fn(Option<&JobRecord>, &Request, &Inputs, u64) -> Decision;

/// Decide `req` against `record` (None when the job does not exist). An accepted
/// record carries `next_seq`.
pub fn decide(
    record: Option<&JobRecord>,
    req: &Request,
    inputs: &Inputs,
    next_seq: u64,
) -> Decision {
    let action = &req.action;
    let name = action.name();
    let actor = &req.actor;
    if actor.lane.is_some() && actor.authority != Authority::Agent {
        return refuse(
            Rule::LaneAgentOnly,
            format!(
                "inside a lane only agent authority is allowed, not {}",
                actor.authority.as_str()
            ),
        );
    }
    if !action.allowed_for(actor.authority) {
        return refuse(
            Rule::Authority,
            format!(
                "{name} needs operator authority, the caller has {}",
                actor.authority.as_str()
            ),
        );
    }
    if let Action::Progress { set } = action
        && set.contains_key("status")
    {
        return refuse(
            Rule::StatusOwned,
            "progress cannot set status; only the request that owns a status sets it",
        );
    }
    let rec = match (record, action) {
        (Some(_), Action::Create { .. }) => {
            return refuse(Rule::IdNew, "a job with this id already exists");
        }
        (None, Action::Create { deadline }) => {
            return create(req, inputs, next_seq, deadline.as_deref());
        }
        (None, _) => return refuse(Rule::JobExists, "no such job; create it first"),
        (Some(r), _) => r,
    };
    if let Some(lane) = &actor.lane {
        if let Action::Claim { session } = action {
            if let Some(s) = &lane.session_id
                && s != session
            {
                return refuse(
                    Rule::LaneSession,
                    format!(
                        "lane {} belongs to session {s}, not {session}",
                        lane.lane_id
                    ),
                );
            }
        } else if rec.lane_id.as_deref() != Some(lane.lane_id.as_str()) {
            return refuse(
                Rule::LaneOwnJob,
                format!("lane {} may act only on the job it claimed", lane.lane_id),
            );
        }
    }
    if let Some(want) = &req.expected_attempt {
        match &rec.attempt_id {
            None => {
                return refuse(
                    Rule::ExpectedAttempt,
                    format!("expected attempt {want} but the job has no attempt (fails closed)"),
                );
            }
            Some(have) if have != want => {
                return refuse(
                    Rule::ExpectedAttempt,
                    format!("expected attempt {want} but the job's attempt is {have}"),
                );
            }
            Some(_) => {}
        }
    }
    if let Some(want) = req.expected_status
        && want != rec.status
    {
        return refuse(Rule::ExpectedStatus, format!("expected status {want}"));
    }
    if rec.status.is_terminal() {
        if action.terminal() == Some(rec.status) {
            return Decision::Ack;
        }
        if !matches!(action, Action::Redispatch { .. }) {
            let why = if actor.authority == Authority::Agent {
                "an agent can never move a terminal; only redispatch or finalize by an operator can"
            } else {
                "a different terminal after a terminal; only redispatch moves it"
            };
            return refuse(Rule::Terminal, why);
        }
    }
    let mut next = rec.clone();
    next.transition_seq = next_seq;
    next.updated_at = crate::time::to_millis(inputs.at);
    match action {
        Action::Create { .. } => return refuse(Rule::IdNew, "a job with this id already exists"),
        Action::Claim { session } => {
            if rec.status != Status::Pending {
                return refuse(Rule::FromStatus, "claim needs pending; another claim won");
            }
            next.status = Status::Running;
            next.attempt_id = Some(inputs.new_attempt_id.clone());
            next.session_id = Some(session.clone());
            next.lane_id = actor.lane.as_ref().map(|l| l.lane_id.clone());
        }
        Action::Started { session } => {
            if rec.status != Status::Running {
                return refuse(Rule::FromStatus, "started needs running");
            }
            if rec.session_id.as_deref() != Some(session.as_str()) {
                return refuse(
                    Rule::AssignedSession,
                    format!(
                        "the attempt is assigned to session {}, not {session}",
                        rec.session_id.as_deref().unwrap_or("none")
                    ),
                );
            }
        }
        Action::Progress { set } => {
            if rec.status != Status::Running {
                return refuse(Rule::FromStatus, "progress needs running");
            }
            for (k, v) in set {
                next.metadata.insert(k.clone(), v.clone());
            }
        }
        Action::Complete { reason } | Action::Fail { reason } => {
            if rec.status != Status::Running {
                return refuse(Rule::FromStatus, format!("{name} needs running"));
            }
            next.status = action.terminal().unwrap_or(rec.status);
            next.reason = reason.clone();
        }
        Action::Cancel { reason } => {
            next.status = Status::Cancelled;
            next.reason = reason.clone();
        }
        Action::Timeout => {
            let Some(deadline) = &rec.deadline else {
                return refuse(Rule::DeadlinePassed, "the job has no deadline");
            };
            match parse_time("deadline", deadline) {
                Ok(d) if inputs.at >= d => {}
                Ok(_) => {
                    return refuse(
                        Rule::DeadlinePassed,
                        format!("the deadline {deadline} has not passed"),
                    );
                }
                Err(_) => {
                    return refuse(
                        Rule::DeadlinePassed,
                        format!("the deadline {deadline:?} is not a time"),
                    );
                }
            }
            next.status = Status::TimedOut;
            next.reason = Some("deadline".into());
        }
        Action::Redispatch { iteration } => {
            if !rec.status.is_terminal() {
                return refuse(Rule::FromStatus, "redispatch needs a terminal status");
            }
            if *iteration != rec.iteration.saturating_add(1) {
                return refuse(
                    Rule::IterationAdvance,
                    format!(
                        "iteration must be {} (current + 1), got {iteration}",
                        rec.iteration.saturating_add(1)
                    ),
                );
            }
            next.status = Status::Pending;
            next.iteration = *iteration;
            next.attempt_id = None;
            next.session_id = None;
            next.lane_id = None;
            next.reason = None;
        }
        Action::Finalize => {
            next.status = Status::Failed;
            next.reason = Some("exhausted".into());
        }
    }
    Decision::Accept(next)
}

fn create(req: &Request, inputs: &Inputs, next_seq: u64, deadline: Option<&str>) -> Decision {
    if req.expected_attempt.is_some() {
        return refuse(
            Rule::ExpectedAttempt,
            "a new job has no attempt (fails closed)",
        );
    }
    if req.expected_status.is_some() {
        return refuse(Rule::ExpectedStatus, "a new job has no status yet");
    }
    let deadline = match deadline.map(|d| parse_time("deadline", d)) {
        None => None,
        Some(Ok(t)) => Some(format_time(t)),
        Some(Err(e)) => return refuse(Rule::DeadlinePassed, e.to_string()),
    };
    let at = crate::time::to_millis(inputs.at);
    Decision::Accept(JobRecord {
        job_id: req.job_id.clone(),
        status: Status::Pending,
        iteration: 1,
        attempt_id: None,
        session_id: None,
        deadline,
        metadata: serde_json::Map::new(),
        created_at: at,
        updated_at: at,
        transition_seq: next_seq,
        lane_id: None,
        reason: None,
    })
}

/// The (from, request, to) triples the table allows; `from` is `None` for create.
/// Used by the property tests as the oracle for "never a forbidden status".
pub fn allowed(from: Option<Status>, request: &str, to: Status) -> bool {
    use Status::*;
    match (from, request, to) {
        (None, "create", Pending) => true,
        (Some(Pending), "claim", Running) => true,
        (Some(Running), "started" | "progress", Running) => true,
        (Some(Running), "complete", Completed) => true,
        (Some(Running), "fail", Failed) => true,
        (Some(Pending | Running), "cancel", Cancelled) => true,
        (Some(Pending | Running), "timeout", TimedOut) => true,
        (Some(f), "redispatch", Pending) => f.is_terminal(),
        (Some(Pending | Running), "finalize", Failed) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::request::Actor;

    fn at() -> Inputs {
        Inputs {
            at: parse_time("t", "2026-01-01T00:00:00Z").unwrap_or_default(),
            new_attempt_id: "a1".into(),
        }
    }

    fn pending() -> JobRecord {
        let req = Request::new("J", Action::Create { deadline: None }, Actor::operator());
        match decide(None, &req, &at(), 1) {
            Decision::Accept(r) => r,
            other => panic!("create: {other:?}"),
        }
    }

    #[test]
    fn rule_names_are_distinct() {
        let all = [
            Rule::LaneAgentOnly,
            Rule::Authority,
            Rule::IdNew,
            Rule::JobExists,
            Rule::LaneOwnJob,
            Rule::LaneSession,
            Rule::ExpectedAttempt,
            Rule::ExpectedStatus,
            Rule::StatusOwned,
            Rule::Terminal,
            Rule::FromStatus,
            Rule::AssignedSession,
            Rule::DeadlinePassed,
            Rule::IterationAdvance,
        ];
        let names: std::collections::BTreeSet<_> = all.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn claim_takes_the_attempt_from_inputs_and_the_next_seq() {
        let p = pending();
        let req = Request::new(
            "J",
            Action::Claim {
                session: "s".into(),
            },
            Actor::agent(),
        );
        let Decision::Accept(r) = decide(Some(&p), &req, &at(), 7) else {
            panic!("claim refused");
        };
        assert_eq!(
            (r.status, r.attempt_id.as_deref(), r.transition_seq),
            (Status::Running, Some("a1"), 7)
        );
        assert!(allowed(Some(Status::Pending), "claim", r.status));
    }

    #[test]
    fn a_refusal_names_its_rule() {
        let p = pending();
        let req = Request::new("J", Action::Timeout, Actor::operator());
        assert!(matches!(
            decide(Some(&p), &req, &at(), 2),
            Decision::Refuse {
                rule: Rule::DeadlinePassed,
                ..
            }
        ));
    }
}
