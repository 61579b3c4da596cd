//! Auto-completion: the only path from a `complete` decision to the engine.
//! Off unless `DROVER_AUTOCOMPLETE=1`; `DROVER_AUTOCOMPLETE=0` is the rollback
//! switch and turns it off everywhere.

use super::{Runner, ShadowDecision, report};
use crate::engine::{Action, Actor, Engine, EngineError, Request, Status};
use crate::evidence::{Evidence, latest_dispatch};
use std::path::Path;

/// The environment variable that turns auto-completion on (`1`) or off (`0`).
pub const ENV: &str = "DROVER_AUTOCOMPLETE";

/// Whether this process's environment turns auto-completion on.
pub fn enabled_by_env() -> bool {
    std::env::var(ENV).map(|v| v.trim() == "1").unwrap_or(false)
}

/// Whether this process's environment forbids auto-completion (`=0`).
pub fn forbidden_by_env() -> bool {
    std::env::var(ENV).map(|v| v.trim() == "0").unwrap_or(false)
}

/// What auto-completion did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The decision was not `complete`: nothing to do.
    NotComplete,
    /// The manifest could not be verified now: held.
    Unproven(String),
    /// The engine accepted `complete` (or acknowledged it was already complete).
    Completed,
    /// The lane reported `failed` or `blocked`: the engine failed the job
    /// with the lane's reason.
    FailedByLane(String),
    /// The engine refused (the job moved on, another attempt, …).
    Refused(String),
}

impl Outcome {
    /// The `action` recorded beside the decision.
    pub fn label(&self) -> String {
        match self {
            Outcome::NotComplete => "none".into(),
            Outcome::Unproven(why) => format!("held: manifest unproven ({why})"),
            Outcome::Completed => "completed".into(),
            Outcome::FailedByLane(why) => format!("failed: {why}"),
            Outcome::Refused(why) => format!("refused: {why}"),
        }
    }
}

/// Commit a `complete` decision through the engine, after verifying the
/// manifest again, with `expected_status=running` and `expected_attempt` =
/// the dispatch's attempt.
pub fn commit(
    engine: &Engine,
    runner: &Runner,
    d: &ShadowDecision,
) -> Result<Outcome, EngineError> {
    if d.decision != "complete" {
        return Ok(Outcome::NotComplete);
    }
    let events = runner.evidence().read(&d.job_id)?;
    let Some(Evidence::Dispatch {
        report_path,
        worktree,
        attempt_id,
        ..
    }) = latest_dispatch(&events)
    else {
        return Ok(Outcome::Unproven("no dispatch record".into()));
    };
    if attempt_id != &d.attempt_id {
        return Ok(Outcome::Refused("a newer dispatch exists".into()));
    }
    let Some(rep) = report_path
        .as_deref()
        .and_then(|p| report::read_report(Path::new(p)))
    else {
        return Ok(Outcome::Unproven("the report is unreadable now".into()));
    };
    let v = report::verify_manifest(&rep, worktree.as_deref().map(Path::new));
    if !v.proven {
        return Ok(Outcome::Unproven(v.detail));
    }
    // The lane's own account decides which terminal: a lane that says it
    // failed or is blocked is not completed.
    let failed = match rep.outcome.as_deref() {
        Some(o @ ("failed" | "blocked")) => Some(format!(
            "the lane reported {o}: {}",
            rep.reason.as_deref().unwrap_or("no reason given")
        )),
        _ => None,
    };
    let action = match &failed {
        Some(why) => Action::Fail {
            reason: Some(why.clone()),
        },
        None => Action::Complete {
            reason: Some(format!("auto-completion: {}", d.reason)),
        },
    };
    let mut req = Request::new(d.job_id.clone(), action, Actor::supervisor())
        .expect_attempt(d.attempt_id.clone());
    req.expected_status = Some(Status::Running);
    match engine.transition(&req) {
        Ok(_) if failed.is_some() => Ok(Outcome::FailedByLane(failed.unwrap_or_default())),
        Ok(_) => {
            if let Some(state_dir) = engine.dir().parent() {
                crate::registry::events::emit_quiet(
                    state_dir,
                    "job.autocompleted",
                    serde_json::json!({"job_id": d.job_id, "attempt_id": d.attempt_id}),
                );
            }
            Ok(Outcome::Completed)
        }
        Err(e @ EngineError::Refused { .. }) => Ok(Outcome::Refused(e.to_string())),
        Err(e) => Err(e),
    }
}
