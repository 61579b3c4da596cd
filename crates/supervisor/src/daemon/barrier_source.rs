//! The watcher's [`BarrierSource`] over the supervisor's socket: each round is
//! one `wait` request. A connection that fails is dropped and made again on
//! the next round, so the watcher's backoff governs reconnects.

use super::client::{Client, ClientError};
use super::protocol::ErrorCode;
use crate::agent::{State, Until};
use crate::proto::args;
use crate::watch::{
    BarrierMode, BarrierResult, BarrierSource, PaneSnapshot, Snapshot, TransportError,
};
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
        let res = client.call(args::Wait {
            panes: self.panes.clone(),
            until: until
                .iter()
                .map(|&state| Until { state, kind: None })
                .collect(),
            mode: match self.mode {
                BarrierMode::All => args::WaitMode::All,
                BarrierMode::Any => args::WaitMode::Any,
            },
            timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            fresh: false,
        });
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
        if v.timed_out {
            return Ok(BarrierResult::Timeout);
        }
        let panes = v
            .snapshots
            .into_iter()
            .map(|w| PaneSnapshot {
                pane: w.snapshot.pane,
                generation: w.snapshot.generation,
                state: w.snapshot.state,
                kind: w.snapshot.kind,
                exit_code: w.snapshot.exit_code,
                since: w.snapshot.since,
                evidence: w.snapshot.evidence,
                screen_hash: w.snapshot.screen_hash,
            })
            .collect();
        Ok(BarrierResult::Matched(Snapshot { panes }))
    }
}
