//! Auto-completion: the only path from a `complete` decision to the engine.
//! Off unless `DROVER_AUTOCOMPLETE=1`; `DROVER_AUTOCOMPLETE=0` is the rollback
//! switch and turns it off everywhere.

use super::{Runner, ShadowDecision, report};
use crate::engine::{Action, Actor, Engine, EngineError, Request, Status};
use crate::evidence::{Evidence, latest_dispatch};
use std::path::Path;

/// The environment variable that turns auto-completion on (`1`) or off (`0`).
pub const ENV: &str = crate::statedir::env::AUTOCOMPLETE;

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
    match prepare(runner, d)? {
        Ok(p) => transition(engine, d, p),
        Err(o) => Ok(o),
    }
}

/// Commit a `complete` decision and append it to the decision log, the
/// line first: whoever sees the job completed finds the decision that
/// completed it (with `action: completed`). Should the engine then refuse,
/// a second line for the same decision says what happened. A decision that
/// cannot be recorded is not acted on. Any other decision is recorded with
/// what auto-completion made of it.
pub fn commit_and_record(
    engine: &Engine,
    runner: &Runner,
    d: &mut ShadowDecision,
) -> Result<Outcome, String> {
    let p = match prepare(runner, d) {
        Ok(Ok(p)) => p,
        Ok(Err(o)) => {
            d.action = Some(o.label());
            runner.record(d).map_err(|e| e.to_string())?;
            return Ok(o);
        }
        Err(e) => {
            d.action = Some(format!("error: {e}"));
            runner.record(d).map_err(|e| e.to_string())?;
            return Err(e.to_string());
        }
    };
    let expected = match &p.failed {
        Some(why) => Outcome::FailedByLane(why.clone()),
        None => Outcome::Completed,
    };
    d.action = Some(expected.label());
    runner.record(d).map_err(|e| e.to_string())?;
    let o = match transition(engine, d, p) {
        Ok(o) => o,
        Err(e) => Outcome::Refused(format!("error: {e}")),
    };
    if o != expected {
        d.action = Some(o.label());
        runner.record(d).map_err(|e| e.to_string())?;
    }
    Ok(o)
}

/// The request for the engine, and the lane's reason when it reported
/// `failed` or `blocked` (the request then fails the job).
struct Prepared {
    req: Request,
    failed: Option<String>,
    /// The report decided on: its path and bytes.
    report: (std::path::PathBuf, Vec<u8>),
}

/// The checks before a `complete` reaches the engine: the request to make,
/// or why there is none.
fn prepare(runner: &Runner, d: &ShadowDecision) -> Result<Result<Prepared, Outcome>, EngineError> {
    if d.decision != "complete" {
        return Ok(Err(Outcome::NotComplete));
    }
    let events = runner.evidence().read(&d.job_id)?;
    let Some(Evidence::Dispatch {
        report_path,
        worktree,
        attempt_id,
        ..
    }) = latest_dispatch(&events)
    else {
        return Ok(Err(Outcome::Unproven("no dispatch record".into())));
    };
    if attempt_id != &d.attempt_id {
        return Ok(Err(Outcome::Refused("a newer dispatch exists".into())));
    }
    // The bytes decided on, kept: the completion is made only while the
    // report still holds them (a report rewritten meanwhile is checked again).
    let read = report_path.as_deref().and_then(|p| {
        let bytes = std::fs::read(p).ok()?;
        let rep: report::Report = serde_json::from_slice(&bytes).ok()?;
        Some((rep, std::path::PathBuf::from(p), bytes))
    });
    let Some((rep, path, bytes)) = read else {
        return Ok(Err(Outcome::Unproven(
            "the report is unreadable now".into(),
        )));
    };
    let v = report::verify_manifest(&rep, worktree.as_deref().map(Path::new));
    if !v.proven {
        return Ok(Err(Outcome::Unproven(v.detail)));
    }
    // The lane's own account decides which terminal: a lane that says it
    // failed or is blocked is not completed.
    let failed = match rep.outcome.as_deref() {
        // Its words go to the job's record, the audit log, the decisions
        // log and the supervisor's log: redacted of secrets first.
        Some(o @ ("failed" | "blocked")) => Some(crate::registry::redact::redact_shown(&format!(
            "the lane reported {o}: {}",
            rep.reason.as_deref().unwrap_or("no reason given")
        ))),
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
    Ok(Ok(Prepared {
        req,
        failed,
        report: (path, bytes),
    }))
}

fn transition(engine: &Engine, d: &ShadowDecision, p: Prepared) -> Result<Outcome, EngineError> {
    let (path, bytes) = &p.report;
    let same = || std::fs::read(path).is_ok_and(|now| now == *bytes);
    match engine.transition_if(&p.req, Some(("the report", &same))) {
        Ok(_) if p.failed.is_some() => Ok(Outcome::FailedByLane(p.failed.unwrap_or_default())),
        Ok(_) => {
            crate::registry::events::emit_quiet(
                engine.state_dir(),
                "job.autocompleted",
                serde_json::json!({"job_id": d.job_id, "attempt_id": d.attempt_id}),
            );
            Ok(Outcome::Completed)
        }
        Err(e @ (EngineError::Refused { .. } | EngineError::Changed { .. })) => {
            Ok(Outcome::Refused(e.to_string()))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shadow::Summary;
    use crate::statedir::StateDir;

    /// Job J1's dispatch of `attempt`, reporting to `report` from `wt`.
    fn dispatch_j1(runner: &Runner, attempt: &str, report: &std::path::Path, wt: &std::path::Path) {
        runner
            .evidence()
            .append(
                "J1",
                &Evidence::Dispatch {
                    t_ms: 1,
                    job_id: "J1".into(),
                    attempt_id: attempt.into(),
                    session_id: "s".into(),
                    pane: "p".into(),
                    pane_generation: 1,
                    nonce: "n".into(),
                    report_path: Some(report.display().to_string()),
                    worktree: Some(wt.display().to_string()),
                },
            )
            .unwrap();
    }

    /// A `complete` decision on a clean job J1's attempt.
    fn complete_clean(attempt: &str) -> ShadowDecision {
        ShadowDecision {
            at: "2026-12-01T00:00:00Z".into(),
            t_ms: 2,
            job_id: "J1".into(),
            attempt_id: attempt.into(),
            decision: "complete".into(),
            reason: "clean".into(),
            summary: Summary {
                events: 1,
                dispatches: 1,
                anchors: 0,
                observations: 0,
                last_state: None,
                report: None,
                transport_errors: 0,
                side_effects_proven: Some(true),
                pane: None,
                pane_generation: None,
                turn_end: None,
            },
            action: None,
        }
    }

    /// Guards issue 24 item 19: the decision that completes a job is in the
    /// log before the engine acts on it (so whoever sees the job completed
    /// finds it); when the engine then refuses, a second line says so.
    #[test]
    fn a_complete_decision_is_recorded_before_the_engine_acts() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path();
        let wt = state.join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join("out.txt"), "x").unwrap();
        let report = wt.join("report.json");
        std::fs::write(
            &report,
            r#"{"attempt_id":"A1","state":"done","manifest":{"files":["out.txt"]}}"#,
        )
        .unwrap();
        let runner = Runner::new(StateDir::new(state));
        dispatch_j1(&runner, "A1", &report, &wt);
        let mut d = complete_clean("A1");
        // No job J1 in the engine: the transition fails after the record.
        let engine = Engine::open(StateDir::new(state)).unwrap();
        let o = commit_and_record(&engine, &runner, &mut d).unwrap();
        assert!(matches!(o, Outcome::Refused(_)), "{o:?}");
        let text = std::fs::read_to_string(runner.decisions_path()).unwrap();
        let actions: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<ShadowDecision>(l).unwrap())
            .map(|d| d.action.unwrap_or_default())
            .collect();
        assert_eq!(actions.len(), 2, "{actions:?}");
        assert_eq!(actions[0], "completed", "recorded before the engine acted");
        assert!(actions[1].starts_with("refused"), "{actions:?}");
    }

    /// Guards issue 35: a report rewritten between the policy's reading
    /// and the completion (a lane saying `failed` a moment after `done`)
    /// must not leave a job completed on a report that no longer says so.
    /// The completion is made only while the report holds the bytes it was
    /// decided on; the rewritten one is decided on next.
    #[test]
    fn a_report_rewritten_before_the_completion_is_decided_on_again() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path();
        let wt = state.join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join("out.txt"), "x").unwrap();
        let engine = Engine::open(StateDir::new(state)).unwrap();
        engine
            .transition(&Request::new(
                "J1",
                Action::Create { deadline: None },
                Actor::operator(),
            ))
            .unwrap();
        let attempt = engine
            .transition(&Request::new(
                "J1",
                Action::Claim {
                    session: "s".into(),
                },
                Actor::operator(),
            ))
            .unwrap()
            .record()
            .attempt_id
            .clone()
            .unwrap();
        let report = wt.join("report.json");
        let write = |outcome: &str| {
            let doc = serde_json::json!({"attempt_id": attempt, "state": "finalized", "outcome": outcome,
                "reason": "r", "side_effects": [{"kind": "file", "path": "out.txt"}]});
            std::fs::write(&report, doc.to_string()).unwrap();
        };
        write("done");
        let runner = Runner::new(StateDir::new(state));
        dispatch_j1(&runner, &attempt, &report, &wt);
        let d = complete_clean(&attempt);
        let p = prepare(&runner, &d)
            .unwrap()
            .unwrap_or_else(|o| panic!("{o:?}"));
        assert!(p.failed.is_none(), "decided on `done`");
        write("failed");
        let o = transition(&engine, &d, p).unwrap();
        assert!(
            matches!(&o, Outcome::Refused(why) if why.contains("the report changed")),
            "{o:?}"
        );
        assert_eq!(engine.show("J1").unwrap().status, Status::Running);
        let p = prepare(&runner, &d)
            .unwrap()
            .unwrap_or_else(|o| panic!("{o:?}"));
        assert!(matches!(
            transition(&engine, &d, p).unwrap(),
            Outcome::FailedByLane(_)
        ));
        assert_eq!(engine.show("J1").unwrap().status, Status::Failed);
    }
}
