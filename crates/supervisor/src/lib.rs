//! The supervisor (`drover serve`) and what it answers with: barriers, shadow runs, reports, gates.

pub use drover_agent::agent;
pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_engine::{engine, registry};
pub use drover_fleet::fleet;
pub use drover_pane::pane;
pub use drover_policy::policy;
pub use drover_proto::proto;
pub use drover_screen::screen;

pub mod daemon;
pub mod gate;
pub mod report;
pub mod shadow;
pub mod watch;
