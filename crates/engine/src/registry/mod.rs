//! The registry: who works on what, under which lease, and whether a task may
//! ship (docs/registry.md). Everything lives under `<state>/registry/`:
//!
//! | file | what | module |
//! |---|---|---|
//! | `session_registry.json` | schema 2: topology, sessions × Claude/Codex lanes | [`schema`], [`heartbeat`] |
//! | `leases.json` | one write lease per task | [`lease`] |
//! | `agent_mix.json` | the WU target and the rolling ledger | [`mix`] |
//! | `events.jsonl` | append-only, redacted operational events | [`events`], [`redact`] |
//! | `assignments/<session_id>.md` | each role's context pack | [`init`] writes stubs |
//!
//! Every write goes through [`crate::store`]: documents are replaced atomically
//! under the lock file beside them, so concurrent processes never lose an
//! update and `kill -9` never leaves a file that does not parse. Reading never
//! writes: a version-1 registry is lifted in memory ([`schema::parse`]).
//!
//! # API for other modules
//!
//! - [`load`] / [`load_required`]: the registry, lifted to version 2.
//! - [`update`]: change the registry under its lock.
//! - [`init`]: create it for a topology; [`view::show`]: the `registry show` table.
//! - [`heartbeat::heartbeat`], [`lease::claim`], [`lease::borrow`],
//!   [`lease::give_back`], [`lease::release`], [`scope::check_scope`],
//!   [`mix::record`], [`mix::report`].
//! - [`events::emit`]`(state_dir, kind, fields)`: append a redacted event;
//!   returns its `seq`. [`events::emit_quiet`] logs instead of failing.
//! - `gate::check`: the conservative gate.
//!
//! Functions that depend on the time take `now`, so tests can pin it.

pub mod error;
pub mod events;
pub mod expiry;
pub mod heartbeat;
pub mod lanes;
pub mod lease;
pub mod lend;
pub mod mix;
pub mod redact;
#[cfg(test)]
mod round_trip_tests;
pub mod schema;
pub mod scope;
pub mod topology;
pub mod view;
pub mod worktree;

pub use error::RegistryError;
pub use schema::{Agent, Lane, Lanes, Registry, Session};
pub use topology::{ShipGate, Topology};

use crate::statedir::StateDir;
use crate::store;
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;

/// Check an id-like argument (task, session, branch): 1-128 of
/// `[A-Za-z0-9._/#:+@-]`, not starting with `-` or `/`, no `..`.
pub fn validate_id(field: &str, s: &str) -> Result<(), RegistryError> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && !s.starts_with(['-', '/'])
        && !s.contains("..")
        && !s.contains("//")
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/#:+@-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(RegistryError::usage(
            field,
            format!(
                "{s:?} must be 1-128 of [A-Za-z0-9._/#:+@-], not start with - or /, and not contain .."
            ),
        ))
    }
}

/// The registry, lifted to version 2; `None` when there is none. Never writes.
pub fn load(state_dir: &StateDir) -> Result<Option<Registry>, RegistryError> {
    let path = state_dir.registry_file();
    match store::read_json::<Value>(&path)? {
        Some(v) => schema::parse(&path, v).map(Some),
        None => Ok(None),
    }
}

/// The registry, or [`RegistryError::NotInitialised`].
pub fn load_required(state_dir: &StateDir) -> Result<Registry, RegistryError> {
    load(state_dir)?.ok_or_else(|| RegistryError::NotInitialised {
        path: state_dir.registry_file(),
    })
}

/// Change the registry under its lock and store it (as version 2). The
/// closure's error aborts without writing.
pub fn update<R>(
    state_dir: &StateDir,
    f: impl FnOnce(&mut Registry) -> Result<R, RegistryError>,
) -> Result<R, RegistryError> {
    let path = state_dir.registry_file();
    let _lock = store::lock_beside(&path)?;
    let Some(v) = store::read_json::<Value>(&path)? else {
        return Err(RegistryError::NotInitialised { path });
    };
    let mut reg = schema::parse(&path, v)?;
    let out = f(&mut reg)?;
    store::write_json_atomic(&path, &reg)?;
    Ok(out)
}

/// A `drover registry init` request.
#[derive(Debug, Clone)]
pub struct InitRequest {
    pub topology: Topology,
    pub agent_mix: Option<mix::MixTarget>,
    /// Replace a registry of another topology (its heartbeats are lost).
    pub force: bool,
}

/// What `init` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitOutcome {
    Created,
    /// Already there with this topology and mix: nothing written.
    Unchanged,
    /// Same topology, new WU target.
    MixUpdated,
    /// Another topology was replaced (`force`).
    Replaced,
}

/// Create the registry for a topology, plus `agent_mix.json` and assignment
/// stubs. A registry that is already there is left alone when it matches,
/// refused when it does not (unless `force`), and never overwritten when it
/// does not parse.
pub fn init(
    state_dir: &StateDir,
    req: &InitRequest,
) -> Result<(InitOutcome, Registry), RegistryError> {
    let path = state_dir.registry_file();
    let (outcome, reg) = {
        let _lock = store::lock_beside(&path)?;
        let existing = match store::read_json::<Value>(&path)? {
            Some(v) => Some(schema::parse(&path, v)?),
            None => None,
        };
        let (outcome, reg) = match existing {
            None => (
                InitOutcome::Created,
                Registry::new(req.topology, policy_for(req.agent_mix, None)),
            ),
            Some(r) if r.topology == req.topology => match req.agent_mix {
                Some(t) if t != r.agent_mix.target => {
                    let mut r = r;
                    r.agent_mix.target = t;
                    (InitOutcome::MixUpdated, r)
                }
                _ => (InitOutcome::Unchanged, r),
            },
            Some(r) if req.force => (
                InitOutcome::Replaced,
                Registry::new(req.topology, policy_for(req.agent_mix, Some(&r.agent_mix))),
            ),
            Some(r) => {
                return Err(RegistryError::refused(
                    "registry init",
                    format!(
                        "{} already holds a {} registry; pass --force to replace it with {} (its heartbeats are lost)",
                        path.display(),
                        r.topology,
                        req.topology
                    ),
                ));
            }
        };
        if outcome != InitOutcome::Unchanged {
            store::write_json_atomic(&path, &reg)?;
        }
        (outcome, reg)
    };
    if outcome != InitOutcome::Unchanged || !state_dir.mix_file().exists() {
        mix::update(state_dir, Some(&reg.agent_mix), |_| ())?;
    }
    for s in &reg.sessions {
        write_assignment_stub(state_dir, &reg, s)?;
    }
    if outcome != InitOutcome::Unchanged {
        events::emit_quiet(
            state_dir,
            "registry.init",
            json!({"topology": reg.topology, "outcome": outcome, "agent_mix": reg.agent_mix.target.to_string()}),
        );
    }
    Ok((outcome, reg))
}

fn policy_for(target: Option<mix::MixTarget>, old: Option<&mix::MixPolicy>) -> mix::MixPolicy {
    let mut p = old.cloned().unwrap_or_default();
    if let Some(t) = target {
        p.target = t;
    }
    p
}

fn write_assignment_stub(
    state_dir: &StateDir,
    reg: &Registry,
    s: &Session,
) -> Result<(), RegistryError> {
    let path = state_dir.assignment(&s.session_id);
    if path.exists() {
        return Ok(());
    }
    let authority =
        topology::role_by_session_id(&s.session_id).map_or("read-only", |r| r.write_authority);
    let permissions = if s.write_lease_owner {
        "writes only in the worktree of the task's write lease; Claude and Codex borrow it one at a time"
    } else {
        "read-only: Claude `--permission-mode plan`, Codex `-s read-only`"
    };
    let text = format!(
        "# {role} (`{id}`)\n\n- topology: {topo}\n- ship gate: {gate}\n- write authority: {authority}\n- lanes: claude, codex — {permissions}\n\n## Assignment\n\n(none yet: the orchestrator writes the task's context here)\n",
        role = s.role,
        id = s.session_id,
        topo = reg.topology,
        gate = s.ship_gate.as_str(),
    );
    store::write_bytes_atomic(&path, text.as_bytes())?;
    Ok(())
}

/// Parse a document that must carry `schema_version: version` (leases, the
/// agent-mix ledger): another or a missing version is an error naming the
/// file, never a guess.
pub(crate) fn parse_versioned<T: serde::de::DeserializeOwned>(
    path: &Path,
    v: Value,
    version: u64,
) -> Result<T, RegistryError> {
    if v.get("schema_version").and_then(Value::as_u64) != Some(version) {
        return Err(RegistryError::UnknownVersion {
            path: path.to_path_buf(),
            version: v
                .get("schema_version")
                .map_or_else(|| "(missing)".into(), |x| x.to_string()),
            known: "1",
        });
    }
    serde_json::from_value(v).map_err(|e| RegistryError::BadDocument {
        path: path.to_path_buf(),
        field: "(document)".into(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        for ok in ["T-0001", "feature/T-1", "agent/T-1/codex", "issue#5"] {
            validate_id("--task", ok).unwrap();
        }
        for bad in ["", "-rf", "/abs", "a/../b", "a b", "a\nb", "x\0"] {
            let e = validate_id("--task", bad).unwrap_err();
            assert!(e.to_string().starts_with("--task"));
        }
    }

    #[test]
    fn init_is_idempotent_and_refuses_another_topology() {
        let d = tempfile::tempdir().unwrap();
        let req = InitRequest {
            topology: Topology::FourRole,
            agent_mix: None,
            force: false,
        };
        assert_eq!(
            init(crate::statedir::StateDir::new(d.path()), &req)
                .unwrap()
                .0,
            InitOutcome::Created
        );
        assert_eq!(
            init(crate::statedir::StateDir::new(d.path()), &req)
                .unwrap()
                .0,
            InitOutcome::Unchanged
        );
        let other = InitRequest {
            topology: Topology::ExpandedEight,
            ..req.clone()
        };
        assert!(matches!(
            init(crate::statedir::StateDir::new(d.path()), &other),
            Err(RegistryError::Refused { .. })
        ));
        let forced = InitRequest {
            force: true,
            ..other
        };
        assert_eq!(
            init(crate::statedir::StateDir::new(d.path()), &forced)
                .unwrap()
                .0,
            InitOutcome::Replaced
        );
        assert_eq!(
            load_required(crate::statedir::StateDir::new(d.path()))
                .unwrap()
                .sessions
                .len(),
            8
        );
        assert!(StateDir::new(d.path()).assignment("deep-reviewer").exists());
    }
}
