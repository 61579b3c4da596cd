//! `drover report`: the lane's own account of its turn, written by drover
//! for the agent (LOOP.md, "Briefs" and "How a lane's identity is
//! established").
//!
//! The command an agent runs ([`request`]) does no work itself: it reads no
//! state dir, runs no git and writes no file. It asks the supervisor over
//! its socket, which establishes the caller's lane from what the caller
//! cannot forge — the socket's peer credentials and the pane's process tree
//! — and then, for that lane's running job, computes the side effects from
//! the worktree recorded at dispatch ([`effects`]), checks the document
//! against the schema the policy reads ([`schema`]), and writes it to the
//! report path recorded at dispatch ([`write_for_lane`]), under the lock
//! every job transition takes.

pub mod drop_box;
pub mod effects;
pub mod request;
pub mod schema;

use crate::engine::{Engine, Status};
use crate::evidence::{Evidence, EvidenceStore, latest_dispatch};
use crate::statedir::StateDir;
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

/// The lane's env, as `drover report` reads it: claims only, which the
/// supervisor compares with what it established (never used to find
/// anything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneEnv {
    pub lane_id: Option<String>,
    pub session_id: Option<String>,
    pub state_dir: Option<PathBuf>,
    /// `DROVER_LANE_DIR`: where to find the lane's drop box, when the
    /// socket cannot be reached from here.
    pub lane_dir: Option<PathBuf>,
}

impl LaneEnv {
    /// From this process's environment.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        LaneEnv {
            lane_id: var(crate::statedir::env::LANE_ID),
            session_id: var(crate::statedir::env::SESSION_ID),
            state_dir: var(crate::statedir::env::STATE_DIR).map(PathBuf::from),
            lane_dir: var(crate::statedir::env::LANE_DIR).map(PathBuf::from),
        }
    }
}

/// Why a report was not written. Every message is one sentence an agent
/// can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error(
        "drover report takes no state dir from its caller: run it without --state-dir; the supervisor finds the lane from the process that asks"
    )]
    StateDirGiven,
    #[error(
        "report takes no lane or state dir from its caller: this process is in lane {lane} of the state dir {}, and its {what} says otherwise; nothing was written",
        state_dir.display()
    )]
    Claim {
        what: &'static str,
        lane: String,
        state_dir: PathBuf,
    },
    #[error(
        "drover report runs inside a drover lane, and this process is not in any lane's pane (no supervisor's lane holds it in its process tree): run it in the lane's own shell, or write the report file the [drover] line names"
    )]
    NotInLane,
    #[error(
        "cannot reach a drover supervisor ({why}): drover report asks the supervisor that runs the lane; nothing was written"
    )]
    Unreachable { why: String },
    #[error("{message}")]
    Remote { code: u8, message: String },
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
    #[error(
        "job {job}'s dispatch record names the {what} {}, which is not inside the state dir {} (nor the lane's own worktree): drover writes and reads there only; nothing was written",
        path.display(), state_dir.display()
    )]
    OutsideState {
        job: String,
        what: &'static str,
        path: PathBuf,
        state_dir: PathBuf,
    },
    #[error("{what} is empty; say in one line {why}")]
    Empty {
        what: &'static str,
        why: &'static str,
    },
    #[error(
        "nothing changed in the worktree {} against its base: make the change the task asks for first, or run `{cmd} report failed --reason \"…\"` if you cannot",
        worktree.display()
    )]
    NothingChanged { worktree: PathBuf, cmd: String },
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
    /// The exit code (docs/cli.md): 2 for what the caller may not choose
    /// or an empty text, 3 when the caller is in no lane or the job's state
    /// refuses a report, 5 when no supervisor can be reached, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            ReportError::StateDirGiven | ReportError::Claim { .. } | ReportError::Empty { .. } => {
                crate::exit::USAGE
            }
            ReportError::NotInLane
            | ReportError::NoJob { .. }
            | ReportError::Finished { .. }
            | ReportError::NothingChanged { .. } => crate::exit::REFUSED,
            ReportError::Unreachable { .. } => crate::exit::TRANSPORT,
            ReportError::Remote { code, .. } => *code,
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
pub fn lane_job(state_dir: &StateDir, pane: &str) -> Result<Option<LaneJob>, ReportError> {
    let bad = |m: String| ReportError::State {
        state_dir: state_dir.to_path_buf(),
        message: m,
    };
    let jobs = state_dir.jobs_dir();
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

/// The worktree of the lane's record, if the lane has one.
fn lane_worktree(state_dir: &StateDir, lane: &str) -> Option<PathBuf> {
    let doc = crate::registry::lanes::read(state_dir).ok()?;
    doc.lanes
        .into_iter()
        .find(|l| l.lane_id == lane)
        .map(|l| l.worktree)
}

/// The base the lane's worktree was made from (its lane record), if any.
fn lane_base(state_dir: &StateDir, lane: &str) -> Option<String> {
    let doc = crate::registry::lanes::read(state_dir).ok()?;
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

/// Where a lane's files may be: inside the state dir, or the lane's own
/// worktree as its lane record or its pane (the operator's `pane new
/// --cwd`) names it. Anything else in a record is refused.
#[derive(Debug, Clone, Default)]
pub struct Bounds {
    /// The pane's working directory, as the supervisor started it.
    pub pane_cwd: Option<PathBuf>,
}

/// `path` made absolute without following a last component that may not
/// exist yet: its parent canonicalized, its name kept.
fn resolved(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let parent = path.parent()?.canonicalize().ok()?;
    Some(parent.join(name))
}

fn inside(path: &Path, root: &Path) -> bool {
    root.canonicalize().is_ok_and(|r| path.starts_with(r))
}

/// Write `lane`'s report for what the agent `said`, in the supervisor of
/// `state_dir` (which established that the caller is in `lane`): the job
/// running on the lane, the report path and worktree its dispatch recorded
/// (each checked to lie where drover keeps them), the side effects from
/// that worktree, and the write done under the job lock only while the job
/// is still running.
pub fn write_for_lane(
    state_dir: &StateDir,
    lane: &str,
    bounds: &Bounds,
    said: &Said,
) -> Result<Written, ReportError> {
    let job = lane_job(state_dir, lane)?.ok_or_else(|| ReportError::NoJob { lane: lane.into() })?;
    if job.status != Status::Running {
        return Err(ReportError::Finished {
            job: job.job_id,
            status: job.status.as_str().to_string(),
        });
    }
    let outside = |what: &'static str, path: &Path| ReportError::OutsideState {
        job: job.job_id.clone(),
        what,
        path: path.to_path_buf(),
        state_dir: state_dir.to_path_buf(),
    };
    let recorded = job
        .report_path
        .clone()
        .ok_or_else(|| ReportError::NoReportPath {
            job: job.job_id.clone(),
        })?;
    // The report goes where drover keeps the lane's files, and never
    // through a link: a record naming anything else is refused.
    let path = resolved(&recorded)
        .filter(|p| inside(p, state_dir))
        .filter(|p| {
            p.symlink_metadata()
                .map_or(true, |m| m.file_type().is_file())
        })
        .ok_or_else(|| outside("report file", &recorded))?;
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
    let lane_wt = lane_worktree(state_dir, lane);
    let worktree = match &job.worktree {
        Some(wt) => {
            let c = wt.canonicalize().map_err(|_| outside("worktree", wt))?;
            let own = |o: &Option<PathBuf>| {
                o.as_ref()
                    .and_then(|p| p.canonicalize().ok())
                    .is_some_and(|p| p == c)
            };
            if !(inside(&c, state_dir) || own(&lane_wt) || own(&bounds.pane_cwd)) {
                return Err(outside("worktree", wt));
            }
            Some(c)
        }
        None => None,
    };
    let effects = match &worktree {
        Some(wt) => effects::changes(wt, lane_base(state_dir, lane).as_deref())?,
        None => Vec::new(),
    };
    if matches!(said, Said::Done { .. })
        && effects.is_empty()
        && let Some(wt) = worktree
    {
        return Err(ReportError::NothingChanged {
            worktree: wt,
            cmd: own_command_word(),
        });
    }
    // The dispatch's session is the one attribution checks.
    let mut doc = json!({
        "attempt_id": job.attempt_id,
        "session_id": job.session_id,
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
    let mut bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    bytes.push(b'\n');
    let bad = |m: String| ReportError::State {
        state_dir: state_dir.to_path_buf(),
        message: m,
    };
    let engine = Engine::open(state_dir).map_err(|e| bad(e.to_string()))?;
    // The running check and the write under the lock every transition
    // takes: once the job has completed, its report cannot change.
    let replaced = engine
        .with_record_locked(&job.job_id, |rec| {
            match rec {
                Some(r)
                    if r.status == Status::Running
                        && r.attempt_id.as_deref() == Some(job.attempt_id.as_str()) => {}
                Some(r) => {
                    return Err(ReportError::Finished {
                        job: job.job_id.clone(),
                        status: r.status.as_str().to_string(),
                    });
                }
                None => {
                    return Err(ReportError::NoJob { lane: lane.into() });
                }
            }
            let replaced = path.exists();
            crate::store::write_bytes_atomic(&path, &bytes).map_err(|source| {
                ReportError::Write {
                    path: path.clone(),
                    source,
                }
            })?;
            Ok(replaced)
        })
        .map_err(|e| bad(e.to_string()))??;
    Ok(Written {
        path,
        job_id: job.job_id,
        doc,
        replaced,
    })
}

/// How a lane spells the drover program `exe` in a command: always its
/// absolute path (quoted for a shell when it needs it), never the bare
/// word `drover`. An agent's shell is not the loop's: Codex runs its
/// commands in a login shell whose profile resets `PATH`, so a word `PATH`
/// finds for the loop may be found by nothing there.
pub fn command_word(exe: &Path) -> String {
    let abs = if exe.is_absolute() {
        exe.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(exe))
            .unwrap_or_else(|_| exe.to_path_buf())
    };
    crate::shell::quote(&abs.display().to_string())
}

/// [`command_word`] of the running binary (`drover` only when the running
/// binary cannot be found, which Linux always can). A binary replaced on
/// disk while it runs (an upgrade mid-run) reads as `<path> (deleted)`: the
/// path is where the new one is, and that is what a lane runs.
pub fn own_command_word() -> String {
    std::env::current_exe()
        .map(|e| {
            let s = e.display().to_string();
            match s.strip_suffix(" (deleted)") {
                Some(p) => command_word(Path::new(p)),
                None => command_word(&e),
            }
        })
        .unwrap_or_else(|_| "drover".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards issue 35: the brief said `drover` when drover was on the
    /// loop's PATH, and Codex's login shell (whose profile resets PATH)
    /// found no `drover`. The word is the absolute path, always.
    #[test]
    fn the_command_word_is_always_the_absolute_path() {
        let me = std::env::current_exe().unwrap();
        let word = command_word(&me);
        assert_eq!(word, me.display().to_string());
        assert!(word.starts_with('/'), "{word}");
        assert_eq!(own_command_word(), word);
        assert_eq!(
            command_word(Path::new("/opt/my tools/drover")),
            "'/opt/my tools/drover'"
        );
        assert_eq!(
            command_word(Path::new("/opt/it's/drover")),
            r"'/opt/it'\''s/drover'"
        );
        let rel = command_word(Path::new("bin/drover"));
        assert!(
            rel.starts_with('/') && rel.ends_with("/bin/drover"),
            "{rel}"
        );
    }
}
