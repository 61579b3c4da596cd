//! `drover lane up`: record each lane, then realise it (worktree, pane) with
//! the same repairs reconcile makes, then wait until every agent is ready.
//!
//! Everything that can refuse is checked for every lane before anything is
//! made; each lane is recorded before its worktree or branch exists, so a
//! crash in the middle leaves named, reconcilable lanes and nothing else.

use super::reconcile::{self, Action, Row};
use super::{Desired, LaneError, LaneRecord, Phase, git, launch, procs};
use crate::agent::{State, Until};
use crate::client::Client;
use crate::pane::Backend;
use crate::proto::{PaneEntry, args};
use crate::registry::{self, Agent, Topology};
use crate::statedir::StateDir;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The backends a lane can run on.
/// Env names drover sets on every lane (`--env` may not override them).
pub const LANE_ENV: &[&str] = &[
    crate::statedir::env::LANE_ID,
    crate::statedir::env::SESSION_ID,
    crate::statedir::env::ROLE,
    crate::statedir::env::STATE_DIR,
    crate::statedir::env::SOCKET,
    super::ports::PORT_ENV,
];

/// The values of [`LANE_ENV`] for one lane.
pub(super) fn lane_env(
    lane_id: &str,
    session_id: &str,
    role: &str,
    state_dir: &StateDir,
    socket: &Path,
) -> Vec<(String, String)> {
    use crate::statedir::env;
    vec![
        (env::LANE_ID.into(), lane_id.into()),
        (env::SESSION_ID.into(), session_id.into()),
        (env::ROLE.into(), role.into()),
        (env::STATE_DIR.into(), state_dir.display().to_string()),
        (env::SOCKET.into(), socket.display().to_string()),
    ]
}

/// A `lane up` request.
#[derive(Debug, Clone)]
pub struct UpRequest {
    pub topology: Topology,
    /// Any directory inside the repository.
    pub repo: PathBuf,
    /// Default: the repository's default branch tip.
    pub base: Option<String>,
    pub agents: Vec<Agent>,
    /// Default: every session of the topology.
    pub sessions: Option<Vec<String>>,
    pub backend: Backend,
    pub sim: bool,
    /// The drover binary (sim lanes run `<exe> sim-agent`).
    pub exe: PathBuf,
    pub env: Vec<(String, String)>,
    pub socket: PathBuf,
    pub ready_timeout: Duration,
}

/// What `lane up` did.
#[derive(Debug, Clone, Serialize)]
pub struct UpReport {
    pub repo: PathBuf,
    pub base_ref: String,
    pub base_sha: String,
    /// The base's upstream and how many commits the base is behind it.
    pub upstream: Option<String>,
    pub behind_upstream: Option<u64>,
    /// Uncommitted paths in the main checkout (never copied into lanes).
    pub main_checkout_changes: usize,
    pub lanes: Vec<Row>,
    /// Lanes this run recorded for the first time.
    pub created: Vec<String>,
    /// Lanes that were already right.
    pub unchanged: usize,
}

/// The lanes a request names: (session, role, agent, writes).
fn selected(
    req: &UpRequest,
) -> Result<Vec<(&'static registry::topology::RoleSpec, Agent)>, LaneError> {
    let roles: Vec<_> = req.topology.roles().collect();
    if let Some(want) = &req.sessions {
        for s in want {
            if !roles.iter().any(|r| r.session_id == s) {
                return Err(LaneError::usage(
                    "--sessions",
                    format!(
                        "{s:?} is not a session of {}: use {}",
                        req.topology,
                        roles
                            .iter()
                            .map(|r| r.session_id)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    if req.agents.is_empty() {
        return Err(LaneError::usage("--agents", "name at least one agent"));
    }
    Ok(roles
        .into_iter()
        .filter(|r| {
            req.sessions
                .as_ref()
                .is_none_or(|w| w.iter().any(|s| s == r.session_id))
        })
        .flat_map(|r| req.agents.iter().map(move |a| (r, *a)))
        .collect())
}

fn check_request(req: &UpRequest) -> Result<(), LaneError> {
    for (k, _) in &req.env {
        if LANE_ENV.contains(&k.as_str()) {
            return Err(LaneError::usage(
                "--env",
                format!("{k} is set by drover for every lane"),
            ));
        }
    }
    Ok(())
}

/// Bring lanes up. The supervisor behind `client` runs the panes.
pub fn up(
    state_dir: &StateDir,
    client: &mut Client,
    req: &UpRequest,
) -> Result<UpReport, LaneError> {
    check_request(req)?;
    git::check_installed()?;
    let repo = git::toplevel(&req.repo)?;
    let base_ref = match &req.base {
        Some(b) => b.clone(),
        None => git::default_branch(&repo)?,
    };
    let base_sha = git::resolve_commit(&repo, &base_ref)?.ok_or_else(|| {
        LaneError::usage(
            "--base",
            format!(
                "{base_ref:?} does not name a commit in {}; pass a branch, tag or commit",
                repo.display()
            ),
        )
    })?;
    let upstream = git::behind_upstream(&repo, &base_ref)?;
    let main_changes = git::changes(&repo)?.len();
    let lanes = selected(req)?;
    registry::init(
        state_dir,
        &registry::InitRequest {
            topology: req.topology,
            agent_mix: None,
            force: false,
        },
    )?;
    let _g = super::op_lock(state_dir)?;
    let doc = super::load(state_dir)?;
    let mut versions: std::collections::HashMap<String, Option<String>> = Default::default();
    let mut fresh = Vec::new();
    let mut revive = Vec::new();
    let mut refusals = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for (role, agent) in &lanes {
        let id = super::lane_id(role.session_id, *agent);
        if let Some(rec) = doc.get(&id) {
            if rec.repo != repo {
                refusals.push(format!(
                    "lane {id} is cut from {}; take it down first (`drover lane down {id}`)",
                    rec.repo.display()
                ));
            } else if rec.desired == Desired::Down || rec.phase == Phase::RecoveryNeeded {
                revive.push(id);
            }
            continue;
        }
        let wt = state_dir.worktree(&id);
        let branch = super::branch_name(role.session_id, *agent);
        if wt.exists() {
            refusals.push(format!(
                "{} exists and is not a lane drover recorded; move it away (see `drover lane gc`)",
                wt.display()
            ));
        }
        if let Some(tip) = git::branch_sha(&repo, &branch)? {
            let extra = git::count_not_in(&repo, &tip, &[&base_sha])?;
            if extra > 0 {
                refusals.push(format!(
                    "branch {branch} already exists with {extra} commit(s) the base {base_ref} lacks; drover will not reset it: merge or delete it, or pick another --base"
                ));
            }
        }
        let launch = if req.sim {
            let script = state_dir.lane_sim_script(&id);
            launch::sim_launch(
                &req.exe,
                *agent,
                role.write_lease_owner(),
                script.is_file().then_some(script.as_path()),
            )
        } else {
            launch::agent_launch(*agent, role.write_lease_owner())
        };
        let program = launch.argv[0].clone();
        // An agent that is not installed would leave every lane recorded,
        // with a worktree and a branch, at `creating`: refuse before any.
        if !req.sim && !missing.contains(&program) && !launch::installed(&program) {
            refusals.push(format!(
                "{program} is not on PATH: install it or fix PATH (`--sim` runs drover's simulated agents instead)"
            ));
            missing.push(program.clone());
        }
        let version = versions
            .entry(program.clone())
            .or_insert_with(|| launch::version(&program))
            .clone();
        let env = lane_env(&id, role.session_id, role.role, state_dir, &req.socket);
        let now = crate::time::to_millis(chrono::Utc::now());
        fresh.push(LaneRecord {
            lane_id: id.clone(),
            session_id: role.session_id.into(),
            role: role.role.into(),
            agent: *agent,
            desired: Desired::Up,
            phase: Phase::Creating,
            reason: None,
            backend: req.backend,
            pane: id,
            generation: 0,
            pane_generation: 0,
            pid: None,
            pid_start: None,
            boot_id: procs::boot_id(),
            repo: repo.clone(),
            worktree: wt,
            branch,
            base_ref: base_ref.clone(),
            base_sha: base_sha.clone(),
            created_branch: false,
            sim: req.sim,
            argv: launch.argv,
            resume_argv: launch.resume_argv,
            env,
            user_env: req.env.iter().map(|(k, _)| k.clone()).collect(),
            agent_version: version,
            worktree_owner: None,
            created_at: now,
            updated_at: now,
        });
    }
    if !refusals.is_empty() {
        return Err(LaneError::Refused(format!(
            "lane up made nothing: {}",
            refusals.join("; ")
        )));
    }
    // Only once nothing is refused: the agent's own signals (its settings
    // file written under the state dir).
    for rec in fresh.iter_mut().filter(|r| !r.sim) {
        let l = launch::Launch {
            argv: std::mem::take(&mut rec.argv),
            resume_argv: rec.resume_argv.take(),
            pane_agent: launch::program(rec.agent),
        };
        let l = launch::with_signals_unless_off(l, rec.agent, &req.exe, state_dir, &rec.lane_id)?;
        rec.argv = l.argv;
        rec.resume_argv = l.resume_argv;
    }
    let created: Vec<String> = fresh.iter().map(|r| r.lane_id.clone()).collect();
    let ids: Vec<String> = lanes
        .iter()
        .map(|(r, a)| super::lane_id(r.session_id, *a))
        .collect();
    super::update(state_dir, |doc| {
        if !doc.repos.contains(&repo) {
            doc.repos.push(repo.clone());
        }
        for mut rec in fresh {
            super::ports::assign(doc, &mut rec)?;
            doc.put(rec);
        }
        for id in &revive {
            if let Some(mut r) = doc.get(id).cloned() {
                super::ports::assign(doc, &mut r)?;
                doc.put(r);
            }
            if let Some(r) = doc.get_mut(id) {
                r.desired = Desired::Up;
                r.user_env = req.env.iter().map(|(k, _)| k.clone()).collect();
                r.phase = if r.worktree.exists() {
                    Phase::Up
                } else {
                    Phase::Creating
                };
                r.reason = None;
            }
        }
        Ok(())
    })?;
    let rows = reconcile::run_locked(state_dir, client, false, Some(&ids), &req.env)?;
    let failed: Vec<String> = rows
        .iter()
        .filter_map(|r| match (&r.action, &r.result) {
            (_, Some(res)) if r.failed => Some(format!("{}: {res}", r.lane_id)),
            (Action::RecoveryNeeded { reason }, _) => Some(format!("{}: {reason}", r.lane_id)),
            _ => None,
        })
        .collect();
    check_backend(state_dir, client, req.backend, &ids)?;
    if !failed.is_empty() {
        return Err(LaneError::Refused(format!(
            "some lanes are not up: {}",
            failed.join("; ")
        )));
    }
    wait_ready(client, &ids, req.ready_timeout)?;
    let unchanged = rows.iter().filter(|r| !r.action.repairs()).count();
    if rows.iter().any(|r| r.action.repairs()) {
        registry::events::emit_quiet(
            state_dir,
            "lane.up",
            json!({"lanes": ids, "base_ref": base_ref, "base_sha": base_sha, "backend": req.backend, "sim": req.sim}),
        );
    }
    Ok(UpReport {
        repo,
        base_ref,
        base_sha,
        upstream: upstream.as_ref().map(|u| u.0.clone()),
        behind_upstream: upstream.map(|u| u.1),
        main_checkout_changes: main_changes,
        lanes: rows,
        created,
        unchanged,
    })
}

/// A supervisor that does not know the requested backend makes a native
/// pane; stop those and say so rather than pretend.
fn check_backend(
    state_dir: &StateDir,
    client: &mut Client,
    backend: Backend,
    ids: &[String],
) -> Result<(), LaneError> {
    if backend == Backend::Native {
        return Ok(());
    }
    let list = reconcile::pane_listing(client)?;
    let wrong: Vec<&String> = ids
        .iter()
        .filter(|id| {
            list.iter()
                .filter_map(PaneEntry::live)
                .any(|p| p.info.name == **id && p.info.backend != backend)
        })
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    for id in &wrong {
        let _ = client.call(args::PaneKill {
            pane: id.to_string(),
        });
    }
    let _ = super::update(state_dir, |doc| {
        for id in &wrong {
            if let Some(r) = doc.get_mut(id) {
                r.phase = Phase::RecoveryNeeded;
                r.reason = Some(format!("the supervisor cannot run {backend} panes"));
            }
        }
        Ok(())
    });
    Err(LaneError::Refused(format!(
        "this supervisor does not run {backend} panes yet (it made native ones, now stopped); use --backend native, then `drover lane down` these lanes"
    )))
}

/// Wait on the supervisor's barrier until every lane's agent is idle.
pub fn wait_ready(client: &mut Client, ids: &[String], timeout: Duration) -> Result<(), LaneError> {
    if ids.is_empty() {
        return Ok(());
    }
    let v = client.call(args::Wait {
        panes: ids.to_vec(),
        until: vec![Until {
            state: State::Idle,
            kind: None,
        }],
        mode: args::WaitMode::All,
        timeout_ms: Some(timeout.as_millis() as u64),
        fresh: false,
    })?;
    if v.timed_out {
        let late: Vec<String> = v
            .snapshots
            .iter()
            .filter(|s| s.snapshot.state != State::Idle)
            .map(|s| format!("{} ({})", s.snapshot.pane, s.snapshot.state))
            .collect();
        return Err(LaneError::Timeout(format!(
            "lanes not ready after {} ms: {}; they stay up (see `drover lane ls`)",
            timeout.as_millis(),
            late.join(", ")
        )));
    }
    Ok(())
}

/// Make a lane's worktree: a new branch at the base, or the lane's own
/// branch again; then drover's marker (excluded from git) and the
/// `.worktreeinclude` files. A path that exists and is not this lane's
/// worktree is refused, never reused.
pub fn make_worktree(state_dir: &StateDir, rec: &mut LaneRecord) -> Result<(), LaneError> {
    let wt = rec.worktree.clone();
    if wt.exists() {
        let ours = git::worktree_at(&rec.repo, &wt)?
            .is_some_and(|w| w.branch.as_deref() == Some(rec.branch.as_str()));
        if !ours {
            return Err(LaneError::Refused(format!(
                "{} exists and is not the worktree of lane {}; move it away",
                wt.display(),
                rec.lane_id
            )));
        }
    } else {
        if let Some(dir) = wt.parent() {
            // 0700 whatever the umask (docs/state-dir.md).
            crate::store::create_private_dir(dir)
                .map_err(|e| LaneError::Git(format!("cannot create {}: {e}", dir.display())))?;
        }
        let _ = git::worktree_prune(&rec.repo);
        match git::branch_sha(&rec.repo, &rec.branch)? {
            None => {
                rec.created_branch = true;
                super::save(state_dir, rec)?;
                git::worktree_add(&rec.repo, &wt, &rec.branch, Some(&rec.base_sha))?;
            }
            Some(tip) => {
                if !rec.created_branch && tip != rec.base_sha {
                    if git::count_not_in(&rec.repo, &tip, &[&rec.base_sha])? > 0 {
                        return Err(LaneError::Refused(format!(
                            "branch {} has commits the base lacks and is not this lane's; drover will not reset it",
                            rec.branch
                        )));
                    }
                    git::move_branch(&rec.repo, &rec.branch, &rec.base_sha, &tip)?;
                }
                git::worktree_add(&rec.repo, &wt, &rec.branch, None)?;
            }
        }
    }
    let marker = json!({"lane_id": rec.lane_id, "state_dir": state_dir.path()});
    std::fs::write(wt.join(super::MARKER), format!("{marker}\n"))
        .map_err(|e| LaneError::Git(format!("cannot write the lane marker: {e}")))?;
    git::exclude_marker(&wt)?;
    git::copy_worktreeinclude(&rec.repo, &wt)?;
    crate::store::create_private_dir(&state_dir.lane_dir(&rec.lane_id))
        .map_err(|e| LaneError::Git(format!("cannot create the lane dir: {e}")))?;
    Ok(())
}
