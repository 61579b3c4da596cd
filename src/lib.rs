//! drover: a supervisor for AI coding agents that work in terminal panes.
//!
//! # Theory of operation
//!
//! Data flows one way, from bytes to a decision:
//!
//! ```text
//! agent TUI ⇄ PTY ─bytes→ screen ─text+signals→ classifier ─observation→ watch hub
//!                                                   barriers, evidence ←──┘
//!            evidence → policy::decide (pure) → engine (the only writer of job status)
//! ```
//!
//! - [`pane`] owns terminals: a PTY per pane, a reader thread that keeps it
//!   drained and a parser thread that feeds the [`screen`] model, answers
//!   terminal queries while nobody is attached, and wakes watchers when a burst
//!   ends; input goes through a bounded writer thread.
//! - [`daemon`] is the supervisor (`drover serve`): a Unix socket speaking the
//!   framed protocol of `docs/protocol.md`, holding every pane for its life;
//!   [`proto`] types that protocol (one request variant per op, typed
//!   replies, the state vocabulary) for the server and every client.
//! - [`agent`] turns a screen into an observation (rules as data) and delivers
//!   prompts; [`watch`] answers barriers from observation changes, never by polling.
//! - [`fleet`] joins supervisors of many hosts over NATS JetStream; it runs
//!   only when the state dir holds a fleet config (docs/fleet.md).
//! - [`registry`], [`engine`] and [`gate`] keep the crash-safe state on disk, all
//!   through [`store`] (atomic writes, locks beside documents, torn-tail-safe JSONL).
//! - [`policy`] decides, purely, whether an attempt is finished.
//!
//! A module lower in the chain never imports one higher up.
//!
//! The modules live in crates of the workspace, one concern each under
//! `crates/` (the crate map is `## Layers` in docs/architecture.md); this
//! crate re-exports every one under its path here (`drover::loopctl` is
//! `drover_loop::loopctl`), so the binary, the integration tests and the
//! benches name `drover::x::y`.

pub use drover_agent::agent;
pub use drover_base::backoff;
pub use drover_base::evidence;
pub use drover_base::exit;
pub use drover_base::git;
pub use drover_client::client;
pub use drover_engine::engine;
pub use drover_fleet::fleet;
pub use drover_lanes::dispatch;
pub use drover_lanes::lane;
pub use drover_report::gate;
pub use drover_supervisor::daemon;
#[cfg(test)]
mod layers;
pub use drover_base::paths;
pub use drover_base::shell;
pub use drover_base::statedir;
pub use drover_base::store;
pub use drover_base::time;
pub use drover_engine::registry;
pub use drover_loop::loopctl;
pub use drover_pane::pane;
pub use drover_policy::policy;
pub use drover_proto::proto;
pub use drover_rehearse::rehearse;
pub use drover_report::report;
pub use drover_report::shadow;
pub use drover_runstate::runstate;
pub use drover_screen::screen;
pub use drover_supervisor::watch;
pub use drover_top::top;
pub use drover_web::web;
