//! What a lane did, checked: its report, the shadow run's verification of
//! declared side effects, and the gates a run passes.

pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_engine::{engine, registry};
pub use drover_policy::policy;
pub use drover_proto::proto;

pub mod gate;
pub mod report;
pub mod shadow;
