//! The supervisor's wire protocol (documented in `docs/protocol.md`).
//!
//! A frame is a 4-byte big-endian length `L`, then `L` bytes: one kind byte
//! and the payload. Kind 1 is a JSON message (request, response, or a control
//! message during attach); kind 2 is pane output (server → client, attach);
//! kind 3 is input (client → server, attach). Frames over [`MAX_FRAME`] are a
//! protocol error and close the connection.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

/// Bumped on any incompatible change; a mismatch is refused with `version`.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest frame accepted (16 MiB).
pub const MAX_FRAME: usize = 16 << 20;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Json = 1,
    Output = 2,
    Input = 3,
}

impl FrameKind {
    fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(FrameKind::Json),
            2 => Some(FrameKind::Output),
            3 => Some(FrameKind::Input),
            _ => None,
        }
    }
}

/// A decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    pub payload: Vec<u8>,
}

/// A request from a client.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub v: u32,
    pub id: u64,
    pub op: String,
    #[serde(default)]
    pub args: serde_json::Value,
}

/// Error categories; each maps to one CLI exit code.
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
    /// The CLI exit code for this error (docs/cli.md).
    pub fn exit_code(self) -> u8 {
        use crate::exit;
        match self {
            ErrorCode::Usage | ErrorCode::Exists => exit::USAGE,
            ErrorCode::Refused => exit::REFUSED,
            ErrorCode::Timeout => exit::TIMEOUT,
            ErrorCode::NotFound | ErrorCode::Unavailable | ErrorCode::Version => exit::TRANSPORT,
            ErrorCode::Internal => exit::ERROR,
        }
    }
}

/// An error answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

/// The answer to a request.
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
    /// A success.
    pub fn ok(id: u64, result: serde_json::Value) -> Self {
        Response {
            v: PROTOCOL_VERSION,
            id,
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    /// A failure.
    pub fn err(id: u64, code: ErrorCode, message: impl Into<String>) -> Self {
        Response {
            v: PROTOCOL_VERSION,
            id,
            ok: false,
            result: None,
            error: Some(ErrorBody {
                code,
                message: message.into(),
            }),
        }
    }
}

/// A malformed or oversized frame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("empty frame")]
    Empty,
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("the frame did not arrive whole within {} s of its first byte", .0.as_secs_f64())]
    Incomplete(std::time::Duration),
    #[error(
        "the supervisor already holds {} MiB of partial requests from other clients; a {len}-byte frame must wait: retry",
        held >> 20
    )]
    OverBudget { len: usize, held: usize },
}

/// Encode a frame into bytes.
pub fn encode(kind: FrameKind, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() + 1) as u32;
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.extend_from_slice(&len.to_be_bytes());
    out.push(kind as u8);
    out.extend_from_slice(payload);
    out
}

/// Encode a JSON message frame.
pub fn encode_json<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serialising our own plain structs cannot fail.
    let payload = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
    encode(FrameKind::Json, &payload)
}

pub(crate) fn check_len(len: u32) -> Result<usize, FrameError> {
    let len = len as usize;
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

pub(crate) fn split(mut body: Vec<u8>) -> Result<Frame, FrameError> {
    let kind = FrameKind::from_byte(body[0]).ok_or(FrameError::UnknownKind(body[0]))?;
    body.remove(0);
    Ok(Frame {
        kind,
        payload: body,
    })
}

/// Read one frame (blocking). `Ok(None)` on a clean EOF between frames.
pub fn read_frame(r: &mut impl Read) -> Result<Option<Frame>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = check_len(u32::from_be_bytes(len))?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    split(body).map(Some)
}

/// Write one frame (blocking).
pub fn write_frame(w: &mut impl Write, kind: FrameKind, payload: &[u8]) -> std::io::Result<()> {
    w.write_all(&encode(kind, payload))?;
    w.flush()
}

/// Typed arguments of the requests whose fields the supervisor must trust,
/// validated with the same rules as the CLI: a raw socket client gets the same
/// usage error a `drover` command would, never a silent default.
pub mod args {
    use super::{ErrorCode, Response};
    use crate::agent::{AgentKind, Until};
    use serde::Deserialize;
    use serde::de::DeserializeOwned;
    use serde_json::Value;
    use std::time::Duration;

    /// A barrier's timeout when the request names none.
    pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = 30_000;

    fn usage(op: &str, m: impl std::fmt::Display) -> Response {
        Response::err(0, ErrorCode::Usage, format!("{op}: {m}"))
    }

    /// Deserialize `args` into `T`; a missing, mistyped or out-of-range field
    /// is a usage error naming it.
    pub fn parse<T: DeserializeOwned>(op: &str, args: &Value) -> Result<T, Response> {
        let v = if args.is_null() {
            Value::Object(Default::default())
        } else {
            args.clone()
        };
        serde_json::from_value(v).map_err(|e| usage(op, e))
    }

    /// `wait`'s mode: every pane or any one.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum WaitMode {
        #[default]
        All,
        Any,
    }

    #[derive(Debug, Deserialize)]
    struct WaitWire {
        panes: Vec<String>,
        until: Vec<String>,
        #[serde(default)]
        timeout_ms: Option<u64>,
        #[serde(default)]
        mode: WaitMode,
        #[serde(default)]
        fresh: bool,
    }

    /// A validated `wait` request.
    #[derive(Debug, Clone)]
    pub struct Wait {
        pub panes: Vec<String>,
        pub until: Vec<Until>,
        pub timeout: Duration,
        pub mode: WaitMode,
        /// Only observations classified after the request count.
        pub fresh: bool,
    }

    impl Wait {
        /// Parse and validate `wait`'s arguments.
        pub fn parse(args: &Value) -> Result<Wait, Response> {
            let w: WaitWire = parse("wait", args)?;
            if w.panes.is_empty() {
                return Err(usage("wait", "`panes` is empty: name at least one pane"));
            }
            if w.until.is_empty() {
                return Err(usage("wait", "`until` is empty: the states to wait for"));
            }
            let until = w
                .until
                .iter()
                .map(|u| u.parse::<Until>().map_err(|e| usage("wait", e)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Wait {
                panes: w.panes,
                until,
                timeout: Duration::from_millis(w.timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS)),
                mode: w.mode,
                fresh: w.fresh,
            })
        }
    }

    /// A validated `pane.read` request.
    #[derive(Debug, Clone, Deserialize)]
    pub struct PaneRead {
        pub pane: String,
        #[serde(default)]
        pub raw: bool,
        /// Scrollback rows to include; a negative or fractional value is refused.
        #[serde(default)]
        pub scrollback: Option<u64>,
    }

    impl PaneRead {
        /// Parse `pane.read`'s arguments.
        pub fn parse(args: &Value) -> Result<PaneRead, Response> {
            parse("pane.read", args)
        }
    }

    /// A validated `evidence.watch` request.
    #[derive(Debug, Clone, Deserialize)]
    pub struct EvidenceWatch {
        pub job_id: String,
        pub attempt_id: String,
        pub session_id: String,
        pub pane: String,
        pub generation: u64,
        #[serde(default)]
        pub autocomplete: bool,
    }

    impl EvidenceWatch {
        /// Parse `evidence.watch`'s arguments; the job id names a file, so it
        /// follows the job-id rule (no `/`, no `..`).
        pub fn parse(args: &Value) -> Result<EvidenceWatch, Response> {
            let op = "evidence.watch";
            let w: EvidenceWatch = parse(op, args)?;
            crate::engine::record::validate_job_id(&w.job_id).map_err(|e| usage(op, e))?;
            crate::engine::record::validate_name("attempt id", &w.attempt_id)
                .map_err(|e| usage(op, e))?;
            crate::engine::record::validate_name("session id", &w.session_id)
                .map_err(|e| usage(op, e))?;
            crate::pane::validate_pane_name(&w.pane).map_err(|e| usage(op, e))?;
            Ok(w)
        }
    }

    /// The agent kind of a `pane.new` spec: one the classifier knows.
    pub fn check_agent(spec: &Value) -> Result<(), Response> {
        match spec.get("agent") {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(a)) => a
                .parse::<AgentKind>()
                .map(|_| ())
                .map_err(|e| usage("pane.new", format!("spec.agent: {e}"))),
            Some(other) => Err(usage(
                "pane.new",
                format!("spec.agent: expected a string, got {other}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = encode(FrameKind::Output, b"hello");
        let f = read_frame(&mut &bytes[..]).unwrap().unwrap();
        assert_eq!(f.kind, FrameKind::Output);
        assert_eq!(f.payload, b"hello");
        assert!(read_frame(&mut &b""[..]).unwrap().is_none());
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        let huge = ((MAX_FRAME + 2) as u32).to_be_bytes();
        assert!(matches!(
            read_frame(&mut &huge[..]),
            Err(FrameError::TooLarge(_))
        ));
        assert!(matches!(
            read_frame(&mut &[0, 0, 0, 0][..]),
            Err(FrameError::Empty)
        ));
        assert!(matches!(
            read_frame(&mut &[0, 0, 0, 1, 9][..]),
            Err(FrameError::UnknownKind(9))
        ));
        assert!(
            read_frame(&mut &[0, 0, 0, 5, 1, b'{'][..]).is_err(),
            "truncated body"
        );
    }
}
