//! The `signal` op: an agent's hook, notify call or status line hands the
//! supervisor what it said (docs/agents.md, "Signals"). The pane is the one
//! whose process tree holds the caller, from its peer credentials, as for
//! `report` (super::report): a lane's hooks never reach another lane.

use super::protocol::Response;
use super::server::{Sup, lock};
use crate::proto::Event;
use crate::proto::args;
use crate::proto::reply::SignalTaken;
use std::sync::Arc;

/// Take a signal for the caller's pane; a caller in none of this
/// supervisor's panes (or of another user) is told so, and nothing changes.
pub(super) async fn take(
    sup: &Arc<Sup>,
    id: u64,
    args: args::Signal,
    peer: Option<tokio::net::unix::UCred>,
) -> Response {
    let me = nix::unistd::getuid().as_raw();
    let pane = peer
        .filter(|c| c.uid() == me)
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok())
        .and_then(|pid| super::report::lane_of(sup, pid))
        .map(|root| root.name);
    let entry = pane
        .as_deref()
        .and_then(|p| lock(&sup.panes).get(p).cloned());
    if let Some(e) = entry {
        let note = args.note;
        let ev = Event::PaneSignal {
            pane: e.pane.name().to_string(),
            generation: e.pane.generation(),
            source: note.source,
            signal: note.signal.kind().to_string(),
        };
        lock(&e.signals).apply(crate::paths::now_ms(), note);
        sup.feed.publish(ev);
        super::detect::on_signal(sup, &e);
    }
    Response::reply(id, &SignalTaken { pane })
}
