//! Following the supervisor's event feed from a client (`events --follow`, `top`).

use super::{Client, ClientError};
use crate::proto::args::EventsFollow;
use crate::proto::{FrameKind, read_frame};
use std::os::unix::net::UnixStream;

/// What to ask the feed for.
#[derive(Debug, Clone, Default)]
pub struct FollowSpec {
    /// Replay the held events after this seq first (`0`: all held).
    pub since: Option<u64>,
    pub pane: Option<String>,
    pub kind: Option<String>,
}

/// A live subscription: each [`EventStream::next_line`] blocks until the next event.
#[derive(Debug)]
pub struct EventStream {
    stream: UnixStream,
    /// The newest seq when the subscription started.
    pub last_seq: u64,
}

impl EventStream {
    /// Subscribe over an open connection.
    pub fn open(mut client: Client, spec: &FollowSpec) -> Result<Self, ClientError> {
        let ok = client.call(EventsFollow {
            since: spec.since,
            pane: spec.pane.clone(),
            kind: spec.kind.clone(),
        })?;
        Ok(EventStream {
            stream: client.into_stream(),
            last_seq: ok.last_seq,
        })
    }

    /// The next event's JSON line; `Ok(None)` when the supervisor stopped.
    pub fn next_line(&mut self) -> Result<Option<String>, ClientError> {
        loop {
            match read_frame(&mut self.stream) {
                Ok(Some(f)) if f.kind == FrameKind::Json => {
                    return String::from_utf8(f.payload)
                        .map(Some)
                        .map_err(|e| ClientError::Protocol(format!("bad event: {e}")));
                }
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(None),
                Err(e) => return Err(ClientError::Protocol(e.to_string())),
            }
        }
    }

    /// The socket, e.g. to wait on it with poll(2) next to a terminal.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.stream.as_fd()
    }
}
