//! `drover web`: the live page of panes, lanes, runs and hosts.

pub use drover_agent::agent;
pub use drover_base::{exit, paths, statedir, store, time};
pub use drover_client::client;
pub use drover_fleet::fleet;
pub use drover_proto::proto;
pub use drover_runstate::{registry, runstate};
pub use drover_top::top;

pub mod web;
