//! Learning that a herdr pane changed without asking herdr: the pane's
//! processes write to its terminal (`/dev/pts/N`, local — drover finds the
//! pane's processes in `/proc` already), and every write raises inotify's
//! `IN_MODIFY` on that device. herdr's own change signals are no faster:
//! its `events.subscribe` and `pane.wait_for_output` poll the pane every
//! 100 ms in the server, and `pane.output_changed` is never emitted (herdr
//! 0.8.2). So the reader sleeps until the terminal is written, then asks
//! `pane.read`; while nothing is written it costs nothing.

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

/// The terminal `pid` has as its stdin, when it is a pseudo-terminal.
pub(super) fn tty_of(pid: u32) -> Option<PathBuf> {
    let link = crate::pane::procfs::fd_target(pid, 0)?;
    link.starts_with("/dev/pts/").then_some(link)
}

/// An inotify watch on one pane's terminal.
pub(super) struct TtyWatch {
    inotify: Inotify,
}

impl TtyWatch {
    /// Watch `tty` for writes (and reads: an app consuming input is about
    /// to answer it). `None` when inotify refuses (then the reader polls).
    pub(super) fn new(tty: &std::path::Path) -> Option<Self> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
        inotify
            .add_watch(tty, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_ACCESS)
            .ok()?;
        Some(TtyWatch { inotify })
    }

    /// Wait up to `timeout` for the terminal to be written; true when it
    /// was (every event queued so far is consumed).
    pub(super) fn wait(&self, timeout: Duration) -> bool {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(n) if n > 0 => {
                self.drain();
                true
            }
            _ => false,
        }
    }

    /// Consume the queued events without waiting.
    pub(super) fn drain(&self) -> bool {
        let mut any = false;
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            any = true;
        }
        any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_the_terminal_wakes_the_watch() {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let path = nix::unistd::ttyname(&pty.slave).expect("ttyname");
        let w = TtyWatch::new(&path).expect("watch");
        assert!(!w.wait(Duration::from_millis(20)), "nothing written yet");
        nix::unistd::write(&pty.slave, b"x").expect("write");
        assert!(w.wait(Duration::from_secs(5)), "the write is seen");
        assert!(!w.wait(Duration::from_millis(20)), "and consumed");
    }
}
