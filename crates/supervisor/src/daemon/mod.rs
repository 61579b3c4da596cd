//! The supervisor (`drover serve`): owns every pane for its life, speaks the
//! framed protocol on a private Unix socket, answers barriers from
//! observation changes, and shuts down cleanly on SIGTERM/SIGINT.

mod adopt;
mod answer;
mod barrier_source;
pub use crate::client;
mod conn_limit;
mod deliver;
mod detect;
mod evidence_watch;
pub mod feed;
mod feed_conn;
mod feed_files;
mod fleet_hook;
pub mod frame_limit;
mod fusion;
mod hub;
mod lost;
mod observe;
mod pace;
pub mod protocol;
mod quiet;
mod report;
mod report_box;
mod rollout;
mod rollout_find;
mod server;
mod server_attach;
mod server_ops;
mod server_watch;
mod signal;

pub use barrier_source::SocketBarrier;
pub use client::{Client, ClientError};
pub use client::{EventStream, FollowSpec};
pub use hub::Snapshot;
pub use server::{ServeError, ServeOptions, serve};
