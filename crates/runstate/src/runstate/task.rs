//! One task's state in a run: what it keeps across phases beside a
//! [`TaskPhase`] whose variants carry what each phase has. `run.json`
//! holds it flat ([`TaskRecord`], the form it has always had); a task is
//! converted at the edge, and a record no phase can hold is refused with a
//! clear error rather than loaded half right.

use crate::proto::usage::Usage;
use crate::registry::Agent;
use crate::runstate::cause::TaskCause;
use crate::runstate::records::{Findings, RebaseRound};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where a task is (the tag of a [`TaskPhase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Kept out of Ready by the board (dependency, label, exclusion).
    Held,
    /// Ready, not started.
    Ready,
    Implementing,
    Reviewing,
    /// Accepted, queued under Landing.
    Landing,
    Landed,
    Parked,
}

impl Phase {
    /// Every phase, in the order a task goes through them.
    pub const ALL: [Phase; 7] = [
        Phase::Held,
        Phase::Ready,
        Phase::Implementing,
        Phase::Reviewing,
        Phase::Landing,
        Phase::Landed,
        Phase::Parked,
    ];

    /// The word in `run.json` and on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Held => "held",
            Phase::Ready => "ready",
            Phase::Implementing => "implementing",
            Phase::Reviewing => "reviewing",
            Phase::Landing => "landing",
            Phase::Landed => "landed",
            Phase::Parked => "parked",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a task is not moving, for people (`reason`, `resume`) and for the
/// run (`cause`). A phase left keeps its note until a step clears it (a
/// Landing task stopped before its turn says so; on disk it stays).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Note {
    pub reason: Option<String>,
    pub resume: Option<String>,
    pub cause: Option<TaskCause>,
}

/// What a started task has: its lane and job, its worktree and branch,
/// its rounds and its candidate. Set when implementing starts and kept
/// through review, landing and a park.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Work {
    pub reviewer: Option<Agent>,
    pub round: u32,
    pub lane: Option<String>,
    pub job: Option<String>,
    pub worktree: Option<PathBuf>,
    pub branch: Option<String>,
    pub candidate_sha256: Option<String>,
    /// The commit its candidate was captured on (a candidate that no longer
    /// applies is retried three-way against it).
    pub candidate_base: Option<String>,
    /// The integration head last merged into its branch (a round sent back
    /// from landing): its candidate is captured against it from then on.
    pub onto: Option<String>,
    /// Rebase rounds it was sent (conflicts resolved by its lane).
    pub rebases: u32,
    /// The round under way that began with a merge, until its candidate is
    /// captured again.
    pub rebase: Option<RebaseRound>,
    /// Its candidate before its last rebase round, shown to the reviewer
    /// beside the new one.
    pub prior_candidate: Option<PathBuf>,
}

impl Work {
    /// Whether nothing was started (a Held or Ready task has no work).
    fn is_empty(&self) -> bool {
        *self == Work::default()
    }
}

/// A task's phase and what it has in it.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskPhase {
    /// Kept out of Ready by the board: why, in its note.
    Held { note: Note },
    /// Ready, not started (a note left from when it was held).
    Ready { note: Note },
    /// Its implementer lane works a round.
    Implementing { work: Work, note: Note },
    /// Its reviewer lane reviews the candidate.
    Reviewing { work: Work, note: Note },
    /// Accepted, queued under Landing.
    Landing { work: Work, note: Note },
    /// On the integration branch as `sha`.
    Landed { sha: String, work: Work, note: Note },
    /// Parked: a task parked before it started has no work yet.
    Parked { work: Work, note: Note },
}

impl TaskPhase {
    /// Its tag.
    pub fn kind(&self) -> Phase {
        match self {
            TaskPhase::Held { .. } => Phase::Held,
            TaskPhase::Ready { .. } => Phase::Ready,
            TaskPhase::Implementing { .. } => Phase::Implementing,
            TaskPhase::Reviewing { .. } => Phase::Reviewing,
            TaskPhase::Landing { .. } => Phase::Landing,
            TaskPhase::Landed { .. } => Phase::Landed,
            TaskPhase::Parked { .. } => Phase::Parked,
        }
    }

    /// Its note.
    pub fn note(&self) -> &Note {
        match self {
            TaskPhase::Held { note } | TaskPhase::Ready { note } => note,
            TaskPhase::Implementing { note, .. }
            | TaskPhase::Reviewing { note, .. }
            | TaskPhase::Landing { note, .. }
            | TaskPhase::Landed { note, .. }
            | TaskPhase::Parked { note, .. } => note,
        }
    }

    /// Its note, to change.
    pub fn note_mut(&mut self) -> &mut Note {
        match self {
            TaskPhase::Held { note } | TaskPhase::Ready { note } => note,
            TaskPhase::Implementing { note, .. }
            | TaskPhase::Reviewing { note, .. }
            | TaskPhase::Landing { note, .. }
            | TaskPhase::Landed { note, .. }
            | TaskPhase::Parked { note, .. } => note,
        }
    }

    /// Its work, unless it is Held or Ready.
    pub fn work(&self) -> Option<&Work> {
        match self {
            TaskPhase::Held { .. } | TaskPhase::Ready { .. } => None,
            TaskPhase::Implementing { work, .. }
            | TaskPhase::Reviewing { work, .. }
            | TaskPhase::Landing { work, .. }
            | TaskPhase::Landed { work, .. }
            | TaskPhase::Parked { work, .. } => Some(work),
        }
    }

    /// Its work to change, unless it is Held or Ready.
    pub fn work_mut(&mut self) -> Option<&mut Work> {
        match self {
            TaskPhase::Held { .. } | TaskPhase::Ready { .. } => None,
            TaskPhase::Implementing { work, .. }
            | TaskPhase::Reviewing { work, .. }
            | TaskPhase::Landing { work, .. }
            | TaskPhase::Landed { work, .. }
            | TaskPhase::Parked { work, .. } => Some(work),
        }
    }

    /// The commit it landed as (Landed only).
    pub fn sha(&self) -> Option<&str> {
        match self {
            TaskPhase::Landed { sha, .. } => Some(sha),
            _ => None,
        }
    }

    /// Its lane, if it has one.
    pub fn lane(&self) -> Option<&str> {
        self.work().and_then(|w| w.lane.as_deref())
    }

    /// Its job, if one is dispatched.
    pub fn job(&self) -> Option<&str> {
        self.work().and_then(|w| w.job.as_deref())
    }

    /// Its reviewer, if it was started.
    pub fn reviewer(&self) -> Option<Agent> {
        self.work().and_then(|w| w.reviewer)
    }

    /// Its round (0 before it starts).
    pub fn round(&self) -> u32 {
        self.work().map_or(0, |w| w.round)
    }

    fn take(&mut self) -> (Work, Note) {
        let held = TaskPhase::Held {
            note: Note::default(),
        };
        match std::mem::replace(self, held) {
            TaskPhase::Held { note } | TaskPhase::Ready { note } => (Work::default(), note),
            TaskPhase::Implementing { work, note }
            | TaskPhase::Reviewing { work, note }
            | TaskPhase::Landing { work, note }
            | TaskPhase::Landed { work, note, .. }
            | TaskPhase::Parked { work, note } => (work, note),
        }
    }

    /// Ready (from Held), keeping its note.
    pub fn enter_ready(&mut self) {
        let (_, note) = self.take();
        *self = TaskPhase::Ready { note };
    }

    /// Implementing, keeping its work and note.
    pub fn enter_implementing(&mut self) {
        let (work, note) = self.take();
        *self = TaskPhase::Implementing { work, note };
    }

    /// Reviewing, keeping its work and note.
    pub fn enter_reviewing(&mut self) {
        let (work, note) = self.take();
        *self = TaskPhase::Reviewing { work, note };
    }

    /// Landing (accepted, queued), keeping its work and note.
    pub fn enter_landing(&mut self) {
        let (work, note) = self.take();
        *self = TaskPhase::Landing { work, note };
    }

    /// Parked, keeping its work and note.
    pub fn enter_parked(&mut self) {
        let (work, note) = self.take();
        *self = TaskPhase::Parked { work, note };
    }

    /// Landed as `sha`, keeping its work and note.
    pub fn land(&mut self, sha: &str) {
        let (work, note) = self.take();
        *self = TaskPhase::Landed {
            sha: sha.to_string(),
            work,
            note,
        };
    }
}

/// One task's state in the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TaskRecord", into = "TaskRecord")]
pub struct TaskState {
    pub id: String,
    pub title: String,
    pub phase: TaskPhase,
    pub tier: Option<String>,
    pub agent: Option<Agent>,
    /// Usage limits this task's lane hit in this run.
    pub limit_parks: u32,
    /// Why its lane is not progressing (LOOP.md, "Stall classes").
    pub stall: Option<String>,
    /// When it was first dispatched, on the loop's clock (the tripwire's start).
    pub first_dispatch: Option<DateTime<Utc>>,
    /// Seconds since then not counted by the tripwire (paused, held, at a limit).
    pub excluded_s: u64,
    /// Classes of finding its failed rounds opened (the tripwire's count).
    pub findings: Findings,
    /// What its lanes' agents used over its jobs, every round and review
    /// (absent: none of them reported usage).
    pub usage: Option<Usage>,
}

impl TaskState {
    /// A task not started, Held with `note` or Ready.
    pub fn new(id: &str, title: &str, held: Option<Note>) -> TaskState {
        TaskState {
            id: id.to_string(),
            title: title.to_string(),
            phase: match held {
                Some(note) => TaskPhase::Held { note },
                None => TaskPhase::Ready {
                    note: Note::default(),
                },
            },
            tier: None,
            agent: None,
            limit_parks: 0,
            stall: None,
            first_dispatch: None,
            excluded_s: 0,
            findings: Findings::default(),
            usage: None,
        }
    }

    /// Its phase's tag.
    pub fn kind(&self) -> Phase {
        self.phase.kind()
    }

    /// Its phase's note.
    pub fn note(&self) -> &Note {
        self.phase.note()
    }

    /// Its phase's note, to change.
    pub fn note_mut(&mut self) -> &mut Note {
        self.phase.note_mut()
    }

    /// Its work, unless it is Held or Ready.
    pub fn work(&self) -> Option<&Work> {
        self.phase.work()
    }

    /// Its work to change, unless it is Held or Ready.
    pub fn work_mut(&mut self) -> Option<&mut Work> {
        self.phase.work_mut()
    }

    /// The commit it landed as (Landed only).
    pub fn sha(&self) -> Option<&str> {
        self.phase.sha()
    }

    /// Its cause, if its note has one.
    pub fn cause(&self) -> Option<TaskCause> {
        self.phase.note().cause
    }

    /// Its lane, if it has one.
    pub fn lane(&self) -> Option<&str> {
        self.phase.lane()
    }

    /// Its job, if one is dispatched.
    pub fn job(&self) -> Option<&str> {
        self.phase.job()
    }

    /// Its reviewer, if it was started.
    pub fn reviewer(&self) -> Option<Agent> {
        self.phase.reviewer()
    }

    /// Its round (0 before it starts).
    pub fn round(&self) -> u32 {
        self.phase.round()
    }

    /// Its worktree, if it was started.
    pub fn worktree(&self) -> Option<&PathBuf> {
        self.work().and_then(|w| w.worktree.as_ref())
    }

    /// Its branch, if it was started.
    pub fn branch(&self) -> Option<&str> {
        self.work().and_then(|w| w.branch.as_deref())
    }

    /// The rebase round under way, if one is.
    pub fn rebase(&self) -> Option<&RebaseRound> {
        self.work().and_then(|w| w.rebase.as_ref())
    }
}

/// A task as `run.json` has it: flat, each optional field mattering only
/// in some phases. Written and read only at the edge ([`TaskState`]'s
/// serde form); its field order is the file's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub title: String,
    pub phase: Phase,
    pub tier: Option<String>,
    pub agent: Option<Agent>,
    pub reviewer: Option<Agent>,
    pub round: u32,
    pub lane: Option<String>,
    pub job: Option<String>,
    pub worktree: Option<PathBuf>,
    pub branch: Option<String>,
    pub candidate_sha256: Option<String>,
    pub sha: Option<String>,
    pub reason: Option<String>,
    pub resume: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<TaskCause>,
    pub limit_parks: u32,
    pub stall: Option<String>,
    #[serde(default)]
    pub first_dispatch: Option<String>,
    #[serde(default)]
    pub excluded_s: u64,
    #[serde(default)]
    pub findings: Findings,
    #[serde(default)]
    pub candidate_base: Option<String>,
    #[serde(default)]
    pub onto: Option<String>,
    #[serde(default)]
    pub rebases: u32,
    #[serde(default)]
    pub rebase: Option<RebaseRound>,
    #[serde(default)]
    pub prior_candidate: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A task record no phase can hold.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TaskRecordError {
    #[error("task {id}: first_dispatch {value:?} is not an RFC 3339 time")]
    FirstDispatch { id: String, value: String },
    #[error("task {id}: {phase:?} with a lane, job, worktree, branch or candidate it cannot have")]
    WorkBeforeStart { id: String, phase: Phase },
    #[error("task {id}: landed with no sha")]
    LandedWithoutSha { id: String },
    #[error("task {id}: a sha, but it is {phase:?}, not landed")]
    ShaNotLanded { id: String, phase: Phase },
}

impl TryFrom<TaskRecord> for TaskState {
    type Error = TaskRecordError;

    fn try_from(r: TaskRecord) -> Result<TaskState, TaskRecordError> {
        let first_dispatch =
            match r.first_dispatch {
                None => None,
                Some(value) => Some(crate::time::parse(&value).map_err(|_| {
                    TaskRecordError::FirstDispatch {
                        id: r.id.clone(),
                        value,
                    }
                })?),
            };
        let work = Work {
            reviewer: r.reviewer,
            round: r.round,
            lane: r.lane,
            job: r.job,
            worktree: r.worktree,
            branch: r.branch,
            candidate_sha256: r.candidate_sha256,
            candidate_base: r.candidate_base,
            onto: r.onto,
            rebases: r.rebases,
            rebase: r.rebase,
            prior_candidate: r.prior_candidate,
        };
        let note = Note {
            reason: r.reason,
            resume: r.resume,
            cause: r.cause,
        };
        let phase = match (r.phase, r.sha) {
            (Phase::Landed, Some(sha)) => TaskPhase::Landed { sha, work, note },
            (Phase::Landed, None) => return Err(TaskRecordError::LandedWithoutSha { id: r.id }),
            (phase, Some(_)) => return Err(TaskRecordError::ShaNotLanded { id: r.id, phase }),
            (phase @ (Phase::Held | Phase::Ready), None) if !work.is_empty() => {
                return Err(TaskRecordError::WorkBeforeStart { id: r.id, phase });
            }
            (Phase::Held, None) => TaskPhase::Held { note },
            (Phase::Ready, None) => TaskPhase::Ready { note },
            (Phase::Implementing, None) => TaskPhase::Implementing { work, note },
            (Phase::Reviewing, None) => TaskPhase::Reviewing { work, note },
            (Phase::Landing, None) => TaskPhase::Landing { work, note },
            (Phase::Parked, None) => TaskPhase::Parked { work, note },
        };
        Ok(TaskState {
            id: r.id,
            title: r.title,
            phase,
            tier: r.tier,
            agent: r.agent,
            limit_parks: r.limit_parks,
            stall: r.stall,
            first_dispatch,
            excluded_s: r.excluded_s,
            findings: r.findings,
            usage: r.usage,
        })
    }
}

impl From<TaskState> for TaskRecord {
    fn from(t: TaskState) -> TaskRecord {
        let kind = t.phase.kind();
        let sha = t.phase.sha().map(str::to_string);
        let mut phase = t.phase;
        let (work, note) = phase.take();
        TaskRecord {
            id: t.id,
            title: t.title,
            phase: kind,
            tier: t.tier,
            agent: t.agent,
            reviewer: work.reviewer,
            round: work.round,
            lane: work.lane,
            job: work.job,
            worktree: work.worktree,
            branch: work.branch,
            candidate_sha256: work.candidate_sha256,
            sha,
            reason: note.reason,
            resume: note.resume,
            cause: note.cause,
            limit_parks: t.limit_parks,
            stall: t.stall,
            first_dispatch: t.first_dispatch.map(crate::time::format_secs),
            excluded_s: t.excluded_s,
            findings: t.findings,
            candidate_base: work.candidate_base,
            onto: work.onto,
            rebases: work.rebases,
            rebase: work.rebase,
            prior_candidate: work.prior_candidate,
            usage: t.usage,
        }
    }
}
