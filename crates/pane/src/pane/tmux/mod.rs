//! The tmux backend: one tmux server per state dir on a dedicated socket
//! (`-L drover-<hash>`, `-f /dev/null`), one control-mode client owned by
//! the supervisor, one window per pane (see `docs/tmux.md`).
//!
//! Env is set with `new-window -e K=V` written to the control client's
//! stdin, so no value is ever in a process's argv. Every pane is addressed by
//! its `%N` id, never by name or focus. Only the server drover started (its
//! pid is recorded in the state dir) is ever touched. The control client
//! takes no `%output` (`refresh-client -f no-output`): each pane's output
//! comes through a pipe of its own (`pipe.rs`).

mod codec;
mod control;
mod gate;
mod pane;
mod pipe;
mod reseed;
mod seed;
mod server;
mod state;

pub use codec::{decode_output, parse_version, quote};
pub use pane::TmuxPane;

use crate::pane::{PaneError, PaneEvents, PaneSpec, PaneSpecExt};
use crate::statedir::{StateDir, StateDirBuf};
use control::{Control, Reply, Sink};
use pane::{Start, lock};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The oldest tmux with `new-window -e` and `refresh-client -f no-output`.
pub const MIN_VERSION: (u32, u32) = (3, 2);
/// The session that holds drover's windows.
const SESSION: &str = "drover";
/// Reconnect attempts back off from this …
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
/// … to this.
const RECONNECT_MAX: Duration = Duration::from_secs(2);
/// How long tmux may take to attach drover's control client.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a restarted supervisor keeps trying to attach to the tmux
/// server whose panes it re-adopts.
const ADOPT_ATTACH_BOUND: Duration = Duration::from_secs(60);
/// How long to wait for a new pane's first process to exec.
const EXEC_TIMEOUT: Duration = Duration::from_secs(2);
/// Output held for a pane id tmux reports before its window is registered.
const UNCLAIMED_MAX: usize = 4 * 1024 * 1024;

/// The tmux binary: `$DROVER_TMUX` or `tmux` on PATH.
fn tmux_binary() -> PathBuf {
    std::env::var_os(crate::statedir::env::TMUX)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("tmux"))
}

/// Whether the tmux backend still keeps pane `name` of `state_dir` for
/// re-adoption (after [`TmuxHost::adopt`]: a pane it re-adopted, or one on
/// a server it could not reach). Such a pane's processes are never ended
/// as lost.
pub fn keeps_pane(state_dir: &StateDir, name: &str) -> bool {
    state::has_saved(state_dir, name)
}

/// The socket name for a state dir: `drover-<12 hex digits of its hash>`.
pub fn socket_name(state_dir: &StateDir) -> String {
    let h = crate::paths::fnv1a64(state_dir.as_os_str().as_encoded_bytes());
    format!("drover-{:012x}", h & 0xffff_ffff_ffff)
}

/// Where tmux puts the socket of `-L name`: `$TMUX_TMPDIR` (else `/tmp`),
/// `tmux-<uid>/name`.
fn socket_file(name: &str) -> PathBuf {
    let dir = std::env::var_os("TMUX_TMPDIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    dir.join(format!("tmux-{}", nix::unistd::getuid()))
        .join(name)
}

/// Remove a tmux socket file no server listens on any more (drover's own,
/// by name); one that still answers is left alone.
/// A server told to exit may answer for a moment more: waited for, bounded.
fn remove_dead_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let is_socket =
        |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket());
    let deadline = Instant::now() + Duration::from_secs(2);
    while is_socket(path) {
        if std::os::unix::net::UnixStream::connect(path).is_err() {
            let _ = std::fs::remove_file(path);
            return;
        }
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// drover's tmux server for one state dir and the control client on it.
pub struct TmuxHost {
    state_dir: StateDirBuf,
    socket: String,
    binary: PathBuf,
    me: Weak<TmuxHost>,
    conn: Mutex<Option<Arc<Control>>>,
    /// Registered panes by tmux id (`%N`).
    panes: Mutex<HashMap<String, Weak<TmuxPane>>>,
    /// Output of a pane id's pipe (generation, bytes) before the pane is registered.
    unclaimed: Mutex<HashMap<String, (u64, Vec<u8>)>>,
    /// One pane creation at a time (default-size + new-window run back to back).
    create: Mutex<()>,
    reconnecting: AtomicBool,
    stopping: AtomicBool,
    /// cat(1), which copies a pane's output into its FIFO, and rm(1).
    cat: PathBuf,
    rm: PathBuf,
    /// The FIFOs an earlier supervisor left were removed.
    swept: AtomicBool,
    /// The server drover started and is connected to: (pid, start time).
    server: Mutex<Option<(u32, u64)>>,
}

impl std::fmt::Debug for TmuxHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TmuxHost")
            .field("socket", &self.socket)
            .finish()
    }
}

struct HostSink(Weak<TmuxHost>);

impl Sink for HostSink {
    fn window_closed(&self, window: &str) {
        let Some(h) = self.0.upgrade() else { return };
        let panes: Vec<Arc<TmuxPane>> = lock(&h.panes).values().filter_map(Weak::upgrade).collect();
        for p in panes {
            let w = lock(&p.inner).window_id.clone();
            if w == window {
                tracing::info!(pane = %p.name_str(), window, "tmux window closed outside drover");
                p.closed("its tmux window was closed");
            }
        }
    }
    fn disconnected(&self, reason: &str) {
        let Some(h) = self.0.upgrade() else { return };
        h.on_disconnect(reason);
    }
}

impl TmuxPane {
    fn name_str(&self) -> &str {
        crate::pane::backend::PaneBackend::name(self)
    }
}

fn tmux_err(message: impl Into<String>) -> PaneError {
    PaneError::Backend {
        backend: "tmux",
        message: message.into(),
    }
}

impl TmuxHost {
    /// The host for `state_dir`; nothing is started until a pane needs it.
    pub fn new(state_dir: &StateDir) -> Arc<Self> {
        Arc::new_cyclic(|me| TmuxHost {
            state_dir: state_dir.to_buf(),
            socket: socket_name(state_dir),
            binary: tmux_binary(),
            me: me.clone(),
            conn: Mutex::new(None),
            panes: Mutex::new(HashMap::new()),
            unclaimed: Mutex::new(HashMap::new()),
            create: Mutex::new(()),
            reconnecting: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            cat: crate::pane::find_executable("cat", "/usr/bin:/bin", None)
                .unwrap_or_else(|| PathBuf::from("cat")),
            rm: crate::pane::find_executable("rm", "/usr/bin:/bin", None)
                .unwrap_or_else(|| PathBuf::from("rm")),
            swept: AtomicBool::new(false),
            server: Mutex::new(None),
        })
    }

    /// The `-L` socket name.
    pub fn socket_name(&self) -> &str {
        &self.socket
    }

    fn arc(&self) -> Option<Arc<TmuxHost>> {
        self.me.upgrade()
    }

    /// Stop routing `pane_id` to `pane` (only if it still routes there: the
    /// id may be another pane's by now).
    fn unregister(&self, pane_id: &str, pane: &TmuxPane) {
        let mut panes = lock(&self.panes);
        if panes
            .get(pane_id)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), pane))
        {
            panes.remove(pane_id);
        }
    }

    /// Make drover's tmux server reap its exited children now: send it
    /// SIGCHLD. tmux before 3.6 loses the SIGCHLD of a pane that exits
    /// while libutempter's helper runs (the helper sets SIGCHLD to SIG_DFL,
    /// and tmux runs it when a pane's terminal closes, racing the
    /// process's own exit); the zombie then waits, with no exit status,
    /// until another child of the server exits. A SIGCHLD only makes tmux
    /// call `waitpid` (tmux 3.6 sends itself one after the helper too).
    /// Only the server drover started, checked by its start time.
    pub(super) fn nudge_reaper(&self) {
        let Some((pid, start)) = *lock(&self.server) else {
            return;
        };
        if crate::pane::record::start_time(pid) == Some(start)
            && let Ok(p) = i32::try_from(pid)
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGCHLD,
            );
        }
    }

    pub(super) fn command(&self, line: String) -> Result<Reply, String> {
        self.commands(&[line])
            .map(|mut v| v.pop().unwrap_or_else(|| Err("no reply".into())))
    }

    pub(super) fn commands(&self, lines: &[String]) -> Result<Vec<Reply>, String> {
        let ctl = lock(&self.conn)
            .clone()
            .filter(|c| c.alive())
            .ok_or_else(|| "drover's tmux control client is not connected".to_string())?;
        ctl.commands(lines)
    }

    /// One line of `n` commands joined by ` ; `, run by tmux back to back.
    pub(super) fn line(&self, line: &str, n: usize) -> Result<Vec<Reply>, String> {
        let ctl = lock(&self.conn)
            .clone()
            .filter(|c| c.alive())
            .ok_or_else(|| "drover's tmux control client is not connected".to_string())?;
        ctl.line(line, n)
    }

    /// Create a window for `spec` and return its pane, its env verified.
    pub fn spawn(
        &self,
        spec: PaneSpec,
        events: Arc<dyn PaneEvents>,
    ) -> Result<Arc<TmuxPane>, PaneError> {
        spec.validate()?;
        let me = self
            .arc()
            .ok_or_else(|| tmux_err("the supervisor is stopping"))?;
        // Nanoseconds: the marker it is part of must be no other pane's.
        let created_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let marker = crate::pane::reap::marker(&spec.name, 1, &created_at);
        let mut w = self.new_window(&spec, &marker)?;
        let pane = TmuxPane::new(
            me,
            Start {
                spec,
                pane_id: w.pane_id.clone(),
                window_id: w.window_id.clone(),
                pid: w.pid,
                generation: 1,
                env_verified: w.env_verified,
                created_at,
            },
            events,
        );
        self.register(&pane, &w.pane_id, w.pipe.take());
        pane.watch_exit(1, w.pid);
        state::save_pane(&self.state_dir, &pane);
        Ok(pane)
    }

    /// Route pane id `pane_id`'s output to `pane`, through `pipe` from now on.
    fn register(&self, pane: &Arc<TmuxPane>, pane_id: &str, pipe: Option<pipe::Pipe>) {
        let mut panes = lock(&self.panes);
        let generation = pipe.as_ref().map(|p| p.generation);
        pane.set_pipe(pipe);
        panes.insert(pane_id.to_string(), Arc::downgrade(pane));
        let early = lock(&self.unclaimed).remove(pane_id);
        // Fed before the table is released: later output cannot overtake it.
        if let (Some((g, bytes)), Some(generation)) = (early, generation)
            && g == generation
        {
            pane.feed(&bytes, true, generation);
        }
        drop(panes);
    }

    /// Forget a pane (kill): close its window when `close`, drop its state.
    pub(super) fn forget(&self, pane: &TmuxPane, pane_id: &str, close: bool) {
        self.unregister(pane_id, pane);
        if close {
            let _ = self.command(format!("kill-window -t {pane_id}"));
        }
        state::remove_pane(&self.state_dir, pane.name_str());
    }

    /// A window running `spec`, its processes marked with `marker` (the
    /// value of [`crate::pane::PANE_MARKER_ENV`]).
    fn new_window(&self, spec: &PaneSpec, marker: &str) -> Result<NewWindow, PaneError> {
        let ctl = self.conn()?;
        let mut words: Vec<String> = Vec::new();
        if let Some(cwd) = &spec.cwd {
            words.push("-c".into());
            words.push(quote(&cwd.to_string_lossy()));
        }
        for (k, v) in &spec.env {
            words.push("-e".into());
            words.push(quote(&format!("{k}={v}")));
        }
        // Last, so it is drover's: inherited by every process of the pane,
        // also those that leave its session and are re-parented away, so
        // that kill finds and ends them (docs/tmux.md).
        words.push("-e".into());
        words.push(quote(&format!("{}={marker}", crate::pane::PANE_MARKER_ENV)));
        // The pane's first process waits at a gate (a FIFO drover opens once
        // it has the window's ids and has pinned its size), so the command's
        // output and exit always belong to a registered pane. Then
        // `env -u` takes out TMUX and TMUX_PANE, which tmux sets on every
        // pane (names only, no values in argv), and execs the command.
        let gate = gate::Gate::new(&self.state_dir, &spec.name).map_err(tmux_err)?;
        let env_bin = crate::pane::find_executable("env", "/usr/bin:/bin", None)
            .ok_or_else(|| tmux_err("env(1) not found in /usr/bin or /bin"))?;
        let mut argv = vec![
            gate::SHELL.to_string(),
            "-c".into(),
            gate::SCRIPT.into(),
            gate.path().to_string_lossy().into_owned(),
            env_bin.to_string_lossy().into_owned(),
            "-u".into(),
            "TMUX".into(),
            "-u".into(),
            "TMUX_PANE".into(),
            "--".into(),
        ];
        argv.extend(spec.argv.iter().cloned());
        let argv: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        let _one = lock(&self.create);
        let lines = vec![
            format!(
                "set-option -t {SESSION} default-size {}x{}",
                spec.cols, spec.rows
            ),
            format!(
                "new-window -d -t {SESSION}: -n {} {} -P -F {} {}",
                quote(&spec.name),
                words.join(" "),
                quote("#{window_id} #{pane_id} #{pane_pid}"),
                argv.join(" ")
            ),
        ];
        let mut replies = ctl.commands(&lines).map_err(tmux_err)?;
        let created = replies.pop().unwrap_or_else(|| Err("no reply".into()));
        for r in replies {
            r.map_err(|e| tmux_err(format!("tmux refused: {e}")))?;
        }
        let body = created.map_err(|e| PaneError::Spawn {
            command: spec.argv.first().cloned().unwrap_or_default(),
            message: format!("tmux refused the window: {e}"),
        })?;
        let first = body.first().cloned().unwrap_or_default();
        let mut f = first.split(' ');
        let (Some(window_id), Some(pane_id), Some(pid)) = (
            f.next().filter(|s| s.starts_with('@')),
            f.next().filter(|s| s.starts_with('%')),
            f.next().and_then(|s| s.parse::<u32>().ok()),
        ) else {
            return Err(tmux_err(format!(
                "tmux answered {first:?} for a new window"
            )));
        };
        let (window_id, pane_id) = (window_id.to_string(), pane_id.to_string());
        // Pin the size (the window was made at `default-size`): no client
        // attaching later may resize it. (No `resize-window` here: on tmux
        // 3.3a one right after creation loses the pane's first output.)
        let _ = ctl.command(format!("set-option -w -t {window_id} window-size manual"));
        drop(_one);
        // The pane's pipe before its command starts: all its output comes
        // through it.
        let piped = self.new_pipe(&spec.name, &pane_id).and_then(|p| {
            match ctl.command(self.pipe_pane_line(&pane_id, &p))? {
                Ok(_) if p.wait_open() => Ok(p),
                Ok(_) => Err("the pane's output pipe never opened".to_string()),
                Err(e) => Err(format!("tmux refused the output pipe: {e}")),
            }
        });
        let pipe = match piped {
            Ok(p) => p,
            Err(e) => {
                crate::pane::native::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = ctl.command(format!("kill-window -t {pane_id}"));
                return Err(tmux_err(e));
            }
        };
        // While it waits at the gate it has started nothing: in its
        // generation's cgroup, so is everything it ever starts.
        crate::pane::cgroup::join(marker, pid);
        if let Err(e) = gate.open(pid) {
            crate::pane::native::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = ctl.command(format!("kill-window -t {pane_id}"));
            return Err(tmux_err(e));
        }
        let server_cmdline = self
            .server_pid()
            .and_then(crate::pane::procfs::cmdline)
            .unwrap_or_default();
        wait_for_exec(pid, &server_cmdline);
        let env_verified = match crate::pane::spawn::verify_env_settled(pid, &spec.env) {
            Ok(v) => v,
            Err(name) => {
                crate::pane::native::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = ctl.command(format!("kill-window -t {pane_id}"));
                return Err(PaneError::EnvMismatch { name });
            }
        };
        Ok(NewWindow {
            window_id,
            pane_id,
            pid,
            env_verified,
            pipe: Some(pipe),
        })
    }

    /// The supervisor is stopping: every pane was killed; stop the control
    /// client and the server drover started.
    pub fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        // A pane killed for the shutdown (its exit recorded) is not live,
        // though the supervisor may still hold it.
        let live = lock(&self.panes)
            .values()
            .filter_map(Weak::upgrade)
            .any(|p| crate::pane::backend::PaneBackend::info(&*p).exit.is_none());
        let ctl = lock(&self.conn).take();
        if let Some(c) = ctl {
            c.stop();
        }
        if !live
            && let Some(pid) = self.server_pid()
            && state::check_owned(&self.state_dir, &self.socket, pid).is_ok()
        {
            let _ = self.tmux().arg("kill-server").output();
            state::forget_server(&self.state_dir);
        }
        if !live {
            // tmux leaves its socket file behind when it is killed, or exits
            // with its last session: drover's own name, and only when no
            // server answers on it any more.
            remove_dead_socket(&socket_file(&self.socket));
        }
    }

    /// Attach to the server the panes to re-adopt run on. A busy server
    /// (a pane flooding, a loaded machine) can be slow to attach a control
    /// client; giving up would leave its panes lost and their agents ended,
    /// so a failed attach is tried again, bounded, while the server runs.
    fn connect_for_adoption(&self) -> Result<(), PaneError> {
        // A server drover did not start is refused at once, never waited on.
        if let Some(pid) = self.server_pid() {
            state::check_owned(&self.state_dir, &self.socket, pid).map_err(tmux_err)?;
        }
        let deadline = Instant::now() + ADOPT_ATTACH_BOUND;
        let mut delay =
            crate::backoff::Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        loop {
            match self.connect(false) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() < deadline && self.server_pid().is_some() => {
                    tracing::warn!(error = %e, "attaching to drover's tmux server to re-adopt panes failed; trying again");
                }
                Err(e) => return Err(e),
            }
            std::thread::sleep(delay.next_delay());
        }
    }

    /// Re-adopt the panes a previous supervisor left on this state dir's
    /// server: those whose `%N` still runs the recorded process. The
    /// others' re-adoption state is removed; their pane records stay, so
    /// the supervisor lists them as lost and ends what still runs.
    pub fn adopt(&self, events: &dyn Fn(&str) -> Arc<dyn PaneEvents>) -> Vec<Arc<TmuxPane>> {
        let saved = state::load_panes(&self.state_dir);
        if saved.is_empty() {
            return Vec::new();
        }
        let Some(me) = self.arc() else {
            return Vec::new();
        };
        if self.server_pid().is_none() {
            for s in &saved {
                tracing::warn!(pane = %s.process.name, "tmux pane lost: drover's tmux server is gone");
                state::remove_saved(&self.state_dir, &s.process.name);
            }
            return Vec::new();
        }
        if let Err(e) = self.connect_for_adoption() {
            tracing::warn!(error = %e, "cannot re-adopt tmux panes");
            return Vec::new();
        }
        let mut out = Vec::new();
        for s in saved {
            let p = &s.process;
            if !p.still_runs() {
                tracing::warn!(pane = %p.name, pid = p.pid, "tmux pane's process is gone; not re-adopted");
                let _ = self.command(format!("kill-window -t {}", s.pane_id));
                state::remove_saved(&self.state_dir, &p.name);
                continue;
            }
            let pane = TmuxPane::new(
                me.clone(),
                Start {
                    spec: p.spec(),
                    pane_id: s.pane_id.clone(),
                    window_id: s.window_id.clone(),
                    pid: p.pid,
                    generation: p.generation,
                    env_verified: true,
                    created_at: p.created_at.clone(),
                },
                events(&p.name),
            );
            self.register(&pane, &s.pane_id, None);
            if let Err(e) = self.resync(&pane) {
                tracing::warn!(pane = %p.name, error = %e, "re-adopted tmux pane could not be read");
            }
            pane.watch_exit(p.generation, p.pid);
            tracing::info!(pane = %p.name, pane_id = %s.pane_id, generation = p.generation, "tmux pane re-adopted");
            out.push(pane);
        }
        out
    }
}

/// A pane's exit as tmux reports it: (code, signal name).
pub(super) type Dead = Option<(Option<i32>, Option<String>)>;

struct NewWindow {
    window_id: String,
    pane_id: String,
    pid: u32,
    env_verified: bool,
    /// The pane's output pipe, started before its command.
    pipe: Option<pipe::Pipe>,
}

/// Start the pane's spec again in a new window (a new `%N`): the old
/// window is closed first. (`respawn-pane` on a pane that had set its title
/// crashed tmux 3.3a's server now and then; a fresh window never did.)
fn respawn(pane: &Arc<TmuxPane>) -> Result<u64, PaneError> {
    let (spec, pane_id, gone, marker) = {
        let g = lock(&pane.inner);
        let next = g.generation + 1;
        let marker = crate::pane::reap::marker(&g.spec.name, next, &g.created_at);
        (g.spec.clone(), g.pane_id.clone(), g.gone, marker)
    };
    let host = pane.host_ref();
    // Unregistered first: the old window's close is not this pane's news,
    // nor is what its pipe still brings.
    host.unregister(&pane_id, pane);
    pane.set_pipe(None);
    if !gone {
        let _ = host.command(format!("kill-window -t {pane_id}"));
    }
    let mut w = host.new_window(&spec, &marker)?;
    let new_id = w.pane_id.clone();
    let new_pipe = w.pipe.take();
    // The new screen first: output the released command already wrote is
    // held for its id and fed when it is registered.
    let generation = pane::reset_generation(pane, w.pane_id, w.window_id, w.pid, w.env_verified);
    host.register(pane, &new_id, new_pipe);
    state::save_pane(&host.state_dir, pane);
    Ok(generation)
}

/// The terminal type tmux announces to its panes.
fn default_terminal() -> &'static str {
    let has = |name: &str| {
        let first = &name[..1];
        ["/usr/share/terminfo", "/lib/terminfo", "/etc/terminfo"]
            .iter()
            .any(|d| Path::new(d).join(first).join(name).exists())
    };
    if has("tmux-256color") {
        "tmux-256color"
    } else {
        "screen-256color"
    }
}

/// Wait until the pane's first process has exec'd: before that /proc shows
/// the forked tmux server. Anything but the server's cmdline (or empty)
/// means exec'd; `env -u …` then execs the command itself.
fn wait_for_exec(pid: u32, server: &[u8]) {
    let deadline = Instant::now() + EXEC_TIMEOUT;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_micros(200), Duration::from_millis(5));
    loop {
        match crate::pane::procfs::cmdline(pid) {
            Some(c)
                if !c.is_empty() && c != server && !is_env_wrapper(&c) && !gate::is_gate(&c) =>
            {
                return;
            }
            None => return,
            Some(_) if Instant::now() >= deadline || crate::pane::spawn::is_zombie(pid) => return,
            Some(_) => {
                std::thread::sleep(delay.next_delay());
            }
        }
    }
}

/// Whether a cmdline is still drover's `env -u TMUX …` wrapper.
fn is_env_wrapper(cmdline: &[u8]) -> bool {
    let mut args = cmdline.split(|b| *b == 0);
    let first = args.next().unwrap_or_default();
    first.ends_with(b"/env") && args.next() == Some(b"-u") && args.next() == Some(b"TMUX")
}
