//! The backend trait: what every kind of pane does, whoever hosts it. The
//! supervisor, classifier, barriers, delivery and the evidence watcher hold
//! `Arc<dyn PaneBackend>` and never learn which backend a pane is on.

use super::{AttachHandle, PaneError, PaneInfo, ScreenMeta};
use crate::screen::Screen;
use std::sync::Arc;

pub use crate::proto::backend::{Backend, UnknownBackend};

/// One pane, on any backend. Implementations keep drover's own screen model
/// of the pane fed in order and call their [`super::PaneEvents`] on output,
/// exit and transport changes, so everything above reads panes the same way.
pub trait PaneBackend: Send + Sync + std::fmt::Debug {
    /// The pane's name.
    fn name(&self) -> &str;
    /// Which backend hosts it.
    fn backend(&self) -> Backend;
    /// A description for `pane ls`.
    fn info(&self) -> PaneInfo;
    /// Run `f` once on the screen with facts about the pane, under the pane's
    /// lock. Callers use [`dyn PaneBackend::with_screen`].
    fn with_screen_dyn(&self, f: &mut dyn FnMut(&mut Screen, &ScreenMeta));
    /// The current generation.
    fn generation(&self) -> u64;
    /// Write raw input bytes (attach).
    fn write_input(&self, bytes: &[u8]) -> Result<(), PaneError>;
    /// Send text (bracketed paste when the app enabled it), then Enter
    /// unless `enter` is false.
    fn send_text(&self, text: &str, enter: bool) -> Result<(), PaneError>;
    /// Send named keys (all validated before any is written).
    fn send_keys(&self, keys: &[String]) -> Result<(), PaneError>;
    /// Resize the pane (the app gets SIGWINCH) and the screen.
    fn resize(&self, cols: u16, rows: u16) -> Result<(), PaneError>;
    /// The size the pane was created with.
    fn spec_size(&self) -> (u16, u16);
    /// Whether text written to the pane reaches the app as a bracketed
    /// paste: the app switched the mode on, as the screen model saw.
    fn pastes_bracketed(&self) -> bool {
        let mut on = false;
        self.with_screen_dyn(&mut |s, _| on = s.bracketed_paste());
        on
    }
    /// End the pane's processes (TERM, grace, KILL) and release the pane.
    fn kill(&self);
    /// Kill the current process and start the spec again as a new generation.
    fn respawn(self: Arc<Self>) -> Result<u64, PaneError>;
    /// Attach a client: kicks any attached client, returns the first frame
    /// (drawn from the screen model) and the stream of wake-ups and events.
    fn attach(&self) -> AttachHandle;
    /// What changed on the screen since client `id`'s last frame, drawn from
    /// the screen model (`None` once another client took over).
    fn attach_frame(&self, id: u64) -> Option<Vec<u8>>;
    /// Detach client `id` (no-op when another client has taken over).
    fn detach(&self, id: u64);
    /// A repaint of the current screen.
    fn repaint(&self) -> Vec<u8>;
    /// Why the pane cannot be reached now (its backend's server or client
    /// is gone); `None` while it can. Barriers answer a transport error.
    fn transport_error(&self) -> Option<String> {
        None
    }
    /// The backend's own id for the pane (tmux `%N`, a herdr pane id).
    fn backend_pane_id(&self) -> Option<String> {
        None
    }
    /// The pane's process record as the supervisor keeps it refreshed
    /// (`<state>/panes/<name>.json`), with `descendants` besides the leader;
    /// `None` when the backend writes its own record.
    fn process_record(
        &self,
        _descendants: Vec<super::Member>,
    ) -> Option<super::record::PaneRecord> {
        None
    }
    /// The processes of the pane's tree running now (for its record).
    fn members(&self) -> Vec<super::Member> {
        Vec::new()
    }
    /// A command an operator can run to reach the pane outside drover.
    fn attach_command(&self) -> Option<String> {
        None
    }
    /// The pane's state as its backend reports it, when it has its own
    /// reading (herdr): one more signal beside drover's own.
    fn backend_state(&self) -> Option<String> {
        None
    }
}

impl dyn PaneBackend {
    /// Run `f` on the screen with facts about the pane, under the pane lock.
    pub fn with_screen<R>(&self, f: impl FnOnce(&mut Screen, &ScreenMeta) -> R) -> R {
        let mut f = Some(f);
        let mut out = None;
        self.with_screen_dyn(&mut |s, m| {
            if let Some(f) = f.take() {
                out = Some(f(s, m));
            }
        });
        match out {
            Some(r) => r,
            // Every implementation calls the closure exactly once.
            None => unreachable!("with_screen_dyn did not call its closure"),
        }
    }
}

/// A live pane as the protocol reports it: its info, how its backend
/// reaches it, and `observation`.
pub fn view(pane: &dyn PaneBackend, observation: crate::proto::Snapshot) -> crate::proto::PaneView {
    let mut info = pane.info();
    info.backend = pane.backend();
    crate::proto::PaneView {
        info,
        backend_pane_id: pane.backend_pane_id(),
        attach_command: pane.attach_command(),
        transport_error: pane.transport_error(),
        backend_state: pane.backend_state(),
        observation,
        usage: None,
    }
}
