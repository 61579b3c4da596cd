//! A pane's screen fused with its agent's own signals (docs/agents.md,
//! "Fusing the screen with the agents' signals"): the detector hands each
//! screen observation here, a signal's arrival re-fuses the last one at
//! once, and a disagreement arms one timer at its bound, after which
//! `signal.disagree` is published if it still holds.

use super::server::{Entry, Sup, lock};
use crate::agent::Observation;
use crate::agent::signals::fuse::{Fused, Tracker};
use crate::proto::Event;
use crate::proto::fuse::{Explained, SignalSeen};
use crate::proto::{Source, args};
use std::sync::Arc;

/// What the fusion keeps per pane.
#[derive(Default)]
pub(super) struct Fusion {
    tracker: Tracker,
    /// The last screen observation, its generation and the screen's hash.
    screen: Option<(Observation, u64, String)>,
    /// The pane's generation and when it started (signals before are another
    /// process's).
    from: (u64, u64),
    /// The deadline (ms since the epoch) a timer is armed for.
    timer_at: Option<u64>,
}

/// The screen's latest observation of `generation`, to fuse from now on.
pub(super) fn screen_seen(entry: &Entry, obs: Observation, generation: u64, hash: String) {
    lock(&entry.fusion).screen = Some((obs, generation, hash));
}

/// What a fusion step gives the detector to publish.
pub(super) struct Step {
    pub fused: Fused,
    pub generation: u64,
    pub hash: String,
    /// A disagreement now due: `signal.disagree` to publish.
    pub due: Option<Event>,
}

/// Fuse the last screen observation with the ledger now; `None` before
/// the pane was first classified. The caller holds the pane's fusion lock
/// until it has published, so two steps publish in the order they fused.
pub(super) fn step(sup: &Arc<Sup>, entry: &Arc<Entry>, f: &mut Fusion) -> Option<Step> {
    let now = crate::paths::now_ms();
    let (obs, generation, hash) = f.screen.clone()?;
    if f.from.0 != generation {
        f.from = (generation, entry.pane.info().started_at_ms);
    }
    let from_ms = f.from.1;
    let fused = {
        let ledger = lock(&entry.signals);
        f.tracker.step(&obs, &ledger, generation, from_ms, now)
    };
    let due = f.tracker.due(now).map(|d| Event::SignalDisagree {
        pane: entry.pane.name().to_string(),
        generation,
        screen: d.screen,
        signals: d.signals,
        fused: fused.observation.label(),
        rule: fused.rule.to_string(),
        screen_hash: hash.clone(),
        for_ms: now.saturating_sub(d.since_ms),
    });
    if let Some(at) = f.tracker.deadline()
        && f.timer_at != Some(at)
    {
        f.timer_at = Some(at);
        arm(sup, entry, at, now);
    }
    Some(Step {
        fused,
        generation,
        hash,
        due,
    })
}

/// The last turn end the pane's agent reported, and the generation it
/// belongs to: what the evidence watcher records as the agent's own word.
pub(super) fn turn_end(entry: &Entry) -> Option<(u64, crate::proto::fuse::TurnEnd)> {
    let f = lock(&entry.fusion);
    let (_, _, view) = f.tracker.last()?;
    Some((f.tracker.generation(), view.turn_end.clone()?))
}

/// One timer for a disagreement's bound: when it fires the pane is fused
/// again (and `signal.disagree` published if the disagreement still holds).
fn arm(sup: &Arc<Sup>, entry: &Arc<Entry>, at_ms: u64, now_ms: u64) {
    let (sup, entry) = (Arc::clone(sup), Arc::clone(entry));
    let wait = std::time::Duration::from_millis(at_ms.saturating_sub(now_ms));
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let alive = lock(&sup.panes)
            .get(entry.pane.name())
            .is_some_and(|e| Arc::ptr_eq(e, &entry));
        if alive {
            super::detect::on_signal(&sup, &entry);
        }
    });
}

/// `pane.explain` with `settle_ms`: first wait (bounded) for the agent's
/// status line to report after the last turn end, when it has a status line
/// that has not reported since — the turn's cost comes with it, a few
/// hundred ms after `Stop` — then explain. Woken by the status line itself,
/// never by polling.
pub(super) async fn explain_settled(
    sup: &Arc<Sup>,
    a: &args::PaneExplain,
) -> Result<Explained, super::protocol::Response> {
    if let Some(ms) = a.settle_ms {
        let e = sup.entry(&a.pane)?;
        let ended = turn_end(&e).map(|(_, t)| t.at.at_ms);
        let mut seen = e.status_at.subscribe();
        let last = *seen.borrow();
        if let Some(ended) = ended
            && last != 0
            && last < ended
        {
            let bound = std::time::Duration::from_millis(ms.min(args::PaneExplain::SETTLE_MAX_MS));
            let _ = tokio::time::timeout(bound, seen.wait_for(|&at| at >= ended)).await;
        }
    }
    explain(sup, a)
}

/// `pane.explain`: the screen's observation, the newest signal of each
/// source, the folded view, the pane's state and the rule that decided it.
pub(super) fn explain(
    sup: &Arc<Sup>,
    a: &args::PaneExplain,
) -> Result<Explained, super::protocol::Response> {
    let e = sup.entry(&a.pane)?;
    let now = crate::paths::now_ms();
    let snap = lock(&e.obs).clone();
    let signals = {
        let ledger = lock(&e.signals);
        Source::ALL
            .into_iter()
            .filter_map(|s| ledger.last_of(s))
            .map(|(at, n)| SignalSeen {
                source: n.source,
                signal: n.signal.kind().to_string(),
                at_ms: *at,
                age_ms: now.saturating_sub(*at),
                session: n.session.clone(),
            })
            .collect()
    };
    let f = lock(&e.fusion);
    let last = f
        .tracker
        .last()
        .filter(|_| f.tracker.generation() == snap.generation);
    let mut fused = Observation::new(snap.state, snap.evidence.clone());
    fused.kind = snap.kind;
    fused.exit_code = snap.exit_code;
    fused.source = snap.source;
    Ok(Explained {
        pane: snap.pane.clone(),
        generation: snap.generation,
        screen: last.map(|(o, _, _)| o.clone()),
        screen_hash: snap.screen_hash.clone(),
        signals,
        view: last.map(|(_, _, v)| v.clone()).unwrap_or_default(),
        fused,
        rule: last.map_or("screen", |(_, r, _)| r.rule).to_string(),
        disagreement: last.and_then(|(_, r, _)| r.disagreement.clone()),
        disagreement_reported: f.tracker.reported(),
        usage: lock(&e.usage).total(),
    })
}
