//! Dispatch: the path the loop uses to hand a job to a lane's agent.
//!
//! Claim the job for the session (a new attempt), record the dispatch with a
//! nonce in the evidence store, deliver the prompt with confirmation, record
//! the execution anchor, mark the job started, and hand the job to the
//! supervisor's evidence watcher. A prompt that is not delivered fails the job
//! with the reason (it can be redispatched), so nothing waits on work that
//! never started.

use crate::client::{Client, ClientError};
use crate::engine::{Action, Actor, Engine, EngineError, Request};
use crate::evidence::{Evidence, EvidenceStore};
use crate::proto::{PaneEntry, args};
use crate::statedir::StateDir;
use crate::store::StoreError;
use serde_json::json;
use std::path::{Path, PathBuf};

/// What to dispatch.
#[derive(Debug, Clone)]
pub struct DispatchSpec {
    pub job_id: String,
    pub pane: String,
    pub session_id: String,
    pub prompt: String,
    /// Where the lane writes `report.json` (default `<state>/lanes/<pane>/report.json`).
    pub report_path: Option<PathBuf>,
    /// Where declared side effects are checked (default: the pane's cwd).
    pub worktree: Option<PathBuf>,
    pub autocomplete: bool,
    /// How long to wait for the agent to be ready (default: the supervisor's).
    pub ready_timeout_ms: Option<u64>,
    /// How the trailer tells the lane to report.
    pub report_by: ReportBy,
}

/// How a lane reports, as its trailer says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportBy {
    /// `drover report done|failed` (spelled `cmd report …`: the program as
    /// the lane runs it), or by hand the report file, shown as one literal
    /// example listing `files`.
    Command { cmd: String, files: Vec<String> },
    /// A read-only reviewer: its last reply's verdict line is its report.
    Verdict,
}

impl Default for ReportBy {
    fn default() -> Self {
        ReportBy::Command {
            cmd: crate::report::own_command_word(),
            files: Vec::new(),
        }
    }
}

/// What a dispatch did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Dispatched {
    pub job_id: String,
    pub attempt_id: String,
    pub nonce: String,
    pub pane: String,
    pub pane_generation: u64,
    pub report_path: String,
    pub autocomplete: bool,
}

/// Errors of a dispatch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The prompt cannot fit in one request to the supervisor; refused before the claim.
    #[error(
        "the prompt is too large: delivering it takes a {bytes}-byte request, over the {limit}-byte frame limit of the supervisor's protocol; shorten it, or put the material in a file and ask the agent to read it"
    )]
    PromptTooLarge { bytes: usize, limit: usize },
    #[error(
        "pane {pane} already has a running job, {running}: a lane holds one job at a time; finish, fail or cancel {running} first"
    )]
    LaneBusy { pane: String, running: String },
    #[error("--session {session}: no such session in the registry (sessions: {known})")]
    UnknownSession { session: String, known: String },
    #[error(
        "job {job_id} attempt {attempt_id}: prompt not delivered, job failed (redispatch it): {reason}"
    )]
    NotDelivered {
        job_id: String,
        attempt_id: String,
        reason: String,
    },
}

/// The trailer appended to every prompt: what the lane needs to report,
/// with the default [`ReportBy`] and session `implementer`.
pub fn trailer(job_id: &str, attempt_id: &str, nonce: &str, report: &Path) -> String {
    trailer_for(
        job_id,
        attempt_id,
        nonce,
        report,
        "implementer",
        &ReportBy::default(),
    )
}

/// The trailer: the `[drover]` line of tokens, then how to report, said
/// literally (docs/shadow.md, "Reports"): the command to run, and for an agent that writes
/// files one complete example of the report with the real values.
pub fn trailer_for(
    job_id: &str,
    attempt_id: &str,
    nonce: &str,
    report: &Path,
    session_id: &str,
    by: &ReportBy,
) -> String {
    let head = format!(
        "\n\n[drover] job={job_id} attempt={attempt_id} nonce={nonce} report={}",
        report.display()
    );
    match by {
        ReportBy::Verdict => format!(
            "{head}\nYou report by the verdict line the brief asks for, as the last line of your last reply."
        ),
        ReportBy::Command { cmd, files } => {
            let files: Vec<&str> = if files.is_empty() {
                vec!["<a file you changed, relative to the worktree>"]
            } else {
                files.iter().map(String::as_str).collect()
            };
            let example = crate::report::schema::example(
                &crate::report::schema::Expect {
                    attempt_id,
                    session_id,
                },
                &files,
            );
            format!(
                "{head}\nWhen finished, run `{cmd} report done` (or `{cmd} report failed --reason \"<why>\"` if you cannot finish). If you cannot run commands, write {} as this one JSON object, one side_effects entry per file you changed: {example}",
                report.display()
            )
        }
    }
}

fn deliver_args(spec: &DispatchSpec, text: &str, nonce: &str) -> args::Deliver {
    args::Deliver {
        pane: spec.pane.clone(),
        text: text.to_string(),
        nonce: Some(nonce.to_string()),
        ready_timeout_ms: spec.ready_timeout_ms,
        confirm_timeout_ms: None,
    }
}

/// Refuse a prompt whose `deliver` request would exceed one protocol frame,
/// measured as sent (JSON-escaped, with the trailer at its real length).
fn check_deliver_size(spec: &DispatchSpec, report: &Path) -> Result<(), DispatchError> {
    use crate::proto::{Framed, MAX_FRAME, Op};
    // Placeholders as long as the real ids: a uuid attempt, a 32-hex nonce.
    let (attempt, nonce) = ("0".repeat(36), "0".repeat(32));
    let text = format!(
        "{}{}",
        spec.prompt,
        trailer_for(
            &spec.job_id,
            &attempt,
            &nonce,
            report,
            &spec.session_id,
            &spec.report_by
        )
    );
    let req = deliver_args(spec, &text, &nonce).into_request();
    // One kind byte precedes the JSON in a frame.
    let bytes =
        serde_json::to_vec(&Framed::new(u64::MAX, &req)).map_or(usize::MAX, |v| v.len() + 1);
    if bytes > MAX_FRAME {
        return Err(DispatchError::PromptTooLarge {
            bytes,
            limit: MAX_FRAME,
        });
    }
    Ok(())
}

/// With a registry, the session must be one of its sessions.
fn check_session(state_dir: &StateDir, session: &str) -> Result<(), DispatchError> {
    let Ok(Some(reg)) = crate::registry::load(state_dir) else {
        return Ok(());
    };
    if reg.session(session).is_some() {
        return Ok(());
    }
    let known: Vec<&str> = reg.sessions.iter().map(|s| s.session_id.as_str()).collect();
    Err(DispatchError::UnknownSession {
        session: session.to_string(),
        known: known.join(", "),
    })
}

/// The running job (other than `job_id`) last dispatched to `pane`, if any.
fn running_job_on(
    engine: &Engine,
    evidence: &EvidenceStore,
    pane: &str,
    job_id: &str,
) -> Result<Option<String>, DispatchError> {
    for r in engine.list()? {
        if r.status != crate::engine::Status::Running || r.job_id == job_id {
            continue;
        }
        let events = evidence.read(&r.job_id)?;
        if let Some(Evidence::Dispatch { pane: p, .. }) = crate::evidence::latest_dispatch(&events)
            && p == pane
        {
            return Ok(Some(r.job_id));
        }
    }
    Ok(None)
}

/// Dispatch a job to a pane. `client` talks to the running supervisor.
pub fn dispatch(
    state_dir: &StateDir,
    client: &mut Client,
    spec: &DispatchSpec,
) -> Result<Dispatched, DispatchError> {
    let report_path = spec
        .report_path
        .clone()
        .unwrap_or_else(|| state_dir.lane_report(&spec.pane));
    // Before the claim: a prompt that cannot be sent must not cost an attempt.
    check_deliver_size(spec, &report_path)?;
    let engine = Engine::open(state_dir)?;
    let evidence = EvidenceStore::new(state_dir);
    // One listing gives the pane's generation and its working directory.
    let info = client
        .call(args::PaneLs {})?
        .into_iter()
        .find(|p| p.name() == spec.pane)
        .ok_or_else(|| ClientError::Remote {
            code: crate::proto::ErrorCode::NotFound,
            message: format!("no pane named {}; see `drover pane ls`", spec.pane),
        })?;
    let (generation, cwd) = match &info {
        PaneEntry::Live(v) => (v.info.generation, v.info.cwd.clone()),
        PaneEntry::Lost(l) => (l.generation, None),
    };
    check_session(state_dir, &spec.session_id)?;
    // One dispatch to a pane at a time: the busy check, the claim and the
    // dispatch evidence that makes the next check see this job happen under
    // the pane's dispatch lock, so two dispatches racing to one pane cannot
    // both pass the check.
    let lane_dir = state_dir.lane_dir(&spec.pane);
    crate::store::create_private_dir(&lane_dir)?;
    let serial = crate::store::LockGuard::exclusive(&state_dir.lane_dispatch_lock(&spec.pane))?;
    if let Some(running) = running_job_on(&engine, &evidence, &spec.pane, &spec.job_id)? {
        return Err(DispatchError::LaneBusy {
            pane: spec.pane.clone(),
            running,
        });
    }
    let applied = engine.transition(&Request::new(
        spec.job_id.clone(),
        Action::Claim {
            session: spec.session_id.clone(),
        },
        Actor::operator(),
    ))?;
    let attempt_id = applied.record().attempt_id.clone().unwrap_or_default();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    if let Some(dir) = report_path.parent() {
        let _ = crate::store::create_private_dir(dir);
    }
    // A report left by an earlier attempt must not speak for this one.
    let _ = std::fs::remove_file(&report_path);
    let worktree = spec.worktree.clone().or(cwd);
    evidence.append(
        &spec.job_id,
        &Evidence::Dispatch {
            t_ms: crate::paths::now_ms(),
            job_id: spec.job_id.clone(),
            attempt_id: attempt_id.clone(),
            session_id: spec.session_id.clone(),
            pane: spec.pane.clone(),
            pane_generation: generation,
            nonce: nonce.clone(),
            report_path: Some(report_path.display().to_string()),
            worktree: worktree.as_ref().map(|w| w.display().to_string()),
        },
    )?;
    drop(serial);
    let text = format!(
        "{}{}",
        spec.prompt,
        trailer_for(
            &spec.job_id,
            &attempt_id,
            &nonce,
            &report_path,
            &spec.session_id,
            &spec.report_by
        )
    );
    let delivered = client.call(deliver_args(spec, &text, &nonce));
    let delivered = match delivered {
        Ok(v) => v,
        Err(e) => {
            let reason = e.to_string();
            let mut req = Request::new(
                spec.job_id.clone(),
                Action::Fail {
                    reason: Some(format!("prompt not delivered: {reason}")),
                },
                Actor::operator(),
            )
            .expect_attempt(attempt_id.clone());
            req.expected_status = Some(crate::engine::Status::Running);
            engine.transition(&req)?;
            crate::registry::events::emit_quiet(
                state_dir,
                "job.not_delivered",
                json!({"job_id": spec.job_id, "attempt_id": attempt_id, "pane": spec.pane}),
            );
            return Err(DispatchError::NotDelivered {
                job_id: spec.job_id.clone(),
                attempt_id,
                reason,
            });
        }
    };
    let confirmed_gen = delivered.generation;
    if confirmed_gen == generation {
        evidence.append(
            &spec.job_id,
            &Evidence::ExecutionAnchor {
                t_ms: crate::paths::now_ms(),
                attempt_id: attempt_id.clone(),
                session_id: spec.session_id.clone(),
                pane_generation: generation,
                detail: "delivery confirmed: the agent went working with the prompt on screen"
                    .into(),
            },
        )?;
    }
    engine.transition(
        &Request::new(
            spec.job_id.clone(),
            Action::Started {
                session: spec.session_id.clone(),
            },
            Actor::operator(),
        )
        .expect_attempt(attempt_id.clone()),
    )?;
    client.call(args::EvidenceWatch {
        job_id: spec.job_id.clone(),
        attempt_id: attempt_id.clone(),
        session_id: spec.session_id.clone(),
        pane: spec.pane.clone(),
        generation,
        autocomplete: spec.autocomplete,
    })?;
    crate::registry::events::emit_quiet(
        state_dir,
        "job.dispatched",
        json!({"job_id": spec.job_id, "attempt_id": attempt_id, "session_id": spec.session_id,
               "pane": spec.pane, "pane_generation": generation, "autocomplete": spec.autocomplete}),
    );
    Ok(Dispatched {
        job_id: spec.job_id.clone(),
        attempt_id,
        nonce,
        pane: spec.pane.clone(),
        pane_generation: generation,
        report_path: report_path.display().to_string(),
        autocomplete: spec.autocomplete,
    })
}
