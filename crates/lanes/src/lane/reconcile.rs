//! `drover lane reconcile`: the recorded lanes (desired) against the panes,
//! processes, worktrees and branches (observed). [`decide`] is the pure
//! table; [`run`] observes, decides and, unless it is a dry run, repairs.
//!
//! Safe repairs only: start a missing pane (a new generation, resuming the
//! conversation where the agent can), respawn an exited one, recreate a
//! missing worktree from its branch or the base, finish an interrupted
//! `lane up` or roll it back, stop a pane of a lane the operator took down.
//! Anything else becomes `recovery-needed` with the reason. Running it twice
//! changes nothing the second time.

use super::{Desired, LaneError, LaneRecord, Phase, git, procs};
use crate::client::Client;
use crate::proto::{PaneEntry, PaneSpec, args};
use crate::statedir::StateDir;
use serde::Serialize;
use serde_json::json;

/// The pane of a lane as the supervisor lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneObs {
    pub generation: u64,
    pub pid: Option<u32>,
    pub state: crate::agent::State,
}

/// The worktree of a lane as git sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WtObs {
    /// A worktree of the lane's repo on the lane's branch (clean or not:
    /// uncommitted changes there are the lane's own work).
    Ours,
    Missing,
    /// There, but not ours or not on the branch.
    Wrong(String),
}

/// Everything [`decide`] looks at for one lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub pane: Option<PaneObs>,
    pub worktree: WtObs,
    /// The recorded pane process is still alive without a pane (its
    /// supervisor was killed).
    pub orphan: bool,
    pub boot_id: Option<String>,
}

/// What reconcile does for one lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Desired and observed agree.
    Healthy,
    /// The pane was respawned by someone else: record its generation.
    Adopt { pane_generation: u64 },
    /// Taken down by the operator; a pane or orphan still runs: stop it.
    Stop,
    /// Taken down; nothing runs.
    StaysDown,
    /// Restart the pane's process as a new generation.
    Respawn { why: String },
    /// Start the pane (a new generation); `resume` continues the conversation.
    StartPane { why: String, resume: bool },
    /// Make the worktree (from the branch, or a new branch at the base), then the pane.
    MakeWorktree { why: String },
    /// Leave it for a human.
    RecoveryNeeded { reason: String },
}

impl Action {
    /// Whether applying this changes anything.
    pub fn repairs(&self) -> bool {
        !matches!(
            self,
            Action::Healthy | Action::StaysDown | Action::RecoveryNeeded { .. }
        )
    }

    /// A short description for the table.
    pub fn describe(&self) -> String {
        match self {
            Action::Healthy => "ok".into(),
            Action::Adopt { pane_generation } => format!("adopt pane generation {pane_generation}"),
            Action::Stop => "stop (taken down)".into(),
            Action::StaysDown => "stays down".into(),
            Action::Respawn { why } => format!("respawn: {why}"),
            Action::StartPane { why, resume } => {
                format!(
                    "start pane{}: {why}",
                    if *resume { " (resume)" } else { "" }
                )
            }
            Action::MakeWorktree { why } => format!("make worktree and pane: {why}"),
            Action::RecoveryNeeded { reason } => format!("recovery-needed: {reason}"),
        }
    }
}

/// The decision table (pure).
pub fn decide(rec: &LaneRecord, obs: &Observed) -> Action {
    if rec.desired == Desired::Down {
        return if obs.pane.is_some() || obs.orphan {
            Action::Stop
        } else {
            Action::StaysDown
        };
    }
    if rec.phase == Phase::RecoveryNeeded {
        return Action::RecoveryNeeded {
            reason: rec
                .reason
                .clone()
                .unwrap_or_else(|| "(no reason recorded)".into()),
        };
    }
    match &obs.worktree {
        WtObs::Wrong(reason) => {
            return Action::RecoveryNeeded {
                reason: reason.clone(),
            };
        }
        WtObs::Missing if rec.phase != Phase::Creating && rec.worktree_owner.is_some() => {
            return Action::RecoveryNeeded {
                reason: format!(
                    "the worktree belongs to {} and is missing; drover does not re-create it",
                    rec.worktree_owner.as_deref().unwrap_or("?")
                ),
            };
        }
        WtObs::Missing => {
            return Action::MakeWorktree {
                why: if rec.phase == Phase::Creating {
                    "finish an interrupted lane up".into()
                } else {
                    "worktree missing".into()
                },
            };
        }
        WtObs::Ours => {}
    }
    let rebooted = rec.boot_id.is_some() && obs.boot_id.is_some() && rec.boot_id != obs.boot_id;
    match &obs.pane {
        // A lost pane is no pane (`pane_obs`): its lane is started again too.
        Some(p) if p.state == crate::agent::State::Exited => Action::Respawn {
            why: format!("the agent's process is {}", p.state),
        },
        Some(_) if rebooted => Action::Respawn {
            why: "first start after a reboot".into(),
        },
        Some(p) if p.generation == rec.pane_generation && rec.phase == Phase::Up => Action::Healthy,
        Some(p) => Action::Adopt {
            pane_generation: p.generation,
        },
        None => Action::StartPane {
            why: match (rec.phase, rebooted) {
                (Phase::Creating, _) => "finish an interrupted lane up".into(),
                (_, true) => "first start after a reboot".into(),
                _ => "no pane (the supervisor restarted or the pane was killed)".into(),
            },
            resume: rec.phase == Phase::Up && rec.resume_argv.is_some(),
        },
    }
}

/// One row of the reconcile table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub lane_id: String,
    pub desired: Desired,
    pub phase: Phase,
    pub pane: String,
    pub worktree: String,
    #[serde(flatten)]
    pub action: Action,
    /// What applying did (`None` in a dry run or when nothing was needed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Whether applying failed (`result` then says why, for people).
    #[serde(skip)]
    pub failed: bool,
}

/// The supervisor's panes by name.
pub fn pane_listing(client: &mut Client) -> Result<Vec<PaneEntry>, LaneError> {
    Ok(client.call(args::PaneLs {})?)
}

fn pane_obs(list: &[PaneEntry], name: &str) -> Option<PaneObs> {
    // A lost pane (left by a supervisor that stopped uncleanly, listed with
    // `lost: true`) is not a pane the supervisor has: the lane has none.
    let p = list
        .iter()
        .filter_map(PaneEntry::live)
        .find(|p| p.info.name == name)?;
    Some(PaneObs {
        generation: p.info.generation,
        pid: Some(p.info.pid),
        state: p.observation.state,
    })
}

/// Observe a lane's worktree.
pub fn worktree_obs(rec: &LaneRecord) -> WtObs {
    if !rec.worktree.exists() {
        return WtObs::Missing;
    }
    match git::worktree_at(&rec.repo, &rec.worktree) {
        Ok(Some(w)) if w.branch.as_deref() == Some(rec.branch.as_str()) => WtObs::Ours,
        Ok(Some(w)) => WtObs::Wrong(match w.branch {
            Some(b) => format!("worktree is on {b}, the lane's branch is {}", rec.branch),
            None => "worktree HEAD is detached".into(),
        }),
        Ok(None) => WtObs::Wrong(format!(
            "{} exists but is not a worktree of {}",
            rec.worktree.display(),
            rec.repo.display()
        )),
        Err(e) => WtObs::Wrong(format!("worktree cannot be inspected: {e}")),
    }
}

/// Observe one lane.
pub fn observe(rec: &LaneRecord, list: &[PaneEntry], boot_id: Option<&str>) -> Observed {
    let pane = pane_obs(list, &rec.pane);
    let orphan = pane.is_none()
        && rec
            .pid
            .is_some_and(|p| procs::same_process(p, rec.pid_start));
    Observed {
        pane,
        worktree: worktree_obs(rec),
        orphan,
        boot_id: boot_id.map(str::to_string),
    }
}

fn pane_cell(o: &Observed) -> String {
    match (&o.pane, o.orphan) {
        (Some(p), _) => format!("gen {} {}", p.generation, p.state),
        (None, true) => "missing (orphan process alive)".into(),
        (None, false) => "missing".into(),
    }
}

fn wt_cell(w: &WtObs) -> String {
    match w {
        WtObs::Ours => "ours".into(),
        WtObs::Missing => "missing".into(),
        WtObs::Wrong(r) => format!("wrong: {r}"),
    }
}

/// Reconcile every recorded lane (or only `only`); the caller holds the op lock.
pub fn run_locked(
    state_dir: &StateDir,
    client: &mut Client,
    dry_run: bool,
    only: Option<&[String]>,
    user_env: &[(String, String)],
) -> Result<Vec<Row>, LaneError> {
    let list = pane_listing(client)?;
    rows_from(state_dir, Some(client), &list, dry_run, only, user_env)
}

/// What `lane reconcile` would do, changing nothing: never a supervisor
/// started, never a lane touched. With none running (`client` absent),
/// every lane is judged as a real reconcile's new supervisor would find it:
/// with no pane of its own yet.
pub fn dry_run(state_dir: &StateDir, client: Option<&mut Client>) -> Result<Vec<Row>, LaneError> {
    let list = match client {
        Some(c) => pane_listing(c)?,
        None => Vec::new(),
    };
    rows_from(state_dir, None, &list, true, None, &[])
}

fn rows_from(
    state_dir: &StateDir,
    mut client: Option<&mut Client>,
    list: &[PaneEntry],
    dry_run: bool,
    only: Option<&[String]>,
    user_env: &[(String, String)],
) -> Result<Vec<Row>, LaneError> {
    let doc = super::load(state_dir)?;
    let boot = procs::boot_id();
    let mut rows = Vec::new();
    for rec in &doc.lanes {
        if only.is_some_and(|o| !o.contains(&rec.lane_id)) {
            continue;
        }
        let obs = observe(rec, list, boot.as_deref());
        let action = decide(rec, &obs);
        let client = client
            .as_deref_mut()
            .filter(|_| !dry_run && action.repairs());
        let mut failed = false;
        let result = if let Some(client) = client {
            Some(
                match apply(state_dir, client, rec, &obs, &action, user_env) {
                    Ok(msg) => msg,
                    Err(e) => {
                        failed = true;
                        format!("failed: {e}")
                    }
                },
            )
        } else {
            if let Action::RecoveryNeeded { reason } = &action
                && !dry_run
                && rec.phase != Phase::RecoveryNeeded
            {
                let mut r = rec.clone();
                r.phase = Phase::RecoveryNeeded;
                r.reason = Some(reason.clone());
                super::save(state_dir, &r)?;
            }
            None
        };
        rows.push(Row {
            lane_id: rec.lane_id.clone(),
            desired: rec.desired,
            phase: rec.phase,
            pane: pane_cell(&obs),
            worktree: wt_cell(&obs.worktree),
            action,
            result,
            failed,
        });
    }
    Ok(rows)
}

/// Reconcile under the op lock.
pub fn run(
    state_dir: &StateDir,
    client: &mut Client,
    dry_run: bool,
) -> Result<Vec<Row>, LaneError> {
    let _g = super::op_lock(state_dir)?;
    let rows = run_locked(state_dir, client, dry_run, None, &[])?;
    if !dry_run && rows.iter().any(|r| r.action.repairs()) {
        crate::registry::events::emit_quiet(
            state_dir,
            "lane.reconcile",
            json!({"lanes": rows.iter().map(|r| json!({"lane_id": r.lane_id, "action": r.action.describe()})).collect::<Vec<_>>()}),
        );
    }
    Ok(rows)
}

fn apply(
    state_dir: &StateDir,
    client: &mut Client,
    rec: &LaneRecord,
    obs: &Observed,
    action: &Action,
    user_env: &[(String, String)],
) -> Result<String, LaneError> {
    let mut rec = rec.clone();
    match action {
        Action::Adopt { pane_generation } => {
            rec.pane_generation = *pane_generation;
            rec.phase = Phase::Up;
            super::save(state_dir, &rec)?;
            Ok("adopted".into())
        }
        Action::Stop => {
            super::down::stop_pane(Some(client), &rec)?;
            Ok("stopped".into())
        }
        Action::Respawn { .. } => {
            let v = client.call(args::PaneRespawn {
                pane: rec.pane.clone(),
            })?;
            rec.pane_generation = v.generation;
            rec.generation += 1;
            rec.boot_id = procs::boot_id();
            if let Some(p) = pane_obs(&pane_listing(client)?, &rec.pane) {
                rec.pid = p.pid;
                rec.pid_start = p.pid.and_then(procs::start_time);
            }
            rec.phase = Phase::Up;
            super::save(state_dir, &rec)?;
            Ok(format!("generation {}", rec.generation))
        }
        Action::StartPane { resume, .. } => {
            if obs.orphan
                && let Some(pid) = rec.pid
            {
                procs::kill_orphan(pid, rec.pid_start);
            }
            start_pane(state_dir, client, &mut rec, *resume, user_env)?;
            Ok(format!("generation {}", rec.generation))
        }
        Action::MakeWorktree { .. } => {
            if let Err(e) = super::up::make_worktree(state_dir, &mut rec) {
                return Err(rollback(state_dir, &rec, e));
            }
            if obs.pane.is_some() {
                let _ = client.call(args::PaneKill {
                    pane: rec.pane.clone(),
                });
            }
            start_pane(state_dir, client, &mut rec, false, user_env)?;
            Ok(format!("generation {}", rec.generation))
        }
        Action::Healthy | Action::StaysDown | Action::RecoveryNeeded { .. } => Ok(String::new()),
    }
}

/// Undo an interrupted `lane up` that cannot be finished: delete the
/// branch it created while that still points at the base and no worktree
/// uses it, and forget the record. A lane that had been up is marked
/// `recovery-needed` instead.
pub(super) fn rollback(state_dir: &StateDir, rec: &LaneRecord, cause: LaneError) -> LaneError {
    if rec.phase != Phase::Creating {
        let mut r = rec.clone();
        r.phase = Phase::RecoveryNeeded;
        r.reason = Some(cause.to_string());
        let _ = super::save(state_dir, &r);
        return cause;
    }
    if rec.created_branch
        && !rec.worktree.exists()
        && git::branch_sha(&rec.repo, &rec.branch)
            .ok()
            .flatten()
            .as_deref()
            == Some(rec.base_sha.as_str())
    {
        let _ = git::worktree_prune(&rec.repo);
        let _ = git::delete_branch(&rec.repo, &rec.branch, &rec.base_sha);
    }
    let _ = super::update(state_dir, |doc| {
        doc.lanes.retain(|l| l.lane_id != rec.lane_id);
        Ok(())
    });
    cause
}

/// Start the lane's pane as its next generation and record it.
pub fn start_pane(
    state_dir: &StateDir,
    client: &mut Client,
    rec: &mut LaneRecord,
    resume: bool,
    user_env: &[(String, String)],
) -> Result<(), LaneError> {
    let missing: Vec<&str> = rec
        .user_env
        .iter()
        .filter(|n| !user_env.iter().any(|(k, _)| k == *n))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(LaneError::Refused(format!(
            "lane {} was brought up with --env {}, whose values drover never stores on disk; \
             bring it up again with `drover lane up … --env NAME=VALUE`",
            rec.lane_id,
            missing.join(", ")
        )));
    }
    let mut env = rec.env.clone();
    env.extend(
        user_env
            .iter()
            .filter(|(k, _)| rec.user_env.contains(k))
            .cloned(),
    );
    let argv = match (&rec.resume_argv, resume) {
        (Some(r), true) => r.clone(),
        _ => rec.argv.clone(),
    };
    // Claude does not start on a settings file removed meanwhile.
    crate::agent::signal_wire::rewire_if_gone(state_dir, &rec.pane, &argv)?;
    let kind = if rec.sim { "sim" } else { rec.agent.as_str() };
    let spec = PaneSpec {
        name: rec.pane.clone(),
        argv,
        env,
        cwd: Some(rec.worktree.clone()),
        cols: crate::pane::DEFAULT_COLS,
        rows: crate::pane::DEFAULT_ROWS,
        agent: kind.to_string(),
    };
    let info = client.call(args::PaneNew {
        spec,
        backend: (rec.backend != crate::pane::Backend::Native).then(|| rec.backend.to_string()),
        split: None,
    })?;
    rec.pane_generation = info.info.generation;
    rec.pid = Some(info.info.pid);
    rec.pid_start = rec.pid.and_then(procs::start_time);
    rec.generation += 1;
    rec.boot_id = procs::boot_id();
    rec.phase = Phase::Up;
    rec.reason = None;
    super::save(state_dir, rec)
}

/// Run at supervisor start (from a thread of `drover serve`, once the socket
/// answers): reconcile when there are lanes, logging the outcome.
pub fn at_start(state_dir: &StateDir, client: &mut Client) {
    if !state_dir.lanes_file().exists() {
        return;
    }
    match run(state_dir, client, false) {
        Ok(rows) => {
            for r in rows.iter().filter(|r| r.action.repairs()) {
                tracing::info!(lane = %r.lane_id, action = %r.action.describe(), result = ?r.result, "lane reconciled at start");
            }
        }
        Err(e) => tracing::warn!(error = %e, "lane reconcile at start failed"),
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
