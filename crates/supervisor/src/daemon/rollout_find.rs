//! Finding a Codex pane's rollout file (docs/agents.md, "The agents' own
//! signals"): Codex writes each session to
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl`,
//! its first line a `session_meta` naming the session's cwd. A pane's file
//! is the newest one made since the pane started whose cwd is the pane's,
//! or, once Codex's `notify` named the thread, that thread's file.

use serde_json::Value;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// The longest rollout line read; a longer one is skipped unread.
pub(super) const MAX_LINE: usize = 1024 * 1024;

/// How many of the newest day folders are looked in: a session begun just
/// before midnight is in the previous day's.
const DAYS: usize = 2;

/// Codex's home for a pane whose env is `env` (the spec's, then the one it
/// inherits, `inherited`): `CODEX_HOME`, else `$HOME/.codex`. A relative
/// `CODEX_HOME` is the pane's cwd's.
pub(super) fn codex_home(
    env: &[(String, String)],
    inherited: impl Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Option<PathBuf> {
    let get = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .or_else(|| inherited(k))
            .filter(|v| !v.is_empty())
    };
    if let Some(h) = get("CODEX_HOME") {
        return Some(cwd.join(h));
    }
    get("HOME").map(|h| Path::new(&h).join(".codex"))
}

/// A file's time comes from the kernel's coarse clock, which may read a
/// few milliseconds behind the pane's start time; this much earlier still
/// counts. (A previous generation's file is told apart by `Want::exclude`.)
const SLACK_MS: u64 = 20;

/// What a pane's rollout must match.
#[derive(Debug, Clone)]
pub(super) struct Want {
    /// Codex's home.
    pub(super) home: PathBuf,
    /// The pane's cwd, symlinks resolved.
    pub(super) cwd: PathBuf,
    /// When the pane's current generation started (Unix ms).
    pub(super) since_ms: u64,
    /// The thread Codex's notify named, when it did.
    pub(super) thread: Option<String>,
    /// The files the pane's previous generations followed: never the new
    /// one's (unless its notify names that thread: a resumed session).
    pub(super) exclude: Vec<PathBuf>,
}

/// A rollout found: its path and whether it was made since the pane started
/// (then it is read from its first line, else from where it ends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    pub(super) path: PathBuf,
    pub(super) fresh: bool,
}

/// The sessions' day folders, newest first (`DAYS` of them).
pub(super) fn day_dirs(home: &Path) -> Vec<PathBuf> {
    let mut days = Vec::new();
    for y in sorted_dirs(&home.join("sessions")) {
        for m in sorted_dirs(&y) {
            days.extend(sorted_dirs(&m));
        }
    }
    days.sort_by(|a, b| b.cmp(a));
    days.truncate(DAYS);
    days
}

/// The folders `dir` holds, by name.
pub(super) fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// When a file was made (its birth time where the filesystem keeps one,
/// else its last change), Unix ms.
fn made_ms(meta: &std::fs::Metadata) -> u64 {
    meta.created()
        .or_else(|_| meta.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The cwd a rollout's first line (its `session_meta`) names, symlinks
/// resolved; `None` while that line is not complete, or is not one.
pub(super) fn session_cwd(path: &Path) -> Option<PathBuf> {
    let f = std::fs::File::open(path).ok()?;
    let mut first = Vec::new();
    std::io::BufReader::new(f.take(MAX_LINE as u64 + 1))
        .read_until(b'\n', &mut first)
        .ok()?;
    if first.pop() != Some(b'\n') {
        return None;
    }
    let v: Value = serde_json::from_slice(&first).ok()?;
    if v.get("type")?.as_str()? != "session_meta" {
        return None;
    }
    let cwd = v.get("payload")?.get("cwd")?.as_str()?;
    std::fs::canonicalize(cwd).ok()
}

/// The pane's rollout, if there is one yet: the thread's file when the
/// notify named one and it is of the pane's cwd, else the newest file of
/// the pane's cwd made since the pane started. A file of another cwd is
/// never taken.
pub(super) fn find(want: &Want) -> Option<Found> {
    let mut best: Option<(u64, PathBuf)> = None;
    for day in day_dirs(&want.home) {
        let Ok(rd) = std::fs::read_dir(&day) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if !name.starts_with("rollout-") || !name.ends_with(".jsonl") {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let made = made_ms(&meta);
            let path = e.path();
            let of_thread = want
                .thread
                .as_deref()
                .is_some_and(|t| name.ends_with(&format!("-{t}.jsonl")));
            if !of_thread && want.exclude.contains(&path) {
                continue;
            }
            let recent = made + SLACK_MS >= want.since_ms;
            if !of_thread && !recent {
                continue;
            }
            if session_cwd(&path).as_deref() != Some(want.cwd.as_path()) {
                continue;
            }
            if of_thread {
                return Some(Found {
                    path,
                    fresh: recent,
                });
            }
            if best.as_ref().is_none_or(|(t, p)| (made, &path) > (*t, p)) {
                best = Some((made, path));
            }
        }
    }
    best.map(|(_, path)| Found { path, fresh: true })
}

#[cfg(test)]
#[path = "rollout_find_tests.rs"]
mod tests;
