//! The loop's errors.

use std::path::PathBuf;

/// Errors of the loop. Each variant names what it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoopError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("{field}: {message}")]
    Usage { field: String, message: String },
    #[error("git {args}: {message}")]
    Git { args: String, message: String },
    #[error("refused: {0}")]
    Refused(String),
    /// An earlier run on the repository stopped unclosed and holds its
    /// tasks (said as it is: what to run to resume or close it).
    #[error("{0}")]
    Unclosed(String),
    /// A flag or what it names is wrong (said as it is, for the command line).
    #[error("{0}")]
    Flag(String),
    /// Real agents' lanes need these on PATH (`claude and codex`).
    #[error(
        "{0} not found on PATH: the loop's lanes run Claude Code and Codex; install them, or pass --sim for simulated agents (see LOOP.md)"
    )]
    MissingAgents(String),
    /// `--fleet` names another fleet than the one this host joined.
    #[error("--fleet {given}: this host joined fleet {joined}")]
    WrongFleet { given: String, joined: String },
    #[error("lane {lane}: {message}")]
    Lane { lane: String, message: String },
    /// The supervisor holding the lanes cannot be reached: the run stopped
    /// unclosed, for `drover loop run --resume`.
    #[error("loop{run} interrupted: {why}; resume it with `drover loop run --resume {run}`")]
    Interrupted { run: u32, why: String },
    /// The loop had to stop (an error other than a lost supervisor): the
    /// run stays unclosed, for `drover loop run --resume`.
    #[error(
        "loop{run} stopped: {why}; it stays unclosed: resume it with `drover loop run --resume {run}`"
    )]
    Stopped { run: u32, why: String },
    /// A signal (SIGINT, SIGTERM, SIGHUP) stopped the run: it stays
    /// unclosed, for `drover loop run --resume`.
    #[error(
        "loop{run} stopped by {signal}; it stays unclosed: resume it with `drover loop run --resume {run}`"
    )]
    Signalled { run: u32, signal: &'static str },
    /// The charter's `setup:` failed in a new worktree
    /// ([`crate::loopctl::land::setup`]): its task parks with `reason`.
    #[error("{reason}")]
    Setup { lane: String, reason: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    /// A task's write lease could not be claimed (the registry refused it).
    #[error(transparent)]
    LeaseRefused(crate::registry::RegistryError),
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// The fleet's bus (`loop run --fleet`, `fleet work`).
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
}

impl LoopError {
    /// An I/O error about a path.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> LoopError {
        LoopError::Io {
            path: path.into(),
            source,
        }
    }

    /// A parse error about a file.
    pub fn parse(path: impl Into<PathBuf>, message: impl Into<String>) -> LoopError {
        LoopError::Parse {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A bad argument.
    pub fn usage(field: impl Into<String>, message: impl Into<String>) -> LoopError {
        LoopError::Usage {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The exit code of `docs/` for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            LoopError::Usage { .. } | LoopError::Parse { .. } | LoopError::Flag(_) => {
                crate::exit::USAGE
            }
            LoopError::Refused(_) | LoopError::Unclosed(_) | LoopError::WrongFleet { .. } => {
                crate::exit::REFUSED
            }
            LoopError::Interrupted { .. } => crate::exit::TRANSPORT,
            // As a shell reports a process its signal ended: 128 + signal.
            LoopError::Signalled { signal, .. } => match *signal {
                "SIGHUP" => 129,
                "SIGTERM" => 143,
                _ => 130,
            },
            LoopError::Registry(e) | LoopError::LeaseRefused(e) => e.exit_code(),
            LoopError::Fleet(e) => e.exit_code(),
            _ => crate::exit::ERROR,
        }
    }
}
