//! `run.json`: the run as the loop records it and `loop status` shows it,
//! and the loop process working it (a run whose process is gone is
//! `interrupted`, whatever its file says).

use crate::runstate::cause::TaskCause;
use crate::runstate::run_state::RunState;
use crate::runstate::task::{Phase, TaskState};
use crate::statedir::StateDir;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The run as `loop status` shows it (`run.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    pub schema_version: u32,
    pub run: u32,
    pub state: RunState,
    pub repo: PathBuf,
    pub charter: PathBuf,
    pub charter_sha256: String,
    pub base: String,
    pub base_sha: String,
    pub integration_branch: String,
    pub integration_worktree: PathBuf,
    pub pool: usize,
    pub lanes_cap: usize,
    pub landings: u32,
    /// Gate runs the landings made (each landing's are in its evidence).
    #[serde(default)]
    pub gate_runs: u32,
    #[serde(with = "crate::time::secs")]
    pub started_at: DateTime<Utc>,
    #[serde(with = "crate::time::opt_secs")]
    pub finished_at: Option<DateTime<Utc>>,
    pub closeout: Option<PathBuf>,
    pub tasks: Vec<TaskState>,
    pub notes: Vec<String>,
    /// Why the run stopped before its queue drained (a guard, a control).
    pub stopped_by: Option<String>,
    /// Tasks started (the guards' iterations).
    pub iterations: u32,
    /// `owner-present`, `overnight` or `overnight until <RFC3339>`.
    #[serde(default)]
    pub mode: String,
    /// The questions put to the owner (QUESTIONS.md), oldest first.
    #[serde(default)]
    pub questions: Vec<Question>,
    /// The integration branch's head after the last landing.
    #[serde(default)]
    pub integration_head: Option<String>,
    /// How often the run was resumed after a crash (`--resume`).
    #[serde(default)]
    pub resumes: u32,
    /// The Backlog.md dir the run works.
    #[serde(default)]
    pub board_dir: Option<PathBuf>,
    /// Rulings listed for ratification: (ruling, recommendation).
    #[serde(default)]
    pub rulings: Vec<(String, String)>,
    /// The loop's clock when this file was written (a resumed fast clock
    /// starts here, so the run's times never go back).
    #[serde(default, with = "crate::time::opt_secs")]
    pub clock_at: Option<DateTime<Utc>>,
    /// The run's wall-clock budget spent so far, on the loop's clock, in
    /// milliseconds (a resume goes on from here; the time between a crash
    /// and its resume is not spent).
    #[serde(default)]
    pub spent_ms: u64,
    /// Parks since the last landing (the guard's streak; a resume goes on
    /// from it).
    #[serde(default)]
    pub consecutive_blockers: u32,
    /// The efforts lane autotune set, and their cooldowns (absent when it
    /// changed nothing; a resume goes on from them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub autotune: Vec<crate::runstate::records::Saved>,
    /// The loop process working the run (its pid and start time), so
    /// `loop status` and `loop control` tell a live run from a dead one.
    #[serde(default)]
    pub process: Option<LoopProcess>,
    /// Simulated lanes and their scripts (absent: real agents); `--resume`
    /// runs the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<crate::runstate::records::SimLanesRecord>,
}

/// A loop process, by pid and the start time `/proc` gives it (a later
/// process that reuses the pid is not it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopProcess {
    pub pid: u32,
    pub start_time: u64,
}

impl LoopProcess {
    /// This process.
    pub fn this() -> Option<LoopProcess> {
        let pid = std::process::id();
        crate::procfs::start_time(pid).map(|start_time| LoopProcess { pid, start_time })
    }

    /// Whether it still runs.
    pub fn runs(&self) -> bool {
        crate::procfs::start_time(self.pid) == Some(self.start_time)
    }
}

impl RunStatus {
    /// Whether a loop process works the run now: not closed, and the
    /// process recorded in it still runs. A run whose loop died (Ctrl-C
    /// before controlled stops, `kill -9`, a reboot) is not live, whatever
    /// its `state` says.
    pub fn is_live(&self) -> bool {
        self.finished_at.is_none() && self.process.is_some_and(|p| p.runs())
    }

    /// The run's state as an operator should read it: `interrupted` for a
    /// run whose loop process is gone while its file still says it runs.
    pub fn live_state(&self) -> RunState {
        if self.state.is_running() && !self.is_live() {
            RunState::Interrupted
        } else {
            self.state
        }
    }

    /// Tasks with a lane at work (implementing or reviewing).
    pub fn in_flight(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| matches!(t.kind(), Phase::Implementing | Phase::Reviewing))
            .count()
    }

    /// The tasks parked because an earlier run still holds their write
    /// lease (with the command that clears it), for a run that landed
    /// nothing because of them.
    pub fn stale_holds(&self) -> Vec<(String, String)> {
        self.tasks
            .iter()
            .filter(|t| t.kind() == Phase::Parked && t.cause() == Some(TaskCause::LeaseRefused))
            .map(|t| {
                (
                    t.id.clone(),
                    format!("drover lease release --task {} --force", t.id),
                )
            })
            .collect()
    }
}

/// One question to the owner, with the loop's recommendation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub at: String,
    pub task: String,
    pub question: String,
    pub recommendation: String,
    /// Asked while overnight: held until the owner is back.
    pub overnight: bool,
}

/// Run `n`'s `run.json` as the loop wrote it (`None`: not written yet; a
/// file that is not a run's is an error naming it).
pub fn read(state: &StateDir, n: u32) -> Result<Option<RunStatus>, crate::store::StoreError> {
    crate::store::read_json(&state.run_file(n))
}

/// The numbers of the runs under a state dir (`loop<N>`), lowest first.
pub fn runs(state: &StateDir) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(state.path())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("loop")?
                .parse::<u32>()
                .ok()
        })
        .collect();
    out.sort_unstable();
    out
}
