//! Native panes: a PTY drover owns; per generation a reader thread that drains
//! it, a parser thread that feeds the screen, a writer and a waiter thread.

use super::attach::AttachHandle;
use super::core::{ExitInfo, PaneCore, PaneInfo, ScreenMeta, core_fields, lock};
use super::input::{Input, Refused};
use super::reap::ProcIds;
use super::spawn::{PtyReader, spawn_process};
use super::{KILL_GRACE, PaneError, PaneEvents, PaneSpec, key_bytes};
use crate::screen::Screen;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use portable_pty::{Child, MasterPty, PtySize};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// How long the waiter lets the reader drain output after the child exits.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(300);
/// How long kill waits for a SIGKILLed group to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(3);
/// The reader's buffer: a chunk, and room for one more PTY read.
const READ_BUF: usize = CHUNK + 4096;
/// While output keeps coming, wake the pane's watchers at most this often
/// (always at the end of a burst). Must stay below the detector's burst-quiet
/// time (2 ms) so a flood still reads as one continuous burst; saves a
/// cross-thread wake-up per 4 KiB PTY read, ~10% of the supervisor's CPU on
/// a flood (docs/performance.md).
const NOTIFY_EVERY: Duration = Duration::from_millis(1);

struct Inner {
    core: PaneCore,
    /// Input for the pane's writer thread: nothing writes to the PTY under
    /// the pane lock, so an app that does not read cannot stall anyone.
    input: Input,
    /// Facts about the generation's leader, for the process record.
    procs: ProcIds,
    master: Box<dyn MasterPty + Send>,
    /// When the leader was reaped (clock ticks since boot): from then on its
    /// pid may be reused, and the group is signalled only while members that
    /// started before this instant remain.
    reaped_ticks: Option<u64>,
    eof: bool,
}
core_fields!(Inner);

/// A pane on a PTY that drover owns.
pub struct NativePane {
    name: String,
    inner: Mutex<Inner>,
    cv: Condvar,
    events: Arc<dyn PaneEvents>,
}

impl std::fmt::Debug for NativePane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativePane")
            .field("name", &self.name)
            .finish()
    }
}

fn start_input(name: &str, fd: std::os::fd::OwnedFd) -> Result<Input, PaneError> {
    Input::start(name, fd).map_err(|e| PaneError::Spawn {
        command: name.to_string(),
        message: format!("writer thread: {e}"),
    })
}

pub(super) fn signal_group(pid: u32, sig: Signal) {
    if pid > 1 {
        let _ = killpg(Pid::from_raw(pid as i32), sig);
    }
}

impl NativePane {
    /// Validate, spawn, verify env, and start the reader and waiter threads.
    pub fn spawn(spec: PaneSpec, events: Arc<dyn PaneEvents>) -> Result<Arc<Self>, PaneError> {
        let procs = ProcIds::new(&spec.name, 1);
        let mut sp = spawn_process(&spec, &procs.marker)?;
        let procs = procs.started(sp.pid);
        let input = match start_input(&spec.name, sp.writer) {
            Ok(i) => i,
            Err(e) => {
                super::reap::end_leader(sp.pid, &mut sp.child);
                return Err(e);
            }
        };
        let pane = Arc::new(NativePane {
            name: spec.name.clone(),
            inner: Mutex::new(Inner {
                core: PaneCore::new(spec, 1, sp.pid, sp.env_verified),
                input,
                procs,
                master: sp.master,
                reaped_ticks: None,
                eof: false,
            }),
            cv: Condvar::new(),
            events,
        });
        pane.start_threads(1, sp.reader, sp.child);
        Ok(pane)
    }

    fn start_threads(
        self: &Arc<Self>,
        generation: u64,
        reader: PtyReader,
        child: Box<dyn Child + Send + Sync>,
    ) {
        let weak = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name(format!("pty-read-{}", self.name))
            .spawn(move || reader_loop(weak, generation, reader));
        let weak = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name(format!("pty-wait-{}", self.name))
            .spawn(move || waiter(weak, generation, child));
    }

    /// The pane's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A description for `pane ls`.
    pub fn info(&self) -> PaneInfo {
        lock(&self.inner).info(&self.name, super::Backend::Native)
    }

    /// Run `f` on the screen with facts about the pane, under the pane lock.
    pub fn with_screen<R>(&self, f: impl FnOnce(&mut Screen, &ScreenMeta) -> R) -> R {
        let mut f = Some(f);
        let mut out = None;
        lock(&self.inner).with_screen(&mut |s, m| {
            if let Some(f) = f.take() {
                out = Some(f(s, m));
            }
        });
        match out {
            Some(r) => r,
            None => unreachable!("PaneCore::with_screen calls its closure once"),
        }
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        lock(&self.inner).generation
    }

    /// Queue `parts` as separate writes: all of them, or none when the
    /// queue is over its byte bound.
    fn write_locked(&self, g: &mut Inner, parts: &[&[u8]]) -> Result<(), PaneError> {
        if g.exit.is_some() {
            return Err(PaneError::Exited(self.name.clone()));
        }
        g.input.push(parts).map_err(|e| match e {
            Refused::Full => PaneError::NotReading(self.name.clone()),
            Refused::Closed => PaneError::Exited(self.name.clone()),
        })
    }

    /// Write raw input bytes (attach).
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), PaneError> {
        let mut g = lock(&self.inner);
        self.write_locked(&mut g, &[bytes])
    }

    /// Send text: as a bracketed paste when the app enabled mode 2004, then
    /// Enter as a separate write unless `enter` is false.
    pub fn send_text(&self, text: &str, enter: bool) -> Result<(), PaneError> {
        let mut g = lock(&self.inner);
        let body = if g.screen.bracketed_paste() {
            // A paste must not be able to end itself early.
            let body = text.replace("\x1b[201~", "");
            let mut buf = Vec::with_capacity(body.len() + 12);
            buf.extend_from_slice(b"\x1b[200~");
            buf.extend_from_slice(body.as_bytes());
            buf.extend_from_slice(b"\x1b[201~");
            buf
        } else {
            text.as_bytes().to_vec()
        };
        let enter: &[u8] = if enter { b"\r" } else { b"" };
        // The text and Enter are separate writes, queued together.
        self.write_locked(&mut g, &[&body, enter])
    }

    /// Send named keys (all validated before any is written).
    pub fn send_keys(&self, keys: &[String]) -> Result<(), PaneError> {
        let mut g = lock(&self.inner);
        let app = g.screen.application_cursor();
        let encoded: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| key_bytes(k, app))
            .collect::<Result<_, _>>()?;
        let parts: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        self.write_locked(&mut g, &parts)
    }

    /// Resize the PTY (the app gets SIGWINCH) and the screen.
    pub fn resize(&self, cols: u16, rows: u16) -> Result<(), PaneError> {
        if cols == 0 || rows == 0 || cols > 1000 || rows > 1000 {
            return Err(PaneError::InvalidSize(format!("{cols}x{rows}")));
        }
        let mut g = lock(&self.inner);
        g.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| PaneError::Io {
                pane: self.name.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
        g.screen.resize(cols, rows);
        g.screen_changed();
        drop(g);
        self.events.output();
        Ok(())
    }

    /// The size the pane was created with (restored after an attach).
    pub fn spec_size(&self) -> (u16, u16) {
        let g = lock(&self.inner);
        (g.spec.cols, g.spec.rows)
    }

    /// End the pane's processes: every process of its tree — including
    /// those that left the session or group, found by the marker they
    /// inherit — is asked to end with SIGTERM, then SIGHUP as a closing
    /// terminal would ([`super::reap::ask_to_end`]), a grace period, then
    /// SIGKILL until none is left; reap. Once the leader is reaped its pid
    /// may be reused: its session counts only for processes that started
    /// before that.
    pub fn kill(&self) {
        let (pid, generation, reaped, ids) = {
            let g = lock(&self.inner);
            (g.pid, g.generation, g.reaped_ticks, g.procs.clone())
        };
        let key = super::reap::TreeKey::of(&ids, reaped);
        let mut found = super::reap::members(&key, true);
        super::reap::ask_to_end(&key, &mut found, KILL_GRACE);
        if reaped.is_none() {
            let leader = super::reap::Member {
                pid,
                start_time: ids.start_time,
            };
            if super::reap::running(&leader) {
                signal_group(pid, Signal::SIGKILL);
            }
            self.wait_exit(generation, REAP_TIMEOUT);
        }
        let reaped = {
            let g = lock(&self.inner);
            if g.generation != generation {
                return;
            }
            g.reaped_ticks
        };
        let key = super::reap::TreeKey::of(&ids, reaped);
        super::reap::sweep(&key, &mut found, REAP_TIMEOUT);
    }

    /// The processes of the current generation alive now (for the record).
    pub fn members(&self) -> Vec<super::reap::Member> {
        let (ids, reaped) = {
            let g = lock(&self.inner);
            (g.procs.clone(), g.reaped_ticks)
        };
        super::reap::members_of_own_tree(&super::reap::TreeKey::of(&ids, reaped))
    }

    /// Who the current generation's processes are.
    pub fn proc_ids(&self) -> ProcIds {
        lock(&self.inner).procs.clone()
    }

    /// Wait until generation `generation` has exited; false on timeout.
    pub fn wait_exit(&self, generation: u64, timeout: Duration) -> bool {
        super::core::wait_exit(&self.inner, &self.cv, generation, timeout)
    }

    /// Kill the current process and start the spec again as a new generation.
    pub fn respawn(self: &Arc<Self>) -> Result<u64, PaneError> {
        self.kill();
        let spec = lock(&self.inner).spec.clone();
        let next = lock(&self.inner).generation + 1;
        let procs = ProcIds::new(&spec.name, next);
        let mut sp = spawn_process(&spec, &procs.marker)?;
        let procs = procs.started(sp.pid);
        let input = match start_input(&spec.name, sp.writer) {
            Ok(i) => i,
            Err(e) => {
                super::reap::end_leader(sp.pid, &mut sp.child);
                return Err(e);
            }
        };
        let generation = {
            let mut g = lock(&self.inner);
            g.input = input;
            g.procs = procs;
            g.master = sp.master;
            g.reaped_ticks = None;
            g.eof = false;
            g.next_generation(sp.pid, sp.env_verified)
        };
        self.start_threads(generation, sp.reader, sp.child);
        self.cv.notify_all();
        self.events.output();
        Ok(generation)
    }

    /// Attach a client: kicks any attached client, returns the first frame
    /// and the stream of wake-ups and events.
    pub fn attach(&self) -> AttachHandle {
        lock(&self.inner).attach()
    }

    /// What changed on the screen since client `id`'s last frame, drawn from
    /// the model, then the terminal queries it should answer; `None` once
    /// another client took over.
    pub fn attach_frame(&self, id: u64) -> Option<Vec<u8>> {
        lock(&self.inner).attach_frame(id)
    }

    /// Detach client `id` (no-op when another client has taken over).
    pub fn detach(&self, id: u64) {
        lock(&self.inner).detach(id);
    }
}

/// Chunks read but not yet parsed, at most: bounds memory (to 1 MiB) when the
/// parser falls behind a flood (the PTY then pushes back on the app, as a
/// terminal does).
const PARSE_QUEUE: usize = 16;
/// Chunks parsed under one lock acquisition at most (128 KiB, as before
/// reads were gathered: how long a reader of the screen may wait).
const PARSE_BATCH: usize = 2;
/// While the parser is busy and more output is already waiting, the PTY's
/// reads (at most 4 KiB each: the line discipline's buffer) are gathered
/// into one chunk of up to this size: one hand-over and one allocation per
/// chunk instead of per read (docs/performance.md, "Ingest").
const CHUNK: usize = 64 * 1024;

/// The reading half: drain the PTY as fast as it fills, so the app is never
/// held up by parsing, and hand the bytes to the parser in order.
fn reader_loop(pane: Weak<NativePane>, generation: u64, mut reader: PtyReader) {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk>(PARSE_QUEUE);
    // Parsed chunks' buffers come back to be read into again, so a flood
    // allocates, zeroes and copies nothing per chunk. A batch's worth is
    // enough: the parser gives back what it takes as it takes it.
    let (spare_tx, spare) = std::sync::mpsc::sync_channel::<Vec<u8>>(PARSE_BATCH);
    let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let more = Arc::new(AtomicBool::new(false));
    let parser = {
        let (pane, q, m) = (pane.clone(), queued.clone(), more.clone());
        std::thread::Builder::new()
            .name("pty-parse".into())
            .spawn(move || parser_loop(pane, generation, rx, spare_tx, q, m))
    };
    let mut buf = vec![0u8; READ_BUF];
    let mut len = 0;
    let mut eof = false;
    while !eof {
        let mut drained = false;
        match reader.read.read(&mut buf[len..]) {
            Ok(0) => eof = true,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if len == 0 {
                    reader.wait_readable();
                    continue;
                }
                drained = true;
            }
            // EIO once every slave fd is closed: the normal end.
            Err(_) => eof = true,
        }
        if len == 0 {
            continue;
        }
        // Gather only while the parser is busy with earlier chunks: read on
        // until the PTY has nothing more (the read that says so costs what
        // asking would) or the chunk is full. An idle parser gets each read
        // at once, so the two threads never wait on each other's batches.
        if !eof && !drained && len < CHUNK && queued.load(Ordering::Acquire) > 0 {
            continue;
        }
        let waiting = !eof && !drained && reader.more_waiting();
        queued.fetch_add(1, Ordering::AcqRel);
        more.store(waiting, Ordering::Release);
        let next = spare.try_recv().unwrap_or_else(|_| vec![0u8; READ_BUF]);
        let full = std::mem::replace(&mut buf, next);
        if tx.send(Chunk { buf: full, len }).is_err() {
            return;
        }
        len = 0;
    }
    drop(tx);
    if let Ok(h) = parser {
        let _ = h.join();
    }
}

/// Bytes read, handed to the parser: the first `len` of `buf`.
struct Chunk {
    buf: Vec<u8>,
    len: usize,
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The parsing half: feed the screen in order, answer queries, forward to an
/// attached client, wake watchers; mark EOF once everything read is parsed.
fn parser_loop(
    pane: Weak<NativePane>,
    generation: u64,
    rx: std::sync::mpsc::Receiver<Chunk>,
    spare: std::sync::mpsc::SyncSender<Vec<u8>>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
    more: Arc<AtomicBool>,
) {
    let mut last_notify: Option<Instant> = None;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < PARSE_BATCH {
            match rx.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        let taken = batch.len();
        let Some(p) = pane.upgrade() else { return };
        {
            let mut g = lock(&p.inner);
            if g.generation != generation {
                return;
            }
            for chunk in &batch {
                g.screen.process(chunk.bytes());
                if g.screen.hooks().has_queries() {
                    let Inner { core, input, .. } = &mut *g;
                    let PaneCore { screen, attach, .. } = core;
                    if let Some(a) = attach {
                        // While a client is attached, its real terminal
                        // answers (the query is re-issued after the frame).
                        a.hold_queries(&screen.take_terminal_queries());
                    } else {
                        // Dropped when the app is not reading its input: a
                        // query flood must not grow memory or stall the parser.
                        let replies = screen.take_replies();
                        if !replies.is_empty() {
                            let _ = input.push(&[&replies]);
                        }
                    }
                }
            }
            g.output_seen();
        }
        for chunk in batch {
            // Full when the reader holds enough already: then dropped.
            let _ = spare.try_send(chunk.buf);
        }
        let left = queued.fetch_sub(taken, Ordering::AcqRel) - taken;
        // Coalesce wake-ups during a flood; never skip the end of a burst.
        let due = last_notify.is_none_or(|t| t.elapsed() >= NOTIFY_EVERY);
        // The burst ends when nothing is queued and the PTY had nothing more
        // waiting after the last read.
        if due || (left == 0 && !more.load(Ordering::Acquire)) {
            p.events.output();
            last_notify = Some(Instant::now());
        }
    }
    if let Some(p) = pane.upgrade() {
        let mut g = lock(&p.inner);
        if g.generation == generation {
            g.eof = true;
        }
        drop(g);
        p.cv.notify_all();
        p.events.output();
    }
}

fn waiter(pane: Weak<NativePane>, generation: u64, mut child: Box<dyn Child + Send + Sync>) {
    let status = child.wait();
    let reaped = super::procfs::uptime_ticks();
    if let Some(pid) = child.process_id() {
        super::reap::remove_leader(pid);
    }
    let Some(p) = pane.upgrade() else { return };
    {
        let mut g = lock(&p.inner);
        if g.generation == generation {
            g.reaped_ticks = Some(reaped);
        }
    }
    let (code, signal) = match &status {
        Ok(s) => match s.signal() {
            Some(sig) => (None, Some(sig.to_string())),
            None => (Some(s.exit_code() as i32), None),
        },
        Err(_) => (None, None),
    };
    let g = lock(&p.inner);
    // Let the reader drain what the child wrote before it exited.
    let (mut g, _) =
        p.cv.wait_timeout_while(g, DRAIN_AFTER_EXIT, |g| {
            g.generation == generation && !g.eof
        })
        .unwrap_or_else(PoisonError::into_inner);
    if g.generation != generation {
        return;
    }
    g.set_exit(ExitInfo::now(code, signal));
    drop(g);
    p.cv.notify_all();
    p.events.exited();
}
