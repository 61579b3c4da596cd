//! Builders for unit tests: the docs/policy.md example scenario and events to add to it.

use super::scenario::{
    AgentState, Dispatch, Event, EventBody, Ids, ReportState, Scenario, TransportResult,
    TurnFailure, TurnHow, TurnSource,
};

/// The finished-clean scenario of docs/policy.md (newest observation `done` at 55_000).
pub fn clean() -> Scenario {
    let full = |a: &str| Ids {
        attempt_id: some(a),
        session_id: some("implementer"),
        pane_generation: Some(1),
        manifest_attempt_id: None,
    };
    let here = Ids {
        session_id: some("implementer"),
        pane_generation: Some(1),
        ..Ids::default()
    };
    Scenario {
        name: "finished-clean".into(),
        note: None,
        now_ms: 60_000,
        staleness_ms: 30_000,
        dispatch: Dispatch {
            job_id: "J1".into(),
            attempt_id: "A1".into(),
            session_id: "implementer".into(),
            pane_generation: 1,
        },
        timeline: vec![
            dispatch().with_ids(full("A1")).at(1_000),
            anchor().with_ids(full("A1")).at(2_000),
            obs(AgentState::Working).with_ids(here.clone()).at(3_000),
            transport(TransportResult::Timeout).at(40_000),
            report(ReportState::Finalized)
                .with_ids(Ids {
                    attempt_id: some("A1"),
                    session_id: some("implementer"),
                    pane_generation: None,
                    manifest_attempt_id: some("A1"),
                })
                .at(50_000),
            obs(AgentState::Done).with_ids(here).at(55_000),
            side_effect(true).at(56_000),
        ],
        expected_policy: None,
    }
}

pub fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

fn event(body: EventBody) -> Event {
    Event {
        t_ms: 0,
        ids: Ids::default(),
        body,
        note: None,
    }
}

pub fn dispatch() -> Event {
    event(EventBody::Dispatch)
}

pub fn anchor() -> Event {
    event(EventBody::ExecutionAnchor)
}

pub fn obs(state: AgentState) -> Event {
    event(EventBody::Observation {
        state,
        state_kind: None,
    })
}

pub fn obs_kind(state: AgentState, kind: &str) -> Event {
    event(EventBody::Observation {
        state,
        state_kind: some(kind),
    })
}

pub fn transport(result: TransportResult) -> Event {
    event(EventBody::Transport { result })
}

pub fn report(state: ReportState) -> Event {
    event(EventBody::Report { state })
}

pub fn side_effect(proven: bool) -> Event {
    event(EventBody::SideEffect { proven })
}

/// The agent's own turn end through its hook, with a message hash when it ended.
pub fn turn_end(how: TurnHow) -> Event {
    event(EventBody::TurnEnd {
        how,
        source: TurnSource::Hook,
        error: None,
        message_sha256: (how == TurnHow::Ended).then(|| "ab".repeat(32)),
    })
}

/// A turn that failed, through Claude Code's `StopFailure` hook.
pub fn turn_failed(error: TurnFailure) -> Event {
    event(EventBody::TurnEnd {
        how: TurnHow::Failed,
        source: TurnSource::Hook,
        error: Some(error),
        message_sha256: None,
    })
}

pub trait EventExt {
    fn at(self, t_ms: u64) -> Event;
    fn ids(self, f: impl FnOnce(&mut Ids)) -> Event;
    fn with_ids(self, ids: Ids) -> Event;
}

impl EventExt for Event {
    fn at(mut self, t_ms: u64) -> Event {
        self.t_ms = t_ms;
        self
    }
    fn ids(mut self, f: impl FnOnce(&mut Ids)) -> Event {
        f(&mut self.ids);
        self
    }
    fn with_ids(mut self, ids: Ids) -> Event {
        self.ids = ids;
        self
    }
}

pub trait ScenarioExt {
    /// Append `e` at `t_ms` (callers keep times non-decreasing).
    fn with(self, t_ms: u64, e: Event) -> Scenario;
}

impl ScenarioExt for Scenario {
    fn with(mut self, t_ms: u64, e: Event) -> Scenario {
        self.timeline.push(e.at(t_ms));
        self
    }
}
