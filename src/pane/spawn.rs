//! Starting a pane's process: open the PTY, spawn the command with its env
//! (set on the child, never typed), wait for the exec, and verify the env in
//! `/proc/<pid>/environ`.

use super::{PaneError, PaneSpec};
use nix::sys::signal::Signal;
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};
use std::io::{Read, Write};
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
    pub(super) writer: Box<dyn Write + Send>,
    pub(super) reader: PtyReader,
    pub(super) child: Box<dyn Child + Send + Sync>,
    pub(super) env_verified: bool,
}

pub(super) fn spawn_process(spec: &PaneSpec) -> Result<Spawned, PaneError> {
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
    let mut cmd = CommandBuilder::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..]);
    // The agent must not think it runs inside tmux (docs/architecture.md).
    cmd.env_remove("TMUX");
    cmd.env_remove("TMUX_PANE");
    if !spec.env.iter().any(|(k, _)| k == "TERM") {
        cmd.env("TERM", "xterm-256color");
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(cwd) = &spec.cwd {
        cmd.cwd(cwd);
    } else if let Ok(cwd) = std::env::current_dir() {
        cmd.cwd(cwd);
    }
    let child = pair
        .slave
        .spawn_command(cmd)
        .map_err(|e| spawn_err(e.to_string()))?;
    // Keep no slave fd in the supervisor, or the reader never sees EOF.
    drop(pair.slave);
    let pid = child.process_id().unwrap_or(0);
    let reader = PtyReader::new(&*pair.master).map_err(spawn_err)?;
    let writer = pair
        .master
        .take_writer()
        .map_err(|e| spawn_err(format!("pty writer: {e}")))?;
    let mut spawned = Spawned {
        pid,
        master: pair.master,
        writer,
        reader,
        child,
        env_verified: false,
    };
    wait_for_exec(pid);
    match verify_env_settled(pid, &spec.env) {
        Ok(verified) => spawned.env_verified = verified,
        Err(name) => {
            super::native::signal_group(pid, Signal::SIGKILL);
            let _ = spawned.child.wait();
            return Err(PaneError::EnvMismatch { name });
        }
    }
    Ok(spawned)
}

/// How long to wait for the forked child to finish `exec`.
const EXEC_TIMEOUT: Duration = Duration::from_secs(2);

/// Wait until the child has exec'd: before that, /proc shows the forked
/// supervisor (our own cmdline) or, mid-exec, nothing, and its environment
/// proves nothing. The new cmdline need not start with the argv we gave: a
/// `#!` script shows its interpreter (`node /…/claude`), and programs may
/// rewrite their argv, so anything but ours (or empty) means exec'd.
fn wait_for_exec(pid: u32) {
    let ours = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let deadline = Instant::now() + EXEC_TIMEOUT;
    let mut delay = Duration::from_micros(100);
    loop {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"));
        match cmdline {
            Ok(c) if !c.is_empty() && c != ours => return,
            Err(_) => return, // gone: nothing to verify
            Ok(_) if Instant::now() >= deadline || is_zombie(pid) => return,
            Ok(_) => {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(5));
            }
        }
    }
}

/// Whether the process already exited (a zombie has an empty cmdline).
pub(super) fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace()
                .next()
                .map(|st| st == "Z" || st == "X")
        })
        .unwrap_or(true)
}

/// How long a mismatch may last before it counts: the child may be in the
/// middle of another exec (a wrapper script exec'ing its program), when
/// /proc shows an empty or half-built environment.
const ENV_SETTLE: Duration = Duration::from_millis(200);

/// [`verify_env`], retried while the child may be between images; only a
/// mismatch that persists is reported.
pub(super) fn verify_env_settled(pid: u32, env: &[(String, String)]) -> Result<bool, String> {
    let deadline = Instant::now() + ENV_SETTLE;
    let mut delay = Duration::from_micros(200);
    loop {
        match verify_env(pid, env) {
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// Compare the child's environment (`/proc/<pid>/environ`) with the declared
/// names and values. `Ok(false)` when the process is already gone; `Err(name)`
/// names the first variable that did not arrive (never its value).
fn verify_env(pid: u32, env: &[(String, String)]) -> Result<bool, String> {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/environ")) else {
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
