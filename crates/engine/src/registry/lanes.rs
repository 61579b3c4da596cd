//! `<state>/registry/lanes.json`, the lanes' desired state: one
//! [`LaneRecord`] per lane, and how it is read. The lane operations that
//! write it are in `crate::lane`; the record lives here, below them, so
//! whatever reads a lane's record (a report's worktree and base) needs
//! none of them.

use super::Agent;
use crate::proto::Backend;
use crate::statedir::StateDir;
use crate::store::{self, StoreError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The schema version of `lanes.json`.
pub const SCHEMA_VERSION: u64 = 1;
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

/// Read `lanes.json` (empty when there is none; corrupt is an error).
pub fn read(state_dir: &StateDir) -> Result<LanesDoc, StoreError> {
    let path = state_dir.lanes_file();
    let doc: Option<LanesDoc> = store::read_json(&path)?;
    let doc = doc.unwrap_or_default();
    if doc.schema_version != SCHEMA_VERSION {
        return Err(StoreError::Corrupt {
            path,
            line: None,
            message: format!(
                "unknown schema_version {}; this drover reads {SCHEMA_VERSION}",
                doc.schema_version
            ),
        });
    }
    Ok(doc)
}
