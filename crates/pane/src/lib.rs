//! Panes: a PTY (native, tmux or herdr) per pane, drained and parsed into the screen model.

pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_proto::proto;
pub use drover_screen::screen;

pub mod pane;
