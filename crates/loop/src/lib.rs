//! The loop: `drover loop run` works a board unattended to an integration branch.

pub use drover_agent::agent;
pub use drover_base::{backoff, evidence, exit, git, paths, procfs, shell, statedir, store, time};
pub use drover_client::client;
pub use drover_engine::{engine, registry};
pub use drover_fleet::fleet;
pub use drover_lanes::{dispatch, lane};
pub use drover_pane::pane;
pub use drover_proto::proto;
pub use drover_report::{gate, report, shadow};
pub use drover_runstate::runstate;

pub mod loopctl;
