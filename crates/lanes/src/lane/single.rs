//! One lane with a name, worktree and branch chosen by its caller (the loop's
//! `l<N>-impl-<task>` on `drover/loop<N>/<task>`), recorded and realised like
//! the lanes of a topology: recorded first (phase `creating`), then the same
//! reconcile repairs make the worktree (or use the one given) and start the
//! pane, then the agent is waited on until ready. Taking it down stops the
//! pane and forgets the record; the worktree is its owner's
//! ([`super::LaneRecord::worktree_owner`]).

use super::reconcile::{self, Action};
use super::{Desired, LaneError, LaneRecord, Phase, git, launch, procs};
use crate::client::Client;
use crate::registry::Agent;
use crate::statedir::StateDir;
use std::path::PathBuf;
use std::time::Duration;

/// What lane to bring up.
#[derive(Debug, Clone)]
pub struct OneLane {
    /// The lane id (also its pane's name).
    pub lane_id: String,
    /// The registry session (`implementer`, `reviewer`) and its role's name.
    pub session_id: String,
    pub role: String,
    pub agent: Agent,
    /// Only a lane that writes gets a write permission mode.
    pub writes: bool,
    /// The repository's top.
    pub repo: PathBuf,
    pub worktree: PathBuf,
    pub branch: String,
    /// The commit a new branch starts at.
    pub base_ref: String,
    pub base_sha: String,
    /// Who owns the worktree (`loop3`); it is never the lane's to remove.
    pub owner: String,
    /// `Some(script)`: run `drover sim-agent` (following the script when
    /// given) instead of the real agent.
    pub sim: Option<Option<PathBuf>>,
    /// The drover binary (sim lanes run `<exe> sim-agent`).
    pub exe: PathBuf,
    pub backend: crate::pane::Backend,
    pub socket: PathBuf,
    /// More of the lane's own env (ids, never secrets: it is recorded).
    pub env: Vec<(String, String)>,
    /// The operator's env (`--env`): only the names are recorded, the values
    /// live in memory and reach the pane only (docs/lanes.md).
    pub user_env: Vec<(String, String)>,
    pub ready_timeout: Duration,
    /// More arguments for a real agent (after its permission flags, in its
    /// resuming command too); a sim lane takes none.
    pub extra_args: Vec<String>,
    /// The effort level the agent starts at (`None`: no effort flag).
    pub effort: Option<String>,
}

/// Record and start one lane, then wait until its agent is ready. A worktree
/// that does not exist is made on a new branch at the base; one that exists
/// must be a worktree of `repo` on `branch`. On failure nothing stays
/// recorded and no pane stays up (a worktree it made is left to its owner).
pub fn up(state_dir: &StateDir, client: &mut Client, l: &OneLane) -> Result<LaneRecord, LaneError> {
    prepare(state_dir, l)?;
    start(state_dir, client, l)
}

/// The first half of [`up`]: record the lane (its port base given,
/// [`super::ports`]) and make its worktree, its pane not started yet, so its
/// owner may set the worktree up first (the loop's `setup:`). Then
/// [`start`], or [`down`] to forget it. On failure nothing stays recorded.
pub fn prepare(state_dir: &StateDir, l: &OneLane) -> Result<LaneRecord, LaneError> {
    if let Some((k, _)) = l.user_env.iter().find(|(k, _)| {
        super::up::LANE_ENV.contains(&k.as_str()) || k == crate::statedir::env::AGENT
    }) {
        return Err(LaneError::usage(
            "--env",
            format!("{k} is set by drover for every lane"),
        ));
    }
    let mut rec = record(state_dir, l)?;
    let _g = super::op_lock(state_dir)?;
    let doc = super::load(state_dir)?;
    if doc.get(&l.lane_id).is_some() {
        return Err(LaneError::Refused(format!(
            "lane {} is already recorded; take it down first (`drover lane down {}`)",
            l.lane_id, l.lane_id
        )));
    }
    let repo = l.repo.clone();
    super::update(state_dir, |doc| {
        if !doc.repos.contains(&repo) {
            doc.repos.push(repo.clone());
        }
        super::ports::assign(doc, &mut rec)?;
        doc.put(rec.clone());
        Ok(())
    })?;
    if let Err(e) = super::up::make_worktree(state_dir, &mut rec) {
        let e = reconcile::rollback(state_dir, &rec, e);
        return Err(LaneError::Refused(format!(
            "lane {} did not come up: {e}",
            l.lane_id
        )));
    }
    Ok(rec)
}

/// The second half of [`up`]: start the prepared lane's pane and wait until
/// its agent is ready.
pub fn start(
    state_dir: &StateDir,
    client: &mut Client,
    l: &OneLane,
) -> Result<LaneRecord, LaneError> {
    {
        let _g = super::op_lock(state_dir)?;
        let ids = [l.lane_id.clone()];
        let rows = reconcile::run_locked(state_dir, client, false, Some(&ids), &l.user_env)?;
        let failed = rows.iter().find_map(|r| match (&r.action, &r.result) {
            (_, Some(res)) if r.failed => Some(res.clone()),
            (Action::RecoveryNeeded { reason }, _) => Some(reason.clone()),
            _ => None,
        });
        if let Some(why) = failed {
            forget(state_dir, client, &l.lane_id)?;
            return Err(LaneError::Refused(format!(
                "lane {} did not come up: {why}",
                l.lane_id
            )));
        }
    }
    if let Err(e) = super::up::wait_ready(client, std::slice::from_ref(&l.lane_id), l.ready_timeout)
    {
        let _ = down(state_dir, client, &l.lane_id);
        return Err(e);
    }
    super::load(state_dir)?
        .get(&l.lane_id)
        .cloned()
        .ok_or_else(|| LaneError::Refused(format!("lane {} vanished from the record", l.lane_id)))
}

/// Stop the lane's pane (waiting until its process has exited) and forget
/// its record. The worktree and branch stay: they are the owner's. A lane
/// that is not recorded is already down.
pub fn down(state_dir: &StateDir, client: &mut Client, lane_id: &str) -> Result<(), LaneError> {
    let _g = super::op_lock(state_dir)?;
    forget(state_dir, client, lane_id)
}

fn forget(state_dir: &StateDir, client: &mut Client, lane_id: &str) -> Result<(), LaneError> {
    let Some(rec) = super::load(state_dir)?.get(lane_id).cloned() else {
        return Ok(());
    };
    // Say "down" on disk first, so no reconcile starts it again meanwhile.
    super::update(state_dir, |doc| {
        if let Some(r) = doc.get_mut(lane_id) {
            r.desired = Desired::Down;
        }
        Ok(())
    })?;
    // The record may predate the pane's pid: ask the listing too.
    let mut rec = rec;
    if rec.pid.is_none()
        && let Some(p) = reconcile::pane_listing(client)?
            .iter()
            .find(|p| p.name() == lane_id)
            .map(|p| match p {
                crate::proto::PaneEntry::Live(v) => v.info.pid,
                crate::proto::PaneEntry::Lost(l) => l.pid,
            })
    {
        rec.pid = Some(p);
        rec.pid_start = procs::start_time(p);
    }
    super::down::stop_pane(Some(client), &rec)?;
    super::update(state_dir, |doc| {
        doc.lanes.retain(|r| r.lane_id != lane_id);
        Ok(())
    })?;
    super::down::unwire(state_dir, lane_id);
    crate::registry::events::emit_quiet(
        state_dir,
        "lane.down",
        serde_json::json!({"lanes": [{"lane_id": lane_id, "removed": false}]}),
    );
    Ok(())
}

fn record(state_dir: &StateDir, l: &OneLane) -> Result<LaneRecord, LaneError> {
    let launch = match &l.sim {
        Some(script) => launch::sim_launch(&l.exe, l.agent, l.writes, script.as_deref()),
        None => {
            let mut launch = launch::agent_launch(l.agent, l.writes);
            launch.argv.extend(l.extra_args.iter().cloned());
            if let Some(r) = launch.resume_argv.as_mut() {
                r.extend(l.extra_args.iter().cloned());
            }
            launch::with_signals_unless_off(launch, l.agent, &l.exe, state_dir, &l.lane_id)?
        }
    };
    let launch = launch::with_effort(launch, l.agent, l.effort.as_deref());
    let version = launch::version(&launch.argv[0]);
    let mut env = super::up::lane_env(&l.lane_id, &l.session_id, &l.role, state_dir, &l.socket);
    env.extend(
        l.env
            .iter()
            .filter(|(k, _)| !super::up::LANE_ENV.contains(&k.as_str()))
            .cloned(),
    );
    let now = crate::time::to_millis(chrono::Utc::now());
    // A worktree that already exists is used as it is (the lane never made
    // it), and nothing is pruned then: a prune beside another process's
    // `git worktree add` in the same repository (a fleet host's lanes) can
    // take the half-made worktree's admin dir from under it.
    if !l.worktree.exists() {
        let _ = git::worktree_prune(&l.repo);
    }
    Ok(LaneRecord {
        lane_id: l.lane_id.clone(),
        session_id: l.session_id.clone(),
        role: l.role.clone(),
        agent: l.agent,
        desired: Desired::Up,
        phase: Phase::Creating,
        reason: None,
        backend: l.backend,
        pane: l.lane_id.clone(),
        generation: 0,
        pane_generation: 0,
        pid: None,
        pid_start: None,
        boot_id: procs::boot_id(),
        repo: l.repo.clone(),
        worktree: l.worktree.clone(),
        branch: l.branch.clone(),
        base_ref: l.base_ref.clone(),
        base_sha: l.base_sha.clone(),
        created_branch: false,
        sim: l.sim.is_some(),
        argv: launch.argv,
        resume_argv: launch.resume_argv,
        env,
        user_env: l.user_env.iter().map(|(k, _)| k.clone()).collect(),
        agent_version: version,
        worktree_owner: Some(l.owner.clone()),
        created_at: now,
        updated_at: now,
    })
}
