//! Starting a pane's process: open the PTY, spawn the command with its env
//! (set on the child, never typed), wait for the exec, and verify the env in
//! `/proc/<pid>/environ`. A failed exec is the error of the spawn.

use super::{PaneError, PaneSpec, PaneSpecExt};
use nix::sys::signal::Signal;
use portable_pty::{Child, MasterPty, PtySize, native_pty_system};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The PTY's output side, plus a handle on the master to ask (without
/// reading) whether more output is already waiting.
pub(super) struct PtyReader {
    pub(super) read: Box<dyn Read + Send>,
    ready: Option<OwnedFd>,
}

impl PtyReader {
    fn new(master: &dyn MasterPty) -> Result<Self, String> {
        let read = master
            .try_clone_reader()
            .map_err(|e| format!("pty reader: {e}"))?;
        let ready = master.as_raw_fd().and_then(|raw| {
            // SAFETY: `raw` is the master's fd, open for the whole call; the
            // dup is ours and closes with this reader.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) };
            fd.try_clone_to_owned().ok()
        });
        Ok(PtyReader { read, ready })
    }

    /// Block until output (or the end of it) is waiting: the master is
    /// non-blocking, so a read without output returns `WouldBlock`.
    pub(super) fn wait_readable(&self) {
        let Some(fd) = &self.ready else {
            std::thread::sleep(Duration::from_millis(10));
            return;
        };
        let mut pfd = nix::libc::pollfd {
            fd: fd.as_raw_fd(),
            events: nix::libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for a fd we own.
        unsafe { nix::libc::poll(&mut pfd, 1, -1) };
    }

    /// Whether a read would return at once (more of a burst is waiting).
    pub(super) fn more_waiting(&self) -> bool {
        let Some(fd) = &self.ready else { return false };
        let mut pfd = nix::libc::pollfd {
            fd: fd.as_raw_fd(),
            events: nix::libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for a fd we own; timeout 0 never blocks.
        let n = unsafe { nix::libc::poll(&mut pfd, 1, 0) };
        n > 0 && pfd.revents & nix::libc::POLLIN != 0
    }
}

pub(super) struct Spawned {
    pub(super) pid: u32,
    pub(super) master: Box<dyn MasterPty + Send>,
    /// A descriptor of the master for the writer thread (non-blocking).
    pub(super) writer: OwnedFd,
    pub(super) reader: PtyReader,
    pub(super) child: Box<dyn Child + Send + Sync>,
    pub(super) env_verified: bool,
}

/// The name of the variable that marks every process of a pane: it is
/// inherited by descendants that leave the pane's session or process group,
/// so they can still be found and ended (docs/architecture.md).
pub const PANE_MARKER_ENV: &str = crate::statedir::env::PANE;
/// Variables a supervisor's environment may hold that no pane may see: the
/// fleet's NATS secrets (docs/fleet.md).
pub const SCRUBBED_ENV: [&str; 2] = [
    crate::statedir::env::NATS_PASSWORD,
    crate::statedir::env::NATS_TOKEN,
];

pub(super) fn spawn_process(spec: &PaneSpec, marker: &str) -> Result<Spawned, PaneError> {
    spec.validate()?;
    let cmd_name = spec.argv[0].clone();
    let spawn_err = |message: String| PaneError::Spawn {
        command: cmd_name.clone(),
        message,
    };
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: spec.rows,
            cols: spec.cols,
            pixel_width: 0,
            pixel_height: 0,
        })
        .map_err(|e| spawn_err(format!("openpty: {e}")))?;
    // The child is started here rather than by portable-pty, whose pre-exec
    // hook closes every descriptor — including the close-on-exec pipe the
    // standard library reports a failed exec through, so a missing `#!`
    // interpreter or an over-long argv looked like a started pane.
    let slave = open_slave(&*pair.master).map_err(|e| spawn_err(format!("pty slave: {e}")))?;
    drop(pair.slave);
    let mut cmd = std::process::Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..]);
    // The agent must not think it runs inside tmux (docs/architecture.md).
    cmd.env_remove("TMUX");
    cmd.env_remove("TMUX_PANE");
    for k in SCRUBBED_ENV {
        cmd.env_remove(k);
    }
    // A supervisor started inside another repository's git hook must not
    // hand that repository to the agent's git (the spec's own env still may).
    crate::git::scrub_repository_env(&mut cmd);
    if !spec.env.iter().any(|(k, _)| k == "TERM") {
        cmd.env("TERM", "xterm-256color");
    }
    cmd.env(PANE_MARKER_ENV, marker);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    } else if let Ok(cwd) = std::env::current_dir() {
        cmd.current_dir(cwd);
    }
    let stdio = || {
        slave
            .try_clone()
            .map(std::process::Stdio::from)
            .map_err(|e| spawn_err(format!("pty slave: {e}")))
    };
    cmd.stdin(stdio()?).stdout(stdio()?).stderr(stdio()?);
    // SAFETY: the hook only makes async-signal-safe calls (signal,
    // sigprocmask, setsid, ioctl, close_range/fcntl) and allocates nothing.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(child_setup);
    }
    let spawned = {
        let _guard = super::reap::spawning();
        let child = cmd.spawn();
        if let Ok(c) = &child {
            super::reap::add_leader(c.id());
        }
        child
    };
    // Keep no slave fd in the supervisor, or the reader never sees EOF.
    drop(cmd);
    drop(slave);
    let child = spawned.map_err(|e| spawn_err(exec_failure(spec, &e)))?;
    let pid = child.id();
    let child: Box<dyn Child + Send + Sync> = Box::new(child);
    let fail = |message: String, child: &mut Box<dyn Child + Send + Sync>| {
        super::native::signal_group(pid, Signal::SIGKILL);
        let _ = child.wait();
        super::reap::remove_leader(pid);
        spawn_err(message)
    };
    let mut child = child;
    let reader = match PtyReader::new(&*pair.master) {
        Ok(r) => r,
        Err(m) => return Err(fail(m, &mut child)),
    };
    // Reader and writer wait with poll: a blocked write must never keep a
    // killed pane's thread (and its queued bytes) alive.
    let writer = match dup_master(&*pair.master)
        .and_then(|w| super::input::set_nonblocking(&w).map(|()| w))
    {
        Ok(w) => w,
        Err(e) => return Err(fail(format!("pty writer: {e}"), &mut child)),
    };
    let mut spawned = Spawned {
        pid,
        master: pair.master,
        writer,
        reader,
        child,
        env_verified: false,
    };
    match verify_env_settled(pid, &spec.env) {
        Ok(verified) => spawned.env_verified = verified,
        Err(name) => {
            super::native::signal_group(pid, Signal::SIGKILL);
            let _ = spawned.child.wait();
            super::reap::remove_leader(pid);
            return Err(PaneError::EnvMismatch { name });
        }
    }
    Ok(spawned)
}

/// Open the PTY's slave side by name (no controlling-terminal side effect
/// in the supervisor; closed on exec).
fn open_slave(master: &dyn MasterPty) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = master
        .tty_name()
        .ok_or_else(|| std::io::Error::other("the pty has no slave name"))?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_NOCTTY | nix::libc::O_CLOEXEC)
        .open(path)
}

fn dup_master(master: &dyn MasterPty) -> std::io::Result<OwnedFd> {
    let raw = master
        .as_raw_fd()
        .ok_or_else(|| std::io::Error::other("the pty has no descriptor"))?;
    // SAFETY: `raw` is the master's fd, open for the whole call; the dup is ours.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) };
    fd.try_clone_to_owned()
}

/// Descriptors marked close-on-exec one by one when `close_range` is missing.
const FALLBACK_MAX_FD: i32 = 4096;

/// In a child between fork and exec: every signal at its default
/// disposition and none blocked, as a program started from a user's shell
/// has them. An ignored signal stays ignored across exec: the supervisor
/// ignores SIGPIPE (and SIGHUP when started under `nohup`), and a process
/// started by `posix_spawn` has glibc's internal signals, 32 and 33,
/// ignored (its child gives them SIG_IGN), which a supervisor started so
/// would hand on to every pane. Those two are set by the system call:
/// glibc's `sigaction` refuses them. Async-signal-safe.
pub(crate) fn default_signals() {
    use nix::libc;
    for sig in 1..=64 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            set_default(sig);
        }
    }
    // SAFETY: an empty set, valid pointers; `sigprocmask` is
    // async-signal-safe.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}

/// Signal `sig` at SIG_DFL through `rt_sigaction` itself.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn set_default(sig: i32) {
    use nix::libc;
    /// The kernel's `struct sigaction` on these two: handler, flags,
    /// restorer, a 64-bit mask.
    #[repr(C)]
    struct KernelSigaction {
        handler: libc::sighandler_t,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let act = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: a valid action for a valid signal number, no old action
    // asked for, the kernel's mask size; a system call is async-signal-safe.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &act as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            std::mem::size_of::<u64>(),
        );
    }
}

/// Signal `sig` at SIG_DFL (glibc refuses its internal 32 and 33 here).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn set_default(sig: i32) {
    // SAFETY: `signal` is async-signal-safe; a refusal changes nothing.
    unsafe {
        nix::libc::signal(sig, nix::libc::SIG_DFL);
    }
}

/// In the child between fork and exec: default signal dispositions and mask,
/// a new session with the PTY as its controlling terminal, and every
/// descriptor above stdio closed on exec (the exec-error pipe stays usable
/// until then).
fn child_setup() -> std::io::Result<()> {
    use nix::libc;
    // SAFETY (whole body): async-signal-safe libc calls on our own process.
    unsafe {
        default_signals();
        if libc::setsid() == -1 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
            return Err(std::io::Error::last_os_error());
        }
        let r = libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        if r != 0 {
            // Older kernels: mark them one by one.
            for fd in 3..FALLBACK_MAX_FD {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
        }
    }
    Ok(())
}

/// Say why the exec failed, in the operator's terms.
fn exec_failure(spec: &PaneSpec, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(nix::libc::E2BIG) => format!(
            "{e}: an argument or env value (or all of them together) is over the kernel's limit"
        ),
        Some(nix::libc::ENOENT) => match interpreter(spec) {
            Some(interp) => {
                format!("{e}: its interpreter {interp} (from the #! line) was not found")
            }
            None => e.to_string(),
        },
        Some(nix::libc::ENOEXEC) => format!("{e}: not a program or script this system can run"),
        _ => e.to_string(),
    }
}

/// The `#!` interpreter of the pane's command, when it is a script.
fn interpreter(spec: &PaneSpec) -> Option<String> {
    let path = super::find_executable(&spec.argv[0], &spec.path_var(), spec.cwd.as_deref())?;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let text = String::from_utf8_lossy(line);
    Some(text.split_whitespace().next()?.to_string())
}

/// Whether the process already exited (a zombie has an empty cmdline).
pub(super) fn is_zombie(pid: u32) -> bool {
    super::procfs::exited(pid).unwrap_or(true)
}

/// How long a mismatch may last before it counts: the child may be in the
/// middle of another exec (a wrapper script exec'ing its program), when
/// /proc shows an empty or half-built environment.
const ENV_SETTLE: Duration = Duration::from_millis(200);

/// [`verify_env`], retried while the child may be between images; only a
/// mismatch that persists is reported.
pub(super) fn verify_env_settled(pid: u32, env: &[(String, String)]) -> Result<bool, String> {
    let deadline = Instant::now() + ENV_SETTLE;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_micros(200), Duration::from_millis(10));
    loop {
        match verify_env(pid, env) {
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(delay.next_delay());
            }
            other => return other,
        }
    }
}

/// Compare the child's environment (`/proc/<pid>/environ`) with the declared
/// names and values. `Ok(false)` when the process is already gone; `Err(name)`
/// names the first variable that did not arrive (never its value).
fn verify_env(pid: u32, env: &[(String, String)]) -> Result<bool, String> {
    let Some(raw) = super::procfs::environ(pid) else {
        return Ok(false);
    };
    if raw.is_empty() && is_zombie(pid) {
        // Exited already: nothing left to verify.
        return Ok(false);
    }
    let actual: std::collections::HashMap<&[u8], &[u8]> = raw
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let i = kv.iter().position(|b| *b == b'=')?;
            Some((&kv[..i], &kv[i + 1..]))
        })
        .collect();
    // Later declarations of the same name win, as on the builder.
    let mut declared: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for (k, v) in env {
        declared.insert(k, v);
    }
    for (k, v) in declared {
        if actual.get(k.as_bytes()) != Some(&v.as_bytes()) {
            return Err(k.to_string());
        }
    }
    Ok(true)
}
