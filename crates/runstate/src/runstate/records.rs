//! The records `run.json` holds beside its tasks' phases: what a task's
//! failed rounds found, the rebase round under way and its merge, the lane
//! roles and the efforts lane autotune set, how the lanes were simulated.

use crate::registry::Agent;
use std::collections::BTreeSet;

/// What a task's failed rounds have found so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Findings {
    /// Classes of finding seen (`gate`, `review`, or the review's `class`).
    #[serde(default)]
    pub classes: BTreeSet<String>,
    /// Failed rounds that opened a class not seen before.
    #[serde(default)]
    pub new_class_rounds: u32,
}

/// The class of a rebase round: a conflict with work that landed since
/// the task's base, not a finding about the task's own work, so it never
/// opens a class (it still counts for `--repair-rounds`).
pub const REBASE_CLASS: &str = "rebase";

impl Findings {
    /// Record one failed round of class `class`; true when it was new. A
    /// rebase round records nothing: other tasks landing is not the task's
    /// work failing to converge.
    pub fn failed(&mut self, class: &str) -> bool {
        if class == REBASE_CLASS {
            return false;
        }
        let new = self.classes.insert(class.to_string());
        if new {
            self.new_class_rounds += 1;
        }
        new
    }
}

/// A round that began with the integration head merged into the task's
/// branch (kept in `run.json` until its candidate is captured again).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RebaseRound {
    pub merged: Merged,
    /// Why its candidate was dropped at landing.
    pub why: String,
    /// What the round's prompt said after the brief, and its trailer's tag
    /// (`rebase`, `repair`): a resume re-runs the round with them.
    #[serde(default)]
    pub addendum: String,
    #[serde(default)]
    pub tag: String,
}

/// What merging the integration head into a task's worktree left.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Merged {
    /// The integration head merged in: the capture's base from now on.
    pub onto: String,
    /// The task's own commit the merge was made on (its side of a conflict).
    pub ours: String,
    /// Files left with conflict markers (empty: the merge was clean and committed).
    pub conflicts: Vec<String>,
    /// `<short sha> <subject>` of the integration commits since the task's
    /// base that changed the conflicted files.
    pub causes: Vec<String>,
    /// The worktree's tree right after the merge (markers included).
    pub merged_tree: String,
}

/// The two kinds of loop lane.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Writes, in its own worktree, under the task's write lease.
    Implementer,
    /// Read-only: reviews a candidate and reports through a heartbeat.
    Reviewer,
}

impl Role {
    /// The registry session the lane belongs to.
    pub fn session_id(self) -> &'static str {
        match self {
            Role::Implementer => "implementer",
            Role::Reviewer => "reviewer",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Implementer => "implementer",
            Role::Reviewer => "reviewer",
        }
    }
}

/// One (role, agent) the tuner changed, as `run.json` keeps it (`autotune`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Saved {
    pub role: Role,
    pub agent: Agent,
    pub effort: String,
    /// Iterations of cooldown left.
    #[serde(default)]
    pub cooldown: u32,
}

/// How a run's lanes were simulated: `drover sim-agent` with these scripts
/// (none: the obedient agent for the role).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SimLanesRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementer: Option<std::path::PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<std::path::PathBuf>,
}
