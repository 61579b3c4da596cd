//! The event stream's events (docs/operators.md, "events --follow"), typed:
//! one [`Event`] variant per kind the supervisor publishes, tagged by its
//! `kind`, and the [`EventLine`] a subscriber reads (`seq`, `at`, then the
//! event). A registry event keeps its own kind and fields ([`RegistryEvent`]).
//!
//! A line is a JSON object whose keys are in sorted order, as the feed has
//! always written them: [`EventLine::to_line`] goes through a
//! `serde_json::Value`, whose map keeps its keys sorted.

use super::signal::{Limits, Source, Usage};
use super::state::{BlockedKind, State};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One event of the supervisor's feed, without its `seq` and `at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Event {
    #[serde(rename = "pane.created")]
    PaneCreated {
        pane: String,
        agent: String,
        generation: u64,
        pid: u32,
    },
    /// The detector saw the pane's state change (`from` is the previous one).
    #[serde(rename = "pane.state")]
    PaneState {
        pane: String,
        generation: u64,
        state: State,
        state_kind: Option<BlockedKind>,
        exit_code: Option<i32>,
        from: State,
    },
    #[serde(rename = "pane.exited")]
    PaneExited {
        pane: String,
        generation: u64,
        exit_code: Option<i32>,
    },
    #[serde(rename = "pane.killed")]
    PaneKilled { pane: String, pid: u32 },
    #[serde(rename = "pane.respawned")]
    PaneRespawned { pane: String, generation: u64 },
    /// An agent's own signal reached the supervisor: its kind and source,
    /// and a limits or usage signal's figures (numbers only: no body, no
    /// tool input, ever).
    #[serde(rename = "pane.signal")]
    PaneSignal {
        pane: String,
        generation: u64,
        source: Source,
        signal: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limits: Option<Limits>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The screen and the agent's own signals disagreed past their bound:
    /// the pane's state follows the fused rule; both sides are recorded,
    /// with the screen's hash (docs/agents.md, "Signals": the drift canary).
    #[serde(rename = "signal.disagree")]
    SignalDisagree {
        pane: String,
        generation: u64,
        /// The state the screen alone gave (`blocked:permission`, …).
        screen: String,
        /// The state the signals gave.
        signals: String,
        /// The state the pane now has, and the rule that decided it.
        fused: String,
        rule: String,
        /// The screen's hash, as the pane's snapshot gives it (`screen_hash`).
        screen_hash: String,
        /// How long they have disagreed.
        for_ms: u64,
    },
    /// An accepted request of `jobs/audit.jsonl`.
    #[serde(rename = "job.transition")]
    JobTransition(JobEvent),
    /// A refused request of `jobs/audit.jsonl`.
    #[serde(rename = "job.refused")]
    JobRefused(JobEvent),
    /// An idempotent repeat of `jobs/audit.jsonl`.
    #[serde(rename = "job.ack")]
    JobAck(JobEvent),
    /// A line of `shadow/decisions.jsonl`.
    #[serde(rename = "shadow.decision")]
    ShadowDecision(ShadowDecisionEvent),
    /// A subscriber fell behind (or asked for more than the ring holds):
    /// `missed` events, the first of them `first`.
    #[serde(rename = "missed")]
    Missed { missed: u64, first: u64 },
    /// A line of `registry/events.jsonl`, with the registry's own kind.
    #[serde(untagged)]
    Registry(RegistryEvent),
}

/// A job event's fields: only named ones (a job's free-text reason never
/// reaches the feed); a field the audit line lacked is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEvent {
    pub job_id: Option<String>,
    /// The request's name (`claim`, `complete`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_attempt_id: Option<String>,
    /// The transition's seq in the audit log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
}

/// A shadow decision's fields as the feed carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowDecisionEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The pane's generation the decision saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

/// A registry event: its kind, the pane it is about, and its fields as the
/// registry wrote them (`registry_seq`, `written_at`, `source: "registry"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistryEvent {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl Event {
    /// The event's kind, as `--kind` filters it.
    pub fn kind(&self) -> &str {
        match self {
            Event::PaneCreated { .. } => "pane.created",
            Event::PaneState { .. } => "pane.state",
            Event::PaneExited { .. } => "pane.exited",
            Event::PaneKilled { .. } => "pane.killed",
            Event::PaneRespawned { .. } => "pane.respawned",
            Event::PaneSignal { .. } => "pane.signal",
            Event::SignalDisagree { .. } => "signal.disagree",
            Event::JobTransition(_) => "job.transition",
            Event::JobRefused(_) => "job.refused",
            Event::JobAck(_) => "job.ack",
            Event::ShadowDecision(_) => "shadow.decision",
            Event::Missed { .. } => "missed",
            Event::Registry(r) => &r.kind,
        }
    }

    /// The pane the event is about, if one.
    pub fn pane(&self) -> Option<&str> {
        match self {
            Event::PaneCreated { pane, .. }
            | Event::PaneState { pane, .. }
            | Event::PaneExited { pane, .. }
            | Event::PaneKilled { pane, .. }
            | Event::PaneRespawned { pane, .. }
            | Event::PaneSignal { pane, .. }
            | Event::SignalDisagree { pane, .. } => Some(pane),
            Event::ShadowDecision(d) => d.pane.as_deref(),
            Event::Registry(r) => r.pane.as_deref(),
            Event::JobTransition(_) | Event::JobRefused(_) | Event::JobAck(_) => None,
            Event::Missed { .. } => None,
        }
    }
}

/// One line of the event stream: the feed's number, when it saw the event,
/// and the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    pub seq: u64,
    /// RFC 3339, UTC, when the supervisor saw it.
    pub at: String,
    #[serde(flatten)]
    pub event: Event,
}

impl EventLine {
    /// The line as the feed writes it: one JSON object, keys sorted. A
    /// registry field named like the line's own (`seq`, `at`, `kind`,
    /// `pane`) never overrides it.
    pub fn to_line(&self) -> String {
        let mut obj = match serde_json::to_value(&self.event) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        obj.remove("pane");
        if let Some(p) = self.event.pane() {
            obj.insert("pane".into(), Value::from(p));
        }
        obj.insert("kind".into(), Value::from(self.event.kind()));
        obj.insert("seq".into(), Value::from(self.seq));
        obj.insert("at".into(), Value::from(self.at.as_str()));
        Value::Object(obj).to_string()
    }

    /// Read one line of the stream.
    pub fn parse(line: &str) -> Result<EventLine, serde_json::Error> {
        serde_json::from_str(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the feed wrote them before its events were typed (keys
    /// sorted, a missing exit code and kind as `null`).
    const LINES: &[&str] = &[
        r#"{"agent":"sim","at":"2026-12-05T23:00:00.000Z","generation":1,"kind":"pane.created","pane":"a","pid":42,"seq":1}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","exit_code":null,"from":"starting","generation":1,"kind":"pane.state","pane":"a","seq":2,"state":"blocked","state_kind":"permission"}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","exit_code":null,"from":"idle","generation":1,"kind":"pane.state","pane":"a","seq":3,"state":"exited","state_kind":null}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","exit_code":3,"generation":1,"kind":"pane.exited","pane":"a","seq":4}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","kind":"pane.killed","pane":"a","pid":42,"seq":5}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","generation":2,"kind":"pane.respawned","pane":"a","seq":6}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","authority":"agent","from":"queued","job_id":"J1","job_seq":3,"kind":"job.transition","new_attempt_id":"A1","request":"claim","seq":7,"to":"running"}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","authority":"agent","from":"running","job_id":"J1","kind":"job.refused","request":"claim","rule":"R3","seq":8}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","authority":"agent","job_id":"J2","kind":"job.ack","request":"cancel","seq":9}"#,
        r#"{"action":"completed","at":"2026-12-05T23:00:00.000Z","attempt_id":"A1","decision":"complete","generation":1,"job_id":"J1","kind":"shadow.decision","pane":"a","reason":"done","seq":10}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","attempt_id":"A1","decision":"hold_busy","job_id":"J1","kind":"shadow.decision","reason":"busy","seq":11}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","first":12,"kind":"missed","missed":4,"seq":15}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","kind":"lease.claim","pane":"a","registry_seq":7,"seq":16,"session":"s1","source":"registry","task":"T-1","written_at":"2026-12-05T22:59:59.000Z"}"#,
        r#"{"at":"2026-12-05T23:00:00.000Z","kind":"loop.start","registry_seq":8,"run":{"id":"r1"},"seq":17,"source":"registry","written_at":"2026-12-05T22:59:59.000Z"}"#,
    ];

    #[test]
    fn every_kind_reads_typed_and_writes_back_byte_for_byte() {
        for line in LINES {
            let ev = EventLine::parse(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(ev.to_line(), *line);
        }
    }

    #[test]
    fn the_typed_kinds_are_not_read_as_registry_events() {
        let kinds: Vec<String> = LINES
            .iter()
            .map(|l| {
                let ev = EventLine::parse(l).unwrap();
                let registry = matches!(ev.event, Event::Registry(_));
                format!("{}{}", ev.event.kind(), if registry { "*" } else { "" })
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "pane.created",
                "pane.state",
                "pane.state",
                "pane.exited",
                "pane.killed",
                "pane.respawned",
                "job.transition",
                "job.refused",
                "job.ack",
                "shadow.decision",
                "shadow.decision",
                "missed",
                "lease.claim*",
                "loop.start*",
            ]
        );
    }

    #[test]
    fn a_pane_state_built_typed_is_the_line_of_old() {
        let ev = EventLine {
            seq: 3,
            at: "2026-12-05T23:00:00.000Z".into(),
            event: Event::PaneState {
                pane: "a".into(),
                generation: 1,
                state: State::Exited,
                state_kind: None,
                exit_code: None,
                from: State::Idle,
            },
        };
        assert_eq!(ev.to_line(), LINES[2]);
        assert_eq!(ev.event.pane(), Some("a"));
    }

    #[test]
    fn a_registry_field_named_like_the_lines_own_does_not_override_it() {
        let mut fields = Map::new();
        fields.insert("kind".into(), Value::from("evil"));
        fields.insert("seq".into(), Value::from(99));
        let ev = EventLine {
            seq: 1,
            at: "t".into(),
            event: Event::Registry(RegistryEvent {
                kind: "gate.check".into(),
                pane: None,
                fields,
            }),
        };
        assert_eq!(ev.to_line(), r#"{"at":"t","kind":"gate.check","seq":1}"#);
    }
}
