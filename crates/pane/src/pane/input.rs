//! A pane's input: a queue bounded in bytes, drained into the PTY by one
//! writer thread that never blocks on the PTY, so a killed pane's thread ends
//! (and its queued bytes are freed) however full the terminal is.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Bytes queued for a pane (including the write in progress) before further
/// writes are refused: a pane that never reads must not grow the supervisor.
/// One write larger than this is still taken while nothing else is queued,
/// so a big paste reaches an app that reads; the bound is then that write.
pub const INPUT_QUEUE_BYTES: usize = 4 << 20;

/// Return freed heap memory to the system (glibc keeps it otherwise): a
/// killed pane's queued input, and the buffers of the sends it refused.
fn give_back_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// Why a write was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Over [`INPUT_QUEUE_BYTES`]: the app is not reading.
    Full,
    /// The writer stopped: the app is gone.
    Closed,
}

#[derive(Default)]
struct State {
    items: VecDeque<Vec<u8>>,
    /// Bytes queued plus the bytes of the write in progress.
    bytes: usize,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.items.clear();
        s.bytes = 0;
        drop(s);
        self.cv.notify_all();
    }
}

/// The sending side, held by the pane for one generation. Dropping it stops
/// the writer thread at once, even in the middle of a write.
pub(super) struct Input {
    shared: Arc<Shared>,
    /// Write end of the stop pipe: closing it wakes the writer's poll.
    _stop: OwnedFd,
}

impl Drop for Input {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl Input {
    /// Start the writer thread for `pty` (a descriptor of the PTY master
    /// whose file is non-blocking).
    pub(super) fn start(name: &str, pty: OwnedFd) -> std::io::Result<Input> {
        let (stop_rd, stop_wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let s2 = shared.clone();
        std::thread::Builder::new()
            .name(format!("pty-write-{name}"))
            .spawn(move || writer(s2, pty, stop_rd))?;
        Ok(Input {
            shared,
            _stop: stop_wr,
        })
    }

    /// Queue `parts` as separate writes, in order: all of them or none.
    pub(super) fn push(&self, parts: &[&[u8]]) -> Result<(), Refused> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut s = self.shared.lock();
        if s.closed {
            return Err(Refused::Closed);
        }
        if s.bytes > 0 && s.bytes + total > INPUT_QUEUE_BYTES {
            return Err(Refused::Full);
        }
        for p in parts.iter().filter(|p| !p.is_empty()) {
            s.items.push_back(p.to_vec());
        }
        s.bytes += total;
        drop(s);
        self.shared.cv.notify_one();
        Ok(())
    }

    /// Bytes waiting (for tests and `pane ls`).
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.shared.lock().bytes
    }
}

enum WriteEnd {
    Done,
    Stopped,
    Gone,
}

/// Write all of `buf`, waiting for room with poll; gives up when the stop
/// pipe closes (the pane was killed or respawned) or the PTY fails.
fn write_all(pty: &OwnedFd, stop: &OwnedFd, mut buf: &[u8]) -> WriteEnd {
    use nix::errno::Errno;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    while !buf.is_empty() {
        match nix::unistd::write(pty, buf) {
            Ok(n) => buf = &buf[n..],
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                let mut fds = [
                    PollFd::new(pty.as_fd(), PollFlags::POLLOUT),
                    PollFd::new(stop.as_fd(), PollFlags::POLLIN),
                ];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(_) => return WriteEnd::Gone,
                }
                if fds[1].any().unwrap_or(true) {
                    return WriteEnd::Stopped;
                }
            }
            Err(_) => return WriteEnd::Gone,
        }
    }
    WriteEnd::Done
}

fn writer(shared: Arc<Shared>, pty: OwnedFd, stop: OwnedFd) {
    loop {
        let item = {
            let mut s = shared.lock();
            loop {
                if s.closed {
                    drop(s);
                    give_back_memory();
                    return;
                }
                if let Some(item) = s.items.pop_front() {
                    break item;
                }
                s = shared.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
        };
        match write_all(&pty, &stop, &item) {
            WriteEnd::Done => {
                let mut s = shared.lock();
                s.bytes = s.bytes.saturating_sub(item.len());
            }
            WriteEnd::Stopped | WriteEnd::Gone => {
                shared.close();
                drop(item);
                give_back_memory();
                return;
            }
        }
    }
}

/// Set `O_NONBLOCK` on the open file behind `fd` (shared by its dups).
pub(super) fn set_nonblocking(fd: &impl AsRawFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    // SAFETY: the fd is open for the duration of the call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd.as_raw_fd()) };
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe nobody reads stands in for a PTY whose app does not read.
    fn stuck() -> (Input, OwnedFd) {
        let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        set_nonblocking(&wr).unwrap();
        (Input::start("t", wr).unwrap(), rd)
    }

    #[test]
    fn bounded_in_bytes_not_writes() {
        let (input, _rd) = stuck();
        // Many small writes are fine until the bytes run out.
        let kib = vec![b'x'; 1024];
        let mut taken = 0usize;
        while input.push(&[&kib]) == Ok(()) {
            taken += 1;
            assert!(taken < 10_000, "never refused");
        }
        assert!(taken > 64, "refused by count: {taken}");
        assert_eq!(input.push(&[b"y"]), Err(Refused::Full));
        assert!(input.queued() <= INPUT_QUEUE_BYTES + kib.len());
    }

    #[test]
    fn one_big_write_is_taken_when_nothing_is_queued() {
        let (input, _rd) = stuck();
        let big = vec![b'x'; INPUT_QUEUE_BYTES * 2];
        assert_eq!(input.push(&[&big]), Ok(()));
        assert_eq!(input.push(&[b"more"]), Err(Refused::Full));
    }

    #[test]
    fn dropping_the_input_ends_a_blocked_writer() {
        let (input, rd) = stuck();
        let big = vec![b'x'; 1 << 20];
        input.push(&[&big]).unwrap();
        let shared = Arc::downgrade(&input.shared);
        drop(input);
        // The writer thread holds the last reference until it ends.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.upgrade().is_some() {
            assert!(std::time::Instant::now() < deadline, "writer never ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(rd);
    }
}
