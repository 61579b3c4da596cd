//! The snapshot the page shows, as typed JSON: `top`'s view
//! ([`crate::top::view::View`]) in the shape docs/web.md gives, the ones
//! that need a human first. Nothing else goes in: no env values, prompt
//! bodies or transcripts; a pane's screen is asked for separately.

use crate::agent::BlockedKind;
use crate::fleet::membership::HostState;
use crate::registry::Agent;
use crate::runstate::{Phase, RunState};
use crate::top::runs::RunCell;
use crate::top::state::RowState;
use crate::top::view::{Attention, Row, View};
use serde::Serialize;
use std::collections::BTreeMap;

/// The whole page's data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    /// The newest supervisor event seq it reflects.
    pub seq: u64,
    pub read_only: bool,
    /// This machine's hostname.
    pub host: String,
    /// The token's id (as the audit log names it).
    pub token_id: String,
    pub warning: Option<String>,
    pub panes: Vec<PaneJson>,
    pub runs: Vec<RunJson>,
    pub older_runs: usize,
    pub gate: Option<GateJson>,
    pub hosts: Vec<HostJson>,
}

/// One pane (or lane without a pane).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaneJson {
    pub name: String,
    pub agent: String,
    pub agent_version: Option<String>,
    pub state: RowState,
    pub blocked_kind: Option<BlockedKind>,
    /// A blocked dialog's option labels, when known.
    pub options: Vec<String>,
    pub since_ms: u64,
    pub attention: Attention,
    pub needs_human: bool,
    pub lane_id: Option<String>,
    pub worktree_state: Option<String>,
    pub ahead: Option<u64>,
    pub behind: Option<u64>,
    pub parked_until: Option<String>,
    pub job_id: Option<String>,
    pub decision: Option<String>,
    /// What the pane's agent reported using, in words (`12.3k in · 4.5k
    /// out · $0.42`); null when it reported nothing.
    pub usage: Option<String>,
}

/// One loop run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunJson {
    pub n: u32,
    pub state: RunState,
    pub live: bool,
    pub mode: String,
    pub integration_branch: String,
    pub needs_human: bool,
    pub tasks: Vec<TaskJson>,
    pub questions: Vec<QuestionJson>,
    /// What its tasks' lanes reported using, summed, in words (`not
    /// reported` when none did); null before a task started.
    pub usage: Option<String>,
}

/// A task of a run under way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskJson {
    pub id: String,
    pub title: String,
    pub phase: Phase,
    pub round: u32,
    pub agent: Option<Agent>,
    pub lane: Option<String>,
    pub reason: Option<String>,
    pub needs_human: bool,
}

/// A question put to the owner.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionJson {
    pub task: String,
    pub question: String,
    pub at: String,
}

/// The ship gate's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateJson {
    pub ready: bool,
    pub words: String,
}

/// A fleet host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostJson {
    pub host: String,
    pub state: HostState,
    pub last_seen: Option<String>,
    pub panes: usize,
}

/// A pane's row (with its dialog's options when blocked).
pub fn pane_json(r: &Row, options: Vec<String>) -> PaneJson {
    let blocked = r.state.agent() == Some(crate::agent::State::Blocked);
    PaneJson {
        name: r.pane.clone(),
        agent: r.agent.clone(),
        agent_version: r.agent_version.clone(),
        state: r.state,
        blocked_kind: r.state_kind.filter(|_| blocked),
        options,
        since_ms: r.since_ms,
        attention: r.attention,
        needs_human: r.attention.needs_human(),
        lane_id: r.lane_id.clone(),
        worktree_state: r.worktree_state.map(|w| w.as_str().to_string()),
        ahead: r.ahead_behind.map(|a| a.0),
        behind: r.ahead_behind.map(|a| a.1),
        parked_until: r.parked_until.clone(),
        job_id: r.job.as_ref().map(|j| j.job_id.clone()),
        decision: r.job.as_ref().and_then(|j| j.decision.clone()),
        usage: r.usage.map(|u| u.brief()),
    }
}

/// A run as the page shows it.
pub fn run_json(c: &RunCell) -> RunJson {
    RunJson {
        n: c.n,
        state: c.state,
        live: c.live,
        mode: c.mode.clone(),
        integration_branch: c.integration_branch.clone(),
        needs_human: c.needs_human(),
        tasks: c
            .tasks
            .iter()
            .map(|t| TaskJson {
                title: t.title.clone(),
                id: t.id.clone(),
                phase: t.phase,
                round: t.round,
                agent: t.agent,
                lane: t.lane.clone(),
                reason: t.reason.clone().or_else(|| t.stall.clone()),
                needs_human: t.needs_human(),
            })
            .collect(),
        questions: c
            .questions
            .iter()
            .map(|q| QuestionJson {
                task: q.task.clone(),
                question: q.question.clone(),
                at: q.at.clone(),
            })
            .collect(),
        usage: c.usage.clone(),
    }
}

/// Everything the page needs that is not `top`'s view.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    pub read_only: bool,
    pub host: String,
    pub token_id: String,
    /// Blocked panes' dialog options by pane.
    pub options: BTreeMap<String, Vec<String>>,
    pub hosts: Vec<HostJson>,
}

/// The snapshot of a view (pure).
pub fn snapshot(v: &View, x: &Extras) -> Snapshot {
    Snapshot {
        seq: v.seq,
        read_only: x.read_only,
        host: x.host.clone(),
        token_id: x.token_id.clone(),
        warning: v.warning.clone(),
        panes: v
            .rows
            .iter()
            .map(|r| pane_json(r, x.options.get(&r.pane).cloned().unwrap_or_default()))
            .collect(),
        runs: v.runs.iter().map(run_json).collect(),
        older_runs: v.older_runs,
        gate: v.gate.as_ref().map(|g| GateJson {
            ready: g.ready,
            words: g.words.clone(),
        }),
        hosts: x.hosts.clone(),
    }
}

/// This machine's hostname.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::runs::RunTask;
    use crate::top::view::{Inputs, build, test_pane};

    /// The page's words are the ones it always had: a pane's state, its
    /// blocked kind and attention, a run's state, a task's phase and agent,
    /// a host's state.
    #[test]
    fn every_word_on_the_page_is_the_old_word() {
        let mut blocked = test_pane("b", "blocked", 7);
        if let crate::proto::PaneEntry::Live(v) = &mut blocked {
            v.observation.kind = Some(BlockedKind::UsageLimit);
        }
        let inp = Inputs {
            panes: vec![blocked, test_pane("i", "idle", 5)],
            ..Default::default()
        };
        let mut v = build(&inp);
        v.runs = vec![RunCell {
            n: 2,
            state: RunState::Interrupted,
            tasks: vec![RunTask {
                id: "T-1".into(),
                phase: Phase::Parked,
                round: 2,
                agent: Some(Agent::Codex),
                ..Default::default()
            }],
            ..Default::default()
        }];
        let x = Extras {
            hosts: vec![HostJson {
                host: "h".into(),
                state: HostState::Late,
                last_seen: None,
                panes: 1,
            }],
            ..Default::default()
        };
        let json = serde_json::to_value(snapshot(&v, &x)).unwrap_or_default();
        assert_eq!(json["panes"][0]["state"], "blocked");
        assert_eq!(json["panes"][0]["blocked_kind"], "usage_limit");
        assert_eq!(json["panes"][0]["attention"], "blocked");
        assert_eq!(json["panes"][1]["state"], "idle");
        assert_eq!(json["panes"][1]["blocked_kind"], serde_json::Value::Null);
        assert_eq!(json["panes"][1]["attention"], "none");
        assert_eq!(json["runs"][0]["state"], "interrupted");
        assert_eq!(json["runs"][0]["tasks"][0]["phase"], "parked");
        assert_eq!(json["runs"][0]["tasks"][0]["agent"], "codex");
        assert_eq!(json["runs"][0]["tasks"][0]["round"], 2);
        assert_eq!(json["hosts"][0]["state"], "late");
    }

    /// A control and a state the page sends are read as sent and as their
    /// types: a word neither has is kept for the refusal, not a bad body.
    /// A pane's usage and a run's reach the page in words, or null.
    #[test]
    fn usage_reaches_the_page_in_words() {
        let mut used = test_pane("u", "idle", 5);
        if let crate::proto::PaneEntry::Live(v) = &mut used {
            v.usage = Some(crate::proto::usage::Usage {
                input_tokens: Some(1600),
                output_tokens: Some(340),
                cached_tokens: None,
                cost_usd: Some(0.06),
            });
        }
        let inp = Inputs {
            panes: vec![used, test_pane("q", "idle", 5)],
            ..Default::default()
        };
        let mut v = build(&inp);
        v.runs = vec![RunCell {
            n: 1,
            usage: Some("not reported".into()),
            ..Default::default()
        }];
        let json = serde_json::to_value(snapshot(&v, &Extras::default())).unwrap_or_default();
        let pane = |n: &str| {
            json["panes"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == n).cloned())
                .unwrap_or_default()
        };
        assert_eq!(pane("u")["usage"], "1600 in · 340 out · $0.06");
        assert_eq!(pane("q")["usage"], serde_json::Value::Null);
        assert_eq!(json["runs"][0]["usage"], "not reported");
    }

    #[test]
    fn a_control_request_keeps_the_words_it_was_sent() {
        let ok: Result<crate::web::actions::ControlReq, _> = serde_json::from_value(
            serde_json::json!({"run": 1, "control": "close-out", "state": "paused"}),
        );
        let ok = ok.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.control.known, Some(crate::runstate::Control::CloseOut));
        assert_eq!(ok.state.known, Some(RunState::Paused));
        let odd: Result<crate::web::actions::ControlReq, _> = serde_json::from_value(
            serde_json::json!({"run": 1, "control": "explode", "state": "?"}),
        );
        let odd = odd.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (odd.control.text.as_str(), odd.control.known),
            ("explode", None)
        );
        assert_eq!((odd.state.text.as_str(), odd.state.known), ("?", None));
        let bad: Result<crate::web::actions::ControlReq, _> =
            serde_json::from_value(serde_json::json!({"run": 1, "control": 3, "state": "paused"}));
        assert!(bad.is_err());
    }

    #[test]
    fn blocked_panes_come_first_with_their_options() {
        let inp = Inputs {
            panes: vec![
                test_pane("a-idle", "idle", 5),
                test_pane("b-blocked", "blocked", 7),
            ],
            ..Default::default()
        };
        let v = build(&inp);
        let mut x = Extras {
            token_id: "abcd1234".into(),
            ..Default::default()
        };
        x.options
            .insert("b-blocked".into(), vec!["Yes".into(), "No".into()]);
        let s = snapshot(&v, &x);
        assert_eq!(s.panes[0].name, "b-blocked");
        assert_eq!(s.panes[0].attention, Attention::Blocked);
        assert!(s.panes[0].needs_human);
        assert_eq!(s.panes[0].options, ["Yes", "No"]);
        assert_eq!(s.panes[0].since_ms, 7);
        assert!(s.panes[1].options.is_empty());
        let json = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(json["panes"][1]["state"], "idle");
        assert!(json["gate"].is_null());
    }
}
