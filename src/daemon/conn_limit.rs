//! Connection hygiene: a cap on connections served at once (with a clear
//! refusal past it), a pause after accept errors instead of a spin when
//! descriptors run out, each logged once per episode, and noticing a client
//! that hung up while its request waits.

use super::protocol::{ErrorCode, Response, encode_json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;

/// Connections served at once at most (fewer when `ulimit -n` is lower).
pub const MAX_CONNECTIONS: usize = 1024;
/// Descriptors kept free for panes, logs and state files: clients never take
/// the last of them.
pub const FD_RESERVE: usize = 64;
/// Pause after a failed `accept` (EMFILE, ENFILE): the connection stays
/// queued in the listen backlog meanwhile.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How long a refusal may take to write before the connection is dropped.
const REFUSAL_WRITE: Duration = Duration::from_millis(500);

/// The cap for a soft descriptor limit of `nofile`.
pub fn cap_for(nofile: u64) -> usize {
    let by_fds = usize::try_from(nofile)
        .unwrap_or(usize::MAX)
        .saturating_sub(FD_RESERVE);
    by_fds.clamp(1, MAX_CONNECTIONS)
}

/// The soft `RLIMIT_NOFILE`.
fn soft_nofile() -> Option<u64> {
    let mut lim = nix::libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let r = unsafe { nix::libc::getrlimit(nix::libc::RLIMIT_NOFILE, &mut lim) };
    (r == 0).then_some(lim.rlim_cur)
}

/// Counts connections and remembers what was already logged.
pub(super) struct Gate {
    cap: usize,
    live: Arc<AtomicUsize>,
    /// Set while over the cap: the refusal is logged once per episode.
    full: Arc<AtomicBool>,
    accept_failing: bool,
}

/// A connection's place under the cap; freed when dropped.
pub(super) struct Slot {
    live: Arc<AtomicUsize>,
    full: Arc<AtomicBool>,
    cap: usize,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let left = self.live.fetch_sub(1, Ordering::AcqRel) - 1;
        // The episode ends once there is room again for a burst of clients.
        if left <= self.cap * 3 / 4 && self.full.swap(false, Ordering::AcqRel) {
            tracing::info!(connections = left, "connections back under the cap");
        }
    }
}

impl Gate {
    pub(super) fn new() -> Self {
        let nofile = soft_nofile().unwrap_or(1024);
        let cap = cap_for(nofile);
        tracing::info!(cap, nofile, "connection cap");
        Gate {
            cap,
            live: Arc::new(AtomicUsize::new(0)),
            full: Arc::new(AtomicBool::new(false)),
            accept_failing: false,
        }
    }

    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// A slot for a new connection, or `None` at the cap.
    pub(super) fn admit(&mut self) -> Option<Slot> {
        if self.accept_failing {
            self.accept_failing = false;
            tracing::info!("accepting connections again");
        }
        let live = self.live.load(Ordering::Acquire);
        if live >= self.cap {
            if !self.full.swap(true, Ordering::AcqRel) {
                tracing::warn!(
                    cap = self.cap,
                    "connection cap reached: refusing new clients until some close"
                );
            }
            return None;
        }
        self.live.fetch_add(1, Ordering::AcqRel);
        Some(Slot {
            live: self.live.clone(),
            full: self.full.clone(),
            cap: self.cap,
        })
    }

    pub(super) fn accept_failed(&mut self, e: &std::io::Error) {
        if !self.accept_failing {
            self.accept_failing = true;
            tracing::warn!(error = %e, live = self.live.load(Ordering::Acquire),
                "accept failed (out of file descriptors?); backing off");
        }
    }
}

/// Tell a client over the cap why, then close.
pub(super) async fn refuse(mut stream: UnixStream, cap: usize) {
    let resp = Response::err(
        0,
        ErrorCode::Unavailable,
        format!(
            "the supervisor is serving its limit of {cap} connections; close idle clients (or raise `ulimit -n` for the supervisor) and retry"
        ),
    );
    let _ = tokio::time::timeout(REFUSAL_WRITE, stream.write_all(&encode_json(&resp))).await;
    // Take the client's request before closing: closing first could fail
    // its write (EPIPE) before it reads the refusal.
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        let mut buf = [0u8; 4096];
        let _ = stream.read(&mut buf).await;
    })
    .await;
    let _ = stream.shutdown().await;
}

/// Resolves when the client has hung up (EOF or error on its socket); never
/// when it sent more bytes instead (they stay buffered for the next frame).
pub(super) async fn hung_up(rd: &mut tokio::io::BufReader<OwnedReadHalf>) {
    match rd.fill_buf().await {
        Ok(b) if !b.is_empty() => std::future::pending().await,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_follows_the_descriptor_limit() {
        assert_eq!(cap_for(1024), 1024 - FD_RESERVE);
        assert_eq!(cap_for(1 << 20), MAX_CONNECTIONS);
        assert_eq!(cap_for(10), 1);
    }
}
