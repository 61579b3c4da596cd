//! One task's state in a run, as `run.json` records it: a [`Phase`] and
//! the fields the phases set (which phase sets and reads each is mapped in
//! the module doc of `loopctl::run`).

use crate::loopctl::run::cause::TaskCause;
use crate::registry::Agent;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where a task is.
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

/// One task's state in the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
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
    /// What the run decides on for a held or parked task (`reason` says it
    /// to people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<TaskCause>,
    /// Usage limits this task's lane hit in this run.
    pub limit_parks: u32,
    /// Why its lane is not progressing (LOOP.md, "Stall classes").
    pub stall: Option<String>,
    /// When it was first dispatched, on the loop's clock (the tripwire's start).
    #[serde(default)]
    pub first_dispatch: Option<String>,
    /// Seconds since then not counted by the tripwire (paused, held, at a limit).
    #[serde(default)]
    pub excluded_s: u64,
    /// Classes of finding its failed rounds opened (the tripwire's count).
    #[serde(default)]
    pub findings: crate::loopctl::night::tripwire::Findings,
    /// The commit its candidate was captured on (a candidate that no longer
    /// applies is retried three-way against it).
    #[serde(default)]
    pub candidate_base: Option<String>,
    /// The integration head last merged into its branch (a round sent back
    /// from landing): its candidate is captured against it from then on.
    #[serde(default)]
    pub onto: Option<String>,
    /// Rebase rounds it was sent (conflicts resolved by its lane).
    #[serde(default)]
    pub rebases: u32,
    /// The round under way that began with a merge, until its candidate is
    /// captured again.
    #[serde(default)]
    pub rebase: Option<crate::loopctl::run::rounds::RebaseRound>,
    /// Its candidate before its last rebase round, shown to the reviewer
    /// beside the new one.
    #[serde(default)]
    pub prior_candidate: Option<PathBuf>,
}
