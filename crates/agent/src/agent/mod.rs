//! Agents: what runs in a pane, how its screen becomes an [`Observation`], how
//! it is started and how a prompt reaches it (docs/agents.md).
//!
//! - [`state`]: the vocabulary (kinds, states, observations).
//! - [`rules`] and [`classify`]: screen rules as data (embedded `rules.toml`,
//!   overridable by `<state dir>/rules.toml`) combined with OSC 7501, the title,
//!   process exit and quiescence.
//! - [`adapter`]: per-kind argv/env/config builders, readiness and the write
//!   plan for delivering a prompt. Pure functions.
//! - [`signals`]: the agents' own signals (hooks, notify, status line,
//!   transcripts), parsed and kept per pane beside the screen.
//! - [`signal_wire`]: the per-pane flags and settings file that make an
//!   agent hand drover its signals (`drover signal`).
//! - [`sim`]: the simulated agent behind `drover sim-agent`.

pub mod adapter;
pub mod classify;
pub mod dialog;
pub mod limit;
pub mod rules;
pub mod signal_wire;
pub mod signals;
pub mod sim;
pub mod state;
pub mod version;
pub mod wrap;

pub use adapter::{
    Access, LaunchOptions, LaunchSpec, Write, delivery_plan, is_ready, launch, prompt_visible,
};
pub use classify::{Classifier, SETTLE_MS, Signals, rows_from_text};
pub use state::{AgentKind, BlockedKind, Observation, ParseStateError, State, StateList, Until};

use std::path::PathBuf;

/// Errors of the agent layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A rules document does not parse or compile; `origin` names the file.
    #[error("rules file {origin}: {message}")]
    Rules { origin: String, message: String },
    /// A sim-agent script does not parse; `origin` names the file.
    #[error("sim script {origin}: {message}")]
    Script { origin: String, message: String },
    /// An agent cannot be started as asked.
    #[error("cannot start agent: {message}")]
    Launch { message: String },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
