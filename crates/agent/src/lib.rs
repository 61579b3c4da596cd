//! The agents: a screen turned into an observation (rules as data), prompts delivered.

pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_proto::proto;

pub mod agent;
