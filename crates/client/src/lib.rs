//! The supervisor's client: what every caller above the supervisor (the
//! lanes, the loop, `top`, the CLI) speaks to it through, typed by
//! `drover-proto`.

pub use drover_base::{backoff, exit, statedir, store};
pub use drover_proto::proto;

pub mod client;
