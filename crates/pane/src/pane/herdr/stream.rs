//! One connection to herdr's socket after the request was written: an
//! answer line read within a bound, a slow read-only request hedged by a
//! second connection, and an `events.subscribe` stream of event lines.

use super::Fault;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The largest answer read from herdr (a `pane read` of a big screen).
const MAX_REPLY: u64 = 16 * 1024 * 1024;

/// An open `events.subscribe` connection.
pub struct Subscription {
    reader: BufReader<UnixStream>,
    /// A line begun when a wait ran out (kept for the next wait).
    partial: Vec<u8>,
}

impl Subscription {
    pub(super) fn new(reader: BufReader<UnixStream>) -> Self {
        Subscription {
            reader,
            partial: Vec::new(),
        }
    }

    /// The next event, waiting up to `timeout`: `Ok(None)` when none came.
    /// An error when herdr closed the connection or sent what is not JSON.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Value>, Fault> {
        let method = "events.subscribe";
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout))
            .map_err(io_fault(method, timeout))?;
        let room = MAX_REPLY.saturating_sub(self.partial.len() as u64);
        match self
            .reader
            .by_ref()
            .take(room)
            .read_until(b'\n', &mut self.partial)
        {
            Ok(0) => Err(Fault::Transport(format!(
                "herdr closed the {method} connection"
            ))),
            Ok(_) if !self.partial.ends_with(b"\n") => Err(Fault::Transport(format!(
                "herdr's {method} event is too long or cut off"
            ))),
            Ok(_) => {
                let line = std::mem::take(&mut self.partial);
                serde_json::from_slice(&line).map(Some).map_err(|_| {
                    Fault::Transport(format!("herdr sent a {method} event that is not JSON"))
                })
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(io_fault(method, timeout)(e)),
        }
    }
}

pub(super) fn io_fault(method: &str, timeout: Duration) -> impl Fn(std::io::Error) -> Fault + '_ {
    move |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Fault::Transport(format!(
            "herdr did not answer {method} within {} ms",
            timeout.as_millis()
        )),
        _ => Fault::Transport(format!("herdr {method}: {e}")),
    }
}

/// The read-only requests sent a second time when the first is slow.
pub(super) const HEDGED: [&str; 3] = ["pane.read", "pane.get", "ping"];
/// How long the first of them gets before the second is sent (herdr
/// answers them in well under a millisecond).
pub(super) const HEDGE_AFTER: Duration = Duration::from_millis(10);

/// Whether `stream` has something to read within `wait`.
pub(super) fn answered_within(stream: &UnixStream, wait: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(ms)).is_ok_and(|n| n > 0)
}

/// The connection of the two that answers first (the first when neither
/// does within `timeout`: its read then times out as it would have).
pub(super) fn first_answered(
    a: BufReader<UnixStream>,
    b: BufReader<UnixStream>,
    timeout: Duration,
) -> BufReader<UnixStream> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [
        PollFd::new(a.get_ref().as_fd(), PollFlags::POLLIN),
        PollFd::new(b.get_ref().as_fd(), PollFlags::POLLIN),
    ];
    let second = poll(&mut fds, PollTimeout::from(ms)).is_ok_and(|n| n > 0)
        && !fds[0].any().unwrap_or(false)
        && fds[1].any().unwrap_or(false);
    if second { b } else { a }
}

/// One answer line (at most [`MAX_REPLY`] bytes), as JSON.
pub(super) fn read_answer(
    reader: &mut BufReader<UnixStream>,
    method: &str,
) -> Result<Value, Fault> {
    let timeout = reader
        .get_ref()
        .read_timeout()
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut answer = String::new();
    reader
        .by_ref()
        .take(MAX_REPLY)
        .read_line(&mut answer)
        .map_err(io_fault(method, timeout))?;
    if answer.trim().is_empty() {
        return Err(Fault::Transport(format!(
            "herdr closed the connection without answering {method}"
        )));
    }
    serde_json::from_str(answer.trim()).map_err(|_| {
        Fault::Transport(format!(
            "herdr answered {method} with something that is not JSON"
        ))
    })
}
