//! The watcher's [`BarrierSource`] over the supervisor's socket: each round is
//! one `wait` request. A connection that fails is dropped and made again on
//! the next round, so the watcher's backoff governs reconnects.

use super::client::{Client, ClientError};
use super::protocol::ErrorCode;
use crate::agent::State;
use crate::watch::{
    BarrierMode, BarrierResult, BarrierSource, PaneSnapshot, Snapshot, TransportError,
};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// Barriers on some panes of one supervisor.
#[derive(Debug)]
pub struct SocketBarrier {
    socket: PathBuf,
    panes: Vec<String>,
    mode: BarrierMode,
    client: Option<Client>,
}

impl SocketBarrier {
    /// Barriers on `panes` of the supervisor listening at `socket`.
    pub fn new(socket: PathBuf, panes: Vec<String>, mode: BarrierMode) -> Self {
        SocketBarrier {
            socket,
            panes,
            mode,
            client: None,
        }
    }
}

impl BarrierSource for SocketBarrier {
    fn wait(
        &mut self,
        until: &[State],
        timeout: Duration,
    ) -> Result<BarrierResult, TransportError> {
        let client = match &mut self.client {
            Some(c) => c,
            None => self.client.insert(
                Client::connect(&self.socket)
                    .map_err(|e| TransportError::Unreachable(e.to_string()))?,
            ),
        };
        let until: Vec<&str> = until.iter().map(|s| s.as_str()).collect();
        let mode = match self.mode {
            BarrierMode::All => "all",
            BarrierMode::Any => "any",
        };
        let res = client.call(
            "wait",
            json!({"panes": self.panes, "until": until, "mode": mode,
                   "timeout_ms": u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)}),
        );
        let v = match res {
            Ok(v) => v,
            Err(e) => {
                self.client = None;
                return Err(match e {
                    ClientError::Remote {
                        code: ErrorCode::NotFound,
                        message,
                    } => TransportError::PaneGone(message),
                    ClientError::Remote { message, .. } => TransportError::Protocol(message),
                    other => TransportError::Unreachable(other.to_string()),
                });
            }
        };
        if v["timed_out"].as_bool() == Some(true) {
            return Ok(BarrierResult::Timeout);
        }
        let panes: Vec<PaneSnapshot> = serde_json::from_value(v["snapshots"].clone())
            .map_err(|e| TransportError::Protocol(format!("bad snapshot: {e}")))?;
        Ok(BarrierResult::Matched(Snapshot { panes }))
    }
}
