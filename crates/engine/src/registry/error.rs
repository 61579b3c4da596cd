//! The registry's typed errors. The CLI maps them to the exit codes of docs/cli.md.

use crate::store::StoreError;
use std::path::PathBuf;

/// Everything that can go wrong reading or changing the registry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Reading or writing a file failed, or a file does not parse (exit 1).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A document has a `schema_version` this drover does not know (exit 1).
    #[error(
        "{path}: unknown schema_version {version}; this drover reads {known}; move the file away or upgrade drover"
    )]
    UnknownVersion {
        path: PathBuf,
        version: String,
        known: &'static str,
    },
    /// A document parses as JSON but a field has the wrong shape (exit 1).
    #[error("{path}: field `{field}` {message}")]
    BadDocument {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// The registry has not been created yet (exit 1).
    #[error("no registry at {path}; run `drover registry init --topology four-role` first")]
    NotInitialised { path: PathBuf },
    /// An argument is invalid (exit 2); `field` names it.
    #[error("{field}: {message}")]
    Usage { field: String, message: String },
    /// A rule said no (exit 3): a lease, a role, the gate.
    #[error("{request} refused: {reason}")]
    Refused { request: String, reason: String },
}

impl RegistryError {
    pub(crate) fn usage(field: impl Into<String>, message: impl Into<String>) -> Self {
        RegistryError::Usage {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn refused(request: impl Into<String>, reason: impl Into<String>) -> Self {
        RegistryError::Refused {
            request: request.into(),
            reason: reason.into(),
        }
    }

    /// The exit code of docs/cli.md for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            RegistryError::Usage { .. } => crate::exit::USAGE,
            RegistryError::Refused { .. } => crate::exit::REFUSED,
            _ => crate::exit::ERROR,
        }
    }
}
