//! The simulated agent (`drover sim-agent`).
use super::AgentError;
use std::path::Path;

/// Which real agent the sim imitates.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Claude Code: inline screen, OSC 0 titles.
    Claude,
    /// Codex: alternate screen, synchronized output, OSC 7501.
    Codex,
}

/// A sim script.
#[derive(Debug, Clone, Default)]
pub struct Script;

impl Script {
    /// Load a script file.
    pub fn load(_p: &Path) -> Result<Self, AgentError> {
        Ok(Script)
    }
}

/// Run the sim agent on stdin/stdout; returns the exit code.
pub fn run(_profile: Profile, _script: Script) -> Result<u8, AgentError> {
    Ok(0)
}
