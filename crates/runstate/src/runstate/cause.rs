//! Why a task is held or parked, as the run decides on it: the reason's
//! text beside it is for people and is never matched.

use crate::runstate::task::Phase;
use serde::{Deserialize, Serialize};

/// Why a task is kept out of Ready, as the run decides on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoldCause {
    /// It is Done.
    Done,
    /// The charter excludes it.
    Excluded,
    /// It is labelled needs-owner.
    NeedsOwner,
    /// A dependency is not Done.
    Dependencies,
    /// It names no modified_files for its lease to claim.
    NoFiles,
}

/// A held or parked task's cause, where the run acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskCause {
    /// Held: the board keeps it out of Ready.
    Held(HoldCause),
    /// Parked: its write lease could not be claimed (an earlier run holds it).
    LeaseRefused,
    /// Parked at a usage limit; the run resumes it when the limit resets.
    LimitWait,
}

impl TaskCause {
    /// The cause of a task recorded before causes were (its reason and
    /// resume text are all such a file has): read once, when the run is
    /// loaded, so that nothing after decides on text.
    pub fn of_legacy(phase: Phase, reason: &str, resume: &str) -> Option<Self> {
        match phase {
            Phase::Held if reason.contains("excluded by the charter") => {
                Some(TaskCause::Held(HoldCause::Excluded))
            }
            Phase::Held if reason.contains("needs-owner") => {
                Some(TaskCause::Held(HoldCause::NeedsOwner))
            }
            Phase::Held if reason.contains("names no modified_files") => {
                Some(TaskCause::Held(HoldCause::NoFiles))
            }
            Phase::Parked if reason.contains("lease claim") && reason.contains("refused") => {
                Some(TaskCause::LeaseRefused)
            }
            Phase::Parked if resume.starts_with("resumes at ") => Some(TaskCause::LimitWait),
            _ => None,
        }
    }
}

impl crate::runstate::status::RunStatus {
    /// Give the tasks of a run written before causes were recorded their
    /// cause (see [`TaskCause::of_legacy`]); a task that has one keeps it.
    pub fn fill_legacy_causes(&mut self) {
        for t in self.tasks.iter_mut().filter(|t| t.cause().is_none()) {
            let kind = t.kind();
            let note = t.note_mut();
            note.cause = TaskCause::of_legacy(
                kind,
                note.reason.as_deref().unwrap_or(""),
                note.resume.as_deref().unwrap_or(""),
            );
        }
    }
}
