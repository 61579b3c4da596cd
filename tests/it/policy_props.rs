//! Properties of `decide` over generated timelines: whatever else happens, it never
//! completes an attempt the evidence does not support.

use drover::policy::{
    AgentState, DecisionKind, Dispatch, Event, EventBody, Ids, ReportState, Scenario,
    TransportResult, decide, parse_scenario, validate,
};
use proptest::prelude::*;

const STALENESS_MS: u64 = 30_000;

fn dispatch_record() -> Dispatch {
    Dispatch {
        job_id: "J1".into(),
        attempt_id: "A1".into(),
        session_id: "implementer".into(),
        pane_generation: 1,
    }
}

/// Identifiers mostly agreeing with the dispatch, sometimes absent, sometimes not.
fn ids() -> impl Strategy<Value = Ids> {
    let attempt = prop_oneof![6 => Just(Some("A1")), 3 => Just(None), 1 => Just(Some("A2"))];
    let session =
        prop_oneof![6 => Just(Some("implementer")), 3 => Just(None), 1 => Just(Some("reviewer"))];
    let generation = prop_oneof![6 => Just(Some(1u64)), 3 => Just(None), 1 => Just(Some(2u64))];
    let manifest = prop_oneof![3 => Just(None), 6 => Just(Some("A1")), 1 => Just(Some("A0"))];
    (attempt, session, generation, manifest).prop_map(|(a, s, g, m)| Ids {
        attempt_id: a.map(str::to_string),
        session_id: s.map(str::to_string),
        pane_generation: g,
        manifest_attempt_id: m.map(str::to_string),
    })
}

fn body() -> impl Strategy<Value = EventBody> {
    prop_oneof![
        1 => Just(EventBody::Dispatch),
        1 => Just(EventBody::ExecutionAnchor),
        5 => (proptest::sample::select(AgentState::ALL.to_vec()),
              proptest::option::of(Just("permission".to_string())))
            .prop_map(|(state, state_kind)| EventBody::Observation { state, state_kind }),
        3 => proptest::sample::select(TransportResult::ALL.to_vec())
            .prop_map(|result| EventBody::Transport { result }),
        3 => proptest::sample::select(ReportState::ALL.to_vec())
            .prop_map(|state| EventBody::Report { state }),
        1 => any::<bool>().prop_map(|proven| EventBody::SideEffect { proven }),
    ]
}

fn agreeing(body: EventBody, t_ms: u64) -> Event {
    Event {
        t_ms,
        ids: Ids {
            attempt_id: Some("A1".into()),
            session_id: Some("implementer".into()),
            pane_generation: Some(1),
            manifest_attempt_id: None,
        },
        body,
        note: None,
    }
}

/// A valid scenario: usually a well-attributed start, then random evidence in time order.
fn scenario() -> impl Strategy<Value = Scenario> {
    let events = proptest::collection::vec((0u64..8_000, ids(), body()), 0..14);
    (any::<bool>(), events, 0u64..40_000).prop_map(|(well_started, events, slack)| {
        let mut timeline = vec![agreeing(EventBody::Dispatch, 1_000)];
        if well_started {
            timeline.push(agreeing(EventBody::ExecutionAnchor, 2_000));
        }
        let mut t = 2_000;
        for (dt, ids, body) in events {
            t += dt;
            timeline.push(Event {
                t_ms: t,
                ids,
                body,
                note: None,
            });
        }
        Scenario {
            name: "generated".into(),
            note: None,
            now_ms: t + slack,
            staleness_ms: STALENESS_MS,
            dispatch: dispatch_record(),
            timeline,
            expected_policy: None,
        }
    })
}

fn newest_state(s: &Scenario) -> Option<AgentState> {
    s.timeline.iter().rev().find_map(|e| match e.body {
        EventBody::Observation { state, .. } => Some(state),
        _ => None,
    })
}

fn any_identifier_differs(s: &Scenario) -> bool {
    let d = &s.dispatch;
    s.timeline.iter().any(|e| {
        let i = &e.ids;
        i.attempt_id.as_ref().is_some_and(|a| *a != d.attempt_id)
            || i.session_id.as_ref().is_some_and(|x| *x != d.session_id)
            || i.pane_generation.is_some_and(|g| g != d.pane_generation)
            || i.manifest_attempt_id
                .as_ref()
                .is_some_and(|m| *m != d.attempt_id)
    })
}

fn error_without_later_observation(s: &Scenario) -> bool {
    let is_error = |e: &Event| {
        e.body
            == EventBody::Transport {
                result: TransportResult::Error,
            }
    };
    match s.timeline.iter().rposition(is_error) {
        None => false,
        Some(pos) => !s.timeline[pos + 1..]
            .iter()
            .any(|e| matches!(e.body, EventBody::Observation { .. })),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Never complete unless the newest observation is done or idle.
    #[test]
    fn never_completes_unless_newest_observation_is_done_or_idle(s in scenario()) {
        let quiescent = matches!(newest_state(&s), Some(AgentState::Done | AgentState::Idle));
        if !quiescent {
            prop_assert_ne!(decide(&s).kind(), DecisionKind::Complete);
        }
    }

    /// Never complete when any identifier anywhere in the timeline disagrees.
    #[test]
    fn never_completes_when_an_identifier_differs(s in scenario()) {
        if any_identifier_differs(&s) {
            prop_assert_ne!(decide(&s).kind(), DecisionKind::Complete);
        }
    }

    /// A transport error with no observation after it is always transport doubt.
    #[test]
    fn error_without_later_observation_holds_reconnect(s in scenario()) {
        if error_without_later_observation(&s) {
            prop_assert_eq!(decide(&s).kind(), DecisionKind::HoldReconnect);
        }
    }

    /// What `drover policy eval` reads back from a serialized scenario decides the same.
    #[test]
    fn file_round_trip_decides_the_same(s in scenario()) {
        prop_assert!(validate(&s).is_ok());
        let text = serde_json::to_string(&s).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = parse_scenario(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decide(&back), decide(&s));
    }
}

/// Guards the generator: `complete` must be reachable, or the properties above are vacuous.
#[test]
fn generator_reaches_complete() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = scenario();
    let completes = (0..2_000)
        .filter_map(|_| strategy.new_tree(&mut runner).ok())
        .filter(|tree| decide(&tree.current()).kind() == DecisionKind::Complete)
        .count();
    assert!(completes > 0, "no generated scenario completes");
}
