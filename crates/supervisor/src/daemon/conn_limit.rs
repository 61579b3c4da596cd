//! Connection hygiene: a cap on connections served at once (with a clear
//! refusal past it), a pause after accept errors instead of a spin when
//! descriptors run out, each logged once per episode, and noticing a client
//! that hung up while its request waits.

use super::protocol::{ErrorCode, Response, encode_json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
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
/// An accept-failure episode ends only once accepts have worked this long
/// after its last failure: with descriptors near the limit accepts fail and
/// succeed by turns, and each turn was logged (45 lines in 8 s).
pub const ACCEPT_EPISODE_QUIET: Duration = Duration::from_secs(10);
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
    accepts: AcceptEpisode,
}

/// What to log about accepts: [`AcceptEpisode::failed`] and
/// [`AcceptEpisode::succeeded`] say when.
#[derive(Debug, Default)]
pub(super) struct AcceptEpisode {
    /// Failures of the episode under way, and when the last one was.
    open: Option<(u64, Instant)>,
}

impl AcceptEpisode {
    /// An accept failed at `now`: true when this starts an episode (log
    /// it). One that failed last [`ACCEPT_EPISODE_QUIET`] ago or more is
    /// over even if no accept came since (the loop retries while a client
    /// waits, so no failure meant no client kept failing).
    pub(super) fn failed(&mut self, now: Instant) -> bool {
        match &mut self.open {
            Some((n, last)) if now.saturating_duration_since(*last) < ACCEPT_EPISODE_QUIET => {
                *n += 1;
                *last = now;
                false
            }
            _ => {
                self.open = Some((1, now));
                true
            }
        }
    }

    /// An accept succeeded at `now`: the episode's failure count when this
    /// ends it (accepts have worked for [`ACCEPT_EPISODE_QUIET`]; log it).
    pub(super) fn succeeded(&mut self, now: Instant) -> Option<u64> {
        let (n, last) = self.open?;
        if now.saturating_duration_since(last) < ACCEPT_EPISODE_QUIET {
            return None;
        }
        self.open = None;
        Some(n)
    }
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
            accepts: AcceptEpisode::default(),
        }
    }

    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// A slot for a new connection, or `None` at the cap.
    pub(super) fn admit(&mut self) -> Option<Slot> {
        if let Some(failures) = self.accepts.succeeded(Instant::now()) {
            tracing::info!(failures, "accepting connections again");
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
        if self.accepts.failed(Instant::now()) {
            tracing::warn!(error = %e, live = self.live.load(Ordering::Acquire),
                "accept failed (out of file descriptors?); backing off, silent until accepts work again");
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

    /// Guards: under descriptor exhaustion accepts fail and succeed by
    /// turns; "accept failed" was logged at each turn (45 times in 8 s).
    /// One line starts an episode, one ends it with the count, and the
    /// episode ends only once accepts have kept working.
    #[test]
    fn accept_failures_are_logged_once_per_episode_with_a_count() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut ep = AcceptEpisode::default();
        assert_eq!(ep.succeeded(at(0)), None, "no episode: nothing to say");
        let mut logged = 0;
        // 8 s of failing and succeeding by turns, every 100 ms.
        for i in 0..80u64 {
            if i % 2 == 0 {
                logged += u64::from(ep.failed(at(i * 100)));
            } else {
                assert_eq!(ep.succeeded(at(i * 100)), None, "turn {i}");
            }
        }
        assert_eq!(logged, 1);
        let last = at(79 * 100);
        assert_eq!(ep.succeeded(last + ACCEPT_EPISODE_QUIET / 2), None);
        assert_eq!(ep.succeeded(last + ACCEPT_EPISODE_QUIET), Some(40));
        assert_eq!(ep.succeeded(last + ACCEPT_EPISODE_QUIET * 2), None);
        // A later failure is a new episode, logged again; so is one long
        // after the last failure with no accept between.
        let later = last + ACCEPT_EPISODE_QUIET * 3;
        assert!(ep.failed(later));
        assert!(!ep.failed(later + Duration::from_millis(100)));
        assert!(ep.failed(later + ACCEPT_EPISODE_QUIET * 2));
    }
}
