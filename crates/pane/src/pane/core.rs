//! What every pane keeps, whichever backend hosts it: its spec and
//! generation, the leader's pid, drover's own screen model, the exit, the
//! times the detector reads and the attached client. Backends hold a
//! [`PaneCore`] inside their lock beside their own fields and describe the
//! pane (`pane ls`, [`ScreenMeta`]) and serve attach through it, so the three
//! backends say the same things the same way.

use super::attach::{AttachHandle, AttachSlot};
use super::backend::Backend;
use super::spec::{PaneSpec, PaneSpecExt};
use crate::screen::Screen;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

pub use crate::proto::pane::{ExitInfo, PaneInfo};

/// Facts about a pane handed to screen readers alongside the screen.
#[derive(Debug, Clone)]
pub struct ScreenMeta {
    pub generation: u64,
    /// The pane leader's pid (the shell of a shell pane).
    pub pid: u32,
    pub exit: Option<ExitInfo>,
    pub quiet: Duration,
    pub since_spawn: Duration,
    pub agent: String,
}

/// The per-pane state every backend keeps under its pane lock.
pub(crate) struct PaneCore {
    pub(crate) spec: PaneSpec,
    pub(crate) generation: u64,
    /// The generation's leader.
    pub(crate) pid: u32,
    pub(crate) screen: Screen,
    pub(crate) exit: Option<ExitInfo>,
    /// The env was read back from the leader (`/proc/<pid>/environ`).
    pub(crate) env_verified: bool,
    pub(crate) started_at_ms: u64,
    pub(crate) started: Instant,
    pub(crate) last_output: Instant,
    pub(crate) attach: Option<AttachSlot>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PaneCore {
    /// Generation `generation` of `spec`, led by `pid`, with a blank screen
    /// of the spec's size.
    pub(crate) fn new(spec: PaneSpec, generation: u64, pid: u32, env_verified: bool) -> Self {
        let now = Instant::now();
        PaneCore {
            screen: Screen::new(spec.cols, spec.rows),
            spec,
            generation,
            pid,
            exit: None,
            env_verified,
            started_at_ms: crate::paths::now_ms(),
            started: now,
            last_output: now,
            attach: None,
        }
    }

    /// Start the next generation, led by `pid`: a blank screen of the spec's
    /// size, no exit, the clocks reset. The attached client stays.
    pub(crate) fn next_generation(&mut self, pid: u32, env_verified: bool) -> u64 {
        self.generation += 1;
        self.pid = pid;
        self.screen = Screen::new(self.spec.cols, self.spec.rows);
        self.exit = None;
        self.env_verified = env_verified;
        self.started_at_ms = crate::paths::now_ms();
        self.started = Instant::now();
        self.last_output = Instant::now();
        self.generation
    }

    /// The `pane ls` description of pane `name` on `backend`.
    pub(crate) fn info(&self, name: &str, backend: Backend) -> PaneInfo {
        let (cols, rows) = self.screen.size();
        PaneInfo {
            name: name.to_string(),
            backend,
            pid: self.pid,
            generation: self.generation,
            cols,
            rows,
            agent: self.spec.agent.clone(),
            argv: self.spec.argv.clone(),
            env_names: self.spec.env_names(),
            env_verified: self.env_verified,
            cwd: self.spec.cwd.clone(),
            started_at_ms: self.started_at_ms,
            bytes: self.screen.bytes(),
            exit: self.exit.clone(),
            attached: self.attach.is_some(),
        }
    }

    /// Run `f` on the screen with the facts screen readers are given.
    pub(crate) fn with_screen(&mut self, f: &mut dyn FnMut(&mut Screen, &ScreenMeta)) {
        let meta = ScreenMeta {
            generation: self.generation,
            pid: self.pid,
            exit: self.exit.clone(),
            quiet: self.last_output.elapsed(),
            since_spawn: self.started.elapsed(),
            agent: self.spec.agent.clone(),
        };
        f(&mut self.screen, &meta)
    }

    /// New output is in the screen: note when, tell an attached client.
    pub(crate) fn output_seen(&mut self) {
        self.last_output = Instant::now();
        if let Some(a) = &self.attach {
            a.changed();
        }
    }

    /// The screen changed without output (a resize, a repaint): tell an
    /// attached client.
    pub(crate) fn screen_changed(&self) {
        if let Some(a) = &self.attach {
            a.changed();
        }
    }

    /// Record the generation's exit and tell an attached client.
    pub(crate) fn set_exit(&mut self, info: ExitInfo) {
        if let Some(a) = &self.attach {
            a.exited(info.clone());
        }
        self.exit = Some(info);
    }

    /// Attach a client (kicking any attached one); its first frame.
    pub(crate) fn attach(&mut self) -> AttachHandle {
        AttachSlot::open(&mut self.attach, &self.screen, self.exit.as_ref())
    }

    /// What changed since client `id`'s last frame (`None` once another
    /// client took over).
    pub(crate) fn attach_frame(&mut self, id: u64) -> Option<Vec<u8>> {
        AttachSlot::frame(&mut self.attach, id, &self.screen)
    }

    /// Detach client `id` (no-op when another client has taken over).
    pub(crate) fn detach(&mut self, id: u64) {
        AttachSlot::close(&mut self.attach, id);
    }
}

/// Backend pane state that holds a [`PaneCore`].
pub(crate) trait HasCore {
    fn core(&self) -> &PaneCore;
}

/// Wait on `cv` until generation `generation` of the pane in `m` has exited
/// (or a newer one started); false on timeout.
pub(crate) fn wait_exit<T: HasCore>(
    m: &Mutex<T>,
    cv: &Condvar,
    generation: u64,
    timeout: Duration,
) -> bool {
    let g = lock(m);
    let (g, _) = cv
        .wait_timeout_while(g, timeout, |g| {
            let c = g.core();
            c.generation == generation && c.exit.is_none()
        })
        .unwrap_or_else(PoisonError::into_inner);
    let c = g.core();
    c.generation != generation || c.exit.is_some()
}

/// Implement [`HasCore`] and plain field access to the core for a backend's
/// locked state (`g.screen`, `g.generation`, … read through to its `core`
/// field), so backend code reads the shared fields as its own.
macro_rules! core_fields {
    ($t:ty) => {
        impl $crate::pane::core::HasCore for $t {
            fn core(&self) -> &$crate::pane::core::PaneCore {
                &self.core
            }
        }
        impl std::ops::Deref for $t {
            type Target = $crate::pane::core::PaneCore;
            fn deref(&self) -> &Self::Target {
                &self.core
            }
        }
        impl std::ops::DerefMut for $t {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.core
            }
        }
    };
}
pub(crate) use core_fields;

/// The [`PaneBackend`](crate::pane::backend::PaneBackend) methods that only
/// read or forward to the core, for a backend pane with `name: String` and
/// `inner: Mutex<Inner>` where `Inner` has [`core_fields`]: written once for
/// every backend whose panes live in another server (tmux, herdr).
macro_rules! core_backend_methods {
    ($backend:expr) => {
        fn name(&self) -> &str {
            &self.name
        }
        fn backend(&self) -> $crate::pane::backend::Backend {
            $backend
        }
        fn info(&self) -> $crate::pane::PaneInfo {
            $crate::pane::core::lock(&self.inner).info(&self.name, $backend)
        }
        fn generation(&self) -> u64 {
            $crate::pane::core::lock(&self.inner).generation
        }
        fn spec_size(&self) -> (u16, u16) {
            let g = $crate::pane::core::lock(&self.inner);
            (g.spec.cols, g.spec.rows)
        }
        fn attach(&self) -> $crate::pane::attach::AttachHandle {
            $crate::pane::core::lock(&self.inner).attach()
        }
        fn attach_frame(&self, id: u64) -> Option<Vec<u8>> {
            $crate::pane::core::lock(&self.inner).attach_frame(id)
        }
        fn detach(&self, id: u64) {
            $crate::pane::core::lock(&self.inner).detach(id);
        }
        fn repaint(&self) -> Vec<u8> {
            $crate::screen::Renderer::new().frame(&$crate::pane::core::lock(&self.inner).screen)
        }
        fn transport_error(&self) -> Option<String> {
            $crate::pane::core::lock(&self.inner).transport.clone()
        }
    };
}
pub(crate) use core_backend_methods;
/// The name tmux and herdr give a signal that ended a pane's process
/// (`Killed`, `Terminated`, …).
pub fn signal_name(n: i32) -> String {
    match n {
        1 => "Hangup".into(),
        2 => "Interrupt".into(),
        3 => "Quit".into(),
        6 => "Aborted".into(),
        9 => "Killed".into(),
        13 => "Broken pipe".into(),
        15 => "Terminated".into(),
        n => format!("Signal {n}"),
    }
}
