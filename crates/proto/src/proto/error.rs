//! Responses and their error categories.

use super::PROTOCOL_VERSION;
use serde::{Deserialize, Serialize};

/// Error categories; each maps to one CLI exit code (docs/cli.md).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Bad arguments (exit 2).
    Usage,
    /// A pane with that name exists (exit 2).
    Exists,
    /// Refused by a rule (exit 3).
    Refused,
    /// A barrier timed out (exit 4).
    Timeout,
    /// The pane is gone (exit 5).
    NotFound,
    /// The pane is there but not taking input (exit 5).
    Unavailable,
    /// Client and supervisor speak different protocol versions (exit 5).
    Version,
    /// Anything else (exit 1).
    Internal,
}

impl ErrorCode {
    /// The CLI exit code for this error (docs/cli.md: 2 usage, 3 refused,
    /// 4 timeout, 5 transport, 1 error).
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorCode::Usage | ErrorCode::Exists => 2,
            ErrorCode::Refused => 3,
            ErrorCode::Timeout => 4,
            ErrorCode::NotFound | ErrorCode::Unavailable | ErrorCode::Version => 5,
            ErrorCode::Internal => 1,
        }
    }
}

/// An error answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

impl ErrorBody {
    /// An error of `code` saying `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
        }
    }
}

/// The answer to a request: the reply of its op (serialized once, here at
/// the edge), or an error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    pub v: u32,
    pub id: u64,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl Response {
    /// A success carrying an op's reply.
    pub fn ok(id: u64, result: serde_json::Value) -> Self {
        Response {
            v: PROTOCOL_VERSION,
            id,
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    /// A success carrying a typed reply.
    pub fn reply<T: Serialize>(id: u64, reply: &T) -> Self {
        match serde_json::to_value(reply) {
            Ok(v) => Response::ok(id, v),
            Err(e) => Response::err(id, ErrorCode::Internal, format!("reply: {e}")),
        }
    }

    /// A failure.
    pub fn err(id: u64, code: ErrorCode, message: impl Into<String>) -> Self {
        Response::from_body(id, ErrorBody::new(code, message))
    }

    /// A failure from its body.
    pub fn from_body(id: u64, body: ErrorBody) -> Self {
        Response {
            v: PROTOCOL_VERSION,
            id,
            ok: false,
            result: None,
            error: Some(body),
        }
    }

    /// The answer to a request of another protocol version.
    pub fn version_mismatch(id: u64, theirs: u32) -> Self {
        Response::err(id, ErrorCode::Version, version_message(theirs))
    }
}

/// What a client of protocol `theirs` is told by this supervisor.
pub fn version_message(theirs: u32) -> String {
    format!(
        "protocol v{theirs}, this supervisor speaks v{PROTOCOL_VERSION} (protocol version mismatch: \
         a different drover build); run `drover kill-server`"
    )
}
