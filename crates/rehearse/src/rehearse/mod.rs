//! Rehearsal: the real Claude Code and Codex TUIs against drover's own mock
//! model server, with no network and no tokens spent (docs/rehearsal.md).
//!
//! - [`server`] is `drover mock-model`: the Anthropic Messages API
//!   ([`anthropic`]) and the OpenAI Responses API ([`openai`]) over SSE,
//!   answering from a [`script`], on loopback only.
//! - [`home`] writes the hermetic HOME each CLI needs; [`discover`] finds the
//!   binaries; [`recording`] turns `script(1)` typescripts into fixtures.
//! - [`template`] fills `{{key}}` in a step from the prompt's `key=value` tokens.
//! - `drover rehearse` (in the CLI) wires these to a pane through the supervisor.

pub mod anthropic;
pub mod discover;
pub mod follow;
pub mod home;
pub mod limit;
pub mod openai;
pub mod recording;
pub mod script;
pub mod server;
pub mod sse;
pub mod template;
pub mod usage;

pub use home::{Prepared, SetupFault};
pub use script::{Script, Step, ToolCall, Turn};
pub use server::{Logger, MockError, MockServer};

/// An agent CLI that can be rehearsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
}

impl Agent {
    /// The binary and agent-kind name.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }
}

/// The argv that runs `inner` under `script(1)`, recording its raw output to
/// `record` (the typescript's header and trailer are removed by
/// [`recording::strip_typescript`]).
pub fn recorded_argv(inner: &[String], record: &std::path::Path) -> Vec<String> {
    let cmd = inner
        .iter()
        .map(|a| crate::shell::quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    vec![
        "script".into(),
        "-q".into(),
        "-f".into(),
        "-e".into(),
        "-c".into(),
        cmd,
        record.to_string_lossy().into_owned(),
    ]
}
