//! Which kind of host a pane lives on, by the name the command line and
//! every file and message use.

use serde::{Deserialize, Serialize};

/// Which kind of host a pane lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A PTY drover owns.
    #[default]
    Native,
    /// A window on drover's own tmux server, read through control mode.
    Tmux,
    /// A pane of a herdr server.
    Herdr,
}

impl Backend {
    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Tmux => "tmux",
            Backend::Herdr => "herdr",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend name drover does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown backend {0:?}: use native, tmux or herdr")]
pub struct UnknownBackend(pub String);

impl std::str::FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "native" => Ok(Backend::Native),
            "tmux" => Ok(Backend::Tmux),
            "herdr" => Ok(Backend::Herdr),
            other => Err(UnknownBackend(other.to_string())),
        }
    }
}
