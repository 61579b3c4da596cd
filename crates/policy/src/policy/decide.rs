//! `decide`: nine checks in the order of docs/policy.md, the first that speaks wins.
//!
//! Each check is a small function over [`Evidence`] that returns `Some(decision)` when
//! it holds the attempt. The order is the policy: doubt about the evidence itself
//! (transport, staleness) first, then what the agent is doing (blocked, unknown), then
//! whose work it is (attribution, before quiescence, because idle proves nothing on a
//! reused session), then whether it ended (busy, report, side effects). `docs/policy.md`
//! says why each sits where it does.

use super::decision::{Decision, DecisionKind};
use super::scenario::{
    AgentState, Event, EventBody, ReportState, Scenario, TransportResult, TurnFailure, TurnHow,
    TurnSource,
};

/// Decide whether the attempt in `s` is finished. Pure and total: it needs no
/// validation first (events are taken in time order, file order breaking ties) and
/// holds rather than completes whenever the evidence is missing or contradicts itself.
pub fn decide(s: &Scenario) -> Decision {
    let ev = Evidence::new(s);
    reconnect(&ev)
        .or_else(|| stale(&ev))
        .or_else(|| blocked(&ev))
        .or_else(|| unknown(&ev))
        .or_else(|| super::attribution::unattributed(&ev))
        .or_else(|| busy(&ev))
        .or_else(|| unfinalized(&ev))
        .or_else(|| unproven(&ev))
        .unwrap_or_else(|| complete(&ev))
}

/// A scenario's timeline in time order, each event with its index in the file.
pub(super) struct Evidence<'a> {
    pub(super) s: &'a Scenario,
    pub(super) events: Vec<Seen<'a>>,
}

/// One event and where it sits in the scenario file.
#[derive(Clone, Copy)]
pub(super) struct Seen<'a> {
    pub(super) index: usize,
    pub(super) event: &'a Event,
}

impl Seen<'_> {
    /// Whether this event comes after `other` on the timeline (time order,
    /// file order breaking ties, as [`Evidence::new`] sorts them).
    pub(super) fn after(&self, other: &Seen) -> bool {
        (self.event.t_ms, self.index) > (other.event.t_ms, other.index)
    }

    /// `timeline[4] report at t=50000` — how reasons point at an event.
    pub(super) fn at(&self) -> String {
        format!(
            "timeline[{}] {} at {}",
            self.index,
            self.event.body.name(),
            when(self.event.t_ms)
        )
    }
}

/// An event's time as a reason shows it: a clock time (`t=` of epoch
/// milliseconds meant nothing to a reader) as
/// `2026-12-05T20:20:17.393Z`; a scenario's own small offsets stay `t=50000`.
pub(super) fn when(t_ms: u64) -> String {
    // Before 2001-09-09 it is an offset in a scenario, not a clock time.
    const EPOCH_FLOOR_MS: u64 = 1_000_000_000_000;
    let clock = i64::try_from(t_ms)
        .ok()
        .filter(|_| t_ms >= EPOCH_FLOOR_MS)
        .and_then(chrono::DateTime::from_timestamp_millis);
    match clock {
        Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        None => format!("t={t_ms}"),
    }
}

impl<'a> Evidence<'a> {
    pub(super) fn new(s: &'a Scenario) -> Self {
        let mut events: Vec<Seen<'a>> = s
            .timeline
            .iter()
            .enumerate()
            .map(|(index, event)| Seen { index, event })
            .collect();
        // Stable: events at the same millisecond keep their file order.
        events.sort_by_key(|e| e.event.t_ms);
        Evidence { s, events }
    }

    /// The newest observation and its state.
    fn newest_observation(&self) -> Option<(Seen<'a>, AgentState, Option<&'a str>)> {
        self.events.iter().rev().find_map(|e| match &e.event.body {
            EventBody::Observation { state, state_kind } => {
                Some((*e, *state, state_kind.as_deref()))
            }
            _ => None,
        })
    }
}

/// The agent's own word that a turn ended, as the timeline holds it.
#[derive(Clone, Copy)]
pub(super) struct TurnEnd<'a> {
    seen: Seen<'a>,
    how: TurnHow,
    source: TurnSource,
    error: Option<TurnFailure>,
    message_sha256: Option<&'a str>,
}

impl TurnEnd<'_> {
    /// `ended by hook (timeline[5] turn_end at t=41000)`, with the failure
    /// and the first digits of the message's hash when there are.
    fn describe(&self) -> String {
        let mut s = format!(
            "{} by {} ({})",
            self.how.name(),
            self.source.name(),
            self.seen.at()
        );
        if let Some(e) = self.error {
            s.push_str(&format!(" on {}", e.name()));
        }
        if let Some(h) = self.message_sha256 {
            s.push_str(&format!(", last message sha256 {}…", &h[..h.len().min(12)]));
        }
        s
    }
}

impl<'a> Evidence<'a> {
    /// The newest of the agent's own turn ends.
    fn newest_turn_end(&self) -> Option<TurnEnd<'a>> {
        self.events.iter().rev().find_map(|e| match &e.event.body {
            EventBody::TurnEnd {
                how,
                source,
                error,
                message_sha256,
            } => Some(TurnEnd {
                seen: *e,
                how: *how,
                source: *source,
                error: *error,
                message_sha256: message_sha256.as_deref(),
            }),
            _ => None,
        })
    }

    /// The newest turn end, when it is newer than every observation: the
    /// agent has said something the screen has not shown yet.
    fn turn_end_past_the_screen(&self) -> Option<TurnEnd<'a>> {
        let end = self.newest_turn_end()?;
        let newer = self
            .newest_observation()
            .is_none_or(|(o, _, _)| end.seen.after(&o));
        newer.then_some(end)
    }
}

fn describe_state(state: AgentState, state_kind: Option<&str>) -> String {
    match state_kind {
        Some(k) => format!("{} ({k})", state.name()),
        None => state.name().to_string(),
    }
}

/// Check 1: A transport error after which no observation arrived. Only an observation
/// clears it: a later `ok` or `timeout` carries no snapshot of the agent.
fn reconnect(ev: &Evidence) -> Option<Decision> {
    let is_error = |e: &Seen| {
        e.event.body
            == EventBody::Transport {
                result: TransportResult::Error,
            }
    };
    let pos = ev.events.iter().rposition(is_error)?;
    let after = &ev.events[pos + 1..];
    if after
        .iter()
        .any(|e| matches!(e.event.body, EventBody::Observation { .. }))
    {
        return None;
    }
    let mut reason = format!(
        "transport error ({}) and no observation since",
        ev.events[pos].at()
    );
    let later: Vec<String> = after
        .iter()
        .filter_map(|e| match e.event.body {
            EventBody::Transport { result } => {
                Some(format!("{} at {}", result.name(), when(e.event.t_ms)))
            }
            _ => None,
        })
        .collect();
    if !later.is_empty() {
        reason.push_str(&format!(
            "; later transport results ({}) carry no snapshot and do not clear it",
            later.join(", ")
        ));
    }
    Some(Decision::new(DecisionKind::HoldReconnect, reason))
}

/// Check 2: No observation at all, or the newest is older than `staleness_ms` at `now_ms`.
fn stale(ev: &Evidence) -> Option<Decision> {
    let Some((seen, state, state_kind)) = ev.newest_observation() else {
        return Some(Decision::new(
            DecisionKind::HoldStale,
            "no observation of the agent in the timeline (a dispatch ack is not one)",
        ));
    };
    let age = ev.s.now_ms.saturating_sub(seen.event.t_ms);
    (age > ev.s.staleness_ms).then(|| {
        Decision::new(
            DecisionKind::HoldStale,
            format!(
                "newest observation ({}, {}) is {age} ms old at now_ms {}, over staleness_ms {}",
                seen.at(),
                describe_state(state, state_kind),
                ev.s.now_ms,
                ev.s.staleness_ms
            ),
        )
    })
}

/// Check 3: The newest observation is `blocked`, or the agent said, after the
/// newest observation, that its turn failed on a usage limit, a login or
/// billing: a human is needed (or the limit's reset), never complete.
fn blocked(ev: &Evidence) -> Option<Decision> {
    let (seen, state, state_kind) = ev.newest_observation()?;
    if state == AgentState::Blocked {
        return Some(Decision::new(
            DecisionKind::EscalateBlocked,
            format!(
                "newest observation ({}) is {}: a human is needed",
                seen.at(),
                describe_state(state, state_kind)
            ),
        ));
    }
    let end = ev
        .turn_end_past_the_screen()
        .filter(|e| e.how == TurnHow::Failed && e.error.is_some_and(TurnFailure::needs_a_human))?;
    Some(Decision::new(
        DecisionKind::EscalateBlocked,
        format!(
            "the agent's turn {}, after the newest observation ({}, {}): a human is needed",
            end.describe(),
            seen.at(),
            describe_state(state, state_kind)
        ),
    ))
}

/// Check 4: The newest observation is `unknown` or `exited`: nothing to infer from.
fn unknown(ev: &Evidence) -> Option<Decision> {
    let (seen, state, state_kind) = ev.newest_observation()?;
    matches!(state, AgentState::Unknown | AgentState::Exited).then(|| {
        Decision::new(
            DecisionKind::HoldUnknown,
            format!(
                "newest observation ({}) is {}",
                seen.at(),
                describe_state(state, state_kind)
            ),
        )
    })
}

/// Check 6: The newest observation is `working` or `starting`, and the agent
/// has not said since that its turn ended (a screen redrawn late after the
/// agent's `Stop` is not work).
fn busy(ev: &Evidence) -> Option<Decision> {
    let (seen, state, state_kind) = ev.newest_observation()?;
    if ev.turn_end_past_the_screen().is_some() {
        return None;
    }
    matches!(state, AgentState::Working | AgentState::Starting).then(|| {
        Decision::new(
            DecisionKind::HoldBusy,
            format!(
                "newest observation ({}) is {}",
                seen.at(),
                describe_state(state, state_kind)
            ),
        )
    })
}

/// The newest report and its state.
fn newest_report<'a>(ev: &Evidence<'a>) -> Option<(Seen<'a>, ReportState)> {
    ev.events.iter().rev().find_map(|e| match e.event.body {
        EventBody::Report { state } => Some((*e, state)),
        _ => None,
    })
}

/// Check 7: No report, or the newest is still `writing` or merely `paused`: a debounce is a
/// filter, not an authority.
fn unfinalized(ev: &Evidence) -> Option<Decision> {
    unfinalized_report(ev).map(|d| match ended_turn(ev) {
        // The agent said it was done and left its report unfinished: what
        // the operator needs to know first.
        Some(end) => Decision::new(
            d.kind(),
            format!("{}; yet the agent's turn {}", d.reason(), end.describe()),
        ),
        None => d,
    })
}

/// The newest turn end when the turn ended (not failed or aborted), newer
/// than the newest report.
fn ended_turn<'a>(ev: &Evidence<'a>) -> Option<TurnEnd<'a>> {
    let end = ev.newest_turn_end().filter(|e| e.how == TurnHow::Ended)?;
    newest_report(ev)
        .is_none_or(|(r, _)| end.seen.after(&r))
        .then_some(end)
}

fn unfinalized_report(ev: &Evidence) -> Option<Decision> {
    let Some((seen, state)) = newest_report(ev) else {
        return Some(Decision::new(
            DecisionKind::HoldUnfinalized,
            "no report from the lane",
        ));
    };
    match state {
        ReportState::Finalized => None,
        ReportState::Writing => Some(Decision::new(
            DecisionKind::HoldUnfinalized,
            format!("newest report ({}) is still writing", seen.at()),
        )),
        ReportState::Paused => Some(Decision::new(
            DecisionKind::HoldUnfinalized,
            format!(
                "newest report ({}) is paused, not finalized: a debounce is a filter, not \
                 an authority",
                seen.at()
            ),
        )),
    }
}

/// Check 8: A side-effect check reported `proven: false`. Absence of checks is not read as
/// proof either way here; manifest verification fails closed later.
fn unproven(ev: &Evidence) -> Option<Decision> {
    let failed: Vec<String> = ev
        .events
        .iter()
        .filter(|e| e.event.body == EventBody::SideEffect { proven: false })
        .map(Seen::at)
        .collect();
    (!failed.is_empty()).then(|| {
        Decision::new(
            DecisionKind::HoldUnproven,
            format!("side effect not proven: {}", failed.join(", ")),
        )
    })
}

/// Check 9: Nothing held the attempt: say what made it complete.
fn complete(ev: &Evidence) -> Decision {
    let d = &ev.s.dispatch;
    let mut parts = vec![format!(
        "attempt {} of job {} on {} generation {}",
        d.attempt_id, d.job_id, d.session_id, d.pane_generation
    )];
    if let Some((seen, state, _)) = ev.newest_observation() {
        parts.push(format!(
            "newest observation {} ({}, {} ms old)",
            state.name(),
            seen.at(),
            ev.s.now_ms.saturating_sub(seen.event.t_ms)
        ));
    }
    if let Some((seen, _)) = newest_report(ev) {
        parts.push(format!("report finalized ({})", seen.at()));
    }
    if let Some(end) = ev.newest_turn_end() {
        parts.push(format!("the agent's own turn end: {}", end.describe()));
    }
    let proven = ev
        .events
        .iter()
        .filter(|e| e.event.body == EventBody::SideEffect { proven: true })
        .count();
    parts.push(if proven == 0 {
        "no side-effect check here (manifest verification decides)".to_string()
    } else {
        format!("{proven} side-effect check(s) proven")
    });
    Decision::new(DecisionKind::Complete, parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::scenario::Ids;
    use crate::policy::testkit::*;

    /// Guards issue 42 item 10: live reasons said `t=1796502017393`.
    #[test]
    fn reasons_show_clock_times_as_people_read_them() {
        assert_eq!(when(1_796_502_017_393), "2026-12-05T20:20:17.393Z");
        assert_eq!(
            when(58_000),
            "t=58000",
            "a scenario's offsets stay as written"
        );
    }

    fn run(check: fn(&Evidence) -> Option<Decision>, s: &Scenario) -> Option<DecisionKind> {
        check(&Evidence::new(s)).map(|d| d.kind())
    }

    #[test]
    fn reconnect_holds_after_an_error_with_nothing_since() {
        let s = clean().with(57_000, transport(TransportResult::Error));
        assert_eq!(run(reconnect, &s), Some(DecisionKind::HoldReconnect));
    }

    #[test]
    fn reconnect_is_not_cleared_by_a_later_timeout_or_ok() {
        let s = clean()
            .with(57_000, transport(TransportResult::Error))
            .with(58_000, transport(TransportResult::Timeout))
            .with(59_000, transport(TransportResult::Ok));
        let d = reconnect(&Evidence::new(&s));
        let reason = d
            .as_ref()
            .map(|d| d.reason().to_string())
            .unwrap_or_default();
        assert_eq!(d.map(|d| d.kind()), Some(DecisionKind::HoldReconnect));
        assert!(reason.contains("timeout at t=58000"), "{reason}");
    }

    #[test]
    fn reconnect_is_cleared_only_by_a_later_observation() {
        let s = clean()
            .with(57_000, transport(TransportResult::Error))
            .with(58_000, obs(AgentState::Done));
        assert_eq!(run(reconnect, &s), None);
    }

    #[test]
    fn reconnect_uses_the_last_error() {
        let s = clean()
            .with(56_500, transport(TransportResult::Error))
            .with(57_000, obs(AgentState::Done))
            .with(58_000, transport(TransportResult::Error));
        assert_eq!(run(reconnect, &s), Some(DecisionKind::HoldReconnect));
    }

    #[test]
    fn a_timeout_alone_is_never_doubt() {
        let s = clean().with(59_000, transport(TransportResult::Timeout));
        assert_eq!(run(reconnect, &s), None);
    }

    #[test]
    fn same_millisecond_keeps_file_order() {
        let s = clean()
            .with(58_000, transport(TransportResult::Error))
            .with(58_000, obs(AgentState::Done));
        assert_eq!(run(reconnect, &s), None);
        let s = clean()
            .with(58_000, obs(AgentState::Done))
            .with(58_000, transport(TransportResult::Error));
        assert_eq!(run(reconnect, &s), Some(DecisionKind::HoldReconnect));
    }

    #[test]
    fn stale_without_any_observation() {
        let mut s = clean();
        s.timeline
            .retain(|e| !matches!(e.body, EventBody::Observation { .. }));
        assert_eq!(run(stale, &s), Some(DecisionKind::HoldStale));
    }

    #[test]
    fn stale_only_past_the_window() {
        let mut s = clean(); // newest observation at 55_000
        s.now_ms = 55_000 + s.staleness_ms;
        assert_eq!(run(stale, &s), None);
        s.now_ms += 1;
        assert_eq!(run(stale, &s), Some(DecisionKind::HoldStale));
    }

    #[test]
    fn blocked_escalates_and_names_the_kind() {
        let s = clean().with(59_000, obs_kind(AgentState::Blocked, "permission"));
        let d = blocked(&Evidence::new(&s));
        assert_eq!(
            d.as_ref().map(Decision::kind),
            Some(DecisionKind::EscalateBlocked)
        );
        assert!(d.is_some_and(|d| d.reason().contains("blocked (permission)")));
    }

    #[test]
    fn only_the_newest_observation_counts_for_blocked() {
        let s = clean()
            .with(58_000, obs(AgentState::Blocked))
            .with(59_000, obs(AgentState::Done));
        assert_eq!(run(blocked, &s), None);
    }

    #[test]
    fn unknown_and_exited_hold() {
        for state in [AgentState::Unknown, AgentState::Exited] {
            let s = clean().with(59_000, obs(state));
            assert_eq!(
                run(unknown, &s),
                Some(DecisionKind::HoldUnknown),
                "{state:?}"
            );
        }
        assert_eq!(run(unknown, &clean()), None);
    }

    #[test]
    fn working_and_starting_are_busy() {
        for state in [AgentState::Working, AgentState::Starting] {
            let s = clean().with(59_000, obs(state));
            assert_eq!(run(busy, &s), Some(DecisionKind::HoldBusy), "{state:?}");
        }
        for state in [AgentState::Idle, AgentState::Done] {
            let s = clean().with(59_000, obs(state));
            assert_eq!(run(busy, &s), None, "{state:?}");
        }
    }

    #[test]
    fn unfinalized_without_a_report_or_with_a_newer_paused_one() {
        let mut s = clean();
        s.timeline
            .retain(|e| !matches!(e.body, EventBody::Report { .. }));
        assert_eq!(run(unfinalized, &s), Some(DecisionKind::HoldUnfinalized));
        for state in [ReportState::Writing, ReportState::Paused] {
            let s = clean().with(59_000, report(state));
            assert_eq!(run(unfinalized, &s), Some(DecisionKind::HoldUnfinalized));
        }
        assert_eq!(run(unfinalized, &clean()), None);
    }

    #[test]
    fn any_unproven_side_effect_holds() {
        let s = clean().with(59_000, side_effect(false));
        assert_eq!(run(unproven, &s), Some(DecisionKind::HoldUnproven));
        assert_eq!(run(unproven, &clean()), None);
    }

    #[test]
    fn finished_clean_completes() {
        assert_eq!(decide(&clean()).kind(), DecisionKind::Complete);
    }

    #[test]
    fn order_reconnect_beats_blocked_and_attribution() {
        let s = clean()
            .with(
                58_000,
                obs(AgentState::Blocked).ids(|i| i.session_id = some("reviewer")),
            )
            .with(59_000, transport(TransportResult::Error));
        assert_eq!(decide(&s).kind(), DecisionKind::HoldReconnect);
    }

    #[test]
    fn order_blocked_beats_attribution() {
        let s = clean().with(
            59_000,
            obs(AgentState::Blocked).ids(|i| i.pane_generation = Some(2)),
        );
        assert_eq!(decide(&s).kind(), DecisionKind::EscalateBlocked);
    }

    #[test]
    fn order_attribution_beats_idle_quiescence() {
        let mut s = clean();
        s.timeline.retain(|e| e.body != EventBody::ExecutionAnchor);
        let s = s.with(59_000, obs(AgentState::Idle));
        assert_eq!(decide(&s).kind(), DecisionKind::HoldUnattributed);
    }

    #[test]
    fn order_busy_beats_report() {
        let s = clean().with(58_000, obs(AgentState::Working)).with(
            59_000,
            report(ReportState::Paused).ids(|i| i.attempt_id = some("A1")),
        );
        assert_eq!(decide(&s).kind(), DecisionKind::HoldBusy);
    }

    /// The agent's `Stop` after a screen that still drew a spinner: the
    /// turn is over by the agent's own word, so the finalized report decides.
    #[test]
    fn a_turn_end_newer_than_a_working_screen_is_not_busy() {
        let here = |i: &mut Ids| {
            i.session_id = some("implementer");
            i.pane_generation = Some(1);
        };
        let mut s = clean();
        s.timeline.retain(|e| {
            !matches!(
                e.body,
                EventBody::Observation {
                    state: AgentState::Done,
                    ..
                }
            )
        });
        let s = s.with(57_000, obs(AgentState::Working).ids(here));
        assert_eq!(decide(&s).kind(), DecisionKind::HoldBusy);
        let s = s.with(58_000, turn_end(TurnHow::Ended).ids(here));
        let d = decide(&s);
        assert_eq!(d.kind(), DecisionKind::Complete, "{d}");
        assert!(
            d.reason().contains("own turn end: ended by hook")
                && d.reason().contains("sha256 abab"),
            "{d}"
        );
        // A working observation after the turn end is a new turn: busy again.
        let s = s.with(59_000, obs(AgentState::Working).ids(here));
        assert_eq!(decide(&s).kind(), DecisionKind::HoldBusy);
    }

    #[test]
    fn a_turn_end_never_completes_without_a_finalized_report() {
        let mut s = clean();
        s.timeline
            .retain(|e| !matches!(e.body, EventBody::Report { .. }));
        let s = s.with(57_000, turn_end(TurnHow::Ended));
        let d = decide(&s);
        assert_eq!(d.kind(), DecisionKind::HoldUnfinalized, "{d}");
        assert!(
            d.reason()
                .contains("no report from the lane; yet the agent's turn ended by hook"),
            "{d}"
        );
    }

    #[test]
    fn a_turn_failed_on_a_limit_past_the_screen_escalates() {
        for error in [
            TurnFailure::RateLimit,
            TurnFailure::Auth,
            TurnFailure::Billing,
        ] {
            let s = clean().with(57_000, turn_failed(error));
            let d = decide(&s);
            assert_eq!(d.kind(), DecisionKind::EscalateBlocked, "{d}");
            assert!(d.reason().contains("failed by hook"), "{d}");
            assert!(d.reason().contains(error.name()), "{d}");
        }
        // Another failure is not a human's matter: the report decides.
        let s = clean().with(57_000, turn_failed(TurnFailure::Other));
        assert_eq!(decide(&s).kind(), DecisionKind::Complete);
        // The screen seen after the failure has the last word.
        let s = clean()
            .with(57_000, turn_failed(TurnFailure::RateLimit))
            .with(58_000, obs(AgentState::Idle));
        assert_eq!(decide(&s).kind(), DecisionKind::Complete);
    }

    #[test]
    fn a_turn_end_of_another_generation_is_unattributed() {
        let s = clean().with(
            57_000,
            turn_end(TurnHow::Ended).ids(|i| i.pane_generation = Some(2)),
        );
        let d = decide(&s);
        assert_eq!(d.kind(), DecisionKind::HoldUnattributed, "{d}");
    }

    #[test]
    fn decision_serializes_as_decision_and_reason() {
        let d = Decision::new(DecisionKind::HoldStale, "why");
        let v = serde_json::to_value(&d).unwrap_or_default();
        assert_eq!(
            v,
            serde_json::json!({"decision": "hold_stale", "reason": "why"})
        );
        for k in DecisionKind::ORDER {
            assert_eq!(DecisionKind::from_name(k.name()), Some(k));
            assert_eq!(Decision::new(k, "r").kind(), k);
        }
    }
}
