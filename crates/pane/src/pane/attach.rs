//! The one client attached to a pane, kept the same way by every backend:
//! a new client kicks the old one, frames are drawn from the pane's screen
//! model by the client's own renderer, and wake-ups coalesce.

use super::ExitInfo;
use crate::screen::{Renderer, Screen};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Events (exit, kick) buffered for an attached client.
const ATTACH_QUEUE: usize = 8;
/// Terminal queries held for an attached client's next frame, at most.
const ATTACH_QUERIES: usize = 4096;

/// Client ids, unique across every pane of every backend.
static ATTACH_IDS: AtomicU64 = AtomicU64::new(1);

/// Events for an attached client (output is pulled, see `AttachSlot::frame`).
#[derive(Debug)]
pub enum AttachMsg {
    Exited(ExitInfo),
    Kicked,
}

/// What an attaching client receives: the first frame, then a wake-up
/// whenever the screen changed and events.
#[derive(Debug)]
pub struct AttachHandle {
    pub id: u64,
    /// The whole screen, drawn from the model.
    pub repaint: Vec<u8>,
    pub rx: tokio::sync::mpsc::Receiver<AttachMsg>,
    /// Notified when the screen changed: fetch the pane's `attach_frame`.
    /// Wake-ups coalesce, so a slow client gets fewer, larger frames.
    pub wake: Arc<tokio::sync::Notify>,
}

/// The attached client of one pane.
pub(crate) struct AttachSlot {
    id: u64,
    tx: tokio::sync::mpsc::Sender<AttachMsg>,
    wake: Arc<tokio::sync::Notify>,
    renderer: Renderer,
    /// Queries for the attached terminal to answer, sent after the next frame.
    queries: Vec<u8>,
}

impl AttachSlot {
    /// Attach a new client in `slot`: kicks the one there, returns the first
    /// frame of `screen` and, when the pane has exited, queues that.
    pub(crate) fn open(
        slot: &mut Option<AttachSlot>,
        screen: &Screen,
        exit: Option<&ExitInfo>,
    ) -> AttachHandle {
        let (tx, rx) = tokio::sync::mpsc::channel(ATTACH_QUEUE);
        let wake = Arc::new(tokio::sync::Notify::new());
        let id = ATTACH_IDS.fetch_add(1, Ordering::Relaxed);
        if let Some(old) = slot.take() {
            let _ = old.tx.try_send(AttachMsg::Kicked);
        }
        let mut renderer = Renderer::new();
        let repaint = renderer.frame(screen);
        if let Some(exit) = exit {
            let _ = tx.try_send(AttachMsg::Exited(exit.clone()));
        }
        *slot = Some(AttachSlot {
            id,
            tx,
            wake: wake.clone(),
            renderer,
            queries: Vec::new(),
        });
        AttachHandle {
            id,
            repaint,
            rx,
            wake,
        }
    }

    /// What changed on `screen` since client `id`'s last frame, then the
    /// terminal queries it should answer; `None` once another client took over.
    pub(crate) fn frame(
        slot: &mut Option<AttachSlot>,
        id: u64,
        screen: &Screen,
    ) -> Option<Vec<u8>> {
        let slot = slot.as_mut().filter(|a| a.id == id)?;
        let mut out = slot.renderer.frame(screen);
        out.append(&mut slot.queries);
        Some(out)
    }

    /// Detach client `id` (no-op when another client has taken over).
    pub(crate) fn close(slot: &mut Option<AttachSlot>, id: u64) {
        if slot.as_ref().is_some_and(|a| a.id == id) {
            *slot = None;
        }
    }

    /// The screen changed: wake the client (coalesced).
    pub(crate) fn changed(&self) {
        self.wake.notify_one();
    }

    /// The pane's process ended.
    pub(crate) fn exited(&self, info: ExitInfo) {
        let _ = self.tx.try_send(AttachMsg::Exited(info));
    }

    /// Hold terminal queries for the client's real terminal to answer
    /// (dropped past [`ATTACH_QUERIES`]).
    pub(crate) fn hold_queries(&mut self, q: &[u8]) {
        if self.queries.len() + q.len() <= ATTACH_QUERIES {
            self.queries.extend_from_slice(q);
        }
    }
}
