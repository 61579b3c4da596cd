//! The fleet: supervisors of many hosts joined over NATS JetStream.

pub use drover_agent::agent;
pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_pane::pane;
pub use drover_proto::proto;

pub mod fleet;
