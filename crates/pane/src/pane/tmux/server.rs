//! The tmux server drover owns and its control client: the command line
//! on drover's socket, the version check, starting the server, connecting
//! (and re-adopting what a new server holds), and reconnecting after the
//! client is lost.

use super::control::Control;
use super::pane::lock;
use super::{
    ATTACH_TIMEOUT, HostSink, MIN_VERSION, RECONNECT_FIRST, RECONNECT_MAX, SESSION, TmuxHost,
    TmuxPane, default_terminal, parse_version, pipe, state, tmux_err,
};
use crate::pane::PaneError;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

impl TmuxHost {
    /// A tmux command on drover's socket (never the user's default server).
    pub(super) fn tmux(&self) -> Command {
        let mut c = Command::new(&self.binary);
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c.env_remove("TMUX").env_remove("TMUX_PANE");
        // The tmux server's environment is every tmux pane's.
        for k in crate::pane::spawn::SCRUBBED_ENV {
            c.env_remove(k);
        }
        // Nor a git hook's repository (`GIT_DIR`, …) the supervisor was started in.
        crate::git::scrub_repository_env(&mut c);
        c.stdin(std::process::Stdio::null());
        c
    }

    /// Check the tmux binary exists and is new enough.
    pub(super) fn check_version(&self) -> Result<(), PaneError> {
        let out = Command::new(&self.binary)
            .arg("-V")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                tmux_err(format!(
                    "cannot run {} ({e}): install tmux ≥ {}.{} or set DROVER_TMUX",
                    self.binary.display(),
                    MIN_VERSION.0,
                    MIN_VERSION.1
                ))
            })?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        match parse_version(&text) {
            Some(v) if v >= MIN_VERSION => Ok(()),
            Some(_) => Err(tmux_err(format!(
                "{text} is too old: drover needs tmux ≥ {}.{} (for new-window -e)",
                MIN_VERSION.0, MIN_VERSION.1
            ))),
            None => Err(tmux_err(format!(
                "{} -V printed {text:?}, not a tmux version: install tmux ≥ {}.{}",
                self.binary.display(),
                MIN_VERSION.0,
                MIN_VERSION.1
            ))),
        }
    }

    /// The pid of the server on our socket, if one answers.
    pub(super) fn server_pid(&self) -> Option<u32> {
        let out = self
            .tmux()
            .args(["display-message", "-p", "#{pid}"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// The live control client, connecting (and starting the server) first
    /// when there is none.
    pub(super) fn conn(&self) -> Result<Arc<Control>, PaneError> {
        if let Some(c) = lock(&self.conn).as_ref()
            && c.alive()
        {
            return Ok(c.clone());
        }
        self.connect(true)
    }

    /// Connect to our server; start it when `start` and none runs. A server
    /// on our socket that drover did not start is refused, never touched.
    pub(super) fn connect(&self, start: bool) -> Result<Arc<Control>, PaneError> {
        let mut slot = lock(&self.conn);
        if let Some(c) = slot.as_ref()
            && c.alive()
        {
            return Ok(c.clone());
        }
        self.check_version()?;
        let pid = match self.server_pid() {
            Some(pid) => {
                state::check_owned(&self.state_dir, &self.socket, pid).map_err(tmux_err)?;
                pid
            }
            None if start => self.start_server()?,
            None => return Err(tmux_err("drover's tmux server is gone")),
        };
        let Some(me) = self.arc() else {
            return Err(tmux_err("the supervisor is stopping"));
        };
        let server = crate::pane::record::start_time(pid).map(|t| (pid, t));
        // Before any pane of this server can be registered: the panes of
        // one that is gone must not alias its ids.
        self.retire_panes_of_other_server(server);
        if !self.swept.swap(true, Ordering::AcqRel) {
            pipe::sweep(&self.state_dir);
        }
        let mut cmd = self.tmux();
        cmd.args(["-C", "attach-session", "-t", SESSION]);
        let ctl = Control::start(cmd, Arc::new(HostSink(Arc::downgrade(&me)))).map_err(tmux_err)?;
        if let Err(e) = quiet_output(&ctl) {
            ctl.stop();
            return Err(e);
        }
        let setup = [
            "set-option -g remain-on-exit on".to_string(),
            format!("set-option -g default-terminal {}", default_terminal()),
            format!(
                "set-option -g history-limit {}",
                crate::screen::SCROLLBACK_ROWS
            ),
        ];
        let replies = ctl.commands(&setup).map_err(tmux_err)?;
        for r in replies {
            r.map_err(|e| tmux_err(format!("tmux refused drover's setup: {e}")))?;
        }
        // No "Pane is dead" line drawn into a dead pane's grid (it scrolls
        // the grid, and the grid is where a lost last output is read back
        // from). tmux 3.2 has no such option and draws it: then it is
        // stripped where the grid is read.
        let _ = ctl.command("set-option -g remain-on-exit-format ''".to_string());
        tracing::info!(socket = %self.socket, server = pid, client = ctl.pid(), "tmux control client attached");
        *lock(&self.server) = server;
        *slot = Some(ctl.clone());
        Ok(ctl)
    }

    /// A tmux server numbers its windows and panes from the start (`@1`,
    /// `%1`, …), so a new server on drover's socket (the old one was killed)
    /// hands out the very ids the panes of the dead one still hold. Those
    /// panes are gone for good: closed and unregistered here, before the new
    /// server's panes are, so that no `%N` of theirs is ever used again — a
    /// re-pipe, a `kill-window` or the output routing would hit the new
    /// server's pane of the same id. Their re-adoption state goes too (it
    /// names ids of the dead server); their pane records stay.
    pub(super) fn retire_panes_of_other_server(&self, server: Option<(u32, u64)>) {
        let previous = *lock(&self.server);
        if previous.is_none() || previous == server {
            return;
        }
        let retired: Vec<Arc<TmuxPane>> = lock(&self.panes)
            .drain()
            .filter_map(|(_, p)| p.upgrade())
            .collect();
        lock(&self.unclaimed).clear();
        for p in retired {
            tracing::warn!(pane = %p.name_str(), "tmux pane lost: drover's tmux server it ran on is gone");
            p.set_pipe(None);
            p.closed("drover's tmux server it ran on was killed; respawn or kill it");
            state::remove_saved(&self.state_dir, p.name_str());
        }
    }

    pub(super) fn start_server(&self) -> Result<u32, PaneError> {
        // The server is started with no pane env: its argv is public for
        // its whole life. The keeper window holds the session open.
        let mut cmd = self.tmux();
        // Its panes inherit its signal dispositions (tmux resets only the
        // ones it sets itself), so it starts with every signal at its
        // default, as from a user's shell. A `pre_exec` also makes the
        // child a fork and exec, not a `posix_spawn`, whose child glibc
        // gives its internal signals (32 and 33) SIG_IGN, kept across exec:
        // the server had them ignored, and every pane's command with it.
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                crate::pane::spawn::default_signals();
                Ok(())
            });
        }
        let out = cmd
            .args([
                "new-session",
                "-d",
                "-s",
                SESSION,
                "-n",
                "keeper",
                "-x",
                "80",
                "-y",
                "24",
                "exec sleep 2147483647",
            ])
            .output()
            .map_err(|e| tmux_err(format!("cannot start tmux: {e}")))?;
        if !out.status.success() {
            return Err(tmux_err(format!(
                "tmux would not start a server on -L {}: {}",
                self.socket,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let pid = self
            .server_pid()
            .ok_or_else(|| tmux_err("the tmux server started but does not answer"))?;
        state::record_server(&self.state_dir, &self.socket, pid).map_err(tmux_err)?;
        tracing::info!(socket = %self.socket, pid, "tmux server started");
        Ok(pid)
    }

    pub(super) fn on_disconnect(&self, reason: &str) {
        let panes: Vec<Arc<TmuxPane>> = lock(&self.panes)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        if self.stopping.load(Ordering::Acquire) {
            return;
        }
        tracing::warn!(socket = %self.socket, reason, "tmux control client lost");
        let msg = format!("tmux unreachable ({reason}); drover reconnects when it is back");
        for p in &panes {
            p.set_transport(Some(msg.clone()));
        }
        if !panes.is_empty() && !self.reconnecting.swap(true, Ordering::AcqRel) {
            let me = self.me.clone();
            let _ = std::thread::Builder::new()
                .name("tmux-reconnect".into())
                .spawn(move || reconnect_loop(me));
        }
    }
}

pub(super) fn reconnect_loop(me: Weak<TmuxHost>) {
    let mut delay = crate::backoff::Backoff::new(RECONNECT_FIRST, RECONNECT_MAX);
    loop {
        std::thread::sleep(delay.next_delay());
        let Some(h) = me.upgrade() else { return };
        if h.stopping.load(Ordering::Acquire) {
            h.reconnecting.store(false, Ordering::Release);
            return;
        }
        let panes: Vec<Arc<TmuxPane>> = lock(&h.panes).values().filter_map(Weak::upgrade).collect();
        if panes.is_empty() {
            h.reconnecting.store(false, Ordering::Release);
            return;
        }
        match h.connect(false) {
            Ok(_) => {
                // Looked up again: a connect to a new server retired the
                // panes of the old one, whose ids are now the new one's.
                let panes: Vec<Arc<TmuxPane>> =
                    lock(&h.panes).values().filter_map(Weak::upgrade).collect();
                for p in &panes {
                    if let Err(e) = h.resync(p) {
                        tracing::warn!(error = %e, "tmux resync failed");
                    }
                }
                tracing::info!(socket = %h.socket, "tmux control client reconnected");
                h.reconnecting.store(false, Ordering::Release);
                // A disconnect during the resync starts a new loop.
                if !lock(&h.conn).as_ref().is_some_and(|c| c.alive()) {
                    h.on_disconnect("lost again while reconnecting");
                }
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "tmux reconnect failed");
                if h.server_pid().is_none() {
                    let msg = "drover's tmux server is gone (killed?); the pane cannot come back: respawn or kill it";
                    for p in &panes {
                        p.set_transport(Some(msg.into()));
                    }
                }
            }
        }
    }
}

/// Set the control client to `no-output`: formatting `%output` is most of
/// what a control client costs tmux; output comes through each pane's pipe.
/// Until tmux has attached the client to the session (it reads the client's
/// stdin before that) the command finds "no current client": asked again.
pub(super) fn quiet_output(ctl: &Control) -> Result<(), PaneError> {
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(1), Duration::from_millis(20));
    loop {
        match ctl.command("refresh-client -f no-output".to_string()) {
            Ok(Ok(_)) => {
                ctl.set_quiet();
                return Ok(());
            }
            Ok(Err(e)) if e.contains("no current client") && Instant::now() < deadline => {}
            Ok(Err(e)) => {
                return Err(tmux_err(format!(
                    "tmux refused `refresh-client -f no-output` ({e}): drover needs tmux ≥ {}.{}",
                    MIN_VERSION.0, MIN_VERSION.1
                )));
            }
            Err(e) => return Err(tmux_err(e)),
        }
        std::thread::sleep(delay.next_delay());
    }
}
