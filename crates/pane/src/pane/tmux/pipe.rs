//! Each pane's output comes through a pipe of its own: `pipe-pane -O -t %N
//! 'exec cat > FIFO'` into a private FIFO under the state dir, read by one
//! thread per pane that blocks on it (an idle pane costs nothing). tmux
//! writes the pane's raw bytes there, so its server does none of the
//! `%output` formatting a control client costs it (docs/tmux.md).
//!
//! Every pipe has a fresh FIFO name (a generation unique to this
//! supervisor and a random nonce), so a `cat` left from an earlier pipe can
//! never write into a newer reader. The pipe's shell removes the FIFO's
//! name once it has the FIFO open (so nothing lingers in the state dir that
//! a reader of it could block on), and the reader removes it when it ends.
//! Starting a pipe on a pane replaces the pane's previous one (tmux closes
//! it; its `cat` sees EOF and exits).

use super::TmuxHost;
use super::pane::lock;
use crate::statedir::StateDir;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The largest read from a FIFO.
const READ_BUF: usize = 256 * 1024;
/// How long the pipe's shell may take to open its FIFO.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);
/// The FIFO's kernel buffer, asked for (a larger buffer lets `cat` write
/// ahead while drover parses; refused quietly above the system's limit).
const FIFO_SIZE: i32 = 1024 * 1024;

/// Pipe generations: a higher number is a newer pipe.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// How a pipe's reader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Every writer closed the FIFO: tmux closed the pipe (replaced, the
    /// pane or the server gone) and its `cat` exited.
    Eof,
    /// drover dropped the pipe (a newer one, the pane killed or dropped).
    Cancelled,
}

/// One pipe: its reader runs until the FIFO's EOF or until this is dropped.
#[derive(Debug)]
pub(super) struct Pipe {
    pub(super) generation: u64,
    path: PathBuf,
    ended: Arc<AtomicBool>,
    /// Dropped to stop the reader (it polls the other end).
    _cancel: std::io::PipeWriter,
}

impl Pipe {
    /// Whether the reader has ended (EOF or cancelled).
    pub(super) fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// The command tmux runs for this pipe (one argument of `pipe-pane`,
    /// quoted for tmux's parser). Only the FIFO's path is in it.
    pub(super) fn command(&self, cat: &Path, rm: &Path) -> String {
        super::quote(&pipe_command(cat, rm, &self.path))
    }

    /// Wait until the pipe's shell has opened the FIFO (it then removes
    /// its name); false when it did not within a bound.
    pub(super) fn wait_open(&self) -> bool {
        self.opened().wait()
    }

    /// What [`Self::wait_open`] watches, to wait without holding the pipe.
    pub(super) fn opened(&self) -> Opened {
        Opened {
            path: self.path.clone(),
            ended: self.ended.clone(),
        }
    }
}

/// A pipe's FIFO name and whether its reader ended.
pub(super) struct Opened {
    path: PathBuf,
    ended: Arc<AtomicBool>,
}

impl Opened {
    /// See [`Pipe::wait_open`].
    pub(super) fn wait(&self) -> bool {
        let deadline = Instant::now() + OPEN_TIMEOUT;
        let mut delay =
            crate::backoff::Backoff::new(Duration::from_micros(200), Duration::from_millis(10));
        while self.path.exists() {
            if Instant::now() >= deadline || self.ended.load(Ordering::Acquire) {
                return false;
            }
            std::thread::sleep(delay.next_delay());
        }
        true
    }
}

/// The shell command that copies the pane's output into `fifo` (only
/// while it is still a FIFO: a pipe drover already dropped must not make a
/// file of it; its name removed once open), escaped for the format and
/// time expansion tmux applies to a `pipe-pane` command (`#` and `%`
/// doubled) and quoted for the shell.
fn pipe_command(cat: &Path, rm: &Path, fifo: &Path) -> String {
    let sh = |p: &Path| crate::shell::quote(&p.to_string_lossy());
    let f = sh(fifo);
    format!(
        "[ -p {f} ] && exec > {f} && {} -f {f} && exec {}",
        sh(rm),
        sh(cat)
    )
    .replace('#', "##")
    .replace('%', "%%")
}

/// Where the FIFOs are: private to the user.
fn dir(state_dir: &StateDir) -> PathBuf {
    state_dir.tmux_pipes_dir()
}

/// Remove the FIFOs an earlier supervisor left (their readers are gone; a
/// `cat` still writing to one has it open and is not disturbed).
pub(super) fn sweep(state_dir: &StateDir) {
    if let Ok(rd) = std::fs::read_dir(dir(state_dir)) {
        for e in rd.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A new pipe `generation` for pane `name`: the FIFO made and opened, its reader
/// started. `bytes` gets what tmux writes (`burst_end` when the read
/// drained the FIFO), `end` how the reader ended.
pub(super) fn open(
    state_dir: &StateDir,
    name: &str,
    generation: u64,
    bytes: impl FnMut(&[u8], bool) + Send + 'static,
    end: impl FnOnce(End) + Send + 'static,
) -> Result<Pipe, String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let d = dir(state_dir);
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    let path = d.join(format!(
        "{name}.{generation}.{}",
        uuid::Uuid::new_v4().simple()
    ));
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .map_err(|e| format!("cannot make the output pipe {}: {e}", path.display()))?;
    // Opened before tmux starts the pipe, without waiting for a writer:
    // the reader polls it, and `cat` finds a reader when it opens it.
    let fifo = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(format!("cannot open the output pipe: {e}"));
        }
    };
    // SAFETY: F_SETPIPE_SZ on a FIFO we own; a refusal changes nothing.
    let _ = unsafe { nix::libc::fcntl(fifo.as_raw_fd(), nix::libc::F_SETPIPE_SZ, FIFO_SIZE) };
    let (cancel_rx, cancel_tx) = std::io::pipe().map_err(|e| {
        let _ = std::fs::remove_file(&path);
        format!("cannot make the reader's stop pipe: {e}")
    })?;
    let ended = Arc::new(AtomicBool::new(false));
    let reader = Reader {
        fifo,
        cancel: cancel_rx,
        path: path.clone(),
        ended: ended.clone(),
    };
    let spawned = std::thread::Builder::new()
        .name(format!("tmux-pipe-{name}"))
        .spawn(move || {
            let how = reader.run(bytes);
            end(how);
        });
    if let Err(e) = spawned {
        let _ = std::fs::remove_file(&path);
        return Err(format!("cannot start the output reader: {e}"));
    }
    Ok(Pipe {
        generation,
        path,
        ended,
        _cancel: cancel_tx,
    })
}

struct Reader {
    fifo: std::fs::File,
    cancel: std::io::PipeReader,
    path: PathBuf,
    ended: Arc<AtomicBool>,
}

impl Reader {
    fn run(mut self, mut bytes: impl FnMut(&[u8], bool)) -> End {
        let mut buf = vec![0u8; READ_BUF];
        let mut unlinked = false;
        let how = 'outer: loop {
            let mut fds = [
                nix::libc::pollfd {
                    fd: self.fifo.as_raw_fd(),
                    events: nix::libc::POLLIN,
                    revents: 0,
                },
                nix::libc::pollfd {
                    fd: self.cancel.as_raw_fd(),
                    events: nix::libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds for fds this thread owns; no timeout
            // (an idle pane's reader sleeps until tmux writes or drover stops it).
            let n = unsafe { nix::libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                break End::Eof;
            }
            if fds[1].revents != 0 {
                break End::Cancelled;
            }
            if fds[0].revents == 0 {
                continue;
            }
            // Before a writer first opens the FIFO, poll reports nothing; a
            // hang-up comes only after one has come and gone.
            loop {
                match self.fifo.read(&mut buf) {
                    Ok(0) => break 'outer End::Eof,
                    Ok(n) => {
                        if !unlinked {
                            // The writer has it open: the name is no longer needed.
                            unlinked = true;
                            let _ = std::fs::remove_file(&self.path);
                        }
                        let drained = n < buf.len();
                        bytes(&buf[..n], drained);
                        if drained {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => break 'outer End::Eof,
                }
            }
        };
        self.ended.store(true, Ordering::Release);
        let _ = std::fs::remove_file(&self.path);
        how
    }
}

impl TmuxHost {
    /// A new pipe for the pane `pane_id` (named `name`): its bytes are
    /// routed to whichever pane holds that id, if the pipe is still its
    /// current one. Not yet started in tmux (see [`Self::pipe_pane_line`]).
    pub(super) fn new_pipe(&self, name: &str, pane_id: &str) -> Result<Pipe, String> {
        let generation = NEXT.fetch_add(1, Ordering::AcqRel);
        let (host, id) = (self.me.clone(), pane_id.to_string());
        let (host_end, id_end) = (self.me.clone(), pane_id.to_string());
        open(
            &self.state_dir,
            name,
            generation,
            move |bytes, burst_end| {
                if let Some(h) = host.upgrade() {
                    h.pipe_output(&id, generation, bytes, burst_end);
                }
            },
            move |how| {
                if how == End::Eof
                    && let Some(h) = host_end.upgrade()
                {
                    h.pipe_ended(&id_end, generation);
                }
            },
        )
    }

    /// The `pipe-pane` command that starts `pipe` on pane `pane_id`.
    pub(super) fn pipe_pane_line(&self, pane_id: &str, pipe: &Pipe) -> String {
        format!(
            "pipe-pane -O -t {pane_id} {}",
            pipe.command(&self.cat, &self.rm)
        )
    }

    /// Bytes from pipe `generation` of pane `pane_id` (a reader thread).
    fn pipe_output(&self, pane_id: &str, generation: u64, bytes: &[u8], burst_end: bool) {
        let panes = lock(&self.panes);
        match panes.get(pane_id).and_then(std::sync::Weak::upgrade) {
            Some(p) => {
                drop(panes);
                p.feed(bytes, burst_end, generation);
            }
            None => {
                // Under the table's lock: a registration cannot slip between
                // the look-up and the hold.
                let mut u = lock(&self.unclaimed);
                if u.len() < 64 {
                    let (g, buf) = u
                        .entry(pane_id.to_string())
                        .or_insert_with(|| (generation, Vec::new()));
                    if *g == generation && buf.len() + bytes.len() <= super::UNCLAIMED_MAX {
                        buf.extend_from_slice(bytes);
                    }
                }
            }
        }
    }

    /// Pipe `generation` of pane `pane_id` hit EOF. While the pane lives
    /// and the control client is up, something replaced drover's pipe (an
    /// operator's own `pipe-pane`): a gap, so the pane is re-piped and
    /// re-seeded — a bounded number of times, never a fight.
    fn pipe_ended(&self, pane_id: &str, generation: u64) {
        let Some(p) = lock(&self.panes)
            .get(pane_id)
            .and_then(std::sync::Weak::upgrade)
        else {
            return;
        };
        if p.pipe_generation() != Some(generation) || self.stopping.load(Ordering::Acquire) {
            return;
        }
        let line = format!(
            "display-message -p -t {pane_id} {}",
            super::quote("#{pane_id} #{pane_dead}")
        );
        // Not connected: the reconnect re-pipes. Gone or dead: the window's
        // close or the exit watcher says so.
        let Ok(Ok(body)) = self.command(line) else {
            return;
        };
        if body.first().map(String::as_str) != Some(&format!("{pane_id} 0")) {
            return;
        }
        if !p.note_repipe() {
            tracing::warn!(pane = %p.name_str(), pane_id, "tmux pane's output pipe keeps being replaced; drover stops re-piping it");
            p.set_transport(Some(format!(
                "its tmux output pipe keeps being replaced (another pipe-pane on {pane_id}?): respawn or kill the pane"
            )));
            return;
        }
        tracing::debug!(pane = %p.name_str(), pane_id, "tmux pane's output pipe was replaced; re-piping");
        if let Err(e) = self.resync(&p) {
            tracing::warn!(pane = %p.name_str(), error = %e, "tmux pane could not be re-piped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_command_survives_tmux_expansion_and_the_shell() {
        let c = pipe_command(
            Path::new("/bin/cat"),
            Path::new("/bin/rm"),
            Path::new("/s/it's #{x} %H/p.1"),
        );
        let f = r"'/s/it'\''s ##{x} %%H/p.1'";
        assert_eq!(
            c,
            format!("[ -p {f} ] && exec > {f} && /bin/rm -f {f} && exec /bin/cat")
        );
    }

    /// Guards: an idle pane's reader must not spin, and dropping the pipe
    /// (a newer pipe, the pane killed) must end it even with no writer.
    #[test]
    fn reader_gets_bytes_then_eof_and_a_dropped_pipe_ends_it() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (etx, erx) = std::sync::mpsc::channel();
        let pipe = open(
            crate::statedir::StateDir::new(dir.path()),
            "p",
            1,
            move |b, _| tx.send(b.to_vec()).unwrap(),
            move |e| etx.send(e).unwrap(),
        )
        .unwrap();
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(&pipe.path)
            .unwrap();
        w.write_all(b"hello").unwrap();
        let got = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(got, b"hello");
        drop(w);
        assert_eq!(
            erx.recv_timeout(std::time::Duration::from_secs(10)),
            Ok(End::Eof)
        );
        assert!(pipe.ended() && !pipe.path.exists());
        let (etx, erx) = std::sync::mpsc::channel();
        let idle = open(
            crate::statedir::StateDir::new(dir.path()),
            "q",
            2,
            |_, _| {},
            move |e| etx.send(e).unwrap(),
        )
        .unwrap();
        let path = idle.path.clone();
        drop(idle);
        assert_eq!(
            erx.recv_timeout(std::time::Duration::from_secs(10)),
            Ok(End::Cancelled)
        );
        assert!(!path.exists());
    }
}
