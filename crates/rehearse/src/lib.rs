//! Rehearsal: the mock model server the real agents talk to, and the agent versions drover supports.

pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_pane::pane;
pub use drover_proto::proto;

pub mod rehearse;
