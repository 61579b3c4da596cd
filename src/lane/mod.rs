//! Lanes: one git worktree and one agent pane per (session, agent), described
//! in `docs/lanes.md`.
//!
//! The desired state is `<state>/registry/lanes.json` (one [`LaneRecord`] per
//! lane, written before anything is made so nothing half-made is ever
//! unnamed); the observed state is the supervisor's pane listing, `/proc` and
//! `git`. [`up`] records lanes and realises them, [`reconcile`] compares the
//! two and repairs what is safe, [`down`] stops lanes and removes a worktree
//! only when nothing can be lost, [`gc`] sweeps what no lane owns.
//!
//! Every operation that changes lanes holds `<state>/registry/lanes.op.lock`
//! for its whole run, so `lane up`, `lane down`, `lane reconcile` and the
//! supervisor's reconcile at start never interleave.

pub mod down;
pub mod gc;
pub mod git;
pub mod launch;
pub mod ls;
pub mod ports;
pub mod procs;
pub mod reconcile;
pub mod single;
pub mod spawn;
pub mod up;

use crate::daemon::ClientError;
use crate::pane::Backend;
use crate::registry::{Agent, RegistryError};
use crate::store::{self, LockGuard, StoreError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The schema version of `lanes.json`.
pub const SCHEMA_VERSION: u64 = 1;
/// How long an operation waits for another one holding the lanes lock.
pub const OP_LOCK_TIMEOUT: Duration = Duration::from_secs(120);
/// The file drover writes into each lane's worktree (excluded from git).
pub const MARKER: &str = ".drover-lane";

/// Errors of lane operations; each maps to one exit code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaneError {
    /// A bad argument (exit 2); `field` names it.
    #[error("{field}: {message}")]
    Usage { field: String, message: String },
    /// Refused because going on could lose work or clobber what is not ours (exit 3).
    #[error("{0}")]
    Refused(String),
    /// `git` is missing or failed (exit 1).
    #[error("{0}")]
    Git(String),
    /// Lanes did not become ready in time (exit 4).
    #[error("{0}")]
    Timeout(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl LaneError {
    pub(crate) fn usage(field: &str, message: impl Into<String>) -> Self {
        LaneError::Usage {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The CLI exit code (see `docs/cli.md`).
    pub fn exit_code(&self) -> u8 {
        use crate::exit;
        match self {
            LaneError::Usage { .. } => exit::USAGE,
            LaneError::Refused(_) => exit::REFUSED,
            LaneError::Timeout(_) => exit::TIMEOUT,
            LaneError::Git(_) | LaneError::Store(_) => exit::ERROR,
            LaneError::Registry(e) => e.exit_code(),
            LaneError::Client(e) => e.exit_code(),
        }
    }
}

/// What the operator wants of a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Desired {
    Up,
    /// Taken down by the operator: never resurrected; the record stays only
    /// while its worktree is kept.
    Down,
}

/// Where a lane is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Recorded; worktree and pane may not exist yet (an interrupted `lane up`).
    Creating,
    /// Worktree and pane made; the agent may still be starting.
    Up,
    /// Something a human must look at; `reason` says what.
    RecoveryNeeded,
    /// Pane stopped, worktree kept (see `reason`).
    Down,
}

/// One lane as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneRecord {
    /// `<session>-<agent>`; also the pane's name.
    pub lane_id: String,
    pub session_id: String,
    pub role: String,
    pub agent: Agent,
    pub desired: Desired,
    pub phase: Phase,
    /// Why the lane is `recovery-needed` or why its worktree was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub backend: Backend,
    pub pane: String,
    /// The lane's generation: 1 at creation, +1 at every respawn (also across
    /// supervisor restarts, where the pane's own counter starts again).
    pub generation: u64,
    /// The pane's generation in the current supervisor.
    #[serde(default)]
    pub pane_generation: u64,
    #[serde(default)]
    pub pid: Option<u32>,
    /// `/proc/<pid>/stat` start time, so a reused pid is never signalled.
    #[serde(default)]
    pub pid_start: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id` when the pane was last started.
    #[serde(default)]
    pub boot_id: Option<String>,
    pub repo: PathBuf,
    pub worktree: PathBuf,
    pub branch: String,
    pub base_ref: String,
    pub base_sha: String,
    /// Whether `lane up` created the branch (so rolling back may delete it).
    #[serde(default)]
    pub created_branch: bool,
    pub sim: bool,
    /// The command the pane runs (the agent with its permission mode).
    pub argv: Vec<String>,
    /// The same agent resuming its conversation, where the agent can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_argv: Option<Vec<String>>,
    /// The lane's own environment (`DROVER_*`: ids and paths, derived by drover).
    pub env: Vec<(String, String)>,
    /// Names of the operator's `--env` variables. Their values are never written
    /// to disk: they live only in the supervisor's memory (a respawn keeps them)
    /// and in the `lane up` that supplied them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_env: Vec<String>,
    #[serde(default)]
    pub agent_version: Option<String>,
    /// Who owns the worktree when it is not the lane's own (a loop run,
    /// `loop3`): `lane down` then never removes it and reconcile never
    /// re-creates it once made; the owner keeps or removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree_owner: Option<String>,
    #[serde(with = "crate::time::millis")]
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[serde(with = "crate::time::millis")]
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// `lanes.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanesDoc {
    pub schema_version: u64,
    #[serde(default)]
    pub lanes: Vec<LaneRecord>,
    /// Every repository a lane was ever cut from (for `lane gc`).
    #[serde(default)]
    pub repos: Vec<PathBuf>,
}

impl Default for LanesDoc {
    fn default() -> Self {
        LanesDoc {
            schema_version: SCHEMA_VERSION,
            lanes: Vec::new(),
            repos: Vec::new(),
        }
    }
}

impl LanesDoc {
    /// The record of a lane.
    pub fn get(&self, lane_id: &str) -> Option<&LaneRecord> {
        self.lanes.iter().find(|l| l.lane_id == lane_id)
    }

    /// The record of a lane, mutably.
    pub fn get_mut(&mut self, lane_id: &str) -> Option<&mut LaneRecord> {
        self.lanes.iter_mut().find(|l| l.lane_id == lane_id)
    }

    /// Insert or replace a record by lane id.
    pub fn put(&mut self, rec: LaneRecord) {
        match self.get_mut(&rec.lane_id) {
            Some(r) => *r = rec,
            None => self.lanes.push(rec),
        }
    }
}

/// `<state>/registry/lanes.json`.
pub fn lanes_path(state_dir: &Path) -> PathBuf {
    crate::statedir::StateDir::new(state_dir).lanes_file()
}

/// `<state>/worktrees/<session>-<agent>`.
pub fn worktree_path(state_dir: &Path, lane_id: &str) -> PathBuf {
    crate::statedir::StateDir::new(state_dir).worktree(lane_id)
}

/// `<state>/lanes/<lane>`: drover's per-lane files (report, sim script),
/// outside the worktree.
pub fn lane_dir(state_dir: &Path, lane_id: &str) -> PathBuf {
    crate::statedir::StateDir::new(state_dir).lane_dir(lane_id)
}

/// The lane id of (session, agent).
pub fn lane_id(session_id: &str, agent: Agent) -> String {
    format!("{session_id}-{agent}")
}

/// The branch of (session, agent).
pub fn branch_name(session_id: &str, agent: Agent) -> String {
    format!("drover/{session_id}/{agent}")
}

/// Read `lanes.json` (empty when there is none; corrupt is an error).
pub fn load(state_dir: &Path) -> Result<LanesDoc, LaneError> {
    let path = lanes_path(state_dir);
    let doc: Option<LanesDoc> = store::read_json(&path)?;
    let doc = doc.unwrap_or_default();
    if doc.schema_version != SCHEMA_VERSION {
        return Err(LaneError::Store(StoreError::Corrupt {
            path,
            line: None,
            message: format!(
                "unknown schema_version {}; this drover reads {SCHEMA_VERSION}",
                doc.schema_version
            ),
        }));
    }
    Ok(doc)
}

/// Change `lanes.json` under its lock.
pub fn update<R>(
    state_dir: &Path,
    f: impl FnOnce(&mut LanesDoc) -> Result<R, LaneError>,
) -> Result<R, LaneError> {
    let path = lanes_path(state_dir);
    let _lock = store::lock_beside(&path)?;
    let mut doc = load(state_dir)?;
    let out = f(&mut doc)?;
    store::write_json_atomic(&path, &doc)?;
    Ok(out)
}

/// Replace one record (by lane id) under the lock.
pub fn save(state_dir: &Path, rec: &LaneRecord) -> Result<(), LaneError> {
    let mut rec = rec.clone();
    rec.updated_at = crate::time::to_millis(chrono::Utc::now());
    update(state_dir, |doc| {
        doc.put(rec);
        Ok(())
    })
}

/// How long [`op_lock`] waits: [`OP_LOCK_TIMEOUT`] (a lane operation may
/// wait on agents starting), unless `DROVER_LOCK_WAIT_MS` says otherwise.
pub fn op_lock_wait() -> Duration {
    match std::env::var(store::LOCK_WAIT_ENV) {
        Ok(_) => store::lock_wait(),
        Err(_) => OP_LOCK_TIMEOUT,
    }
}

/// Hold the lanes operation lock, waiting at most [`op_lock_wait`]; when
/// it gives up, the error names the holder's pid.
pub fn op_lock(state_dir: &Path) -> Result<LockGuard, LaneError> {
    let path = crate::statedir::StateDir::new(state_dir).lanes_op_lock();
    let wait = op_lock_wait();
    let deadline = Instant::now() + wait;
    loop {
        if let Some(g) = LockGuard::try_exclusive(&path)? {
            g.note_holder();
            return Ok(g);
        }
        if Instant::now() >= deadline {
            let holder = store::holder_of(&path).map_or_else(
                || "another lane operation".to_string(),
                |p| format!("pid {p}"),
            );
            return Err(LaneError::Timeout(format!(
                "{holder} has held {} for {} ms; wait for it or check `drover lane ls`",
                path.display(),
                wait.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_session_and_agent() {
        assert_eq!(lane_id("implementer", Agent::Codex), "implementer-codex");
        assert_eq!(
            branch_name("ci-eval-auditor", Agent::Claude),
            "drover/ci-eval-auditor/claude"
        );
    }

    #[test]
    fn a_missing_file_is_an_empty_doc_and_a_corrupt_one_an_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path()).unwrap().lanes.is_empty());
        let p = lanes_path(d.path());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "{not json").unwrap();
        assert!(matches!(load(d.path()), Err(LaneError::Store(_))));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{not json");
    }
}
