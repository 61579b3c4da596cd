//! Per-pane detectors and barriers: a pane is classified when a burst of its
//! output ends, only changes are published (moving the hub's epoch), and
//! barriers sleep on that epoch — nothing polls.

use super::hub::Snapshot;
use super::observe;
use super::protocol::{ErrorCode, Response};
use super::server::{BURST_QUIET, Entry, MAX_BURST, Sup, lock};
use crate::agent::{Observation, State};
use crate::proto::Event;
use crate::proto::args::{Wait, WaitMode};
use crate::proto::reply::{WaitSnapshot, Waited};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub(super) fn starting_snapshot(pane: &str, generation: u64) -> Snapshot {
    Snapshot {
        pane: pane.to_string(),
        generation,
        state: State::Starting,
        kind: None,
        exit_code: None,
        since_ms: crate::paths::now_ms(),
        since: crate::paths::now_rfc3339(),
        evidence: vec!["spawned".into()],
        screen_hash: String::new(),
        seq: 0,
        source: crate::proto::Source::Screen,
    }
}

/// Classify when a burst of output ends (and once more after it settles);
/// publish only changes. Woken by the pane's reader, never by a timer loop.
pub(super) async fn detector(sup: Arc<Sup>, entry: Arc<Entry>) {
    // Quiet times at which to look again after a burst (cancelled by output).
    // Armed at spawn too: a pane that prints nothing must still settle
    // (e.g. to idle) instead of staying `starting`.
    let mut rechecks: Vec<Duration> = observe::spawn_rechecks().to_vec();
    let mut burst_end = Instant::now();
    let mut pacer = super::pace::Pacer::new(burst_end);
    // The agent's version, asked once per binary (cached by path and mtime).
    let version = agent_version(&entry).await;
    loop {
        let alive = lock(&sup.panes)
            .get(entry.pane.name())
            .is_some_and(|e| Arc::ptr_eq(e, &entry));
        if !alive {
            return;
        }
        let woke = match rechecks.first().copied() {
            Some(at) => {
                let left = at.saturating_sub(burst_end.elapsed());
                tokio::select! {
                    _ = entry.notify.notified() => true,
                    _ = tokio::time::sleep(left) => {
                        rechecks.remove(0);
                        false
                    }
                }
            }
            None => {
                entry.notify.notified().await;
                true
            }
        };
        if woke {
            // The burst ends once the pane's output has been quiet for
            // `BURST_QUIET` (counted from the wake-up when nothing was
            // output since), or after `MAX_BURST`. Output meanwhile does not
            // wake this task: it sleeps until `BURST_QUIET` after the last
            // output it saw and looks again (docs/performance.md, "Pacing
            // classifications during a flood").
            let woke_at = Instant::now();
            loop {
                let start = Instant::now();
                loop {
                    let left = MAX_BURST.saturating_sub(start.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    entry.notify.clear();
                    let Some(burst) = super::quiet::burst_left(
                        entry.notify.since_output(),
                        woke_at.elapsed(),
                        BURST_QUIET,
                    ) else {
                        break;
                    };
                    tokio::time::sleep(burst.min(left)).await;
                }
                // A flooding pane is classified at most once per
                // `CLASSIFY_EVERY` (docs/performance.md); output during the
                // wait is waited out like any burst.
                let wait = pacer.delay(Instant::now());
                if wait.is_zero() {
                    break;
                }
                tokio::time::sleep(wait).await;
            }
            pacer.take(Instant::now());
            burst_end = Instant::now();
            rechecks = observe::settle_rechecks().to_vec();
        }
        publish(&sup, &entry, version.as_deref());
    }
}

/// `claude --version` / `codex --version` of the pane's program, for the
/// evidence of its observations; `None` for other kinds or when it cannot tell.
async fn agent_version(entry: &Entry) -> Option<String> {
    let info = entry.pane.info();
    if !matches!(info.agent.as_str(), "claude" | "codex") {
        return None;
    }
    let bin = std::path::PathBuf::from(info.argv.first()?);
    let name = bin.file_name()?.to_string_lossy().into_owned();
    if name != info.agent {
        return None; // wrapped (e.g. recorded under script(1)): not the agent itself
    }
    tokio::task::spawn_blocking(move || crate::agent::version::version(&bin).ok())
        .await
        .ok()
        .flatten()
}

fn publish(sup: &Arc<Sup>, entry: &Arc<Entry>, version: Option<&str>) {
    let got = entry.pane.with_screen(|screen, meta| {
        // A frame inside a synchronized-output block may be torn.
        if screen.hooks().in_sync_block() && meta.exit.is_none() {
            return None;
        }
        // Render the rows once: they are classified and hashed.
        let rows = screen.rows();
        let hash = crate::paths::fnv1a64(crate::screen::join_rows(&rows).as_bytes());
        Some((
            observe::observe(&sup.classifier, &rows, screen, meta),
            meta.generation,
            hash,
        ))
    });
    let Some((mut o, generation, hash)) = got else {
        return;
    };
    if let Some(v) = version {
        o.evidence.push(format!("agent_version:{v}"));
    }
    not_starting_again(&mut o, &lock(&entry.obs), generation);
    super::fusion::screen_seen(entry, o, generation, format!("{hash:016x}"));
    publish_fused(sup, entry);
}

/// `starting` means "not ready yet": once `generation` has been published
/// in any other state, a frame that matches nothing is `unknown`, not a
/// restart — for the fusion too, so `agent explain` and `signal.disagree`
/// name the screen `unknown` (with what it came after), never `starting`.
fn not_starting_again(o: &mut Observation, published: &Snapshot, generation: u64) {
    if o.state != State::Starting
        || published.generation != generation
        || published.state == State::Starting
    {
        return;
    }
    // A re-check of a frame already read this way keeps the state it came
    // after (not `after:unknown`).
    let after = published
        .evidence
        .iter()
        .find(|e| e.starts_with("after:"))
        .filter(|_| published.state == State::Unknown)
        .cloned()
        .unwrap_or_else(|| format!("after:{}", published.state));
    o.evidence.push(after);
    o.state = State::Unknown;
}

/// A signal reached the pane's ledger: fuse the last screen observation
/// with it and publish at once, without waiting for output.
pub(super) fn on_signal(sup: &Arc<Sup>, entry: &Arc<Entry>) {
    publish_fused(sup, entry);
}

/// Fuse the pane's last screen observation with its signals and publish
/// the outcome: only changes move the epoch (or every classification while
/// a `--fresh` barrier waits).
fn publish_fused(sup: &Arc<Sup>, entry: &Arc<Entry>) {
    // Held until published: a signal's step and the detector's publish in
    // the order they fused.
    let mut fusion = lock(&entry.fusion);
    let Some(step) = super::fusion::step(sup, entry, &mut fusion) else {
        return;
    };
    let super::fusion::Step {
        fused,
        generation,
        hash,
        due,
    } = step;
    let Observation {
        state,
        kind,
        exit_code,
        evidence,
        source,
        ..
    } = fused.observation;
    let mut obs = lock(&entry.obs);
    let changed = obs.generation != generation
        || obs.state != state
        || obs.kind != kind
        || obs.exit_code != exit_code;
    obs.evidence = evidence;
    obs.screen_hash = hash;
    obs.source = source;
    obs.seq += 1;
    let fresh_waiting = sup.fresh_waiters.load(Ordering::Relaxed) > 0;
    if !changed {
        drop(obs);
        if fresh_waiting {
            sup.epoch.send_modify(|x| *x += 1);
        }
        if let Some(ev) = due {
            sup.feed.publish(ev);
        }
        return;
    }
    let from = obs.state;
    obs.generation = generation;
    obs.state = state;
    obs.kind = kind;
    obs.exit_code = exit_code;
    obs.since_ms = crate::paths::now_ms();
    obs.since = crate::paths::now_rfc3339();
    tracing::debug!(pane = %obs.pane, state = %obs.state, "observation changed");
    if obs.state == State::Exited {
        tracing::info!(pane = %obs.pane, generation, code = ?obs.exit_code, "pane exited");
    }
    let ev = Event::PaneState {
        pane: obs.pane.clone(),
        generation: obs.generation,
        state: obs.state,
        state_kind: obs.kind,
        exit_code: obs.exit_code,
        from,
    };
    let (pane, exited) = (obs.pane.clone(), obs.state == State::Exited);
    drop(obs);
    sup.feed.publish(ev);
    if exited {
        sup.feed.publish(Event::PaneExited {
            pane,
            generation,
            exit_code,
        });
    }
    sup.epoch.send_modify(|x| *x += 1);
    if let Some(ev) = due {
        sup.feed.publish(ev);
    }
}

pub(super) async fn wait_barrier(sup: &Arc<Sup>, args: Wait) -> Result<Waited, Response> {
    let timeout = args.timeout();
    let Wait {
        panes,
        until,
        mode,
        fresh,
        ..
    } = args;
    let any = mode == WaitMode::Any;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut rx = sup.epoch.subscribe();
    // `--fresh`: only observations classified after this point count.
    let mut start_seq = std::collections::HashMap::new();
    let _fresh = fresh.then(|| FreshWaiter::new(sup));
    loop {
        rx.borrow_and_update();
        let mut snaps = Vec::with_capacity(panes.len());
        for p in &panes {
            let e = sup.entry(p)?;
            // A pane whose backend cannot be reached has no current state:
            // answering from the last one is how a gap looks like a finish.
            if let Some(why) = e.pane.transport_error() {
                return Err(Response::err(0, ErrorCode::Unavailable, why));
            }
            let snap = lock(&e.obs).clone();
            start_seq
                .entry(p.clone())
                .or_insert((snap.generation, snap.seq));
            snaps.push(snap);
        }
        let is_fresh = |s: &Snapshot| {
            !fresh
                || start_seq
                    .get(&s.pane)
                    .is_none_or(|&(g, q)| s.generation != g || s.seq > q)
        };
        let matches =
            |s: &Snapshot| is_fresh(s) && until.iter().any(|u| u.matches(s.state, s.kind));
        let met = if any {
            snaps.iter().any(matches)
        } else {
            snaps.iter().all(matches)
        };
        if met {
            let snapshots = snaps
                .iter()
                .map(|s| WaitSnapshot {
                    matched: Some(matches(s)),
                    snapshot: s.clone(),
                })
                .collect();
            return Ok(Waited {
                matched: true,
                timed_out: false,
                snapshots,
            });
        }
        tokio::select! {
            changed = rx.changed() => if changed.is_err() {
                return Err(Response::err(0, ErrorCode::Internal, "supervisor is stopping"));
            },
            _ = tokio::time::sleep_until(deadline) => {
                let snapshots = snaps
                    .into_iter()
                    .map(|snapshot| WaitSnapshot { snapshot, matched: None })
                    .collect();
                return Ok(Waited { matched: false, timed_out: true, snapshots });
            }
        }
    }
}

/// Counts a `--fresh` barrier for as long as it waits.
struct FreshWaiter<'a>(&'a Sup);

impl<'a> FreshWaiter<'a> {
    fn new(sup: &'a Sup) -> Self {
        sup.fresh_waiters.fetch_add(1, Ordering::Relaxed);
        FreshWaiter(sup)
    }
}

impl Drop for FreshWaiter<'_> {
    fn drop(&mut self) {
        self.0.fresh_waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unmatched() -> Observation {
        Observation::new(State::Starting, vec!["since_spawn:9000ms".into()])
    }

    #[test]
    fn an_unmatched_frame_after_ready_is_unknown_to_the_fusion() {
        let mut published = starting_snapshot("p", 1);
        published.state = State::Blocked;
        let mut o = unmatched();
        not_starting_again(&mut o, &published, 1);
        assert_eq!(o.state, State::Unknown);
        assert_eq!(o.evidence.last().map(String::as_str), Some("after:blocked"));
        // A re-check keeps what the first unknown came after.
        published.state = State::Unknown;
        published.evidence = o.evidence.clone();
        let mut again = unmatched();
        not_starting_again(&mut again, &published, 1);
        assert_eq!(
            again.evidence.last().map(String::as_str),
            Some("after:blocked")
        );
    }

    #[test]
    fn a_new_generation_or_one_never_ready_is_still_starting() {
        let mut published = starting_snapshot("p", 1);
        let mut o = unmatched();
        not_starting_again(&mut o, &published, 1);
        assert_eq!(o.state, State::Starting);
        published.state = State::Idle;
        not_starting_again(&mut o, &published, 2);
        assert_eq!(o.state, State::Starting);
        assert!(!o.evidence.iter().any(|e| e.starts_with("after:")));
    }
}
