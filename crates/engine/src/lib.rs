//! The crash-safe state on disk: the job engine (the only writer of job status) and the registry.

pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_proto::proto;

pub mod engine;
pub mod registry;
