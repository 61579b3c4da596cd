//! The threads of one herdr pane generation: the screen reader (`pane
//! read`, woken by writes to the pane's terminal), the exit watcher (the
//! wrapper's pidfd, then its status file) and the agent watcher (`agent.rs`).
//! Each ends when its generation is over or the pane is dropped.

use super::pane::{HerdrPane, lock};
use super::{Fault, REQUEST_TIMEOUT};
use crate::pane::ExitInfo;
use serde_json::json;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How a read's transport error begins when herdr could not be reached.
const UNREACHABLE: &str = "herdr unreachable";
/// How the transport error begins once herdr's server is gone.
pub(super) const WENT_AWAY: &str = "herdr's server went away";
/// Reads back off from this …
pub const READ_EVERY: Duration = Duration::from_millis(100);
/// … to this while herdr cannot be reached.
const READ_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// After the exit, how long the status file may take to appear.
const STATUS_WAIT: Duration = Duration::from_millis(500);
/// After the command ended, how long herdr may take to show the wrapper's
/// exit title (all the command's output taken in) before the last read.
const FINAL_READ_WAIT: Duration = Duration::from_secs(1);
/// How long the wrapper may take to start the command (its child).
const COMMAND_FIND_TIMEOUT: Duration = Duration::from_secs(5);
/// After a pane hung up while herdr still answered, how long its server
/// may take to end for the hangup to be herdr going away.
const SERVER_STOP_WAIT: Duration = Duration::from_secs(5);

/// Start the threads of `generation`.
pub(super) fn start(pane: &Arc<HerdrPane>, generation: u64) {
    let name = pane.name_str().to_string();
    let spawn = |what: &str, f: Box<dyn FnOnce() + Send>| {
        let _ = std::thread::Builder::new()
            .name(format!("herdr-{what}-{name}"))
            .spawn(f);
    };
    let (w1, w2, w3) = (
        Arc::downgrade(pane),
        Arc::downgrade(pane),
        Arc::downgrade(pane),
    );
    spawn("read", Box::new(move || reader(w1, generation)));
    spawn("exit", Box::new(move || exit_watcher(w2, generation)));
    spawn(
        "agent",
        Box::new(move || super::agent::watch(w3, generation)),
    );
}

/// The generation's pane id while the generation is current and running.
pub(super) fn current(pane: &HerdrPane, generation: u64) -> Option<(String, bool)> {
    let g = lock(&pane.inner);
    (g.generation == generation).then(|| (g.pane_id.clone(), g.exit.is_some()))
}

/// One `pane read --source visible --format text` of `pane_id`: the text
/// and herdr's revision of the pane (when it gives one).
pub(super) fn read(pane: &HerdrPane, pane_id: &str) -> Result<(String, Option<u64>), Fault> {
    let r = pane.host.client().request(
        "pane.read",
        json!({"pane_id": pane_id, "source": "visible", "format": "text", "strip_ansi": true}),
        REQUEST_TIMEOUT,
        false,
    )?;
    let text = r["read"]["text"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| Fault::Transport("pane read answered without .read.text".into()))?;
    Ok((text, r["read"]["revision"].as_u64()))
}

/// The terminal title herdr shows for `pane_id` (`pane.get`:
/// `.pane.terminal_title`; `None` when the app set none).
pub(super) fn title(pane: &HerdrPane, pane_id: &str) -> Result<Option<String>, Fault> {
    let r = pane.host.client().request(
        "pane.get",
        json!({"pane_id": pane_id}),
        REQUEST_TIMEOUT,
        false,
    )?;
    Ok(r["pane"]["terminal_title"].as_str().map(String::from))
}

/// How the reader learns the pane may have changed.
enum Wake {
    /// inotify on the pane's terminal (see `tty.rs`).
    Tty(super::tty::TtyWatch),
    /// No terminal to watch (not found, or inotify refused): polling,
    /// faster after a change, slower while nothing changes.
    Poll,
}

/// The screen reader: woken by writes to the pane's terminal (or polling
/// without one), it reads the screen and the title from herdr.
fn reader(weak: Weak<HerdrPane>, generation: u64) {
    let wake = match weak.upgrade().map(|p| lock(&p.inner).pid) {
        Some(pid) => match super::tty::tty_of(pid).and_then(|t| super::tty::TtyWatch::new(&t)) {
            Some(w) => Wake::Tty(w),
            None => {
                tracing::debug!(pid, "herdr pane's terminal not watchable; polling it");
                Wake::Poll
            }
        },
        None => return,
    };
    let mut pace = Pace::new(matches!(wake, Wake::Tty(_)));
    let mut last_read: Option<std::time::Instant> = None;
    loop {
        let woken = match &wake {
            Wake::Tty(w) => w.wait(pace.timeout()),
            Wake::Poll => {
                std::thread::sleep(pace.timeout());
                false
            }
        };
        if woken {
            // Let herdr take in the write (and a burst coalesce); reads
            // are at most every MIN_GAP while writes keep coming.
            let gap = last_read.map_or(MIN_GAP, |t| MIN_GAP.saturating_sub(t.elapsed()));
            std::thread::sleep(SETTLE.max(gap));
            if let Wake::Tty(w) = &wake {
                w.drain();
            }
        }
        let Some(p) = weak.upgrade() else { return };
        let Some((pane_id, exited)) = current(&p, generation) else {
            return;
        };
        if exited {
            return;
        }
        last_read = Some(std::time::Instant::now());
        match read(&p, &pane_id) {
            Ok((text, _)) => {
                // pane.read's revision is always 0 on herdr 0.8; pane.get
                // has the title (and counts its changes) — asked each time.
                if let Ok(Some(t)) = title(&p, &pane_id)
                    && t != super::EXITED_TITLE
                {
                    p.set_title(generation, t);
                }
                let changed = p.show(generation, text);
                pace.read(changed, woken);
            }
            Err(f) if f.is_transport() => {
                tracing::debug!(pane = %p.name_str(), error = %f, "herdr pane read failed");
                p.set_transport(
                    generation,
                    Some(format!(
                        "{UNREACHABLE} ({f}); drover reads again when it answers"
                    )),
                );
                pace.failed();
            }
            Err(f) => {
                // herdr answered but has no such pane (closed in herdr):
                // unreachable until the process is seen to exit.
                if current(&p, generation).is_some_and(|(_, exited)| !exited) {
                    p.set_transport(
                        generation,
                        Some(format!("herdr no longer shows pane {pane_id} ({f})")),
                    );
                }
                pace.failed();
            }
        }
    }
}

/// After a write to the terminal, how long herdr gets to take it in
/// before the read (herdr parses a pane's output as it arrives).
const SETTLE: Duration = Duration::from_millis(2);
/// The least time between two reads while writes keep coming.
const MIN_GAP: Duration = Duration::from_millis(10);
/// After a write or a change, the screen is read again this soon even
/// without another write, doubling up to [`RECHECK_LAST`]: herdr may not
/// have drawn all of a write at the first read (its PTY reader and the
/// request run on threads of their own), and a frame missed then would
/// wait for the next write.
const RECHECK_FIRST: Duration = Duration::from_millis(5);
const RECHECK_LAST: Duration = Duration::from_millis(160);
/// With a watched terminal, the reads while nothing is written start here
/// and double up to [`QUIET_MAX`] (they catch what no write shows: the
/// line discipline's echo, herdr's own redraws).
const QUIET_FIRST: Duration = Duration::from_millis(250);
const QUIET_MAX: Duration = Duration::from_secs(30);
/// Without one, polling starts at [`POLL_MIN`] after a change and doubles
/// to [`POLL_MAX`] while nothing changes.
const POLL_MIN: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_millis(500);

/// When the reader reads next: a pure function of what the last reads saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pace {
    watched: bool,
    next: Duration,
}

impl Pace {
    pub(super) fn new(watched: bool) -> Self {
        Pace {
            watched,
            next: if watched { RECHECK_FIRST } else { POLL_MIN },
        }
    }

    /// How long to wait (for a write, or outright) before the next read.
    pub(super) fn timeout(&self) -> Duration {
        self.next
    }

    /// A read answered; `changed` whether the screen changed, `woken`
    /// whether a write woke it.
    pub(super) fn read(&mut self, changed: bool, woken: bool) {
        self.next = match (self.watched, changed || woken) {
            (true, true) => RECHECK_FIRST,
            (true, false) if self.next < RECHECK_LAST => self.next * 2,
            (true, false) if self.next < QUIET_FIRST => QUIET_FIRST,
            (true, false) => (self.next * 2).min(QUIET_MAX),
            (false, _) if changed => POLL_MIN,
            (false, _) => (self.next * 2).min(POLL_MAX),
        };
    }

    /// herdr could not be reached: back off.
    pub(super) fn failed(&mut self) {
        self.next = (self.next * 2).clamp(READ_EVERY, READ_BACKOFF_MAX);
    }
}

/// Whether `pid` leads its own process group and session, as a herdr
/// pane's shell (and the wrapper it exec'd) does.
pub(super) fn is_leader(pid: u32) -> bool {
    pid > 1
        && crate::pane::procfs::stat(pid)
            .is_some_and(|s| s.pgrp == i64::from(pid) && s.session == i64::from(pid))
}

/// The command the wrapper `pid` runs: its child (none when the command
/// has ended already: the status file is there, or the wrapper is gone).
fn find_command(pid: u32, status_file: &std::path::Path) -> Option<u32> {
    let deadline = std::time::Instant::now() + COMMAND_FIND_TIMEOUT;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(2), Duration::from_millis(50));
    loop {
        if let Some(c) = crate::pane::procfs::main_thread_children(pid).first() {
            return Some(*c);
        }
        if status_file.exists() || !is_leader(pid) || std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(delay.next_delay());
    }
}

/// Wait until the command or the wrapper ends (either pidfd readable);
/// false when the generation ended or the pane was dropped first.
fn wait_end(weak: &Weak<HerdrPane>, generation: u64, fds: &[std::os::fd::OwnedFd]) -> bool {
    let fds: Vec<_> = fds.iter().collect();
    loop {
        if crate::pane::procfs::wait_readable(&fds, Duration::from_secs(1)) {
            return true;
        }
        let Some(p) = weak.upgrade() else {
            return false;
        };
        if current(&p, generation).is_none_or(|(_, exited)| exited) {
            return false;
        }
    }
}

/// The exit: the command's (or the wrapper's) pidfd wakes the watcher; the
/// wrapper keeps herdr's pane open until the last screen is read (herdr
/// closes a pane when its process ends), then the status file gives the
/// code and `.seen` lets the wrapper go.
fn exit_watcher(weak: Weak<HerdrPane>, generation: u64) {
    let (pid, status_file) = match weak.upgrade() {
        Some(p) => {
            let g = lock(&p.inner);
            (g.pid, g.status_file.clone())
        }
        None => return,
    };
    let wrapper = crate::pane::procfs::pidfd_open(pid).ok();
    let child = find_command(pid, &status_file);
    if let (Some(c), Some(p)) = (child, weak.upgrade()) {
        let mut g = lock(&p.inner);
        if g.generation == generation {
            g.command_pid = Some(c);
        }
    }
    let command = child.and_then(|c| crate::pane::procfs::pidfd_open(c).ok());
    let fds: Vec<_> = wrapper.into_iter().chain(command).collect();
    if !fds.is_empty() && !wait_end(&weak, generation, &fds) {
        return;
    }
    let Some(p) = weak.upgrade() else { return };
    let (pane_id, stopping) = {
        let g = lock(&p.inner);
        if g.generation != generation {
            return;
        }
        (g.pane_id.clone(), g.stopping)
    };
    final_read(&p, generation, &pane_id, pid);
    let deadline = std::time::Instant::now() + STATUS_WAIT;
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(&status_file) {
            break s.trim().parse::<i32>().ok();
        }
        if std::time::Instant::now() >= deadline || (stopping && !is_leader(pid)) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let info = exit_info(status, stopping);
    // `herdr server stop` (or a herdr that died) ends its panes with SIGHUP:
    // that is herdr going away, not the command's own end. Stopping, herdr
    // answers "server is shutting down" (`server_unavailable`) to all but
    // `ping` before it hangs its panes up and some 0.2-1 s before it stops
    // answering: the pane's own `pane.get` asks. Were the hangup to come
    // first, a hangup while herdr still answers watches herdr's server (the
    // socket's peer) end. A read that already failed says it too.
    // A herdr killed outright closes the pane's terminal: the command may
    // end any way (a sim agent exits 0), and herdr no longer answering is
    // the cause all the same.
    let hangup = info.signal.as_deref() == Some(crate::pane::core::signal_name(1).as_str());
    let mut server = None;
    if !stopping {
        let unreachable = lock(&p.inner)
            .transport
            .as_deref()
            .is_some_and(|t| t.starts_with(UNREACHABLE));
        let gone = unreachable
            || match p.host.client().request_peer(
                "pane.get",
                json!({"pane_id": pane_id}),
                REQUEST_TIMEOUT,
            ) {
                Err(f) => f.is_transport(),
                Ok((_, pid)) => {
                    server = pid.filter(|_| hangup);
                    false
                }
            };
        if gone {
            p.set_transport(generation, Some(went_away(hangup)));
        }
    }
    p.record_exit(generation, info);
    // The wrapper may go (and herdr close the pane).
    let seen = super::seen_file(&status_file);
    if is_leader(pid)
        && let Err(e) = std::fs::write(&seen, b"")
    {
        tracing::debug!(pane = %p.name_str(), error = %e, "cannot release the herdr wrapper");
    }
    drop(p);
    if let Some(server) = server
        && ends_within(server, SERVER_STOP_WAIT)
        && let Some(p) = weak.upgrade()
    {
        p.set_transport(generation, Some(went_away(true)));
    }
}

/// Why a pane ended with herdr gone: it hung the pane up, or the pane's
/// terminal closed with it.
fn went_away(hangup: bool) -> String {
    let how = if hangup {
        "it ended the pane with SIGHUP"
    } else {
        "the pane ended with it"
    };
    format!("{WENT_AWAY} ({how})")
}

/// Whether process `pid` ends within `wait` (already gone: true). When no
/// pidfd can be had for another reason (out of fds), `/proc` is asked every
/// 50 ms instead.
fn ends_within(pid: u32, wait: Duration) -> bool {
    use crate::pane::procfs;
    match procfs::pidfd_open(pid) {
        Ok(fd) => procfs::wait_readable(&[&fd], wait),
        Err(e) if e.raw_os_error() == Some(nix::libc::ESRCH) => true,
        Err(_) => {
            let deadline = std::time::Instant::now() + wait;
            loop {
                if !procfs::exists(pid) {
                    return true;
                }
                if std::time::Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The last screen: while the wrapper still runs, wait (bounded) until
/// herdr shows its exit title — herdr has then taken in every byte the
/// command wrote — and read once more.
fn final_read(p: &HerdrPane, generation: u64, pane_id: &str, pid: u32) {
    if is_leader(pid) {
        let deadline = std::time::Instant::now() + FINAL_READ_WAIT;
        loop {
            match title(p, pane_id) {
                Ok(Some(t)) if t == super::EXITED_TITLE => break,
                Ok(_) if std::time::Instant::now() < deadline && is_leader(pid) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => break,
            }
        }
    }
    if let Ok((text, _)) = read(p, pane_id) {
        p.show(generation, text);
    }
}

/// The exit as the wrapper's status reports it (`128+N` is signal N).
pub(super) fn exit_info(status: Option<i32>, killed: bool) -> ExitInfo {
    let at_ms = crate::paths::now_ms();
    match status {
        Some(s) if (129..=192).contains(&s) => ExitInfo {
            code: None,
            signal: Some(crate::pane::core::signal_name(s - 128)),
            at_ms,
        },
        Some(s) => ExitInfo {
            code: Some(s),
            signal: None,
            at_ms,
        },
        None => ExitInfo {
            code: None,
            signal: killed.then(|| crate::pane::core::signal_name(15)),
            at_ms,
        },
    }
}

/// Bytes that draw `text` (rows separated by `\n`) on a screen of `size`:
/// each row at its place, erased first; the bottom rows when there are
/// more than fit (the footers detection reads are there).
pub fn draw(text: &str, (cols, rows): (u16, u16)) -> Vec<u8> {
    let lines: Vec<&str> = text.trim_end_matches('\n').split('\n').collect();
    let skip = lines.len().saturating_sub(usize::from(rows));
    let mut out = String::from("\x1b[0m");
    for r in 0..usize::from(rows) {
        out.push_str(&format!("\x1b[{};1H\x1b[2K", r + 1));
        if let Some(line) = lines.get(skip + r) {
            let clean: String = line
                .chars()
                .filter(|c| !c.is_control())
                .take(usize::from(cols))
                .collect();
            out.push_str(clean.trim_end());
        }
    }
    let last = lines.len().saturating_sub(skip).clamp(1, usize::from(rows));
    out.push_str(&format!("\x1b[{last};1H"));
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draw_puts_rows_in_place_and_keeps_the_bottom() {
        let mut s = crate::screen::Screen::new(20, 3);
        s.process(&draw("a\nb\nc\nd\n", (20, 3)));
        assert_eq!(s.rows()[..3], ["b", "c", "d"]);
        let mut s = crate::screen::Screen::new(4, 3);
        s.process(&draw("toolong\n\x1b[31mx", (4, 3)));
        assert_eq!(s.rows()[0], "tool");
        assert_eq!(s.rows()[1], "[31m");
    }

    #[test]
    fn reads_follow_writes_and_slow_down_while_quiet() {
        let mut p = Pace::new(true);
        p.read(true, true);
        assert_eq!(p.timeout(), RECHECK_FIRST, "a change is read again soon");
        p.read(false, false);
        assert_eq!(p.timeout(), RECHECK_FIRST * 2);
        while p.timeout() < RECHECK_LAST {
            p.read(false, false);
        }
        p.read(false, false);
        assert_eq!(p.timeout(), QUIET_FIRST, "then rarely");
        for _ in 0..10 {
            p.read(false, false);
        }
        assert_eq!(p.timeout(), QUIET_MAX, "an idle pane is read rarely");
        p.read(false, true);
        assert_eq!(
            p.timeout(),
            RECHECK_FIRST,
            "a write that showed nothing yet is read again soon"
        );
        let mut p = Pace::new(false);
        for _ in 0..10 {
            p.read(false, false);
        }
        assert_eq!(p.timeout(), POLL_MAX);
        p.read(true, false);
        assert_eq!(p.timeout(), POLL_MIN, "polling speeds up after a change");
        p.failed();
        assert!(p.timeout() >= READ_EVERY);
    }

    #[test]
    fn exit_statuses() {
        assert_eq!(exit_info(Some(3), false).code, Some(3));
        assert_eq!(
            exit_info(Some(143), false).signal.as_deref(),
            Some("Terminated")
        );
        assert_eq!(exit_info(None, true).signal.as_deref(), Some("Terminated"));
        let unknown = exit_info(None, false);
        assert!(unknown.code.is_none() && unknown.signal.is_none());
    }
}
