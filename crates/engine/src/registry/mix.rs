//! The Claude:Codex balance, measured in work units (WU) over a rolling window
//! of tasks (docs/registry.md "Agent mix"). `agent_mix.json` holds the ledger; the
//! decisions are pure functions over it.

use super::schema::Agent;
use super::{RegistryError, validate_id};
use crate::statedir::StateDir;
use crate::store;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Default WU target per agent.
pub const DEFAULT_TARGET_WU: u32 = 5;
/// Default rolling window, in tasks.
pub const DEFAULT_WINDOW_TASKS: u32 = 20;
/// Default skew (WU) above which `drover mix` reports an imbalance.
pub const DEFAULT_MAX_SKEW_WU: u32 = 2;
/// The most WU one record may carry.
pub const MAX_WU_PER_RECORD: u32 = 1000;
/// Version of `agent_mix.json`.
pub const LEDGER_VERSION: u64 = 1;

/// The WU target per agent, e.g. `claude=5,codex=5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MixTarget {
    pub claude: u32,
    pub codex: u32,
}

impl MixTarget {
    /// The value for one agent.
    pub fn get(&self, a: Agent) -> u32 {
        match a {
            Agent::Claude => self.claude,
            Agent::Codex => self.codex,
        }
    }
}

impl std::fmt::Display for MixTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "claude={},codex={}", self.claude, self.codex)
    }
}

/// The rolling window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MixWindow {
    #[serde(rename = "type")]
    pub kind: String,
    pub size: u32,
}

/// The registry's `agent_mix` policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MixPolicy {
    pub target: MixTarget,
    pub unit: String,
    pub window: MixWindow,
    pub max_allowed_skew_wu: u32,
}

impl Default for MixPolicy {
    fn default() -> Self {
        MixPolicy {
            target: MixTarget {
                claude: DEFAULT_TARGET_WU,
                codex: DEFAULT_TARGET_WU,
            },
            unit: "work_unit".into(),
            window: MixWindow {
                kind: "rolling_tasks".into(),
                size: DEFAULT_WINDOW_TASKS,
            },
            max_allowed_skew_wu: DEFAULT_MAX_SKEW_WU,
        }
    }
}

impl MixPolicy {
    /// The default policy with another target.
    pub fn with_target(target: MixTarget) -> MixPolicy {
        MixPolicy {
            target,
            ..MixPolicy::default()
        }
    }
}

/// Parse `--agent-mix claude=5,codex=5`. A missing agent gets 0; at least one
/// must be positive; each agent at most once.
pub fn parse_agent_mix(s: &str) -> Result<MixTarget, RegistryError> {
    let field = "--agent-mix";
    let mut seen: BTreeMap<Agent, u32> = BTreeMap::new();
    for item in s.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(RegistryError::usage(
                field,
                format!("empty item in {s:?}; expected e.g. claude=5,codex=5"),
            ));
        }
        let Some((name, n)) = item.split_once('=') else {
            return Err(RegistryError::usage(
                field,
                format!("{item:?} is not agent=WU (e.g. claude=5)"),
            ));
        };
        let agent = Agent::parse(name.trim()).ok_or_else(|| {
            RegistryError::usage(
                field,
                format!("unknown agent {:?}; expected claude or codex", name.trim()),
            )
        })?;
        let n: u32 = n.trim().parse().map_err(|_| {
            RegistryError::usage(
                field,
                format!("{agent}={:?}: WU must be a whole number", n.trim()),
            )
        })?;
        if n > MAX_WU_PER_RECORD {
            return Err(RegistryError::usage(
                field,
                format!("{agent}={n}: at most {MAX_WU_PER_RECORD}"),
            ));
        }
        if seen.insert(agent, n).is_some() {
            return Err(RegistryError::usage(
                field,
                format!("{agent} is given twice"),
            ));
        }
    }
    let t = MixTarget {
        claude: seen.get(&Agent::Claude).copied().unwrap_or(0),
        codex: seen.get(&Agent::Codex).copied().unwrap_or(0),
    };
    if t.claude == 0 && t.codex == 0 {
        return Err(RegistryError::usage(
            field,
            "at least one agent needs a positive target",
        ));
    }
    Ok(t)
}

/// One ledger row: an agent spent WU on a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixEntry {
    pub task: String,
    pub agent: Agent,
    pub wu: u32,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// WU spent per agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spent {
    pub claude: u32,
    pub codex: u32,
}

impl Spent {
    fn add(&mut self, a: Agent, wu: u32) {
        match a {
            Agent::Claude => self.claude = self.claude.saturating_add(wu),
            Agent::Codex => self.codex = self.codex.saturating_add(wu),
        }
    }
}

/// `agent_mix.json`: the policy, the rolling ledger, and what it adds up to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixLedger {
    pub schema_version: u64,
    #[serde(flatten)]
    pub policy: MixPolicy,
    pub ledger: Vec<MixEntry>,
    pub spent: Spent,
    pub skew_wu: f64,
    pub next_agent: Agent,
    /// When the ledger was last written.
    #[serde(default, with = "crate::time::opt_millis_note")]
    pub updated_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl MixLedger {
    /// An empty ledger for a policy.
    pub fn new(policy: MixPolicy) -> MixLedger {
        let mut l = MixLedger {
            schema_version: LEDGER_VERSION,
            policy,
            ledger: Vec::new(),
            spent: Spent::default(),
            skew_wu: 0.0,
            next_agent: Agent::Claude,
            updated_at: None,
        };
        l.recompute();
        l
    }

    /// Drop rows outside the window and refresh the totals.
    pub fn recompute(&mut self) {
        self.ledger = window(&self.ledger, self.policy.window.size);
        let r = report(&self.policy, &self.ledger, None);
        self.spent = r.spent;
        self.skew_wu = r.skew_wu;
        self.next_agent = r.next_agent;
    }
}

/// Keep the rows of the last `size` distinct tasks (by latest appearance).
pub fn window(entries: &[MixEntry], size: u32) -> Vec<MixEntry> {
    let mut tasks: HashSet<&str> = HashSet::new();
    for e in entries.iter().rev() {
        if tasks.len() >= size as usize {
            break;
        }
        tasks.insert(&e.task);
    }
    entries
        .iter()
        .filter(|e| tasks.contains(e.task.as_str()))
        .cloned()
        .collect()
}

/// What `drover mix` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixReport {
    pub target: MixTarget,
    pub window_tasks: u32,
    pub tasks_in_window: usize,
    pub spent: Spent,
    /// Claude's WU minus its target share of the total: positive means Claude is ahead.
    pub skew_wu: f64,
    pub max_allowed_skew_wu: u32,
    pub over_skew: bool,
    /// The agent the next lane should use.
    pub next_agent: Agent,
}

/// Sum a (windowed) ledger against the policy. `session_lanes` is a session's
/// (claude, codex) WU, used to break a tie.
pub fn report(policy: &MixPolicy, entries: &[MixEntry], session_lanes: Option<Spent>) -> MixReport {
    let mut spent = Spent::default();
    let mut tasks = HashSet::new();
    for e in entries {
        spent.add(e.agent, e.wu);
        tasks.insert(e.task.as_str());
    }
    let skew_wu = skew(policy.target, spent);
    MixReport {
        target: policy.target,
        window_tasks: policy.window.size,
        tasks_in_window: tasks.len(),
        spent,
        skew_wu,
        max_allowed_skew_wu: policy.max_allowed_skew_wu,
        over_skew: skew_wu.abs() > f64::from(policy.max_allowed_skew_wu),
        next_agent: next_agent(policy.target, skew_wu, session_lanes),
    }
}

/// Claude's spent WU minus its share of the total under the target ratio.
pub fn skew(target: MixTarget, spent: Spent) -> f64 {
    let t = f64::from(target.claude) + f64::from(target.codex);
    if t == 0.0 {
        return 0.0;
    }
    let total = f64::from(spent.claude) + f64::from(spent.codex);
    let s = f64::from(spent.claude) - total * f64::from(target.claude) / t;
    (s * 100.0).round() / 100.0
}

/// The agent that reduces the skew; on a tie, the one this session used less;
/// then the one with the larger target; then Claude.
pub fn next_agent(target: MixTarget, skew_wu: f64, session: Option<Spent>) -> Agent {
    if target.codex == 0 {
        return Agent::Claude;
    }
    if target.claude == 0 {
        return Agent::Codex;
    }
    if skew_wu > 0.0 {
        return Agent::Codex;
    }
    if skew_wu < 0.0 {
        return Agent::Claude;
    }
    if let Some(s) = session
        && s.claude != s.codex
    {
        return if s.claude < s.codex {
            Agent::Claude
        } else {
            Agent::Codex
        };
    }
    if target.codex > target.claude {
        Agent::Codex
    } else {
        Agent::Claude
    }
}

/// Read `agent_mix.json` (`None` when absent).
pub fn load(state_dir: &StateDir) -> Result<Option<MixLedger>, RegistryError> {
    let path = state_dir.mix_file();
    let Some(v) = store::read_json::<serde_json::Value>(&path)? else {
        return Ok(None);
    };
    parse_ledger(&path, v).map(Some)
}

fn parse_ledger(path: &Path, v: serde_json::Value) -> Result<MixLedger, RegistryError> {
    super::parse_versioned(path, v, LEDGER_VERSION)
}

/// Change the ledger under its lock. `policy` (the registry's, when there is
/// one) replaces the stored policy.
pub fn update<R>(
    state_dir: &StateDir,
    policy: Option<&MixPolicy>,
    f: impl FnOnce(&mut MixLedger) -> R,
) -> Result<(R, MixLedger), RegistryError> {
    let path = state_dir.mix_file();
    let _lock = store::lock_beside(&path)?;
    let mut ledger = match store::read_json::<serde_json::Value>(&path)? {
        Some(v) => parse_ledger(&path, v)?,
        None => MixLedger::new(policy.cloned().unwrap_or_default()),
    };
    if let Some(p) = policy {
        ledger.policy = p.clone();
    }
    let out = f(&mut ledger);
    ledger.recompute();
    ledger.updated_at = Some(crate::time::to_millis(chrono::Utc::now()));
    store::write_json_atomic(&path, &ledger)?;
    Ok((out, ledger))
}

/// A `drover mix record` request.
#[derive(Debug, Clone)]
pub struct RecordRequest {
    pub task: String,
    pub agent: Agent,
    pub wu: u32,
    pub session: Option<String>,
}

/// Append a ledger row; when a session is named, refresh its lanes'
/// `wu_spent_rolling` in the registry.
pub fn record(
    state_dir: &StateDir,
    req: &RecordRequest,
    now: DateTime<Utc>,
) -> Result<MixReport, RegistryError> {
    validate_id("--task", &req.task)?;
    if req.wu == 0 || req.wu > MAX_WU_PER_RECORD {
        return Err(RegistryError::usage(
            "--wu",
            format!("must be 1..={MAX_WU_PER_RECORD}"),
        ));
    }
    let reg = super::load(state_dir)?;
    if let Some(sid) = &req.session {
        let known = reg.as_ref().is_some_and(|r| r.session(sid).is_some());
        if !known {
            return Err(RegistryError::usage(
                "--session",
                format!("no session {sid:?} in the registry"),
            ));
        }
    }
    let policy = reg.as_ref().map(|r| r.agent_mix.clone());
    let entry = MixEntry {
        task: req.task.clone(),
        agent: req.agent,
        wu: req.wu,
        at: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        session: req.session.clone(),
    };
    let ((), ledger) = update(state_dir, policy.as_ref(), |l| l.ledger.push(entry))?;
    if reg.is_some() {
        refresh_lane_wu(state_dir)?;
    }
    super::events::emit_quiet(
        state_dir,
        "mix.record",
        serde_json::json!({"task": req.task, "agent": req.agent, "wu": req.wu, "session": req.session}),
    );
    Ok(report(&ledger.policy, &ledger.ledger, None))
}

/// Set every lane's `wu_spent_rolling` from the ledger's window. The ledger is
/// re-read under the registry lock so a late writer cannot store an old sum.
fn refresh_lane_wu(state_dir: &StateDir) -> Result<(), RegistryError> {
    super::update(state_dir, |reg| {
        let ledger = load(state_dir)?.unwrap_or_else(|| MixLedger::new(reg.agent_mix.clone()));
        for s in &mut reg.sessions {
            for a in Agent::ALL {
                let sum: u32 = ledger
                    .ledger
                    .iter()
                    .filter(|e| e.agent == a && e.session.as_deref() == Some(s.session_id.as_str()))
                    .map(|e| e.wu)
                    .sum();
                s.lanes.get_mut(a).wu_spent_rolling = sum;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(task: &str, agent: Agent, wu: u32) -> MixEntry {
        MixEntry {
            task: task.into(),
            agent,
            wu,
            at: String::new(),
            session: None,
        }
    }

    #[test]
    fn parses_and_names_what_is_wrong() {
        assert_eq!(
            parse_agent_mix("claude=5,codex=5").unwrap(),
            MixTarget {
                claude: 5,
                codex: 5
            }
        );
        assert_eq!(
            parse_agent_mix(" codex=3 ").unwrap(),
            MixTarget {
                claude: 0,
                codex: 3
            }
        );
        for (bad, says) in [
            ("claude=5,gpt=5", "unknown agent"),
            ("claude=five", "whole number"),
            ("claude=-1", "whole number"),
            ("claude", "not agent=WU"),
            ("claude=1,claude=2", "twice"),
            ("claude=0,codex=0", "positive"),
            ("", "empty item"),
            ("claude=5,", "empty item"),
        ] {
            let err = parse_agent_mix(bad).unwrap_err();
            assert!(matches!(err, RegistryError::Usage { .. }));
            assert!(err.to_string().contains(says), "{bad}: {err}");
            assert!(err.to_string().starts_with("--agent-mix"), "{err}");
        }
    }

    #[test]
    fn skew_follows_the_target_ratio() {
        let even = MixTarget {
            claude: 5,
            codex: 5,
        };
        assert_eq!(
            skew(
                even,
                Spent {
                    claude: 6,
                    codex: 2
                }
            ),
            2.0
        );
        assert_eq!(
            skew(
                even,
                Spent {
                    claude: 2,
                    codex: 6
                }
            ),
            -2.0
        );
        let uneven = MixTarget {
            claude: 3,
            codex: 7,
        };
        assert_eq!(
            skew(
                uneven,
                Spent {
                    claude: 3,
                    codex: 7
                }
            ),
            0.0
        );
    }

    #[test]
    fn next_agent_reduces_skew_then_breaks_ties_by_session() {
        let even = MixTarget {
            claude: 5,
            codex: 5,
        };
        assert_eq!(next_agent(even, 1.0, None), Agent::Codex);
        assert_eq!(next_agent(even, -0.5, None), Agent::Claude);
        assert_eq!(
            next_agent(
                even,
                0.0,
                Some(Spent {
                    claude: 4,
                    codex: 1
                })
            ),
            Agent::Codex
        );
        assert_eq!(next_agent(even, 0.0, None), Agent::Claude);
        assert_eq!(
            next_agent(
                MixTarget {
                    claude: 0,
                    codex: 1
                },
                -9.0,
                None
            ),
            Agent::Codex
        );
    }

    #[test]
    fn window_keeps_the_last_tasks() {
        let rows = vec![
            e("T1", Agent::Claude, 1),
            e("T2", Agent::Codex, 2),
            e("T3", Agent::Claude, 3),
            e("T2", Agent::Claude, 1),
        ];
        let w = window(&rows, 2);
        let tasks: Vec<_> = w.iter().map(|r| r.task.as_str()).collect();
        assert_eq!(tasks, ["T2", "T3", "T2"]);
        let r = report(&MixPolicy::default(), &w, None);
        assert_eq!(
            r.spent,
            Spent {
                claude: 4,
                codex: 2
            }
        );
        assert_eq!(r.skew_wu, 1.0);
        assert!(!r.over_skew);
        assert_eq!(r.next_agent, Agent::Codex);
    }
}
