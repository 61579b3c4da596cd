//! Lending a write lease to one lane's agent: `borrow` sets `active_agent`
//! only when it is null, `return` clears it, so Claude and Codex never hold a
//! lease at once.

use super::lease::{LeaseState, update};
use super::schema::Agent;
use super::{RegistryError, validate_id};
use crate::statedir::StateDir;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;

/// Whether a borrow or return changed anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LendOutcome {
    Changed,
    /// Already so: an idempotent repeat.
    Unchanged,
}

fn lend(
    state_dir: &StateDir,
    task: &str,
    agent: Agent,
    borrow: bool,
    now: DateTime<Utc>,
) -> Result<LendOutcome, RegistryError> {
    validate_id("--task", task)?;
    let verb = if borrow { "borrow" } else { "return" };
    let request = format!("lease {verb} {task} --agent {agent}");
    let out = update(state_dir, now, |doc| {
        let Some(l) = doc.leases.iter_mut().find(|l| l.is_for(task)) else {
            return Err(RegistryError::refused(
                request,
                format!("no lease for task {task}"),
            ));
        };
        match (borrow, l.active_agent) {
            (true, _) if l.state != LeaseState::Active => Err(RegistryError::refused(
                request,
                format!("lease {} is {}", l.lease_id, l.state.as_str()),
            )),
            (true, None) => {
                l.active_agent = Some(agent);
                Ok(LendOutcome::Changed)
            }
            (false, Some(a)) if a == agent => {
                l.active_agent = None;
                Ok(LendOutcome::Changed)
            }
            (_, Some(a)) if a == agent => Ok(LendOutcome::Unchanged),
            (false, None) => Ok(LendOutcome::Unchanged),
            (_, Some(a)) => Err(RegistryError::refused(
                request,
                format!("{a} holds it; Claude and Codex never hold a lease at once"),
            )),
        }
    })?;
    if out == LendOutcome::Changed {
        super::events::emit_quiet(
            state_dir,
            &format!("lease.{verb}"),
            json!({"task": task, "agent": agent}),
        );
    }
    Ok(out)
}

/// Lend the task's lease to one agent; refused while the other holds it.
pub fn borrow(
    state_dir: &StateDir,
    task: &str,
    agent: Agent,
    now: DateTime<Utc>,
) -> Result<LendOutcome, RegistryError> {
    lend(state_dir, task, agent, true, now)
}

/// Give a borrowed lease back.
pub fn give_back(
    state_dir: &StateDir,
    task: &str,
    agent: Agent,
    now: DateTime<Utc>,
) -> Result<LendOutcome, RegistryError> {
    lend(state_dir, task, agent, false, now)
}
