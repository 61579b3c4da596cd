//! Panes: one terminal with one process tree each. `native` is a PTY drover
//! owns; the spec, its validation and the key table are backend-neutral.
//!
//! Nothing above this module knows how a pane is hosted. A pane reports output
//! and exit through [`PaneEvents`] so the layers above (classifier, barriers)
//! are driven by events, never by polling.

mod attach;
pub mod backend;
pub mod cgroup;
mod core;
pub mod herdr;
mod hosts;
mod input;
mod keys;
mod native;
mod native_backend;
pub use crate::procfs;
pub mod reap;
pub mod record;
mod saved;
mod spawn;
pub use spawn::SCRUBBED_ENV;
mod spec;
pub mod tmux;

pub use self::core::signal_name;
pub use self::core::{ExitInfo, PaneInfo, ScreenMeta};
pub use attach::{AttachHandle, AttachMsg};
pub use backend::{Backend, PaneBackend};
pub use hosts::Hosts;
pub use keys::{KeyError, key_bytes};
pub use native::NativePane;
pub use procfs::{env_values, foreground_job, shell_child_in_foreground};
pub use spec::{
    DEFAULT_COLS, DEFAULT_ROWS, PaneSpec, PaneSpecExt, find_executable, parse_size,
    validate_env_name, validate_pane_name,
};

use std::path::PathBuf;

pub use input::INPUT_QUEUE_BYTES;
pub use reap::{Member, ProcIds};
pub use spawn::PANE_MARKER_ENV;

/// SIGTERM → SIGKILL grace when a pane is killed.
pub const KILL_GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// Callbacks from a pane's reader and waiter threads. Called without any
/// pane lock held; implementations must not block.
pub trait PaneEvents: Send + Sync {
    /// New output was parsed into the screen.
    fn output(&self);
    /// The pane's process exited and its output was drained.
    fn exited(&self);
    /// The pane's transport went away or came back (see
    /// [`PaneBackend::transport_error`]).
    fn transport_changed(&self) {
        self.output();
    }
}

/// Errors of pane operations; each says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PaneError {
    #[error("invalid pane name {0:?}: use 1-64 of A-Z a-z 0-9 . _ -")]
    InvalidName(String),
    #[error("invalid env name {0:?}: use [A-Za-z_][A-Za-z0-9_]*")]
    InvalidEnvName(String),
    #[error("env {0} has a NUL byte in its value")]
    InvalidEnvValue(String),
    #[error(
        "env {0} is drover's own (it marks every process of a pane so kill can end them): leave it out"
    )]
    ReservedEnv(String),
    #[error(
        "env {0} is herdr's own (herdr sets it in each of its panes, for that pane): leave it out on the herdr backend"
    )]
    HerdrOwnEnv(String),
    #[error("invalid size {0:?}: use COLSxROWS, e.g. 120x40")]
    InvalidSize(String),
    #[error(
        "size {cols}x{rows} is too small for an agent pane: use at least 80x24 (footers are read there)"
    )]
    TooSmallForAgent { cols: u16, rows: u16 },
    #[error("no command given: pass it after --, e.g. `-- bash`")]
    NoCommand,
    #[error("command not found: {0}")]
    CommandNotFound(String),
    #[error("cwd {} does not exist or is not a directory", .0.display())]
    MissingCwd(PathBuf),
    #[error("cannot start {command}: {message}")]
    Spawn { command: String, message: String },
    #[error(
        "env {name} did not reach the child process (checked /proc/<pid>/environ); pane not created"
    )]
    EnvMismatch { name: String },
    #[error("pane {0} has exited; respawn it first")]
    Exited(String),
    #[error(
        "pane {0} is not reading its input ({mib} MiB are queued); nothing more is sent until it does",
        mib = INPUT_QUEUE_BYTES >> 20
    )]
    NotReading(String),
    #[error("pty I/O on pane {pane}: {source}")]
    Io {
        pane: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("pane {pane} is unreachable: {message}")]
    Transport { pane: String, message: String },
    #[error("{backend}: {message}")]
    Backend {
        backend: &'static str,
        message: String,
    },
    /// The backend cannot do this operation (refused, exit 3).
    #[error("{backend} refuses {operation}: {message}")]
    Unsupported {
        backend: &'static str,
        operation: &'static str,
        message: String,
    },
}

impl PaneError {
    /// Bad input from the caller (exit 2) rather than a runtime failure.
    pub fn is_usage(&self) -> bool {
        !matches!(
            self,
            PaneError::Spawn { .. }
                | PaneError::Io { .. }
                | PaneError::Exited(_)
                | PaneError::NotReading(_)
                | PaneError::Transport { .. }
                | PaneError::Backend { .. }
                | PaneError::Unsupported { .. }
        )
    }
}
