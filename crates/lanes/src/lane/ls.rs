//! `drover lane ls`: each lane's pane, agent state and since, job and
//! decision, lease, heartbeat, worktree state and ahead/behind its base,
//! and what its agent used (its pane's usage tally, when reported).

use super::{LaneError, LaneRecord, git};
use crate::client::Client;
use crate::proto::PaneEntry;
use crate::registry::worktree::{WorktreeCheck, inspect};
use crate::statedir::StateDir;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

/// One row of `lane ls`.
#[derive(Debug, Clone, Serialize)]
pub struct LaneView {
    pub lane_id: String,
    pub session_id: String,
    pub agent: String,
    pub desired: super::Desired,
    pub phase: super::Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub pane: String,
    pub backend: crate::pane::Backend,
    pub generation: u64,
    /// `None` when the supervisor has no such pane.
    pub agent_state: Option<String>,
    pub since: Option<String>,
    pub job: Option<String>,
    pub decision: Option<String>,
    pub lease: Option<String>,
    pub heartbeat: Option<String>,
    /// `clean|dirty|detached|missing|inspection-failed`.
    pub worktree_state: WorktreeState,
    pub worktree: String,
    pub branch: String,
    pub base_ref: String,
    pub base_sha: String,
    pub ahead: Option<u64>,
    pub behind: Option<u64>,
    /// How far the base is behind its upstream, when it has one.
    pub base_behind_upstream: Option<u64>,
    pub agent_version: Option<String>,
    /// What the lane's agent used across its sessions, as the supervisor
    /// tallies its usage signals; absent when it reported none (or no
    /// supervisor has its pane).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::proto::usage::Usage>,
}

/// The worktree state word of a check.
pub fn state_word(c: &WorktreeCheck) -> WorktreeState {
    match c {
        WorktreeCheck::Clean { .. } => WorktreeState::Clean,
        WorktreeCheck::Dirty { .. } => WorktreeState::Dirty,
        WorktreeCheck::Detached => WorktreeState::Detached,
        WorktreeCheck::Missing => WorktreeState::Missing,
        WorktreeCheck::WrongBranch { .. } | WorktreeCheck::InspectionFailed { .. } => {
            WorktreeState::InspectionFailed
        }
    }
}

/// A lane's worktree as `lane ls` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorktreeState {
    #[default]
    Clean,
    Dirty,
    Detached,
    Missing,
    /// Not on its branch, or git could not say.
    InspectionFailed,
}

impl WorktreeState {
    /// The word `lane ls` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            WorktreeState::Clean => "clean",
            WorktreeState::Dirty => "dirty",
            WorktreeState::Detached => "detached",
            WorktreeState::Missing => "missing",
            WorktreeState::InspectionFailed => "inspection-failed",
        }
    }
}

impl std::fmt::Display for WorktreeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Running jobs by the pane they were last dispatched to: (job, decision).
fn jobs_by_pane(state_dir: &StateDir) -> BTreeMap<String, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    if !state_dir.jobs_dir().is_dir() {
        return out;
    }
    let Ok(engine) = crate::engine::Engine::open(state_dir) else {
        return out;
    };
    let evidence = crate::evidence::EvidenceStore::new(state_dir);
    let decisions =
        crate::store::read_jsonl::<crate::shadow::ShadowDecision>(&state_dir.decisions_log())
            .map(|r| r.records)
            .unwrap_or_default();
    for job in engine.list().unwrap_or_default() {
        if job.status != crate::engine::Status::Running {
            continue;
        }
        let Ok(events) = evidence.read(&job.job_id) else {
            continue;
        };
        if let Some(crate::evidence::Evidence::Dispatch { pane, .. }) =
            crate::evidence::latest_dispatch(&events)
        {
            let d = decisions
                .iter()
                .rev()
                .find(|d| d.job_id == job.job_id && Some(&d.attempt_id) == job.attempt_id.as_ref())
                .map(|d| d.decision.clone());
            out.insert(pane.clone(), (job.job_id.clone(), d));
        }
    }
    out
}

/// The rows of `lane ls`; `client` is `None` when no supervisor runs.
pub fn ls(state_dir: &StateDir, client: Option<&mut Client>) -> Result<Vec<LaneView>, LaneError> {
    let doc = super::load(state_dir)?;
    let panes: Vec<PaneEntry> = match client {
        Some(c) => super::reconcile::pane_listing(c)?,
        None => Vec::new(),
    };
    let jobs = jobs_by_pane(state_dir);
    let now = chrono::Utc::now();
    let leases = crate::registry::lease::list(state_dir, now).unwrap_or_default();
    let reg = crate::registry::load(state_dir).ok().flatten();
    Ok(doc
        .lanes
        .iter()
        .map(|rec| view(rec, &panes, &jobs, &leases, reg.as_ref()))
        .collect())
}

fn view(
    rec: &LaneRecord,
    panes: &[PaneEntry],
    jobs: &BTreeMap<String, (String, Option<String>)>,
    leases: &[crate::registry::lease::Lease],
    reg: Option<&crate::registry::Registry>,
) -> LaneView {
    let pane = panes.iter().find(|p| p.name() == rec.pane);
    let check = inspect(&rec.worktree, Some(&rec.branch));
    let (ahead, behind) = match git::branch_sha(&rec.repo, &rec.branch) {
        Ok(Some(tip)) => match git::ahead_behind(&rec.repo, &tip, &rec.base_sha) {
            Ok((a, b)) => (Some(a), Some(b)),
            Err(_) => (None, None),
        },
        _ => (None, None),
    };
    let upstream = git::behind_upstream(&rec.repo, &rec.base_ref)
        .ok()
        .flatten()
        .map(|u| u.1);
    // The lease of this lane: the one on its worktree or branch, else one of
    // its session its agent has borrowed — never a session-mate's lease.
    let wt = rec.worktree.display().to_string();
    let lease = leases
        .iter()
        .find(|l| {
            l.worktree.as_deref() == Some(wt.as_str()) || l.branch.as_deref() == Some(&rec.branch)
        })
        .or_else(|| {
            leases
                .iter()
                .find(|l| l.owner_session == rec.session_id && l.active_agent == Some(rec.agent))
        })
        .map(|l| {
            let holder = if l.active_agent == Some(rec.agent) {
                " (borrowed by this lane)"
            } else {
                ""
            };
            format!(
                "{} {}{holder}",
                l.task_id.as_deref().unwrap_or(&l.lease_id),
                json!(l.state).as_str().unwrap_or("?")
            )
        });
    let heartbeat = reg
        .and_then(|r| r.session(&rec.session_id))
        .map(|s| s.lanes.get(rec.agent))
        .and_then(|l| {
            l.last_heartbeat
                .as_ref()
                .map(|at| format!("{} at {at}", l.status))
        });
    let job = jobs.get(&rec.pane);
    LaneView {
        lane_id: rec.lane_id.clone(),
        session_id: rec.session_id.clone(),
        agent: rec.agent.to_string(),
        desired: rec.desired,
        phase: rec.phase,
        reason: rec.reason.clone(),
        pane: rec.pane.clone(),
        backend: rec.backend,
        generation: rec.generation,
        agent_state: pane.map(|p| match p {
            PaneEntry::Live(v) => v.observation.state.to_string(),
            PaneEntry::Lost(_) => "lost".to_string(),
        }),
        since: pane
            .and_then(PaneEntry::live)
            .map(|v| v.observation.since.clone()),
        job: job.map(|j| j.0.clone()),
        decision: job.and_then(|j| j.1.clone()),
        lease,
        heartbeat,
        worktree_state: state_word(&check),
        worktree: rec.worktree.display().to_string(),
        branch: rec.branch.clone(),
        base_ref: rec.base_ref.clone(),
        base_sha: rec.base_sha.clone(),
        ahead,
        behind,
        base_behind_upstream: upstream,
        agent_version: rec.agent_version.clone(),
        usage: pane.and_then(PaneEntry::live).and_then(|v| v.usage),
    }
}
