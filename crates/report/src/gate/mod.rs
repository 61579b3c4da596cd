//! The conservative gate (docs/registry.md): a task is `ready` only when no lease for it
//! needs recovery, every blocking session of the topology has a fresh
//! pass-class heartbeat for it (the Deep Reviewer too when a load-bearing path
//! changed), and the event log's privacy audit is clean. Otherwise it is
//! `blocked`, with every reason. Planner and Experiment Scout never block.
//!
//! [`evaluate`] decides from loaded data (pure); [`check`] loads and decides.

use crate::registry::events::{self, AuditFinding};
use crate::registry::heartbeat::{self, SessionVerdict};
use crate::registry::lease::{self, Lease, LeaseState};
use crate::registry::schema::GATE_POLICY;
use crate::registry::{self, Registry, RegistryError, ShipGate, Topology};
use crate::statedir::StateDir;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;

/// Ready or blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Ready,
    Blocked,
}

/// One reason the gate is blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// `registry`, `task`, `lease`, `session` or `privacy`.
    pub check: &'static str,
    /// What it is about: a session id, a lease id, an event seq.
    pub subject: String,
    pub message: String,
}

/// A blocking session and how it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Required {
    pub session_id: String,
    pub role: String,
    pub ship_gate: ShipGate,
    pub passed: bool,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateReport {
    pub verdict: Verdict,
    pub task: Option<String>,
    pub topology: Option<Topology>,
    pub load_bearing: bool,
    pub required: Vec<Required>,
    pub privacy_findings: usize,
    pub reasons: Vec<Reason>,
}

/// What the gate looks at.
#[derive(Debug, Clone)]
pub struct GateInput<'a> {
    pub registry: Option<&'a Registry>,
    /// Leases with their states brought up to date.
    pub leases: &'a [Lease],
    /// The privacy audit, or why it could not run.
    pub audit: Result<Vec<AuditFinding>, String>,
    pub task: Option<&'a str>,
    pub load_bearing: bool,
    pub now: DateTime<Utc>,
}

fn reason(check: &'static str, subject: impl Into<String>, message: impl Into<String>) -> Reason {
    Reason {
        check,
        subject: subject.into(),
        message: message.into(),
    }
}

/// The task the gate is about when none is given: the write-lease owner's
/// task, else the only eligible lease's task.
pub fn default_task(reg: Option<&Registry>, leases: &[Lease]) -> Option<String> {
    if let Some(t) = reg
        .and_then(|r| r.write_lease_owner())
        .and_then(|s| s.task.clone())
    {
        return Some(t);
    }
    let mut tasks = leases
        .iter()
        .filter(|l| l.eligible())
        .filter_map(|l| l.task_id.clone());
    match (tasks.next(), tasks.next()) {
        (Some(t), None) => Some(t),
        _ => None,
    }
}

/// Decide (pure).
pub fn evaluate(input: &GateInput<'_>) -> GateReport {
    let mut reasons = Vec::new();
    let task = input
        .task
        .map(str::to_string)
        .or_else(|| default_task(input.registry, input.leases));
    let mut required = Vec::new();
    match (input.registry, &task) {
        (None, _) => reasons.push(reason(
            "registry",
            "session_registry.json",
            "no registry: run `drover registry init`",
        )),
        (Some(_), None) => reasons.push(reason(
            "task",
            "-",
            "no task: pass --task (the Implementer has none and there is no single lease)",
        )),
        (Some(reg), Some(task)) => {
            if reg.gate_policy != GATE_POLICY {
                reasons.push(reason(
                    "registry",
                    "gate_policy",
                    format!(
                        "unknown gate_policy {:?}; only conservative exists",
                        reg.gate_policy
                    ),
                ));
            }
            let mut ids: Vec<(String, String, ShipGate)> = reg
                .topology
                .roles()
                .filter(|r| r.ship_gate.blocks(input.load_bearing))
                .map(|r| (r.session_id.to_string(), r.role.to_string(), r.ship_gate))
                .collect();
            for s in &reg.sessions {
                if s.ship_gate.blocks(input.load_bearing)
                    && !ids.iter().any(|(id, ..)| *id == s.session_id)
                {
                    ids.push((s.session_id.clone(), s.role.clone(), s.ship_gate));
                }
            }
            for (id, role, gate) in ids {
                let passed = match reg.session(&id) {
                    None => {
                        reasons.push(reason(
                            "session",
                            &id,
                            format!("{role} ({id}) is missing from the registry"),
                        ));
                        false
                    }
                    Some(s) => match heartbeat::verdict(s, task, input.now) {
                        SessionVerdict::Pass => true,
                        SessionVerdict::Fail(why) | SessionVerdict::NoPass(why) => {
                            reasons.push(reason(
                                "session",
                                &id,
                                format!("{role} ({id}) has not passed {task}: {why}"),
                            ));
                            false
                        }
                    },
                };
                required.push(Required {
                    session_id: id,
                    role,
                    ship_gate: gate,
                    passed,
                });
            }
        }
    }
    if let Some(task) = &task {
        for l in input
            .leases
            .iter()
            .filter(|l| l.task_id.as_deref() == Some(task.as_str()))
        {
            if l.state == LeaseState::RecoveryNeeded {
                reasons.push(reason(
                    "lease",
                    &l.lease_id,
                    format!(
                        "lease {} for {task} needs recovery: {}",
                        l.lease_id,
                        l.recovery_reason.as_deref().unwrap_or("unknown")
                    ),
                ));
            }
        }
    }
    let privacy_findings = match &input.audit {
        Ok(f) => {
            for x in f {
                let at = x
                    .seq
                    .map_or_else(|| format!("line {}", x.line), |s| format!("seq {s}"));
                reasons.push(reason(
                    "privacy",
                    at.clone(),
                    format!("events.jsonl {at}: {} in field {}", x.rule, x.field),
                ));
            }
            f.len()
        }
        Err(why) => {
            reasons.push(reason(
                "privacy",
                "events.jsonl",
                format!("the privacy audit could not run: {why}"),
            ));
            0
        }
    };
    GateReport {
        verdict: if reasons.is_empty() {
            Verdict::Ready
        } else {
            Verdict::Blocked
        },
        task,
        topology: input.registry.map(|r| r.topology),
        load_bearing: input.load_bearing,
        required,
        privacy_findings,
        reasons,
    }
}

/// Load everything and decide. A registry or lease file that cannot be read
/// is an error, not a verdict.
pub fn check(
    state_dir: &StateDir,
    task: Option<&str>,
    load_bearing: bool,
    now: DateTime<Utc>,
) -> Result<GateReport, RegistryError> {
    if let Some(t) = task {
        registry::validate_id("--task", t)?;
    }
    let reg = registry::load(state_dir)?;
    let leases = lease::list(state_dir, now)?;
    let audit = events::audit(state_dir).map_err(|e| e.to_string());
    let report = evaluate(&GateInput {
        registry: reg.as_ref(),
        leases: &leases,
        audit,
        task,
        load_bearing,
        now,
    });
    events::emit_quiet(
        state_dir,
        "gate.check",
        json!({"task": report.task, "verdict": report.verdict, "reasons": report.reasons.len(), "load_bearing": load_bearing}),
    );
    Ok(report)
}

/// The human view of a report.
pub fn render(r: &GateReport) -> String {
    let verdict = match r.verdict {
        Verdict::Ready => "ready",
        Verdict::Blocked => "blocked",
    };
    let mut out = format!(
        "{verdict}: task {} · topology {}{}\n",
        r.task.as_deref().unwrap_or("-"),
        r.topology.map_or("-", |t| t.as_str()),
        if r.load_bearing {
            " · load-bearing"
        } else {
            ""
        }
    );
    for q in &r.required {
        out += &format!(
            "  {} {} ({})\n",
            if q.passed { "pass" } else { "----" },
            q.session_id,
            q.role
        );
    }
    for x in &r.reasons {
        out += &format!("  - {}\n", x.message);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::heartbeat::{HeartbeatRequest, apply};
    use crate::registry::mix::MixPolicy;
    use crate::registry::schema::Agent;

    fn pass(reg: &mut Registry, id: &str, task: &str, now: DateTime<Utc>) {
        let req = HeartbeatRequest {
            session_id: id.into(),
            task: Some(task.into()),
            status: "passed".into(),
            agent: Some(Agent::Codex),
            ..Default::default()
        };
        apply(reg, &req, now).unwrap();
    }

    fn eval(reg: &Registry, lb: bool, now: DateTime<Utc>) -> GateReport {
        evaluate(&GateInput {
            registry: Some(reg),
            leases: &[],
            audit: Ok(vec![]),
            task: Some("T-1"),
            load_bearing: lb,
            now,
        })
    }

    #[test]
    fn four_role_needs_reviewer_and_auditor_only() {
        let now = Utc::now();
        let mut reg = Registry::new(Topology::FourRole, MixPolicy::default());
        let r = eval(&reg, false, now);
        assert_eq!(r.verdict, Verdict::Blocked);
        let blocked: Vec<_> = r.reasons.iter().map(|x| x.subject.as_str()).collect();
        assert_eq!(blocked, ["reviewer", "ci-eval-auditor"]);
        pass(&mut reg, "reviewer", "T-1", now);
        pass(&mut reg, "ci-eval-auditor", "T-1", now);
        assert_eq!(eval(&reg, false, now).verdict, Verdict::Ready);
        assert_eq!(
            eval(&reg, true, now).verdict,
            Verdict::Ready,
            "no deep reviewer in four-role"
        );
    }

    #[test]
    fn expanded_eight_adds_deep_reviewer_when_load_bearing_and_never_planner() {
        let now = Utc::now();
        let mut reg = Registry::new(Topology::ExpandedEight, MixPolicy::default());
        for id in [
            "reviewer",
            "ci-regression-auditor",
            "eval-claim-privacy-auditor",
        ] {
            pass(&mut reg, id, "T-1", now);
        }
        assert_eq!(eval(&reg, false, now).verdict, Verdict::Ready);
        let r = eval(&reg, true, now);
        assert_eq!(r.reasons.len(), 1);
        assert_eq!(r.reasons[0].subject, "deep-reviewer");
        pass(&mut reg, "deep-reviewer", "T-1", now);
        assert_eq!(eval(&reg, true, now).verdict, Verdict::Ready);
    }

    #[test]
    fn privacy_and_missing_registry_block() {
        let now = Utc::now();
        let reg = Registry::new(Topology::FourRole, MixPolicy::default());
        let f = AuditFinding {
            seq: Some(4),
            line: 4,
            rule: "github-token",
            field: "cmd".into(),
        };
        let r = evaluate(&GateInput {
            registry: Some(&reg),
            leases: &[],
            audit: Ok(vec![f]),
            task: Some("T-1"),
            load_bearing: false,
            now,
        });
        assert!(
            r.reasons
                .iter()
                .any(|x| x.check == "privacy" && x.message.contains("github-token"))
        );
        let r = evaluate(&GateInput {
            registry: None,
            leases: &[],
            audit: Ok(vec![]),
            task: None,
            load_bearing: false,
            now,
        });
        assert_eq!(r.verdict, Verdict::Blocked);
        assert_eq!(r.reasons[0].check, "registry");
    }
}
