//! The two topologies of docs/registry.md as data. There is no third one: running Claude
//! and Codex side by side is the lane policy on both, not a topology.

use serde::{Deserialize, Serialize};

/// A set of role sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Orchestrator, Implementer, Reviewer, CI/Eval Auditor.
    FourRole,
    /// Eight sessions for long governance work.
    ExpandedEight,
}

impl Topology {
    /// The name used on the command line and on disk.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::FourRole => "four-role",
            Topology::ExpandedEight => "expanded-eight",
        }
    }

    /// Parse a `--topology` value.
    pub fn parse(s: &str) -> Option<Topology> {
        match s {
            "four-role" => Some(Topology::FourRole),
            "expanded-eight" => Some(Topology::ExpandedEight),
            _ => None,
        }
    }

    /// The sessions of this topology, in table order.
    pub fn roles(self) -> impl Iterator<Item = &'static RoleSpec> {
        ROLES.iter().filter(move |r| match self {
            Topology::FourRole => r.four_role,
            Topology::ExpandedEight => r.expanded_eight,
        })
    }
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session's class in the conservative gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShipGate {
    /// Orchestrator: owns the ledger and the gate decision; never blocks.
    ControlPlane,
    /// Implementer: owns the write lease.
    LeaseOwner,
    /// Must report a fresh pass for the task.
    Blocking,
    /// Deep Reviewer: blocking when a load-bearing path changed, else non-blocking.
    BlockingIfLoadBearing,
    /// Planner and Experiment Scout: never block.
    NonBlocking,
}

impl ShipGate {
    /// The name stored on disk.
    pub fn as_str(self) -> &'static str {
        match self {
            ShipGate::ControlPlane => "control-plane",
            ShipGate::LeaseOwner => "lease-owner",
            ShipGate::Blocking => "blocking",
            ShipGate::BlockingIfLoadBearing => "blocking-if-load-bearing",
            ShipGate::NonBlocking => "non-blocking",
        }
    }

    /// Whether a session of this class must pass for a task.
    pub fn blocks(self, load_bearing: bool) -> bool {
        match self {
            ShipGate::Blocking => true,
            ShipGate::BlockingIfLoadBearing => load_bearing,
            _ => false,
        }
    }
}

/// One row of the topology table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleSpec {
    /// Stable id, e.g. `implementer`.
    pub session_id: &'static str,
    /// Human role name, e.g. `Implementer`.
    pub role: &'static str,
    /// Gate class.
    pub ship_gate: ShipGate,
    /// What the session may write.
    pub write_authority: &'static str,
    /// Part of the four-role topology.
    pub four_role: bool,
    /// Part of the expanded-eight topology.
    pub expanded_eight: bool,
}

impl RoleSpec {
    /// Only the Implementer writes (and so owns the write lease).
    pub fn write_lease_owner(&self) -> bool {
        self.ship_gate == ShipGate::LeaseOwner
    }
}

/// docs/registry.md's table, row for row.
pub const ROLES: &[RoleSpec] = &[
    RoleSpec {
        session_id: "orchestrator",
        role: "Orchestrator",
        ship_gate: ShipGate::ControlPlane,
        write_authority: "ledger, queue/plan proposal, gate decision",
        four_role: true,
        expanded_eight: true,
    },
    RoleSpec {
        session_id: "planner-triage",
        role: "Planner / Issue Triage",
        ship_gate: ShipGate::NonBlocking,
        write_authority: "read-only queue/plan/workset proposal",
        four_role: false,
        expanded_eight: true,
    },
    RoleSpec {
        session_id: "experiment-scout",
        role: "Experiment Scout",
        ship_gate: ShipGate::NonBlocking,
        write_authority: "read-only hypothesis, ablation, aggregate evidence",
        four_role: false,
        expanded_eight: true,
    },
    RoleSpec {
        session_id: "implementer",
        role: "Implementer",
        ship_gate: ShipGate::LeaseOwner,
        write_authority: "assigned task branch/worktree only",
        four_role: true,
        expanded_eight: true,
    },
    RoleSpec {
        session_id: "reviewer",
        role: "Reviewer",
        ship_gate: ShipGate::Blocking,
        write_authority: "read-only review report",
        four_role: true,
        expanded_eight: true,
    },
    RoleSpec {
        session_id: "deep-reviewer",
        role: "Deep Reviewer",
        ship_gate: ShipGate::BlockingIfLoadBearing,
        write_authority: "read-only architecture/load-bearing review",
        four_role: false,
        expanded_eight: true,
    },
    RoleSpec {
        session_id: "ci-eval-auditor",
        role: "CI/Eval Auditor",
        ship_gate: ShipGate::Blocking,
        write_authority: "read-only CI/eval/claim report",
        four_role: true,
        expanded_eight: false,
    },
    RoleSpec {
        session_id: "ci-regression-auditor",
        role: "CI / Regression Auditor",
        ship_gate: ShipGate::Blocking,
        write_authority: "read-only CI/regression report",
        four_role: false,
        expanded_eight: true,
    },
    RoleSpec {
        session_id: "eval-claim-privacy-auditor",
        role: "Eval / Claim / Privacy Auditor",
        ship_gate: ShipGate::Blocking,
        write_authority: "read-only eval/claim/privacy report",
        four_role: false,
        expanded_eight: true,
    },
];

/// The table row for a session id.
pub fn role_by_session_id(id: &str) -> Option<&'static RoleSpec> {
    ROLES.iter().find(|r| r.session_id == id)
}

/// The table row for a role name (case and spacing around `/` ignored).
pub fn role_by_name(name: &str) -> Option<&'static RoleSpec> {
    let norm = |s: &str| {
        s.to_ascii_lowercase()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
    };
    let want = norm(name);
    ROLES.iter().find(|r| norm(r.role) == want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_role_is_the_four_sessions_of_the_table() {
        let ids: Vec<_> = Topology::FourRole.roles().map(|r| r.session_id).collect();
        assert_eq!(
            ids,
            ["orchestrator", "implementer", "reviewer", "ci-eval-auditor"]
        );
    }

    #[test]
    fn expanded_eight_has_eight_and_one_writer() {
        let roles: Vec<_> = Topology::ExpandedEight.roles().collect();
        assert_eq!(roles.len(), 8);
        let writers: Vec<_> = roles.iter().filter(|r| r.write_lease_owner()).collect();
        assert_eq!(writers.len(), 1);
        assert_eq!(writers[0].session_id, "implementer");
        assert!(!roles.iter().any(|r| r.session_id == "ci-eval-auditor"));
    }

    #[test]
    fn role_names_match_loosely() {
        assert_eq!(
            role_by_name("ci / eval auditor").map(|r| r.session_id),
            Some("ci-eval-auditor")
        );
        assert!(role_by_name("dual-agent").is_none());
    }

    #[test]
    fn deep_reviewer_blocks_only_when_load_bearing() {
        let d = role_by_session_id("deep-reviewer").unwrap();
        assert!(!d.ship_gate.blocks(false));
        assert!(d.ship_gate.blocks(true));
        assert!(!ShipGate::NonBlocking.blocks(true));
    }
}
