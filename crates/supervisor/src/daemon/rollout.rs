//! A Codex pane's rollout as a signal source (`transcript`; docs/agents.md,
//! "The agents' own signals"): Codex's `notify` fires only for a completed
//! turn, while its rollout file says when a turn started, was aborted or
//! failed on a limit, and what it used. The supervisor follows the pane's
//! rollout (found by `rollout_find`), woken by inotify, reads each new
//! complete line (a line over [`MAX_LINE`] is skipped unread) and hands its
//! notes to the same path as the `signal` op (`super::signal::apply`).
//!
//! Only a pane whose agent is `codex` and whose argv carries drover's
//! `notify` (not started with `--no-signals`) is followed. The tail stops
//! when the pane is killed; an exited pane's file is read to its end and
//! let go, and a new generation looks for a new file. A line's contents
//! never reach the log.

use super::rollout_find::{self, Found, MAX_LINE, Want};
use super::server::{Entry, Sup, lock};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::unix::AsyncFd;

/// How many files of earlier generations a pane's follow remembers.
const MAX_TAKEN: usize = 64;

/// Whether the pane `info` describes gets its rollout followed.
pub(super) fn followed(info: &crate::pane::PaneInfo) -> bool {
    info.agent == "codex" && crate::agent::signal_wire::codex_wired(&info.argv)
}

/// Codex's home for a pane being made with `env` (its spec's), the rest of
/// its env being the supervisor's own.
pub(super) fn home_of_spec(spec: &crate::proto::PaneSpec) -> Option<PathBuf> {
    let cwd = spec
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    rollout_find::codex_home(&spec.env, |k| std::env::var(k).ok(), &cwd)
}

/// Codex's home for a pane adopted from a previous supervisor: from its
/// process's env.
fn home_of_process(info: &crate::pane::PaneInfo) -> Option<PathBuf> {
    let env = crate::pane::env_values(info.pid, &["CODEX_HOME", "HOME"]);
    let cwd = info.cwd.clone().unwrap_or_default();
    rollout_find::codex_home(&env, |_| None, &cwd)
}

/// Follow `entry`'s rollout if it is a followed pane: `home` is Codex's
/// home when the caller knows it (a new pane's spec), else it is read
/// from the pane's process (an adopted pane).
pub(super) fn start(sup: &Arc<Sup>, entry: &Arc<Entry>, home: Option<PathBuf>) {
    let info = entry.pane.info();
    if !followed(&info) {
        return;
    }
    let Some(home) = home.or_else(|| home_of_process(&info)) else {
        tracing::info!(pane = %info.name, "no CODEX_HOME or HOME for the pane: its rollout is not followed");
        return;
    };
    tokio::spawn(follow(sup.clone(), entry.clone(), home));
}

/// The inotify descriptor, for tokio.
struct Watcher(Inotify);

impl AsRawFd for Watcher {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// The folders a new rollout of `home` can appear in: the home (or its
/// parent while it is missing), `sessions`, its years, months and newest
/// days.
fn watched_dirs(home: &Path) -> Vec<PathBuf> {
    let sessions = home.join("sessions");
    let mut dirs = vec![home.parent().unwrap_or(home).to_path_buf()];
    dirs.push(home.to_path_buf());
    dirs.push(sessions.clone());
    for y in rollout_find::sorted_dirs(&sessions) {
        dirs.extend(rollout_find::sorted_dirs(&y));
        dirs.push(y);
    }
    dirs.extend(rollout_find::day_dirs(home));
    dirs
}

/// How many times the folders are listed again while new ones keep
/// appearing under the watches just added.
const WATCH_ROUNDS: usize = 8;

/// Watch the folders a new rollout of `home` can appear in (adding a watch
/// twice is harmless). A folder made before its parent was watched sent no
/// event (Codex makes `sessions/YYYY/MM/DD` at once, then writes its file
/// in it), so the folders are listed again after the watches are added,
/// until no new one appears: then every folder is watched, and what is
/// made later is told by an event.
fn watch(w: &Inotify, home: &Path) {
    let flags = AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE;
    let mut dirs = watched_dirs(home);
    for _ in 0..WATCH_ROUNDS {
        for d in &dirs {
            let _ = w.add_watch(d, flags);
        }
        let now = watched_dirs(home);
        if now == dirs {
            return;
        }
        dirs = now;
    }
}

/// The pane's current follow: the generation, what it wants, its tail.
struct Follow {
    generation: u64,
    want: Want,
    tail: Option<crate::store::JsonlTail>,
}

/// Whether `entry` is still the pane of its name (not killed).
fn alive_in_table(sup: &Sup, entry: &Arc<Entry>) -> bool {
    lock(&sup.panes)
        .get(entry.pane.name())
        .is_some_and(|e| Arc::ptr_eq(e, entry))
}

async fn follow(sup: Arc<Sup>, entry: Arc<Entry>, home: PathBuf) {
    let name = entry.pane.name().to_string();
    let inotify = match Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK) {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(pane = %name, error = %e, "inotify unavailable: the pane's rollout is not followed");
            return;
        }
    };
    // SAFETY: the Watcher owns the Inotify, so its descriptor stays open
    // and the same for as long as the AsyncFd holds it.
    let fd = match unsafe { AsyncFd::register(Watcher(inotify)) } {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!(pane = %name, error = %e, "cannot wait on inotify: the pane's rollout is not followed");
            return;
        }
    };
    let mut epoch = sup.epoch.subscribe();
    let mut cur: Option<Follow> = None;
    // Every file the pane followed: a new generation's is another one.
    let mut taken: Vec<PathBuf> = Vec::new();
    let mut files_moved = true;
    loop {
        if !alive_in_table(&sup, &entry) {
            return;
        }
        let info = entry.pane.info();
        if cur.as_ref().is_none_or(|c| c.generation != info.generation) {
            let cwd = info
                .cwd
                .clone()
                .or_else(|| std::env::current_dir().ok())
                .and_then(|c| std::fs::canonicalize(c).ok());
            let Some(cwd) = cwd else {
                tracing::info!(pane = %name, "the pane's cwd cannot be resolved: its rollout is not followed");
                return;
            };
            cur = Some(Follow {
                generation: info.generation,
                want: Want {
                    home: home.clone(),
                    cwd,
                    since_ms: info.started_at_ms,
                    thread: None,
                    exclude: taken.clone(),
                },
                tail: None,
            });
            files_moved = true;
        }
        if let Some(c) = cur.as_mut() {
            if info.exit.is_some() {
                // Codex's last lines are written before it exits.
                if let Some(mut t) = c.tail.take() {
                    apply_lines(&sup, &entry, &mut t);
                }
            } else {
                let thread = lock(&entry.rollout_thread).clone();
                if thread != c.want.thread {
                    c.want.thread = thread;
                    files_moved = true;
                }
                if files_moved {
                    watch(&fd.get_ref().0, &home);
                    choose(c, &name);
                    if let Some(t) = &c.tail
                        && !taken.iter().any(|p| p == t.path())
                    {
                        if taken.len() >= MAX_TAKEN {
                            taken.remove(0);
                        }
                        taken.push(t.path().to_path_buf());
                    }
                }
                if let Some(t) = c.tail.as_mut() {
                    apply_lines(&sup, &entry, t);
                }
            }
        }
        files_moved = false;
        tokio::select! {
            r = fd.readable() => {
                let Ok(mut g) = r else { return };
                loop {
                    match g.get_inner().0.read_events() {
                        Ok(_) => continue,
                        Err(nix::errno::Errno::EAGAIN) => break,
                        Err(nix::errno::Errno::EINTR) => continue,
                        Err(e) => {
                            tracing::warn!(pane = %name, error = %e, "inotify read failed: the pane's rollout is no longer followed");
                            return;
                        }
                    }
                }
                g.clear_ready();
                files_moved = true;
            }
            r = epoch.changed() => if r.is_err() { return },
        }
    }
}

/// Take the pane's rollout when one is found (or a better one: the
/// notified thread's); a file already followed keeps its place.
fn choose(c: &mut Follow, pane: &str) {
    let Some(Found { path, fresh }) = rollout_find::find(&c.want) else {
        return;
    };
    if c.tail.as_ref().is_some_and(|t| t.path() == path) {
        return;
    }
    tracing::info!(pane, fresh, "following the pane's Codex rollout");
    let tail = if fresh {
        crate::store::JsonlTail::from_start(path)
    } else {
        crate::store::JsonlTail::from_end(path)
    };
    c.tail = Some(tail.with_max_line(MAX_LINE));
}

/// Read the new complete lines and hand their notes to the pane.
fn apply_lines(sup: &Arc<Sup>, entry: &Arc<Entry>, tail: &mut crate::store::JsonlTail) {
    let skipped = tail.skipped();
    for line in tail.read_new() {
        match crate::agent::signals::parse::codex_rollout_line(&line) {
            Ok(notes) => {
                for note in notes {
                    super::signal::apply(sup, entry, note);
                }
            }
            Err(e) => {
                tracing::debug!(pane = %entry.pane.name(), error = %e, "skipped a rollout line")
            }
        }
    }
    if tail.skipped() > skipped {
        tracing::info!(
            pane = %entry.pane.name(),
            lines = tail.skipped() - skipped,
            max_bytes = MAX_LINE,
            "skipped rollout lines over the bound"
        );
    }
}
