//! The kinds of agent a pane runs. The states, blocked kinds, wait targets
//! and observations are the protocol's (`proto::state`), re-exported here.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

pub use crate::proto::state::{BlockedKind, Observation, ParseStateError, State, StateList, Until};

/// What program runs in a pane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// Any command; idle means its output went quiet.
    Shell,
    /// drover's built-in simulated agent (either profile).
    Sim,
}

impl AgentKind {
    /// The lowercase name used on the CLI, in rules files and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Shell => "shell",
            AgentKind::Sim => "sim",
        }
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AgentKind {
    type Err = ParseStateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "claude" => Ok(AgentKind::Claude),
            "codex" => Ok(AgentKind::Codex),
            "shell" => Ok(AgentKind::Shell),
            "sim" => Ok(AgentKind::Sim),
            other => Err(ParseStateError {
                what: "agent kind",
                value: other.to_string(),
                expected: "claude, codex, shell, sim",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_kind_serde_name_matches_display() {
        for k in [
            AgentKind::Claude,
            AgentKind::Codex,
            AgentKind::Shell,
            AgentKind::Sim,
        ] {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
            assert_eq!(k.to_string().parse::<AgentKind>().unwrap(), k);
        }
    }
}
