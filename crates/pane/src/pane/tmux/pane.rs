//! A pane on drover's tmux server: its own screen model fed from the pane's
//! output pipe (`pipe.rs`), input through `send-keys -H`, exit from the
//! leader's pidfd and `#{pane_dead_status}`.

use super::codec::{hex_keys, quote};
use super::pipe::Pipe;
use super::{Dead, TmuxHost};
use crate::pane::backend::{Backend, PaneBackend};
use crate::pane::core::{PaneCore, core_backend_methods, core_fields};
use crate::pane::{ExitInfo, KILL_GRACE, PaneError, PaneEvents, PaneSpec, ScreenMeta, key_bytes};
use crate::screen::Screen;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long kill waits for a SIGKILLed group to be gone.
const REAP_TIMEOUT: Duration = Duration::from_secs(3);
/// After the leader exits, how long tmux may take to mark the pane dead.
const DEAD_WAIT: Duration = Duration::from_secs(3);
/// Writes queued for a pane that is not reading its input before senders
/// are refused (`NotReading`): tmux takes the bytes, so this bounds only
/// what waits for the control client.
const INPUT_QUEUE: usize = 64;
/// Input bytes per `send-keys -H` command line.
const KEYS_PER_COMMAND: usize = 2048;
/// While output keeps coming, wake watchers at most this often (as native).
const NOTIFY_EVERY: Duration = Duration::from_millis(1);
/// How long a resize waits for tmux to hand the new size to the app.
const RESIZE_SETTLE: Duration = Duration::from_secs(1);
/// Output held for a pane whose screen is being re-seeded, at most.
const SEED_BUFFER: usize = 8 * 1024 * 1024;
/// Once tmux reports the pane dead, how long its last output may take to
/// come through the pipe before drover's screen is repainted from tmux's grid.
const TAIL_DRAIN: Duration = Duration::from_secs(2);
/// The pipe counts as drained once nothing came for this long and the
/// screen matches tmux's grid.
const TAIL_QUIET: Duration = Duration::from_millis(10);
/// Re-pipes after an outside `pipe-pane` replaced drover's pipe: at most
/// this many …
const REPIPE_MAX: usize = 5;
/// … within this long; then drover stops taking the pipe back.
const REPIPE_WINDOW: Duration = Duration::from_secs(60);

pub(super) use crate::pane::core::lock;

pub(super) struct Inner {
    core: PaneCore,
    pub(super) pane_id: String,
    pub(super) window_id: String,
    pub(super) created_at: String,
    /// The leader's start time (with its pid: never a recycled pid).
    pid_start: u64,
    last_notify: Option<Instant>,
    /// Why the pane cannot be reached now.
    pub(super) transport: Option<String>,
    /// The window was closed in tmux: the pane will not come back.
    pub(super) gone: bool,
    /// While the screen is being re-seeded from `capture-pane`: output of
    /// the new pipe (all of it after the capture) held meanwhile.
    seeding: Option<Vec<Vec<u8>>>,
    /// The pane's output pipe now: only its bytes reach the screen.
    pipe: Option<Pipe>,
    /// When drover last took the pipe back from an outside `pipe-pane`.
    repipes: std::collections::VecDeque<Instant>,
    /// The bracketed-paste mode last noted in the state dir.
    paste_noted: bool,
    /// Input for the pane's writer thread: (pane id, bytes). Callers never
    /// wait on tmux; a pane whose queue is full is not reading.
    input: std::sync::mpsc::SyncSender<(String, Vec<u8>)>,
}
core_fields!(Inner);

/// A pane on drover's tmux server.
pub struct TmuxPane {
    name: String,
    host: Arc<TmuxHost>,
    pub(super) inner: Mutex<Inner>,
    /// One re-seed (re-pipe and capture) at a time.
    pub(super) reseed_lock: Mutex<()>,
    cv: Condvar,
    events: Arc<dyn PaneEvents>,
}

impl std::fmt::Debug for TmuxPane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TmuxPane")
            .field("name", &self.name)
            .finish()
    }
}

/// Where a new or adopted pane starts from.
pub(super) struct Start {
    pub(super) spec: PaneSpec,
    pub(super) pane_id: String,
    pub(super) window_id: String,
    pub(super) pid: u32,
    pub(super) generation: u64,
    pub(super) env_verified: bool,
    pub(super) created_at: String,
}

/// What tmux says of a pane's process: whether the pane is dead (its
/// terminal closed, read to its end) and the exit once tmux has reaped the
/// process (`None` before).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PaneStatus {
    pub(super) dead: bool,
    pub(super) exit: Dead,
}

/// Parse `#{pane_dead} #{pane_dead_status} #{pane_dead_signal}`. tmux can
/// mark a pane dead (its terminal closed) before it has reaped the process,
/// and can reap it while another process still holds the terminal: the two
/// are reported apart.
pub(super) fn parse_status(line: &str) -> PaneStatus {
    let mut f = line.split(' ');
    let dead = f.next() == Some("1");
    let code: Option<i32> = f.next().and_then(|s| s.parse().ok());
    let signal = f
        .next()
        .and_then(|s| s.parse::<i32>().ok())
        .filter(|s| *s > 0)
        .map(crate::pane::core::signal_name);
    let exit = match (code, signal) {
        (_, Some(sig)) => Some((None, Some(sig))),
        (Some(c), None) => Some((Some(c), None)),
        (None, None) => None,
    };
    PaneStatus { dead, exit }
}

/// The exit of a dead pane (see [`parse_status`]); `None` while the pane is
/// alive or tmux has not reaped its process yet.
pub(super) fn parse_dead(line: &str) -> Dead {
    let s = parse_status(line);
    if s.dead { s.exit } else { None }
}

impl TmuxPane {
    pub(super) fn new(host: Arc<TmuxHost>, s: Start, events: Arc<dyn PaneEvents>) -> Arc<Self> {
        let input = start_writer(&s.spec.name, host.clone());
        Arc::new(TmuxPane {
            name: s.spec.name.clone(),
            host,
            inner: Mutex::new(Inner {
                core: PaneCore::new(s.spec, s.generation, s.pid, s.env_verified),
                pane_id: s.pane_id,
                window_id: s.window_id,
                created_at: s.created_at,
                pid_start: crate::pane::record::start_time(s.pid).unwrap_or(0),
                last_notify: None,
                transport: None,
                gone: false,
                seeding: None,
                pipe: None,
                repipes: std::collections::VecDeque::new(),
                paste_noted: false,
                input,
            }),
            reseed_lock: Mutex::new(()),
            cv: Condvar::new(),
            events,
        })
    }

    pub(super) fn host_ref(&self) -> &Arc<TmuxHost> {
        &self.host
    }

    /// The tmux pane id (`%N`).
    pub(super) fn pane_id(&self) -> String {
        lock(&self.inner).pane_id.clone()
    }

    /// Watch the leader of `generation` and record its exit.
    pub(super) fn watch_exit(self: &Arc<Self>, generation: u64, pid: u32) {
        let weak = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name(format!("tmux-wait-{}", self.name))
            .spawn(move || exit_watcher(weak, generation, pid));
    }

    /// Output of pipe `generation` (its reader thread): dropped unless that
    /// is the pane's pipe now.
    pub(super) fn feed(&self, bytes: &[u8], burst_end: bool, generation: u64) {
        let mut g = lock(&self.inner);
        if g.pipe.as_ref().map(|p| p.generation) != Some(generation) {
            return;
        }
        if let Some(buf) = &mut g.seeding {
            if buf.iter().map(Vec::len).sum::<usize>() < SEED_BUFFER {
                buf.push(bytes.to_vec());
            }
            return;
        }
        g.screen.process(bytes);
        // tmux is the app's terminal and answers its queries; drop ours.
        if g.screen.hooks().has_queries() {
            let _ = g.screen.take_replies();
        }
        self.note_paste(&mut g);
        g.output_seen();
        let due = g.last_notify.is_none_or(|t| t.elapsed() >= NOTIFY_EVERY);
        if due || burst_end {
            g.last_notify = Some(Instant::now());
            drop(g);
            self.events.output();
        }
    }

    /// The generation of the pane's current pipe.
    pub(super) fn pipe_generation(&self) -> Option<u64> {
        lock(&self.inner).pipe.as_ref().map(|p| p.generation)
    }

    /// What to wait on for the current pipe's FIFO to be opened by tmux's side.
    pub(super) fn pipe_opened(&self) -> Option<super::pipe::Opened> {
        lock(&self.inner).pipe.as_ref().map(Pipe::opened)
    }

    /// Make `pipe` the pane's pipe (the previous one's reader stops).
    pub(super) fn set_pipe(&self, pipe: Option<Pipe>) {
        lock(&self.inner).pipe = pipe;
    }

    /// Whether drover may take its pipe back once more (bounded: an outside
    /// `pipe-pane` that keeps replacing it is not fought in a loop).
    pub(super) fn note_repipe(&self) -> bool {
        let mut g = lock(&self.inner);
        while g
            .repipes
            .front()
            .is_some_and(|t| t.elapsed() >= REPIPE_WINDOW)
        {
            g.repipes.pop_front();
        }
        if g.repipes.len() >= REPIPE_MAX {
            return false;
        }
        g.repipes.push_back(Instant::now());
        true
    }

    /// Start holding the output of `pipe`, the pane's pipe from now on,
    /// until [`Self::seed`] (re-seeding after a gap); any older pipe's
    /// output is dropped from now on (the capture has it).
    pub(super) fn begin_seed(&self, pipe: Option<Pipe>) {
        let mut g = lock(&self.inner);
        g.pipe = pipe;
        g.seeding = Some(Vec::new());
    }

    /// Replace the screen with tmux's own rendering of the pane (`frame`,
    /// drawn from `capture-pane -e -p` and the app's terminal state), then
    /// replay the new pipe's output, all of which came after the capture.
    pub(super) fn seed(&self, frame: &[u8]) {
        let mut g = lock(&self.inner);
        let (cols, rows) = g.screen.size();
        let mut screen = Screen::new(cols, rows);
        screen.process(frame);
        for chunk in g.seeding.take().unwrap_or_default() {
            screen.process(&chunk);
        }
        let _ = screen.take_replies();
        g.screen = screen;
        self.note_paste(&mut g);
        g.output_seen();
        drop(g);
        self.events.output();
    }

    /// Abandon a re-seed (keep the screen, apply what was held).
    pub(super) fn end_seed(&self) {
        let mut g = lock(&self.inner);
        for chunk in g.seeding.take().unwrap_or_default() {
            g.screen.process(&chunk);
        }
        self.note_paste(&mut g);
    }

    /// Note the app's bracketed-paste mode in the state dir when it changed
    /// (a re-seeded screen cannot learn it from tmux).
    fn note_paste(&self, g: &mut Inner) {
        let paste = g.screen.bracketed_paste();
        if paste != g.paste_noted {
            g.paste_noted = paste;
            super::state::save_paste_mode(&self.host.state_dir, &self.name, paste);
        }
    }

    /// The transport came back or went away.
    pub(super) fn set_transport(&self, err: Option<String>) {
        let mut g = lock(&self.inner);
        if g.gone {
            return;
        }
        if g.transport == err {
            return;
        }
        g.transport = err;
        drop(g);
        self.events.transport_changed();
    }

    /// The window was closed in tmux (an operator, `kill-pane`): the pane is
    /// gone for good; its process, if any, went with it.
    pub(super) fn closed(&self, why: &str) {
        let mut g = lock(&self.inner);
        g.gone = true;
        g.transport = Some(format!("pane {} is gone: {why}", self.name));
        let exit = g.exit.clone().unwrap_or_else(|| ExitInfo::now(None, None));
        g.set_exit(exit);
        drop(g);
        self.cv.notify_all();
        self.events.exited();
        self.events.transport_changed();
    }

    /// The pane is dead in tmux, so tmux's grid holds everything the app
    /// wrote and tmux has handed all of it to the pipe (it keeps a pane
    /// alive until its pipe's buffer is written). Wait until drover's screen
    /// matches tmux's grid (`capture-pane -p`) with the pipe quiet, so the
    /// last output that is still in the pipe or its `cat` reaches the
    /// screen; when it never does (the pipe broke, or a bound of
    /// [`TAIL_DRAIN`]), repaint the screen from the grid (`capture-pane -e
    /// -p`, the cursor) and stop taking the pipe's output.
    fn recover_tail(&self, generation: u64) {
        let deadline = Instant::now() + TAIL_DRAIN;
        let mut delay =
            crate::backoff::Backoff::new(Duration::from_millis(1), Duration::from_millis(20));
        loop {
            let Some((same, styled, cursor)) = self.compare_tail(generation) else {
                return;
            };
            let (quiet, pipe_open) = {
                let g = lock(&self.inner);
                let open = g.pipe.as_ref().is_some_and(|p| !p.ended());
                (g.last_output.elapsed() >= TAIL_QUIET, open)
            };
            if same && (quiet || !pipe_open) {
                return;
            }
            if !same && (!pipe_open || Instant::now() >= deadline) {
                self.repaint_tail(generation, &styled, &cursor);
                return;
            }
            std::thread::sleep(delay.next_delay());
        }
    }

    /// Whether drover's screen shows what tmux's grid does, with the grid's
    /// styled rows and cursor; `None` when tmux cannot tell or the pane moved on.
    fn compare_tail(&self, generation: u64) -> Option<(bool, Vec<String>, Vec<u16>)> {
        let pane_id = self.pane_id();
        let lines = [
            format!(
                "display-message -p -t {pane_id} {}",
                quote("#{pane_id} #{cursor_x} #{cursor_y}")
            ),
            format!("capture-pane -p -t {pane_id}"),
            format!("capture-pane -e -p -t {pane_id}"),
        ];
        let replies = self.host.commands(&lines).ok()?;
        let [Ok(info), Ok(plain), Ok(styled)] = replies.as_slice() else {
            return None;
        };
        let info = info.first().map(String::as_str).unwrap_or("");
        let mut f = info.split(' ');
        if f.next() != Some(pane_id.as_str()) {
            return None;
        }
        let cursor: Vec<u16> = f.filter_map(|s| s.parse().ok()).collect();
        let theirs: Vec<String> = plain
            .iter()
            .map(|l| crate::screen::sanitize_line(l.trim_end()))
            .collect();
        // An older tmux draws "Pane is dead" into the grid (scrolling it):
        // that grid is not the app's screen.
        if theirs.iter().any(|l| l.contains("Pane is dead (")) {
            return None;
        }
        let g = lock(&self.inner);
        if g.generation != generation || g.exit.is_some() {
            return None;
        }
        let same = crate::screen::join_rows(&theirs) == g.screen.text();
        Some((same, styled.clone(), cursor))
    }

    /// Repaint the screen from tmux's grid (the pipe lost the last output).
    fn repaint_tail(&self, generation: u64, styled: &[String], cursor: &[u16]) {
        let mut g = lock(&self.inner);
        if g.generation != generation || g.exit.is_some() {
            return;
        }
        // Whatever the pipe still brings came before the grid: not drawn again.
        g.pipe = None;
        let (_, rows) = g.screen.size();
        let mut buf = b"\x1b[0m\x1b[H\x1b[2J".to_vec();
        for (i, l) in styled.iter().take(usize::from(rows)).enumerate() {
            buf.extend_from_slice(format!("\x1b[{};1H", i + 1).as_bytes());
            buf.extend_from_slice(l.as_bytes());
            buf.extend_from_slice(b"\x1b[0m");
        }
        if let [x, y] = cursor[..] {
            buf.extend_from_slice(format!("\x1b[{};{}H", y + 1, x + 1).as_bytes());
        }
        g.screen.redraw(&buf);
        let _ = g.screen.take_replies();
        g.screen_changed();
        drop(g);
        tracing::debug!(pane = %self.name, "the pipe lost the last output; screen repainted from tmux's grid");
        self.events.output();
    }

    pub(super) fn record_exit(&self, generation: u64, code: Option<i32>, signal: Option<String>) {
        let mut g = lock(&self.inner);
        if g.generation != generation || g.exit.is_some() {
            return;
        }
        g.set_exit(ExitInfo::now(code, signal));
        drop(g);
        self.cv.notify_all();
        self.events.exited();
    }

    fn transport_err(&self, message: String) -> PaneError {
        PaneError::Transport {
            pane: self.name.clone(),
            message,
        }
    }

    fn check_usable(&self, g: &Inner) -> Result<(), PaneError> {
        if let Some(t) = &g.transport {
            return Err(self.transport_err(t.clone()));
        }
        if g.exit.is_some() {
            return Err(PaneError::Exited(self.name.clone()));
        }
        Ok(())
    }

    /// Queue input bytes for the pane's writer thread, in order.
    fn send_bytes(&self, pane_id: &str, chunks: &[&[u8]]) -> Result<(), PaneError> {
        use std::sync::mpsc::TrySendError;
        let g = lock(&self.inner);
        for c in chunks {
            if c.is_empty() {
                continue;
            }
            g.input
                .try_send((pane_id.to_string(), c.to_vec()))
                .map_err(|e| match e {
                    TrySendError::Full(_) => PaneError::NotReading(self.name.clone()),
                    TrySendError::Disconnected(_) => PaneError::Exited(self.name.clone()),
                })?;
        }
        Ok(())
    }

    fn wait_exit(&self, generation: u64, timeout: Duration) -> bool {
        crate::pane::core::wait_exit(&self.inner, &self.cv, generation, timeout)
    }

    /// Stop the current process: TERM and HUP to its group and to every
    /// process carrying the generation's marker, a grace period, then KILL
    /// until none is left. The pane stays (dead) in tmux. A leader that
    /// already exited may have left marked processes (a daemon it started):
    /// they are ended too.
    fn stop_process(&self) {
        let (pid, pid_start, generation, exited, marker) = {
            let g = lock(&self.inner);
            let marker = crate::pane::reap::marker(&self.name, g.generation, &g.created_at);
            (g.pid, g.pid_start, g.generation, g.exit.is_some(), marker)
        };
        let leader = crate::pane::record::start_time(pid) == Some(pid_start);
        if exited || !leader || !pid_is_pane_leader(pid) {
            crate::pane::reap::end_marked(pid, pid_start, &marker, KILL_GRACE, REAP_TIMEOUT);
            return;
        }
        let seen =
            crate::pane::reap::stop_marked_tree(pid, &marker, KILL_GRACE, REAP_TIMEOUT, |d| {
                self.wait_exit(generation, d)
            });
        // No exit seen (the transport may be down): the leader is gone once
        // its pid is; record that much.
        if !seen && !crate::pane::procfs::exists(pid) {
            self.record_exit(generation, None, Some(crate::pane::core::signal_name(9)));
        }
    }
}

/// The pane's writer thread: turns queued input into `send-keys -H`
/// commands, in order; ends when the pane is dropped.
fn start_writer(name: &str, host: Arc<TmuxHost>) -> std::sync::mpsc::SyncSender<(String, Vec<u8>)> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<(String, Vec<u8>)>(INPUT_QUEUE);
    let pane = name.to_string();
    let _ = std::thread::Builder::new()
        .name(format!("tmux-write-{name}"))
        .spawn(move || {
            for (pane_id, bytes) in rx.iter() {
                let lines: Vec<String> = bytes
                    .chunks(KEYS_PER_COMMAND)
                    .map(|part| format!("send-keys -t {pane_id} -H {}", hex_keys(part)))
                    .collect();
                match host.commands(&lines) {
                    Ok(replies) => {
                        if let Some(Err(e)) = replies.into_iter().find(Result::is_err) {
                            tracing::warn!(pane = %pane, error = %e, "tmux refused input");
                        }
                    }
                    Err(e) => tracing::warn!(pane = %pane, error = %e, "input not delivered"),
                }
            }
        });
    tx
}

/// Whether `pid` still leads its own process group and session, as a tmux
/// pane's first process does: guards against signalling a reused pid.
fn pid_is_pane_leader(pid: u32) -> bool {
    pid > 1
        && crate::pane::procfs::stat(pid)
            .is_some_and(|s| s.pgrp == i64::from(pid) && s.session == i64::from(pid))
}

/// Block until the leader exits (its pidfd turns readable), then ask tmux
/// for the exit status.
fn exit_watcher(pane: Weak<TmuxPane>, generation: u64, pid: u32) {
    if let Ok(fd) = crate::pane::procfs::pidfd_open(pid) {
        loop {
            if crate::pane::procfs::wait_readable(&[&fd], Duration::from_secs(1)) {
                break;
            }
            let Some(p) = pane.upgrade() else { return };
            let g = lock(&p.inner);
            if g.generation != generation || g.exit.is_some() {
                return;
            }
        }
    }
    let exited = Instant::now();
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(2), Duration::from_millis(100));
    loop {
        let Some(p) = pane.upgrade() else { return };
        let (pane_id, quiet) = {
            let g = lock(&p.inner);
            if g.generation != generation || g.exit.is_some() {
                return;
            }
            (g.pane_id.clone(), g.last_output.elapsed())
        };
        let line = format!(
            "display-message -p -t {pane_id} {}",
            quote("#{pane_id} #{pane_dead} #{pane_dead_status} #{pane_dead_signal}")
        );
        let status = match p.host.command(line) {
            // A missing target prints nothing: check the id, not the status.
            Ok(Ok(body)) => body
                .first()
                .and_then(|l| l.strip_prefix(&format!("{pane_id} ")))
                .map(parse_status),
            _ => None,
        };
        match status.map(|s| (s.dead, s.exit)) {
            Some((true, Some((code, signal)))) => {
                // tmux read the terminal to its end: its grid is final.
                p.recover_tail(generation);
                p.record_exit(generation, code, signal);
                return;
            }
            // The leader is reaped but another process holds the terminal
            // (a background job): the code is known; wait for the output
            // to calm down first, as tmux may still be passing a flood.
            Some((false, Some((code, signal)))) if quiet >= DEAD_WAIT => {
                p.record_exit(generation, code, signal);
                return;
            }
            Some((_, Some(_))) => {}
            // The leader is gone (its pidfd fired) but tmux has not reaped
            // it: tmux may have lost its SIGCHLD; have it look again.
            Some((_, None)) | None => p.host.nudge_reaper(),
        }
        if exited.elapsed() >= DEAD_WAIT && quiet >= DEAD_WAIT && p.transport_error().is_none() {
            // The leader is gone, tmux never reported its status and nothing
            // came for a while: exited, code unknown.
            tracing::warn!(pane = %p.name, pane_id = %pane_id, "tmux never reported the exit status");
            p.record_exit(generation, None, None);
            return;
        }
        drop(p);
        std::thread::sleep(delay.next_delay());
    }
}

impl PaneBackend for TmuxPane {
    core_backend_methods!(Backend::Tmux);
    fn with_screen_dyn(&self, f: &mut dyn FnMut(&mut Screen, &ScreenMeta)) {
        lock(&self.inner).with_screen(f)
    }
    fn write_input(&self, bytes: &[u8]) -> Result<(), PaneError> {
        let pane_id = {
            let g = lock(&self.inner);
            self.check_usable(&g)?;
            g.pane_id.clone()
        };
        self.send_bytes(&pane_id, &[bytes])
    }
    fn send_text(&self, text: &str, enter: bool) -> Result<(), PaneError> {
        let (pane_id, bracketed) = {
            let g = lock(&self.inner);
            self.check_usable(&g)?;
            (g.pane_id.clone(), g.screen.bracketed_paste())
        };
        let mut body = Vec::new();
        if bracketed {
            // A paste must not be able to end itself early.
            let t = text.replace("\x1b[201~", "");
            body.extend_from_slice(b"\x1b[200~");
            body.extend_from_slice(t.as_bytes());
            body.extend_from_slice(b"\x1b[201~");
        } else {
            body.extend_from_slice(text.as_bytes());
        }
        self.send_bytes(&pane_id, &[&body])?;
        if enter {
            self.send_bytes(&pane_id, &[b"\r"])?;
        }
        Ok(())
    }
    fn send_keys(&self, keys: &[String]) -> Result<(), PaneError> {
        let (pane_id, app) = {
            let g = lock(&self.inner);
            self.check_usable(&g)?;
            (g.pane_id.clone(), g.screen.application_cursor())
        };
        let encoded: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| key_bytes(k, app))
            .collect::<Result<_, _>>()?;
        let chunks: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        self.send_bytes(&pane_id, &chunks)
    }
    fn resize(&self, cols: u16, rows: u16) -> Result<(), PaneError> {
        if cols == 0 || rows == 0 || cols > 1000 || rows > 1000 {
            return Err(PaneError::InvalidSize(format!("{cols}x{rows}")));
        }
        let (pane_id, pid) = {
            let g = lock(&self.inner);
            if let Some(t) = &g.transport {
                return Err(self.transport_err(t.clone()));
            }
            (g.pane_id.clone(), g.pid)
        };
        // The model takes the new size before tmux is asked: tmux can hand
        // the size to the app as soon as it has run the command, before its
        // reply reaches drover, and the frame the app then draws must land
        // in a model of that size. (Resized on the reply, a wide frame read
        // meanwhile was clipped into the old model and stayed so until the
        // app drew again.) A frame still on its way for the old size is
        // redrawn by the app on its SIGWINCH.
        let old = {
            let mut g = lock(&self.inner);
            let old = g.screen.size();
            g.screen.resize(cols, rows);
            old
        };
        let refused = match self
            .host
            .command(format!("resize-window -t {pane_id} -x {cols} -y {rows}"))
        {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(self.transport_err(format!("tmux refused the resize: {e}"))),
            Err(e) => Some(self.transport_err(e)),
        };
        if let Some(e) = refused {
            // The app keeps its size: so does the model (unless something
            // since gave it another, e.g. a re-seed from tmux).
            let mut g = lock(&self.inner);
            if g.screen.size() == (cols, rows) {
                g.screen.resize(old.0, old.1);
            }
            drop(g);
            self.events.output();
            return Err(e);
        }
        // Return once the app can see it, as native does.
        let deadline = Instant::now() + RESIZE_SETTLE;
        while crate::pane::procfs::pty_size(pid).is_some_and(|s| s != (cols, rows))
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.events.output();
        Ok(())
    }
    fn kill(&self) {
        self.stop_process();
        self.set_pipe(None);
        let (pane_id, gone) = {
            let g = lock(&self.inner);
            (g.pane_id.clone(), g.gone)
        };
        self.host.forget(self, &pane_id, !gone);
    }
    fn respawn(self: Arc<Self>) -> Result<u64, PaneError> {
        self.stop_process();
        super::respawn(&self)
    }
    fn backend_pane_id(&self) -> Option<String> {
        Some(self.pane_id())
    }
    fn attach_command(&self) -> Option<String> {
        Some(format!(
            "tmux -L {} attach -t {}",
            self.host.socket_name(),
            self.pane_id()
        ))
    }
}

/// Reset the pane for a new generation (after `respawn-pane` or a new window).
pub(super) fn reset_generation(
    pane: &Arc<TmuxPane>,
    pane_id: String,
    window_id: String,
    pid: u32,
    env_verified: bool,
) -> u64 {
    let generation = {
        let mut g = lock(&pane.inner);
        g.pane_id = pane_id;
        g.window_id = window_id;
        if g.paste_noted {
            g.paste_noted = false;
            super::state::save_paste_mode(&pane.host.state_dir, &pane.name, false);
        }
        g.gone = false;
        g.transport = None;
        g.pid_start = crate::pane::record::start_time(pid).unwrap_or(0);
        g.next_generation(pid, env_verified)
    };
    pane.watch_exit(generation, pid);
    pane.cv.notify_all();
    pane.events.output();
    generation
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_keep_dead_and_reaped_apart() {
        let s = parse_status("0 3 ");
        assert!(!s.dead);
        assert_eq!(s.exit, Some((Some(3), None)));
        assert_eq!(
            parse_status("1  "),
            PaneStatus {
                dead: true,
                exit: None
            }
        );
    }

    #[test]
    fn dead_status_lines() {
        assert_eq!(parse_dead("1 3 "), Some((Some(3), None)));
        assert_eq!(parse_dead("1  9"), Some((None, Some("Killed".into()))));
        assert_eq!(parse_dead("0  "), None);
        // Dead but not yet reaped by tmux: ask again.
        assert_eq!(parse_dead("1  "), None);
        assert_eq!(parse_dead(""), None);
    }
}
