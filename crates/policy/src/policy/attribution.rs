//! Check 5, attribution: is every piece of evidence about *this* attempt?
//!
//! Every identifier on every event is collected and confronted with the dispatch
//! record. Taking only the first occurrence of each would drop exactly the contradicting
//! value this check exists to catch (seed 003, R1): a finalized report from another
//! session, a manifest written for another attempt, an observation from a respawned pane.

use super::decide::{Evidence, Seen};
use super::decision::{Decision, DecisionKind};
use super::scenario::EventBody;

/// Hold the attempt when its evidence cannot be tied to it. Sub-checks, most specific
/// first, so the reason names the real problem.
pub(super) fn unattributed(ev: &Evidence) -> Option<Decision> {
    no_dispatch_event(ev)
        .or_else(|| raced_dispatch(ev))
        .or_else(|| mismatched_ids(ev))
        .or_else(|| dispatch_not_named(ev))
        .or_else(|| missing_anchor(ev))
        .or_else(|| unnamed_report(ev))
        .map(|reason| Decision::new(DecisionKind::HoldUnattributed, reason))
}

fn dispatches<'e, 'a>(ev: &'e Evidence<'a>) -> impl Iterator<Item = &'e Seen<'a>> {
    ev.events
        .iter()
        .filter(|e| e.event.body == EventBody::Dispatch)
}

fn no_dispatch_event(ev: &Evidence) -> Option<String> {
    dispatches(ev)
        .next()
        .is_none()
        .then(|| "the timeline has no dispatch event".to_string())
}

/// Two dispatch events carrying different attempts: two claimers raced.
fn raced_dispatch(ev: &Evidence) -> Option<String> {
    let mut attempts: Vec<(&str, String)> = Vec::new();
    for e in dispatches(ev) {
        if let Some(a) = e.event.ids.attempt_id.as_deref()
            && !attempts.iter().any(|(seen, _)| *seen == a)
        {
            attempts.push((a, e.at()));
        }
    }
    (attempts.len() > 1).then(|| {
        let list: Vec<String> = attempts
            .iter()
            .map(|(a, at)| format!("{a} ({at})"))
            .collect();
        format!(
            "dispatched more than once with different attempts: {}",
            list.join(", ")
        )
    })
}

/// Every identifier on every event that differs from the dispatch record.
fn mismatched_ids(ev: &Evidence) -> Option<String> {
    let d = &ev.s.dispatch;
    let mut found: Vec<String> = Vec::new();
    for e in &ev.events {
        let ids = &e.event.ids;
        let quoted = |v: &Option<String>, want: &str| {
            v.as_deref()
                .filter(|v| *v != want)
                .map(|v| format!("{v:?}"))
        };
        let seen = [
            ("attempt_id", quoted(&ids.attempt_id, &d.attempt_id)),
            ("session_id", quoted(&ids.session_id, &d.session_id)),
            (
                "pane_generation",
                ids.pane_generation
                    .filter(|g| *g != d.pane_generation)
                    .map(|g| g.to_string()),
            ),
            (
                "manifest_attempt_id",
                quoted(&ids.manifest_attempt_id, &d.attempt_id),
            ),
        ];
        let differs: Vec<String> = seen
            .into_iter()
            .filter_map(|(field, v)| v.map(|v| format!("{field} {v}")))
            .collect();
        if !differs.is_empty() {
            found.push(format!("{} has {}", e.at(), differs.join(", ")));
        }
    }
    (!found.is_empty()).then(|| {
        format!(
            "evidence disagrees with the dispatch (attempt {:?}, session {:?}, generation {}): {}",
            d.attempt_id,
            d.session_id,
            d.pane_generation,
            found.join("; ")
        )
    })
}

fn dispatch_not_named(ev: &Evidence) -> Option<String> {
    let attempt = &ev.s.dispatch.attempt_id;
    (!dispatches(ev).any(|e| e.event.ids.attempt_id.as_ref() == Some(attempt)))
        .then(|| format!("no dispatch event names attempt {attempt:?}: attribution undecidable"))
}

/// The attempt must have run: an execution anchor carrying its id, after its dispatch.
/// Acknowledging a dispatch is not evidence of work.
fn missing_anchor(ev: &Evidence) -> Option<String> {
    let attempt = &ev.s.dispatch.attempt_id;
    let names_attempt = |e: &Seen| e.event.ids.attempt_id.as_ref() == Some(attempt);
    let first_dispatch = ev
        .events
        .iter()
        .position(|e| e.event.body == EventBody::Dispatch && names_attempt(e))?;
    let anchors: Vec<(usize, &Seen)> = ev
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.event.body == EventBody::ExecutionAnchor)
        .collect();
    let ours: Vec<&(usize, &Seen)> = anchors.iter().filter(|(_, e)| names_attempt(e)).collect();
    if ours.is_empty() {
        let others = anchors.len();
        let mut reason = format!(
            "no execution anchor carries attempt {attempt:?}: the dispatch was acknowledged, not shown to run"
        );
        if others > 0 {
            reason.push_str(&format!(" ({others} anchor(s) without this attempt's id)"));
        }
        return Some(reason);
    }
    ours.iter().all(|(pos, _)| *pos < first_dispatch).then(|| {
        format!(
            "the execution anchor for attempt {attempt:?} ({}) precedes its dispatch ({})",
            ours[0].1.at(),
            ev.events[first_dispatch].at()
        )
    })
}

/// A report that does not say which attempt it is about cannot be attributed.
fn unnamed_report(ev: &Evidence) -> Option<String> {
    let unnamed: Vec<String> = ev
        .events
        .iter()
        .filter(|e| {
            matches!(e.event.body, EventBody::Report { .. }) && e.event.ids.attempt_id.is_none()
        })
        .map(Seen::at)
        .collect();
    (!unnamed.is_empty()).then(|| {
        format!(
            "report does not name its attempt ({}): attribution undecidable",
            unnamed.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::scenario::{AgentState, ReportState, Scenario};
    use crate::policy::testkit::*;

    fn reason(s: &Scenario) -> Option<String> {
        unattributed(&Evidence::new(s)).map(|d| d.reason().to_string())
    }

    #[test]
    fn clean_scenario_is_attributed() {
        assert_eq!(reason(&clean()), None);
    }

    #[test]
    fn missing_dispatch_event_holds() {
        let mut s = clean();
        s.timeline.retain(|e| e.body != EventBody::Dispatch);
        assert!(reason(&s).is_some_and(|r| r.contains("no dispatch event")));
    }

    #[test]
    fn raced_double_dispatch_holds() {
        let s = clean().with(2_500, dispatch().ids(|i| i.attempt_id = some("A2")));
        assert!(reason(&s).is_some_and(|r| r.contains("dispatched more than once")));
    }

    #[test]
    fn every_identifier_counts_not_just_the_first() {
        // The first report agrees; a later one, from another session, must still hold.
        let s = clean().with(
            57_000,
            report(ReportState::Finalized).ids(|i| {
                i.attempt_id = some("A1");
                i.session_id = some("reviewer");
            }),
        );
        let r = reason(&s).unwrap_or_default();
        assert!(r.contains("session_id \"reviewer\""), "{r}");
    }

    #[test]
    fn each_identifier_field_is_checked() {
        let cases: [fn(&mut crate::policy::Ids); 4] = [
            |i| i.attempt_id = some("A0"),
            |i| i.session_id = some("reviewer"),
            |i| i.pane_generation = Some(2),
            |i| i.manifest_attempt_id = some("A0"),
        ];
        for (n, f) in cases.into_iter().enumerate() {
            let s = clean().with(57_000, obs(AgentState::Done).ids(f));
            assert!(reason(&s).is_some(), "case {n}");
        }
    }

    #[test]
    fn all_mismatches_are_listed() {
        let s = clean()
            .with(
                57_000,
                obs(AgentState::Done).ids(|i| i.pane_generation = Some(2)),
            )
            .with(
                58_000,
                side_effect(true).ids(|i| i.manifest_attempt_id = some("A0")),
            );
        let r = reason(&s).unwrap_or_default();
        assert!(
            r.contains("pane_generation 2") && r.contains("manifest_attempt_id \"A0\""),
            "{r}"
        );
    }

    #[test]
    fn dispatch_event_without_the_attempt_is_undecidable() {
        let mut s = clean();
        for e in &mut s.timeline {
            if e.body == EventBody::Dispatch {
                e.ids.attempt_id = None;
            }
        }
        assert!(reason(&s).is_some_and(|r| r.contains("no dispatch event names")));
    }

    #[test]
    fn no_anchor_for_this_attempt_holds() {
        let mut s = clean();
        for e in &mut s.timeline {
            if e.body == EventBody::ExecutionAnchor {
                e.ids.attempt_id = None;
            }
        }
        assert!(reason(&s).is_some_and(|r| r.contains("no execution anchor")));
    }

    #[test]
    fn anchor_before_dispatch_holds() {
        let mut s = clean();
        s.timeline.retain(|e| e.body != EventBody::ExecutionAnchor);
        s.timeline
            .insert(0, anchor().ids(|i| i.attempt_id = some("A1")).at(500));
        assert!(reason(&s).is_some_and(|r| r.contains("precedes its dispatch")));
    }

    #[test]
    fn report_without_attempt_is_undecidable() {
        let s = clean().with(57_000, report(ReportState::Finalized));
        assert!(reason(&s).is_some_and(|r| r.contains("does not name its attempt")));
    }
}
