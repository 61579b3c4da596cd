//! The `signal` op: an agent's hook, notify call or status line hands the
//! supervisor what it said (docs/agents.md, "The agents' own signals"). The
//! pane is the one whose process tree holds the caller, from its peer
//! credentials, as for `report` (super::report): a lane's hooks never reach
//! another lane.
//!
//! Cheap by design: no disk write per signal, only the pane's ledger and
//! its usage tally (in memory, [`crate::proto::usage::Tally`]) and one `pane.signal` event on the feed (a limits or usage
//! signal, with its figures, only when they changed). A pane's agent may send
//! [`Rate::PER_SECOND`] signals a second; past that they are dropped, with
//! one warning in the log per second of flood, so a looping hook cannot
//! flood the feed.

use super::protocol::Response;
use super::server::{Entry, Sup, lock};
use crate::proto::Event;
use crate::proto::args;
use crate::proto::reply::SignalTaken;
use crate::proto::signal::{Signal, SignalNote, Source};
use std::sync::Arc;

/// A pane's signals in the current one-second window.
#[derive(Debug, Default)]
pub(super) struct Rate {
    window_start_ms: u64,
    count: u32,
    warned: bool,
}

/// What to do with one more signal.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admit {
    Take,
    /// Drop it, and say so (the first drop of a window).
    DropAndWarn,
    Drop,
}

impl Rate {
    /// Signals a pane's agent may send a second.
    pub(super) const PER_SECOND: u32 = 200;

    /// Count one more signal seen at `now_ms`.
    pub(super) fn admit(&mut self, now_ms: u64) -> Admit {
        if now_ms.saturating_sub(self.window_start_ms) >= 1000 {
            *self = Rate {
                window_start_ms: now_ms,
                count: 0,
                warned: false,
            };
        }
        if self.count < Self::PER_SECOND {
            self.count += 1;
            return Admit::Take;
        }
        if self.warned {
            Admit::Drop
        } else {
            self.warned = true;
            Admit::DropAndWarn
        }
    }
}

/// Whether `note` only repeats a figure the ledger has (limits or usage,
/// from the same source): the status line runs every few hundred ms with
/// the same figures, which are kept and published once.
fn repeats(ledger: &crate::agent::signals::Ledger, note: &SignalNote) -> bool {
    matches!(note.signal, Signal::Limits(_) | Signal::Usage(_))
        && ledger
            .notes()
            .rev()
            .find(|(_, n)| n.source == note.source && n.signal.kind() == note.signal.kind())
            .is_some_and(|(_, n)| n == note)
}

/// Apply `note` to pane `e`'s ledger and publish `pane.signal`, within
/// the pane's rate; a figure already kept is not kept again. Every source
/// goes through here: the `signal` op and a Codex pane's rollout
/// (super::rollout). A notify naming Codex's thread tells the rollout
/// follower which file is the pane's.
pub(super) fn apply(sup: &Arc<Sup>, e: &Arc<Entry>, note: SignalNote) {
    let now = crate::paths::now_ms();
    let admit = lock(&e.signal_rate).admit(now);
    if admit == Admit::DropAndWarn {
        tracing::warn!(
            pane = %e.pane.name(),
            per_second = Rate::PER_SECOND,
            "the pane's agent sends more signals than taken; dropping the rest of this second"
        );
    }
    if admit != Admit::Take {
        return;
    }
    if note.source == Source::Status {
        e.status_at.send_replace(now);
    }
    if note.source == Source::Notify
        && let Some(thread) = &note.session
    {
        let mut t = lock(&e.rollout_thread);
        if t.as_ref() != Some(thread) {
            *t = Some(thread.clone());
        }
    }
    let (limits, usage) = match &note.signal {
        Signal::Limits(l) => (Some(*l), None),
        Signal::Usage(u) => (None, Some(*u)),
        _ => (None, None),
    };
    let ev = Event::PaneSignal {
        pane: e.pane.name().to_string(),
        generation: e.pane.generation(),
        source: note.source,
        signal: note.signal.kind().to_string(),
        limits,
        usage,
    };
    if let Signal::Usage(u) = &note.signal {
        lock(&e.usage).take(e.pane.generation(), note.session.as_deref(), u);
    }
    let mut ledger = lock(&e.signals);
    if !repeats(&ledger, &note) {
        ledger.apply(now, note);
        drop(ledger);
        sup.feed.publish(ev);
        // Re-fuse at once: a `Stop` reaches a barrier without waiting for
        // the screen to settle.
        super::detect::on_signal(sup, e);
    }
}

/// How long a signal from a caller in no pane is kept for a pane being
/// created, and how many are kept at most.
const EARLY_TTL: std::time::Duration = std::time::Duration::from_secs(10);
const EARLY_MAX: usize = 64;

/// A signal that came while a pane was being created, from a caller in no
/// pane yet: its caller's lineage (pid, start time) and the note.
pub(super) struct Early {
    at: std::time::Instant,
    lineage: Vec<(u32, u64)>,
    note: SignalNote,
}

/// A new pane is in the table: take the signals kept for it (its leader is
/// in their caller's lineage, the same process by its start time), in the
/// order they came.
pub(super) fn take_early(sup: &Arc<Sup>, e: &Arc<Entry>) {
    let info = e.pane.info();
    let Some(start) = crate::pane::procfs::start_time(info.pid) else {
        return;
    };
    let mine: Vec<SignalNote> = {
        let mut early = lock(&sup.early_signals);
        let now = std::time::Instant::now();
        let mut mine = Vec::new();
        early.retain(|x| {
            if now.duration_since(x.at) >= EARLY_TTL {
                return false;
            }
            if x.lineage.contains(&(info.pid, start)) {
                mine.push(x.note.clone());
                return false;
            }
            true
        });
        mine
    };
    for note in mine {
        apply(sup, e, note);
    }
}

/// Take a signal for the caller's pane; a caller in none of this
/// supervisor's panes (or of another user) is told so, and nothing changes.
pub(super) async fn take(
    sup: &Arc<Sup>,
    id: u64,
    args: args::Signal,
    peer: Option<tokio::net::unix::UCred>,
) -> Response {
    let me = nix::unistd::getuid().as_raw();
    let caller = peer
        .filter(|c| c.uid() == me)
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok());
    let resolve = || {
        let name = caller
            .and_then(|pid| super::report::lane_of(sup, pid))?
            .name;
        let e = lock(&sup.panes).get(&name).cloned()?;
        Some((name, e))
    };
    let mut found = resolve();
    if found.is_none()
        && let Some(pid) = caller
    {
        // A hook can fire before its pane is in the table (the agent runs
        // inside the spawn). A pane goes into the table before it leaves
        // `creating`, so `creating` is read before the table is looked at
        // again: empty, and a pane made since the first look is in the table
        // now; not empty, and the signal is kept for the pane being created,
        // which takes it once it is in the table (`take_early`). The hook
        // does not wait.
        let creating = !lock(&sup.creating).is_empty();
        let lineage = creating.then(|| {
            crate::pane::procfs::lineage(pid, super::report::MAX_DEPTH)
                .into_iter()
                .map(|(p, st)| (p, st.starttime))
                .collect::<Vec<(u32, u64)>>()
        });
        let mut early = lock(&sup.early_signals);
        // Under the lock `take_early` drains with: in the table by now, or
        // kept before the new pane's drain.
        found = resolve();
        if found.is_none()
            && let Some(lineage) = lineage
        {
            let now = std::time::Instant::now();
            early.retain(|e| now.duration_since(e.at) < EARLY_TTL);
            if early.len() >= EARLY_MAX {
                early.pop_front();
            }
            early.push_back(Early {
                at: now,
                lineage,
                note: args.note.clone(),
            });
        }
    }
    let (pane, entry) = match found {
        Some((name, e)) => (Some(name), Some(e)),
        None => (None, None),
    };
    if let Some(e) = entry {
        apply(sup, &e, args.note);
    }
    Response::reply(id, &SignalTaken { pane })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pane_gets_its_per_second_and_one_warning_then_a_new_second() {
        let mut r = Rate::default();
        let t0 = 1_000_000;
        for _ in 0..Rate::PER_SECOND {
            assert_eq!(r.admit(t0), Admit::Take);
        }
        assert_eq!(r.admit(t0 + 10), Admit::DropAndWarn);
        assert_eq!(r.admit(t0 + 20), Admit::Drop);
        assert_eq!(r.admit(t0 + 999), Admit::Drop);
        assert_eq!(r.admit(t0 + 1000), Admit::Take);
    }

    #[test]
    fn a_figure_is_kept_once_until_it_changes_and_events_always() {
        use crate::proto::signal::{Source, Usage};
        let usage = |c: f64| SignalNote {
            source: Source::Status,
            session: None,
            signal: Signal::Usage(Usage {
                cost_usd: Some(c),
                ..Usage::default()
            }),
        };
        let mut l = crate::agent::signals::Ledger::default();
        assert!(!repeats(&l, &usage(0.1)));
        l.apply(1, usage(0.1));
        assert!(repeats(&l, &usage(0.1)));
        assert!(!repeats(&l, &usage(0.2)));
        let ended = SignalNote {
            source: Source::Hook,
            session: None,
            signal: Signal::TurnEnded {
                message_sha256: None,
            },
        };
        l.apply(2, ended.clone());
        assert!(
            repeats(&l, &usage(0.1)),
            "another kind between changes nothing"
        );
        assert!(!repeats(&l, &ended), "an event is never a repeat");
    }
}
