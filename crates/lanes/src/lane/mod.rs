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

use crate::client::ClientError;
pub use crate::registry::lanes::{Desired, LaneRecord, LanesDoc, Phase, SCHEMA_VERSION};
use crate::registry::{Agent, RegistryError};
use crate::statedir::StateDir;
use crate::store::{self, LockGuard, StoreError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// The agent's start could not be prepared (its signals' settings file).
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
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
            LaneError::Git(_) | LaneError::Store(_) | LaneError::Agent(_) => exit::ERROR,
            LaneError::Registry(e) => e.exit_code(),
            LaneError::Client(e) => e.exit_code(),
        }
    }
}

/// `<state>/worktrees/<session>-<agent>`.
pub fn worktree_path(state_dir: &Path, lane_id: &str) -> PathBuf {
    StateDir::new(state_dir).worktree(lane_id)
}

/// `<state>/lanes/<lane>`: drover's per-lane files (report, sim script),
/// outside the worktree.
pub fn lane_dir(state_dir: &Path, lane_id: &str) -> PathBuf {
    StateDir::new(state_dir).lane_dir(lane_id)
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
    Ok(crate::registry::lanes::read(StateDir::new(state_dir))?)
}

/// Change `lanes.json` under its lock.
pub fn update<R>(
    state_dir: &Path,
    f: impl FnOnce(&mut LanesDoc) -> Result<R, LaneError>,
) -> Result<R, LaneError> {
    let path = StateDir::new(state_dir).lanes_file();
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
    let path = StateDir::new(state_dir).lanes_op_lock();
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
        let p = StateDir::new(d.path()).lanes_file();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "{not json").unwrap();
        assert!(matches!(load(d.path()), Err(LaneError::Store(_))));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{not json");
    }
}
