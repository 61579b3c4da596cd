//! The frame codec of the supervisor's protocol (docs/protocol.md).
//!
//! A frame is a 4-byte big-endian length `L`, then `L` bytes: one kind byte
//! and the payload. Kind 1 is a JSON message (request, response, or a control
//! message during attach); kind 2 is pane output (server → client, attach);
//! kind 3 is input (client → server, attach). Frames over [`MAX_FRAME`] are a
//! protocol error and close the connection.

use serde::Serialize;
use std::io::{Read, Write};

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

pub fn check_len(len: u32) -> Result<usize, FrameError> {
    let len = len as usize;
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

pub fn split(mut body: Vec<u8>) -> Result<Frame, FrameError> {
    let Some(&first) = body.first() else {
        return Err(FrameError::Empty);
    };
    let kind = FrameKind::from_byte(first).ok_or(FrameError::UnknownKind(first))?;
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
