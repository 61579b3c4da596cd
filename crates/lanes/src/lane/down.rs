//! `drover lane down`: stop a lane's pane, then remove its worktree and
//! branch only when nothing can be lost (see `docs/lanes.md`):
//!
//! 1. the worktree is clean (drover's own marker aside),
//! 2. its branch has no commits the base lacks, or they are merged into the
//!    base branch's current tip,
//! 3. no live process has its cwd in the worktree,
//!
//! re-checked at the moment of removal: git refuses to remove a dirty
//! worktree itself, and the branch is deleted only while it still points at
//! the commit that was checked. Otherwise the worktree and branch are kept,
//! the lane stays recorded as down, and the reason is said. There is no
//! `--force`.

use super::{Desired, LaneError, LaneRecord, Phase, git, procs};
use crate::client::{Client, ClientError};
use crate::proto::ErrorCode;
use crate::proto::args;
use crate::statedir::StateDir;
use serde::Serialize;
use serde_json::json;

/// What `lane down` did with one lane.
#[derive(Debug, Clone, Serialize)]
pub struct DownOutcome {
    pub lane_id: String,
    pub pane_stopped: bool,
    /// Worktree and branch removed, record forgotten.
    pub removed: bool,
    /// Why they were kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// Stop a lane's pane (gone already is fine) and any orphan of it, and wait
/// until its process has exited.
/// `client` is `None` when no supervisor runs (so no pane does).
pub fn stop_pane(client: Option<&mut Client>, rec: &LaneRecord) -> Result<bool, LaneError> {
    let kill = args::PaneKill {
        pane: rec.pane.clone(),
    };
    let stopped = match client.map(|c| c.call(kill)) {
        Some(Ok(_)) => true,
        None
        | Some(Err(ClientError::Remote {
            code: ErrorCode::NotFound,
            ..
        })) => false,
        Some(Err(e)) => return Err(e.into()),
    };
    if let Some(pid) = rec.pid {
        if procs::same_process(pid, rec.pid_start) && !stopped {
            procs::kill_orphan(pid, rec.pid_start);
        }
        procs::wait_gone(pid, rec.pid_start, procs::EXIT_WAIT);
    }
    Ok(stopped)
}

/// Why a worktree and branch cannot be removed now; `None` when they can.
pub fn removal_blocker(rec: &LaneRecord) -> Result<Option<String>, LaneError> {
    if rec.worktree.exists() {
        match git::worktree_at(&rec.repo, &rec.worktree)? {
            Some(w) if w.branch.as_deref() == Some(rec.branch.as_str()) => {}
            Some(_) => return Ok(Some("the worktree is not on the lane's branch".into())),
            None => {
                return Ok(Some(format!(
                    "{} is not a worktree of {}",
                    rec.worktree.display(),
                    rec.repo.display()
                )));
            }
        }
        let changes = git::changes(&rec.worktree)?;
        if !changes.is_empty() {
            return Ok(Some(format!(
                "uncommitted work ({} changed path(s), e.g. {})",
                changes.len(),
                changes[0].get(3..).unwrap_or("?")
            )));
        }
        let users = procs::cwd_users(&rec.worktree);
        if !users.is_empty() {
            return Ok(Some(format!(
                "live process(es) working there (pid {})",
                users
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    if let Some(tip) = git::branch_sha(&rec.repo, &rec.branch)? {
        let current_base = git::resolve_commit(&rec.repo, &rec.base_ref)?;
        let mut bases = vec![rec.base_sha.as_str()];
        if let Some(b) = current_base.as_deref() {
            bases.push(b);
        }
        let extra = git::count_not_in(&rec.repo, &tip, &bases)?;
        if extra > 0 {
            return Ok(Some(format!(
                "branch {} has {extra} commit(s) not merged into {}",
                rec.branch, rec.base_ref
            )));
        }
    }
    Ok(None)
}

/// Remove the worktree and branch if [`removal_blocker`] finds nothing,
/// re-checking at the moment of removal. `Ok(None)` when removed, else why kept.
pub fn try_remove(rec: &LaneRecord) -> Result<Option<String>, LaneError> {
    if let Some(why) = removal_blocker(rec)? {
        return Ok(Some(why));
    }
    let tip = git::branch_sha(&rec.repo, &rec.branch)?;
    if rec.worktree.exists() {
        // git re-checks cleanliness itself and refuses otherwise.
        if let Err(e) = git::worktree_remove(&rec.repo, &rec.worktree) {
            return Ok(Some(format!("git kept the worktree: {e}")));
        }
    }
    git::worktree_prune(&rec.repo)?;
    // Only a branch this lane made, and only while it still points at the
    // commit just checked; a branch that existed before stays the user's.
    if let Some(tip) = tip
        && rec.created_branch
    {
        if let Some(why) = removal_blocker(rec)? {
            return Ok(Some(format!("worktree removed; branch kept: {why}")));
        }
        if let Err(e) = git::delete_branch(&rec.repo, &rec.branch, &tip) {
            return Ok(Some(format!("worktree removed; branch kept: {e}")));
        }
    }
    Ok(None)
}

/// Remove a removed lane's signals folder (`<state>/signals/<lane>/`, its
/// agent's settings file). One that cannot be removed only stays behind:
/// the lane is gone either way.
pub(super) fn unwire(state_dir: &StateDir, lane_id: &str) {
    if let Err(e) = crate::agent::signal_wire::unwire(state_dir, lane_id) {
        tracing::warn!(lane = lane_id, error = %e, "the lane's signals folder stays");
    }
}

/// Take lanes down (`ids`, or every lane when `None`); `client` is `None`
/// when no supervisor runs.
pub fn down(
    state_dir: &StateDir,
    mut client: Option<&mut Client>,
    ids: Option<&[String]>,
) -> Result<Vec<DownOutcome>, LaneError> {
    let _g = super::op_lock(state_dir)?;
    let doc = super::load(state_dir)?;
    if let Some(ids) = ids {
        for id in ids {
            if doc.get(id).is_none() {
                return Err(LaneError::usage(
                    "LANE",
                    format!("no lane {id:?}; see `drover lane ls`"),
                ));
            }
        }
    }
    let chosen: Vec<LaneRecord> = doc
        .lanes
        .iter()
        .filter(|l| ids.is_none_or(|ids| ids.contains(&l.lane_id)))
        .cloned()
        .collect();
    // First say "down" on disk, so no reconcile brings them back meanwhile.
    super::update(state_dir, |doc| {
        for l in &chosen {
            if let Some(r) = doc.get_mut(&l.lane_id) {
                r.desired = Desired::Down;
            }
        }
        Ok(())
    })?;
    let mut out = Vec::new();
    for mut rec in chosen {
        let pane_stopped = stop_pane(client.as_deref_mut(), &rec)?;
        let kept = match &rec.worktree_owner {
            // Not the lane's to remove: its owner (a loop run) keeps or removes it.
            Some(owner) => Some(format!("the worktree belongs to {owner}")),
            None => try_remove(&rec)?,
        };
        match &kept {
            None => {
                super::update(state_dir, |doc| {
                    doc.lanes.retain(|l| l.lane_id != rec.lane_id);
                    Ok(())
                })?;
                unwire(state_dir, &rec.lane_id);
            }
            Some(why) => {
                rec.desired = Desired::Down;
                rec.phase = Phase::Down;
                rec.reason = Some(format!("kept: {why}"));
                rec.pid = None;
                rec.pid_start = None;
                super::save(state_dir, &rec)?;
            }
        }
        out.push(DownOutcome {
            lane_id: rec.lane_id.clone(),
            pane_stopped,
            removed: kept.is_none(),
            kept,
        });
    }
    crate::registry::events::emit_quiet(
        state_dir,
        "lane.down",
        json!({"lanes": out.iter().map(|o| json!({"lane_id": o.lane_id, "removed": o.removed})).collect::<Vec<_>>()}),
    );
    Ok(out)
}
