//! `session_registry.json`, schema 2 (docs/registry.md), and the lift of version 1.
//!
//! Reading never rewrites: a version-1 file is lifted in memory, and only the
//! next write stores version 2. An unknown `schema_version` is an error naming
//! the file, never a guess.

use super::RegistryError;
use super::mix::MixPolicy;
use super::topology::{self, RoleSpec, ShipGate, Topology};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The schema version this drover writes.
pub const SCHEMA_VERSION: u64 = 2;
/// The only gate policy there is.
pub const GATE_POLICY: &str = "conservative";
/// The status of a lane or session nobody has reported on yet.
pub const IDLE: &str = "idle";

/// Claude Code or Codex: the two agents a lane can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    Claude,
    Codex,
}

impl Agent {
    /// Both agents, Claude first.
    pub const ALL: [Agent; 2] = [Agent::Claude, Agent::Codex];

    /// `claude` or `codex`.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }

    /// Parse `claude` or `codex`.
    pub fn parse(s: &str) -> Option<Agent> {
        match s {
            "claude" => Some(Agent::Claude),
            "codex" => Some(Agent::Codex),
            _ => None,
        }
    }

    /// The other agent.
    pub fn other(self) -> Agent {
        match self {
            Agent::Claude => Agent::Codex,
            Agent::Codex => Agent::Claude,
        }
    }
}

impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The whole registry document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registry {
    pub schema_version: u64,
    pub topology: Topology,
    pub gate_policy: String,
    pub agent_mix: MixPolicy,
    /// A list, not a map, for compatibility with version 1.
    pub sessions: Vec<Session>,
    /// Fields drover does not know are kept as they are.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One role session with its Claude and Codex lanes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub session_id: String,
    pub role: String,
    pub task: Option<String>,
    pub branch: Option<String>,
    pub status: String,
    pub last_heartbeat: Option<String>,
    pub next_command: Option<String>,
    pub lanes: Lanes,
    pub write_lease_owner: bool,
    pub ship_gate: ShipGate,
    /// The TTL the last heartbeat asked for (default 30 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ttl_s: Option<u64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The two lanes of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lanes {
    pub claude: Lane,
    pub codex: Lane,
}

impl Lanes {
    /// Both lanes idle.
    pub fn idle() -> Lanes {
        Lanes {
            claude: Lane::idle(Agent::Claude),
            codex: Lane::idle(Agent::Codex),
        }
    }

    /// The lane of `agent`.
    pub fn get(&self, agent: Agent) -> &Lane {
        match agent {
            Agent::Claude => &self.claude,
            Agent::Codex => &self.codex,
        }
    }

    /// The lane of `agent`, mutably.
    pub fn get_mut(&mut self, agent: Agent) -> &mut Lane {
        match agent {
            Agent::Claude => &mut self.claude,
            Agent::Codex => &mut self.codex,
        }
    }
}

/// One (session, agent) lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    pub agent: Agent,
    pub status: String,
    pub current_turn: Option<Value>,
    pub wu_spent_rolling: u32,
    /// The task the lane's last heartbeat was for (so a pass cannot carry over
    /// to another task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// When the lane last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Lane {
    /// A lane nobody has reported on.
    pub fn idle(agent: Agent) -> Lane {
        Lane {
            agent,
            status: IDLE.into(),
            current_turn: None,
            wu_spent_rolling: 0,
            task: None,
            last_heartbeat: None,
            extra: BTreeMap::new(),
        }
    }
}

impl Session {
    /// A fresh session for a topology row.
    pub fn from_role(r: &RoleSpec) -> Session {
        Session {
            session_id: r.session_id.into(),
            role: r.role.into(),
            task: None,
            branch: None,
            status: IDLE.into(),
            last_heartbeat: None,
            next_command: None,
            lanes: Lanes::idle(),
            write_lease_owner: r.write_lease_owner(),
            ship_gate: r.ship_gate,
            heartbeat_ttl_s: None,
            extra: BTreeMap::new(),
        }
    }
}

impl Registry {
    /// A new registry for a topology, every session idle.
    pub fn new(topology: Topology, agent_mix: MixPolicy) -> Registry {
        Registry {
            schema_version: SCHEMA_VERSION,
            topology,
            gate_policy: GATE_POLICY.into(),
            agent_mix,
            sessions: topology.roles().map(Session::from_role).collect(),
            extra: BTreeMap::new(),
        }
    }

    /// The session with this id.
    pub fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.iter().find(|s| s.session_id == id)
    }

    /// The session with this id, mutably.
    pub fn session_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| s.session_id == id)
    }

    /// The session that owns the write lease (the Implementer).
    pub fn write_lease_owner(&self) -> Option<&Session> {
        self.sessions.iter().find(|s| s.write_lease_owner)
    }
}

/// Parse a registry document, lifting version 1 to version 2 in memory.
/// `path` only names the file in errors.
pub fn parse(path: &Path, doc: Value) -> Result<Registry, RegistryError> {
    let bad = |field: &str, message: String| RegistryError::BadDocument {
        path: path.to_path_buf(),
        field: field.into(),
        message,
    };
    let Value::Object(obj) = doc else {
        return Err(bad("(document)", "must be a JSON object".into()));
    };
    match obj.get("schema_version") {
        Some(Value::Number(n)) if n.as_u64() == Some(2) => {
            serde_json::from_value(Value::Object(obj)).map_err(|e| bad("(document)", e.to_string()))
        }
        Some(Value::Number(n)) if n.as_u64() == Some(1) => lift_v1(path, obj),
        other => Err(RegistryError::UnknownVersion {
            path: path.to_path_buf(),
            version: other.map_or_else(|| "(missing)".into(), |v| v.to_string()),
            known: "1 (lifted) and 2",
        }),
    }
}

/// Version 1 → 2: lanes synthesised idle, `write_lease_owner` only for the
/// Implementer, `ship_gate` from the role, defaults for the rest.
fn lift_v1(path: &Path, mut obj: Map<String, Value>) -> Result<Registry, RegistryError> {
    let bad = |field: String, message: &str| RegistryError::BadDocument {
        path: path.to_path_buf(),
        field,
        message: message.into(),
    };
    let sessions = match obj.remove("sessions") {
        Some(Value::Array(a)) => a,
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(bad("sessions".into(), "must be a list")),
    };
    let mut lifted = Vec::with_capacity(sessions.len());
    for (i, s) in sessions.into_iter().enumerate() {
        let Value::Object(mut s) = s else {
            return Err(bad(format!("sessions[{i}]"), "must be an object"));
        };
        let mut text = |key: &str| -> Result<Option<String>, RegistryError> {
            match s.remove(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(v)) => Ok(Some(v)),
                Some(_) => Err(bad(format!("sessions[{i}].{key}"), "must be a string")),
            }
        };
        let session_id = text("session_id")?
            .ok_or_else(|| bad(format!("sessions[{i}].session_id"), "is missing"))?;
        let role = text("role")?;
        let spec = role
            .as_deref()
            .and_then(topology::role_by_name)
            .or_else(|| topology::role_by_session_id(&session_id));
        let task = text("task")?;
        let branch = text("branch")?;
        let status = text("status")?.unwrap_or_else(|| IDLE.into());
        let last_heartbeat = text("last_heartbeat")?;
        let next_command = text("next_command")?;
        lifted.push(Session {
            role: role
                .or_else(|| spec.map(|r| r.role.to_string()))
                .unwrap_or_else(|| session_id.clone()),
            session_id,
            task,
            branch,
            status,
            last_heartbeat,
            next_command,
            lanes: Lanes::idle(),
            write_lease_owner: spec.is_some_and(|r| r.write_lease_owner()),
            ship_gate: spec.map_or(ShipGate::NonBlocking, |r| r.ship_gate),
            heartbeat_ttl_s: None,
            extra: s.into_iter().collect(),
        });
    }
    let topology = match obj.remove("topology") {
        Some(Value::String(t)) => Topology::parse(&t)
            .ok_or_else(|| bad("topology".into(), "must be four-role or expanded-eight"))?,
        None | Some(Value::Null) => infer_topology(&lifted),
        Some(_) => return Err(bad("topology".into(), "must be a string")),
    };
    obj.remove("schema_version");
    obj.remove("gate_policy");
    obj.remove("agent_mix");
    Ok(Registry {
        schema_version: SCHEMA_VERSION,
        topology,
        gate_policy: GATE_POLICY.into(),
        agent_mix: MixPolicy::default(),
        sessions: lifted,
        extra: obj.into_iter().collect(),
    })
}

fn infer_topology(sessions: &[Session]) -> Topology {
    let expanded_only = sessions
        .iter()
        .any(|s| topology::role_by_session_id(&s.session_id).is_some_and(|r| !r.four_role));
    if expanded_only {
        Topology::ExpandedEight
    } else {
        Topology::FourRole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1() -> Value {
        json!({"schema_version": 1, "topology": "four-role", "sessions": [
            {"session_id": "orchestrator", "role": "Orchestrator", "task": null, "branch": null,
             "status": "active", "last_heartbeat": "2026-11-30T01:00:00Z", "next_command": null},
            {"session_id": "implementer", "role": "Implementer", "task": "T-1", "branch": "feature/T-1",
             "status": "active", "last_heartbeat": "2026-11-30T01:00:00Z", "next_command": "make test",
             "note": "kept"},
            {"session_id": "reviewer", "role": "Reviewer", "status": "passed"},
            {"session_id": "ci-eval-auditor", "role": "CI/Eval Auditor", "status": "clear"}]})
    }

    #[test]
    fn v1_lift_keeps_roles_and_gives_the_lease_to_the_implementer_only() {
        let r = parse(Path::new("r.json"), v1()).unwrap();
        assert_eq!(r.schema_version, 2);
        assert_eq!(r.topology, Topology::FourRole);
        assert_eq!(r.gate_policy, "conservative");
        let fresh = Registry::new(Topology::FourRole, MixPolicy::default());
        let ids = |r: &Registry| {
            r.sessions
                .iter()
                .map(|s| s.session_id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&r), ids(&fresh));
        for (a, b) in r.sessions.iter().zip(&fresh.sessions) {
            assert_eq!(a.role, b.role);
            assert_eq!(a.ship_gate, b.ship_gate);
            assert_eq!(a.write_lease_owner, b.write_lease_owner);
            assert_eq!(a.lanes, Lanes::idle());
        }
        let imp = r.session("implementer").unwrap();
        assert_eq!(imp.task.as_deref(), Some("T-1"));
        assert_eq!(imp.extra.get("note"), Some(&json!("kept")));
    }

    #[test]
    fn v2_round_trips() {
        let r = parse(Path::new("r.json"), v1()).unwrap();
        let again = parse(Path::new("r.json"), serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(r, again);
    }

    #[test]
    fn unknown_and_missing_versions_are_errors_naming_the_file() {
        for doc in [
            json!({"schema_version": 3, "sessions": []}),
            json!({"sessions": []}),
            json!({"schema_version": "2"}),
        ] {
            let e = parse(Path::new("/x/session_registry.json"), doc).unwrap_err();
            assert!(matches!(e, RegistryError::UnknownVersion { .. }), "{e}");
            assert!(e.to_string().contains("session_registry.json"));
        }
    }

    #[test]
    fn v1_without_topology_is_inferred() {
        let doc = json!({"schema_version": 1, "sessions": [{"session_id": "deep-reviewer"}]});
        let r = parse(Path::new("r.json"), doc).unwrap();
        assert_eq!(r.topology, Topology::ExpandedEight);
        assert_eq!(r.sessions[0].role, "Deep Reviewer");
    }

    proptest::proptest! {
        /// Any sequence of heartbeats leaves a registry that round-trips through JSON.
        #[test]
        fn registry_round_trips(beats in proptest::collection::vec((0usize..8, 0usize..3, 0usize..4, 0usize..14), 0..20)) {
            use crate::registry::heartbeat::{FAIL_CLASS, HeartbeatRequest, NEUTRAL_CLASS, PASS_CLASS, apply};
            let statuses: Vec<&str> = PASS_CLASS.iter().chain(FAIL_CLASS).chain(NEUTRAL_CLASS).copied().collect();
            let mut r = Registry::new(Topology::ExpandedEight, MixPolicy::default());
            let now = chrono::Utc::now();
            for (s, a, t, status) in beats {
                let req = HeartbeatRequest {
                    session_id: r.sessions[s].session_id.clone(),
                    task: (t > 0).then(|| format!("T-{t}")),
                    status: statuses[status % statuses.len()].to_string(),
                    agent: [None, Some(Agent::Claude), Some(Agent::Codex)][a],
                    ..Default::default()
                };
                apply(&mut r, &req, now).unwrap();
            }
            let back = parse(Path::new("r.json"), serde_json::to_value(&r).unwrap()).unwrap();
            proptest::prop_assert_eq!(back, r);
        }
    }
}
