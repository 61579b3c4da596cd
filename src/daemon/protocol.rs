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

fn check_len(len: u32) -> Result<usize, FrameError> {
    let len = len as usize;
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

fn split(mut body: Vec<u8>) -> Result<Frame, FrameError> {
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

/// Read one frame (async). `Ok(None)` on a clean EOF between frames.
pub async fn read_frame_async(
    r: &mut (impl tokio::io::AsyncRead + Unpin),
) -> Result<Option<Frame>, FrameError> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = check_len(u32::from_be_bytes(len))?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    split(body).map(Some)
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
