//! `drover report`: the lane's own account of its turn, written by drover
//! for the agent (LOOP.md, "Briefs").
//!
//! Run inside a lane, it finds everything from the lane's `DROVER_*` env
//! and the state dir — the running job dispatched to this lane's pane, its
//! attempt, session, report path and worktree — computes the side effects
//! from the worktree against the merge-base ([`effects`]), checks the
//! document against the schema the policy reads ([`schema`]), and writes
//! it atomically. It only reads the state dir and writes the one report
//! file (in the lane dir, outside the worktree), so it runs inside Codex's
//! sandbox with the lane dir as a writable root, and Claude Code can be
//! allowed exactly this command.

pub mod effects;
pub mod schema;

use crate::engine::{Engine, Status};
use crate::evidence::{Evidence, EvidenceStore, latest_dispatch};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The longest summary or reason kept (one line for the close-out).
pub const MAX_TEXT_CHARS: usize = 500;

/// What the agent says of its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    Done { summary: Option<String> },
    Failed { reason: String },
    Blocked { reason: String },
}

impl Said {
    /// `done`, `failed` or `blocked`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Said::Done { .. } => "done",
            Said::Failed { .. } => "failed",
            Said::Blocked { .. } => "blocked",
        }
    }
}

/// The lane's env, as `drover report` reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneEnv {
    pub lane_id: Option<String>,
    pub session_id: Option<String>,
    pub state_dir: Option<PathBuf>,
}

impl LaneEnv {
    /// From this process's environment.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        LaneEnv {
            lane_id: var("DROVER_LANE_ID"),
            session_id: var("DROVER_SESSION_ID"),
            state_dir: var("DROVER_STATE_DIR").map(PathBuf::from),
        }
    }
}

/// Why a report was not written. Every message is one sentence an agent
/// can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error(
        "drover report runs inside a drover lane, and {missing} is not set here: run it in the lane's own shell (the pane drover started), or write the report file the [drover] line names"
    )]
    OutsideLane { missing: &'static str },
    #[error(
        "lane {lane} has no running job: nothing was dispatched to it yet, or its job already ended; there is nothing to report"
    )]
    NoJob { lane: String },
    #[error(
        "job {job} is already {status}: a finished job's report cannot change; nothing was written"
    )]
    Finished { job: String, status: String },
    #[error("job {job} names no report file in its dispatch record; nothing was written")]
    NoReportPath { job: String },
    #[error("{what} is empty; say in one line {why}")]
    Empty {
        what: &'static str,
        why: &'static str,
    },
    #[error(
        "nothing changed in the worktree {} against its base: make the change the task asks for first, or run `drover report failed --reason \"…\"` if you cannot",
        worktree.display()
    )]
    NothingChanged { worktree: PathBuf },
    #[error("cannot compute the side effects in {}: {message}", worktree.display())]
    Git { worktree: PathBuf, message: String },
    #[error(
        "cannot write the report {}: {source}; the lane dir must be writable (nothing was written)",
        path.display()
    )]
    Write {
        path: PathBuf,
        #[source]
        source: crate::store::StoreError,
    },
    #[error("cannot read the state dir {}: {message}", state_dir.display())]
    State { state_dir: PathBuf, message: String },
}

impl ReportError {
    /// The exit code (docs/cli.md): 2 outside a lane or for an empty text,
    /// 3 when the job's state refuses a report, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            ReportError::OutsideLane { .. } | ReportError::Empty { .. } => crate::exit::USAGE,
            ReportError::NoJob { .. }
            | ReportError::Finished { .. }
            | ReportError::NothingChanged { .. } => crate::exit::REFUSED,
            _ => crate::exit::ERROR,
        }
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub path: PathBuf,
    pub job_id: String,
    pub doc: Value,
    /// An earlier report of the same attempt was replaced.
    pub replaced: bool,
}

/// The job in flight on a lane, as its dispatch recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneJob {
    pub job_id: String,
    pub attempt_id: String,
    pub session_id: String,
    pub report_path: Option<PathBuf>,
    pub worktree: Option<PathBuf>,
    pub status: Status,
}

/// The job last dispatched to `pane` (running first, else the newest
/// dispatch of any status). Only reads the state dir.
pub fn lane_job(state_dir: &Path, pane: &str) -> Result<Option<LaneJob>, ReportError> {
    let bad = |m: String| ReportError::State {
        state_dir: state_dir.to_path_buf(),
        message: m,
    };
    let jobs = state_dir.join("jobs");
    if !jobs.is_dir() {
        return Ok(None);
    }
    let engine = Engine::open(state_dir).map_err(|e| bad(e.to_string()))?;
    let evidence = EvidenceStore::new(state_dir);
    let mut best: Option<(bool, u64, LaneJob)> = None;
    for r in engine.list().map_err(|e| bad(e.to_string()))? {
        let events = evidence.read(&r.job_id).map_err(|e| bad(e.to_string()))?;
        let Some(Evidence::Dispatch {
            t_ms,
            attempt_id,
            session_id,
            pane: p,
            report_path,
            worktree,
            ..
        }) = latest_dispatch(&events)
        else {
            continue;
        };
        if p != pane {
            continue;
        }
        let running = r.status == Status::Running;
        let key = (running, *t_ms);
        if best.as_ref().is_some_and(|(a, b, _)| (*a, *b) >= key) {
            continue;
        }
        best = Some((
            running,
            *t_ms,
            LaneJob {
                job_id: r.job_id.clone(),
                attempt_id: attempt_id.clone(),
                session_id: session_id.clone(),
                report_path: report_path.as_ref().map(PathBuf::from),
                worktree: worktree.as_ref().map(PathBuf::from),
                status: r.status,
            },
        ));
    }
    Ok(best.map(|(_, _, j)| j))
}

/// The base the lane's worktree was made from (its lane record), if any.
fn lane_base(state_dir: &Path, lane: &str) -> Option<String> {
    let doc = crate::lane::load(state_dir).ok()?;
    doc.lanes
        .into_iter()
        .find(|l| l.lane_id == lane)
        .map(|l| l.base_sha)
        .filter(|b| !b.is_empty())
}

fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.chars().take(MAX_TEXT_CHARS).collect()
}

/// Write the lane's report for what the agent `said`.
pub fn submit(env: &LaneEnv, said: &Said) -> Result<Written, ReportError> {
    let lane = env.lane_id.clone().ok_or(ReportError::OutsideLane {
        missing: "DROVER_LANE_ID",
    })?;
    let state_dir = env.state_dir.clone().ok_or(ReportError::OutsideLane {
        missing: "DROVER_STATE_DIR",
    })?;
    let job =
        lane_job(&state_dir, &lane)?.ok_or_else(|| ReportError::NoJob { lane: lane.clone() })?;
    if job.status != Status::Running {
        return Err(ReportError::Finished {
            job: job.job_id,
            status: job.status.as_str().to_string(),
        });
    }
    let path = job
        .report_path
        .clone()
        .ok_or_else(|| ReportError::NoReportPath {
            job: job.job_id.clone(),
        })?;
    let text = match said {
        Said::Done { summary } => summary.as_deref().map(one_line),
        Said::Failed { reason } | Said::Blocked { reason } => {
            let r = one_line(reason);
            if r.is_empty() {
                return Err(ReportError::Empty {
                    what: "--reason",
                    why: "why the task cannot be finished",
                });
            }
            Some(r)
        }
    };
    let worktree = job.worktree.clone();
    let effects = match &worktree {
        Some(wt) => effects::changes(wt, lane_base(&state_dir, &lane).as_deref())?,
        None => Vec::new(),
    };
    if matches!(said, Said::Done { .. })
        && effects.is_empty()
        && let Some(wt) = worktree
    {
        return Err(ReportError::NothingChanged { worktree: wt });
    }
    // The dispatch's session is the one attribution checks.
    let session = job.session_id.clone();
    let mut doc = json!({
        "attempt_id": job.attempt_id,
        "session_id": session,
        "job_id": job.job_id,
        "state": schema::FINALIZED,
        "outcome": said.outcome(),
        "side_effects": effects.iter().map(|c| json!({"kind": "file", "path": c.path, "change": c.change})).collect::<Vec<_>>(),
        "at": crate::paths::now_rfc3339(),
    });
    if let Some(t) = text {
        let key = if matches!(said, Said::Done { .. }) {
            "summary"
        } else {
            "reason"
        };
        doc[key] = Value::String(t);
    }
    let replaced = path.exists();
    let mut bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    bytes.push(b'\n');
    crate::store::write_bytes_atomic(&path, &bytes).map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(Written {
        path,
        job_id: job.job_id,
        doc,
        replaced,
    })
}

/// How a lane spells the drover program `exe` in a command: `drover` when
/// that is what `PATH` finds, else its absolute path (quoted for a shell
/// when it needs it), so the command the brief names runs as written.
pub fn command_word(exe: &Path) -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    if crate::pane::find_executable("drover", &path, None).is_some_and(|p| same(&p, exe)) {
        return "drover".into();
    }
    let s = exe.display().to_string();
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
