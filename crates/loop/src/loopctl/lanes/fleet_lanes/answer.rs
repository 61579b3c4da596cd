//! The coordinator's answers to its hosts (`start`, `progress`, `release`,
//! `finish`), each on a task of its own: who asks is the host whose subject the
//! request came on, and the answer goes only to that host's own inbox; the
//! engine decides each, a candidate is applied to the task's worktree only
//! under the job's running attempt and only from the host it was given to,
//! and every request and answer is recorded.

use super::deliveries::{self, SEEN_WITHIN};
use super::{Remote, Shared, lock, record};
use crate::engine::{Action, Actor, Engine, Request, Status};
use crate::fleet::work::{self, CoordReply, Finished, HostRequest};
use crate::fleet::{FleetError, Names};
use crate::loopctl::LoopError;
use crate::loopctl::land::git;
use crate::loopctl::lanes::simlanes::lane_err;
use crate::loopctl::ops::{Outcome, Role};
use crate::statedir::StateDir;
use futures_util::StreamExt;
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the coordinator says on the work-queue after an answer: an ack
/// subject and its body (`+ACK`, `+WPI`, `-NAK …`, `+TERM`).
type AckSay = Option<(String, String)>;

/// Answer the hosts of run `run` until the connection closes.
pub(super) async fn serve(
    client: async_nats::Client,
    mut sub: async_nats::Subscriber,
    js: async_nats::jetstream::Context,
    shared: Arc<Mutex<Shared>>,
    names: Names,
    run: String,
) {
    let log = lock(&shared).log.clone();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    while let Some(msg) = sub.next().await {
        let Some(host) = names.coord_host(&run, &msg.subject).map(str::to_string) else {
            continue;
        };
        let Some(reply_to) = msg.reply.clone() else {
            continue;
        };
        // The answer goes to the asking host's own inbox, nowhere else.
        if !reply_to
            .as_str()
            .starts_with(&format!("{}.", names.inbox_prefix(&host)))
        {
            record(
                &log,
                json!({"event": "dropped", "host": host,
                       "why": "its reply subject is not its own inbox"}),
            );
            continue;
        }
        // Each request on a task of its own, so one slow request (a patch
        // to fetch, a delivery not seen yet) holds no other; at most
        // [`IN_FLIGHT`] at once. Two about one job are still decided one
        // at a time, under the shared lock.
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let (client, js, names, shared, log) = (
            client.clone(),
            js.clone(),
            names.clone(),
            Arc::clone(&shared),
            log.clone(),
        );
        tokio::spawn(async move {
            let _permit = permit;
            let req = if msg.payload.len() > work::MAX_REQUEST {
                Err(format!("a request larger than {} bytes", work::MAX_REQUEST))
            } else {
                serde_json::from_slice::<HostRequest>(&msg.payload)
                    .map_err(|_| "not a request".to_string())
                    .and_then(|r| match r.unfit() {
                        Some(why) => Err(why),
                        None => Ok(r),
                    })
            };
            let (reply, say) = match req {
                Ok(req) => respond(&shared, &js, &names, &host, req).await,
                Err(why) => {
                    record(&log, json!({"event": "refused", "host": host, "why": why}));
                    (refused(why), None)
                }
            };
            let body = serde_json::to_vec(&reply).unwrap_or_default();
            let _ = client.publish(reply_to, body.into()).await;
            if let Some((ack, body)) = say {
                let _ = client.publish(ack, body.into()).await;
            }
        });
    }
}

/// How many requests are answered at once.
const IN_FLIGHT: usize = 32;

/// One well-formed request of `host`'s.
async fn respond(
    shared: &Arc<Mutex<Shared>>,
    js: &async_nats::jetstream::Context,
    names: &Names,
    host: &str,
    req: HostRequest,
) -> (CoordReply, AckSay) {
    let log = {
        let mut s = lock(shared);
        if !s.asked.contains(host) {
            s.asked.insert(host.to_string());
        }
        s.log.clone()
    };
    let (reply, say) = match &req {
        HostRequest::Start {
            job,
            stream_seq,
            delivered,
        } => {
            let again = {
                let s = lock(shared);
                s.remotes.get(job).and_then(|r| {
                    let a = r.starts.get(&(*stream_seq, *delivered))?;
                    (r.given.get(a).map(String::as_str) == Some(host)).then(|| a.clone())
                })
            };
            match again {
                Some(attempt) => (CoordReply::Started { attempt }, None),
                None => {
                    let known = lock(shared).remotes.contains_key(job);
                    let ack = if known {
                        deliveries::seen(shared, job, *stream_seq, host, *delivered, SEEN_WITHIN)
                            .await
                    } else {
                        None
                    };
                    match ack {
                        None if !known => (refused(format!("no job {job} in this run")), None),
                        None => (
                            refused(format!(
                                "no delivery {delivered} of job {job}'s item to host {host} was seen here (or a later one went elsewhere)"
                            )),
                            None,
                        ),
                        Some(ack) => {
                            let sh = Arc::clone(shared);
                            let (job, host, key) =
                                (job.clone(), host.to_string(), (*stream_seq, *delivered));
                            let reply = tokio::task::spawn_blocking(move || {
                                let mut s = lock(&sh);
                                let state_dir = s.state_dir.clone();
                                match s.remotes.get_mut(&job) {
                                    None => refused(format!("no job {job} in this run")),
                                    Some(r) => {
                                        start(StateDir::new(&state_dir), r, &job, &host, key)
                                    }
                                }
                            })
                            .await
                            .unwrap_or_else(|e| refused(format!("the coordinator failed: {e}")));
                            // A job with its outcome takes no more deliveries.
                            let say = match &reply {
                                CoordReply::Started { .. } => None,
                                _ => Some((ack, "+TERM".to_string())),
                            };
                            (reply, say)
                        }
                    }
                }
            }
        }
        HostRequest::Progress {
            job,
            stream_seq,
            delivered,
        } => {
            let live = lock(shared)
                .remotes
                .get(job)
                .is_some_and(|r| r.outcome.is_none());
            match deliveries::latest(shared, job, *stream_seq, host, *delivered) {
                Some(ack) if live => (CoordReply::Accepted, Some((ack, "+WPI".to_string()))),
                _ => (
                    refused(format!(
                        "delivery {delivered} of job {job} is not host {host}'s to keep (superseded, or the job has its outcome)"
                    )),
                    None,
                ),
            }
        }
        HostRequest::Release {
            job,
            stream_seq,
            delivered,
            delay_ms,
        } => match deliveries::latest(shared, job, *stream_seq, host, *delivered) {
            Some(ack) => {
                let delay = (*delay_ms).min(60_000) * 1_000_000;
                (
                    CoordReply::Accepted,
                    Some((ack, format!("-NAK {{\"delay\": {delay}}}"))),
                )
            }
            None => (
                refused(format!(
                    "delivery {delivered} of job {job} is not host {host}'s to hand back"
                )),
                None,
            ),
        },
        HostRequest::Finish {
            job,
            attempt,
            finished,
        } => {
            // Checked before anything is fetched: the job is this run's and
            // the attempt was given to the host that asks.
            let known = {
                let s = lock(shared);
                match s.remotes.get(job) {
                    None => Err(refused(format!("no job {job} in this run"))),
                    Some(r) if r.given.get(attempt).map(String::as_str) != Some(host) => {
                        Err(refused(format!(
                            "attempt {attempt} of job {job} was not given to host {host}"
                        )))
                    }
                    Some(r) => Ok(r.finished.get(attempt).cloned()),
                }
            };
            match known {
                Err(r) => (r, None),
                Ok(Some(again)) => (again, None),
                Ok(None) => {
                    let patch = match finished {
                        // Only from the asking host's own bucket, which
                        // no other host's user may write.
                        Finished::Implemented { patch } => Some(
                            work::retrying(|| async move {
                                let store = work::open_host_objects(js, names, host).await?;
                                work::get_bytes(&store, patch).await
                            })
                            .await,
                        ),
                        _ => None,
                    };
                    let sh = Arc::clone(shared);
                    let (job2, host2, attempt2, finished2) = (
                        job.clone(),
                        host.to_string(),
                        attempt.clone(),
                        finished.clone(),
                    );
                    let reply = tokio::task::spawn_blocking(move || {
                        handle_finish(&sh, &job2, &host2, &attempt2, &finished2, patch)
                    })
                    .await
                    .unwrap_or_else(|e| refused(format!("the coordinator failed: {e}")));
                    // Acked only once taken, never after a refusal.
                    let say = (reply == CoordReply::Accepted)
                        .then(|| {
                            let mut s = lock(shared);
                            let seq = s.remotes.get(job).and_then(|r| r.seq)?;
                            s.deliveries
                                .remove(&seq)
                                .map(|d| (d.ack, "+ACK".to_string()))
                        })
                        .flatten();
                    (reply, say)
                }
            }
        }
    };
    if !matches!(req, HostRequest::Progress { .. }) || reply != CoordReply::Accepted {
        let (op, attempt, delivered) = match (&req, &reply) {
            (HostRequest::Start { delivered, .. }, CoordReply::Started { attempt }) => {
                ("start", Some(attempt.clone()), Some(*delivered))
            }
            (HostRequest::Start { delivered, .. }, _) => ("start", None, Some(*delivered)),
            (HostRequest::Progress { delivered, .. }, _) => ("progress", None, Some(*delivered)),
            (HostRequest::Release { delivered, .. }, _) => ("release", None, Some(*delivered)),
            (HostRequest::Finish { attempt, .. }, _) => ("finish", Some(attempt.clone()), None),
        };
        record(
            &log,
            json!({"event": op, "job": req.job(), "host": host, "attempt": attempt,
                   "delivered": delivered, "reply": reply}),
        );
    }
    (reply, say)
}

fn refused(why: impl Into<String>) -> CoordReply {
    CoordReply::Refused { why: why.into() }
}

/// A `finish` of an attempt given to `host`: the engine decides.
fn handle_finish(
    shared: &Mutex<Shared>,
    job: &str,
    host: &str,
    attempt: &str,
    finished: &Finished,
    patch: Option<Result<Vec<u8>, FleetError>>,
) -> CoordReply {
    let mut s = lock(shared);
    let state_dir = s.state_dir.clone();
    let Some(r) = s.remotes.get_mut(job) else {
        return refused(format!("no job {job} in this run"));
    };
    if let Some(again) = r.finished.get(attempt) {
        return again.clone();
    }
    let reply = finish(
        StateDir::new(&state_dir),
        r,
        job,
        host,
        attempt,
        finished,
        patch,
    );
    r.finished.insert(attempt.to_string(), reply.clone());
    if reply == CoordReply::Accepted && matches!(finished, Finished::Implemented { .. }) {
        let task = r.lane.task.clone();
        s.implemented_by.insert(task, host.to_string());
    }
    reply
}

/// An attempt for one delivery: the same one when asked again; a new one,
/// superseding the attempt of an earlier delivery (its host was given up).
fn start(
    state_dir: &StateDir,
    r: &mut Remote,
    job: &str,
    host: &str,
    key: (u64, i64),
) -> CoordReply {
    if let Some(a) = r.starts.get(&key) {
        return CoordReply::Started { attempt: a.clone() };
    }
    if r.outcome.is_some() {
        return refused(format!("job {job} has its outcome"));
    }
    let engine = match Engine::open(crate::statedir::StateDir::new(state_dir)) {
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
            r.given.insert(attempt.clone(), host.to_string());
            CoordReply::Started { attempt }
        }
        Err(e) => refused(e.to_string()),
    }
}

/// The result of one attempt. A candidate is applied to the task's
/// worktree only when the engine's record still has this attempt running;
/// the completion then goes through the engine under the same attempt.
fn finish(
    state_dir: &StateDir,
    r: &mut Remote,
    job: &str,
    host: &str,
    attempt: &str,
    finished: &Finished,
    patch: Option<Result<Vec<u8>, FleetError>>,
) -> CoordReply {
    let engine = match Engine::open(crate::statedir::StateDir::new(state_dir)) {
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
/// the task's worktree, which is at the base; a candidate that makes a
/// symlink pointing outside the tree is taken back out and refused.
fn apply(worktree: &Path, lane_dir: &Path, attempt: &str, bytes: &[u8]) -> Result<(), LoopError> {
    if bytes.is_empty() {
        return Ok(());
    }
    let file = lane_dir.join(format!("fleet-{attempt}.patch"));
    crate::store::write_bytes_atomic(&file, bytes)?;
    let file = file.to_string_lossy();
    let touched = git::run_bytes(worktree, &["apply", "--numstat", "-z", &file])
        .map_err(|e| lane_err("-", e))?;
    git::run(worktree, &["apply", "--binary", &file]).map_err(|e| lane_err("-", e))?;
    let bad = crate::fleet::candidate::escaping_symlinks(
        worktree,
        &crate::fleet::candidate::patch_paths(&touched),
    );
    if !bad.is_empty() {
        let _ = git::run(worktree, &["apply", "-R", "--binary", &file]);
        return Err(lane_err("-", crate::fleet::candidate::describe(&bad)));
    }
    Ok(())
}
