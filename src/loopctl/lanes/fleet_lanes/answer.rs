//! The coordinator's answers to its hosts (`start`, `finish`), one request
//! at a time: the engine decides each, a candidate is applied to the task's
//! worktree only under the job's running attempt, and every request and
//! answer is recorded.

use super::{Remote, Shared, lock, record};
use crate::engine::{Action, Actor, Engine, Request, Status};
use crate::fleet::FleetError;
use crate::fleet::work::{self, CoordReply, Finished, HostRequest};
use crate::loopctl::LoopError;
use crate::loopctl::land::git;
use crate::loopctl::lanes::simlanes::lane_err;
use crate::loopctl::ops::{Outcome, Role};
use futures_util::StreamExt;
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Answer the hosts of one run, one request at a time (so no two requests
/// about a job interleave), until the connection closes.
pub(super) async fn serve(
    client: async_nats::Client,
    mut sub: async_nats::Subscriber,
    objects: async_nats::jetstream::object_store::ObjectStore,
    shared: Arc<Mutex<Shared>>,
) {
    while let Some(msg) = sub.next().await {
        let Some(reply_to) = msg.reply.clone() else {
            continue;
        };
        let reply = match serde_json::from_slice::<HostRequest>(&msg.payload) {
            Ok(req) => {
                let patch = match &req {
                    HostRequest::Finish {
                        finished: Finished::Implemented { patch },
                        ..
                    } => Some(work::retrying(|| work::get_bytes(&objects, patch)).await),
                    _ => None,
                };
                let sh = Arc::clone(&shared);
                tokio::task::spawn_blocking(move || handle(&sh, &req, patch))
                    .await
                    .unwrap_or_else(|e| CoordReply::Refused {
                        why: format!("the coordinator failed: {e}"),
                    })
            }
            Err(e) => CoordReply::Refused {
                why: format!("not a request: {e}"),
            },
        };
        let body = serde_json::to_vec(&reply).unwrap_or_default();
        let _ = client.publish(reply_to, body.into()).await;
    }
}

fn refused(why: impl Into<String>) -> CoordReply {
    CoordReply::Refused { why: why.into() }
}

/// One request: the engine decides; the answer is recorded.
fn handle(
    shared: &Mutex<Shared>,
    req: &HostRequest,
    patch: Option<Result<Vec<u8>, FleetError>>,
) -> CoordReply {
    let mut s = lock(shared);
    let (state_dir, log) = (s.state_dir.clone(), s.log.clone());
    let reply = match req {
        HostRequest::Start {
            job,
            host,
            stream_seq,
            delivered,
        } => match s.remotes.get_mut(job) {
            None => refused(format!("no job {job} in this run")),
            Some(r) => start(&state_dir, r, job, host, (*stream_seq, *delivered)),
        },
        HostRequest::Finish {
            job,
            host,
            attempt,
            finished,
        } => match s.remotes.get_mut(job) {
            None => refused(format!("no job {job} in this run")),
            Some(r) => match r.finished.get(attempt) {
                Some(again) => again.clone(),
                None => {
                    let reply = finish(&state_dir, r, job, host, attempt, finished, patch);
                    r.finished.insert(attempt.clone(), reply.clone());
                    if reply == CoordReply::Accepted
                        && matches!(finished, Finished::Implemented { .. })
                    {
                        let task = r.lane.task.clone();
                        s.implemented_by.insert(task, host.clone());
                    }
                    reply
                }
            },
        },
    };
    let (op, job, host) = match req {
        HostRequest::Start { job, host, .. } => ("start", job, host),
        HostRequest::Finish { job, host, .. } => ("finish", job, host),
    };
    let attempt = match (req, &reply) {
        (_, CoordReply::Started { attempt }) => Some(attempt.clone()),
        (HostRequest::Finish { attempt, .. }, _) => Some(attempt.clone()),
        _ => None,
    };
    let delivered = match req {
        HostRequest::Start { delivered, .. } => Some(*delivered),
        HostRequest::Finish { .. } => None,
    };
    record(
        &log,
        json!({"event": op, "job": job, "host": host, "attempt": attempt,
               "delivered": delivered, "reply": reply}),
    );
    reply
}

/// An attempt for one delivery: the same one when asked again; a new one,
/// superseding the attempt of an earlier delivery (its host was given up).
fn start(state_dir: &Path, r: &mut Remote, job: &str, host: &str, key: (u64, i64)) -> CoordReply {
    if let Some(a) = r.starts.get(&key) {
        return CoordReply::Started { attempt: a.clone() };
    }
    if r.outcome.is_some() {
        return refused(format!("job {job} has its outcome"));
    }
    let engine = match Engine::open(state_dir) {
        Ok(e) => e,
        Err(e) => return refused(e.to_string()),
    };
    let session = r.lane.role.session_id().to_string();
    let go = || -> Result<String, crate::engine::EngineError> {
        let rec = engine.show(job)?;
        if rec.status == Status::Running {
            // An earlier delivery's attempt: its host stopped acking.
            let old = rec.attempt_id.clone().unwrap_or_default();
            let failed = engine.transition(
                &Request::new(
                    job,
                    Action::Fail {
                        reason: Some(format!(
                            "attempt {old} given up: the item was delivered again (to {host})"
                        )),
                    },
                    Actor::operator(),
                )
                .expect_attempt(old),
            )?;
            engine.transition(&Request::new(
                job,
                Action::Redispatch {
                    iteration: failed.record().iteration + 1,
                },
                Actor::operator(),
            ))?;
        }
        let claimed = engine.transition(&Request::new(
            job,
            Action::Claim { session },
            Actor::operator(),
        ))?;
        Ok(claimed.record().attempt_id.clone().unwrap_or_default())
    };
    match go() {
        Ok(attempt) => {
            r.starts.insert(key, attempt.clone());
            CoordReply::Started { attempt }
        }
        Err(e) => refused(e.to_string()),
    }
}

/// The result of one attempt. A candidate is applied to the task's
/// worktree only when the engine's record still has this attempt running;
/// the completion then goes through the engine under the same attempt.
fn finish(
    state_dir: &Path,
    r: &mut Remote,
    job: &str,
    host: &str,
    attempt: &str,
    finished: &Finished,
    patch: Option<Result<Vec<u8>, FleetError>>,
) -> CoordReply {
    let engine = match Engine::open(state_dir) {
        Ok(e) => e,
        Err(e) => return refused(e.to_string()),
    };
    let current = engine.show(job).ok();
    let live = current
        .as_ref()
        .is_some_and(|c| c.status == Status::Running && c.attempt_id.as_deref() == Some(attempt));
    let (action, outcome) = match finished {
        Finished::Implemented { .. } => (
            Action::Complete {
                reason: Some(format!("candidate from {host}")),
            },
            Outcome::Completed,
        ),
        Finished::Reviewed { pass, reason } => {
            // The verdict goes where the runner reads it: this registry's
            // reviewer session, as a reviewer here would have said it.
            if live {
                let said = crate::registry::heartbeat::heartbeat(
                    state_dir,
                    &crate::registry::heartbeat::HeartbeatRequest {
                        session_id: Role::Reviewer.session_id().into(),
                        task: Some(r.lane.task.clone()),
                        status: if *pass { "pass" } else { "fail" }.into(),
                        agent: Some(r.lane.agent),
                        ..Default::default()
                    },
                    chrono::Utc::now(),
                );
                if let Err(e) = said {
                    return refused(format!("the verdict could not be recorded: {e}"));
                }
                // A failed review's reason is the repair round's evidence.
                let report = json!({
                    "source": "fleet",
                    "host": host,
                    "verdict": if *pass { "pass" } else { "fail" },
                    "findings": if *pass { "" } else { reason.as_str() },
                });
                if let Err(e) = crate::store::write_json_atomic(&r.report, &report) {
                    tracing::warn!(error = %e, "the review's report not written");
                }
            }
            (
                Action::Complete {
                    reason: Some(format!(
                        "review on {host}: {}",
                        if *pass { "pass" } else { reason }
                    )),
                },
                Outcome::Completed,
            )
        }
        Finished::Failed { status, reason } => (
            Action::Fail {
                reason: Some(format!("on {host}: {status}: {reason}")),
            },
            Outcome::Failed {
                status: status.clone(),
                reason: format!("on {host}: {reason}"),
            },
        ),
        Finished::Escalated { decision, reason } => {
            if !live {
                return refused(format!(
                    "attempt {attempt} is not the job's running attempt"
                ));
            }
            r.outcome = Some(Outcome::Escalated {
                decision: decision.clone(),
                reason: format!("on {host}: {reason}"),
            });
            return CoordReply::Accepted;
        }
    };
    if live && let Some(p) = patch {
        let applied = p.map_err(|e| e.to_string()).and_then(|bytes| {
            apply(&r.worktree, &r.lane.lane_dir, attempt, &bytes).map_err(|e| e.to_string())
        });
        if let Err(why) = applied {
            return refused(format!(
                "the candidate of attempt {attempt} does not apply: {why}"
            ));
        }
    }
    // The engine decides (and audits) even when the attempt is stale: a
    // superseded attempt's result is refused there, by its CAS.
    match engine.transition(&Request::new(job, action, Actor::operator()).expect_attempt(attempt)) {
        Ok(_) => {
            r.outcome = Some(outcome);
            CoordReply::Accepted
        }
        Err(e) => refused(e.to_string()),
    }
}

/// Apply a candidate patch (bytes exactly as the host's git wrote them) to
/// the task's worktree, which is at the base.
fn apply(worktree: &Path, lane_dir: &Path, attempt: &str, bytes: &[u8]) -> Result<(), LoopError> {
    if bytes.is_empty() {
        return Ok(());
    }
    let file = lane_dir.join(format!("fleet-{attempt}.patch"));
    crate::store::write_bytes_atomic(&file, bytes)?;
    git::run(worktree, &["apply", "--binary", &file.to_string_lossy()])
        .map(|_| ())
        .map_err(|e| lane_err("-", e))
}
