//! What a run checks before it creates anything: a clear one-line error
//! naming the flag, never the raw OS error of a read deep in the run.

use crate::loopctl::LoopError;
use crate::loopctl::board;
use crate::loopctl::land::git;
use std::path::{Path, PathBuf};

/// The repository given (canonical), or the current git toplevel.
pub fn repo(given: Option<&Path>) -> Result<PathBuf, LoopError> {
    match given {
        Some(r) => std::fs::canonicalize(r)
            .map_err(|e| LoopError::Flag(format!("--repo {}: {e}", r.display()))),
        None => {
            let cwd = std::env::current_dir().map_err(|e| LoopError::io(".", e))?;
            let top = git::line(&cwd, &["rev-parse", "--show-toplevel"]).map_err(|_| {
                LoopError::Flag("not in a git repository: pass --repo (and --board)".into())
            })?;
            Ok(PathBuf::from(top))
        }
    }
}

/// A usage error naming `flag` when `path` is not a file.
pub fn need_file(flag: &str, path: &Path) -> Result<(), LoopError> {
    if path.is_file() {
        return Ok(());
    }
    Err(LoopError::Flag(format!(
        "{flag} {}: no such file",
        path.display()
    )))
}

/// A usage error saying where a board was looked for when there is none.
pub fn need_board(dir: &Path, given: bool) -> Result<(), LoopError> {
    let tasks = board::tasks_dir(dir);
    if tasks.is_dir() {
        return Ok(());
    }
    let how = if given {
        format!("--board {}", dir.display())
    } else {
        format!("no --board given, and {}", dir.display())
    };
    Err(LoopError::Flag(format!(
        "{how}: no Backlog.md board there (looked for {} and {}); make one with `backlog init`, or pass --board DIR",
        dir.join("tasks").display(),
        dir.join("backlog").join("tasks").display()
    )))
}

/// Real agents' lanes need Claude Code and Codex on PATH.
pub fn need_agents() -> Result<(), LoopError> {
    let missing = crate::loopctl::lanes::lanes_ops::missing_agents();
    if missing.is_empty() {
        return Ok(());
    }
    Err(LoopError::MissingAgents(missing.join(" and ")))
}

/// `--sign`: signing that cannot work is said before any lane starts, not
/// at the first landing in the night.
pub fn need_signing(repo: &Path) -> Result<(), LoopError> {
    crate::git::check_signing(repo).map_err(|m| LoopError::Flag(format!("--sign: {m}")))
}

/// The board's directory relative to the repository, for the fleet's hosts
/// (they build each lane's brief from the task there, at the base). Real
/// agents need it committed there at the base; simulated lanes do without.
pub fn fleet_board(
    repo: &Path,
    board_dir: &Path,
    base: Option<&str>,
    sim: bool,
) -> Result<Option<String>, LoopError> {
    let abs = std::fs::canonicalize(board_dir).unwrap_or_else(|_| board_dir.to_path_buf());
    let rel = abs
        .strip_prefix(repo)
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    if sim {
        return Ok(rel);
    }
    let Some(rel) = rel else {
        return Err(LoopError::Flag(format!(
            "--fleet with real agents: the board {} is not in the repository {}; the fleet's hosts build each brief from the board at the base, so keep it in the repository (or pass --sim)",
            board_dir.display(),
            repo.display()
        )));
    };
    let base = base.unwrap_or("HEAD");
    let spec = if rel.is_empty() {
        ".".to_string()
    } else {
        rel.clone()
    };
    let changed = git::line(repo, &["diff", "--name-only", base, "--", &spec]).unwrap_or_default();
    let untracked = git::line(
        repo,
        &["ls-files", "--others", "--exclude-standard", "--", &spec],
    )
    .unwrap_or_default();
    if let Some(first) = changed.lines().chain(untracked.lines()).next() {
        return Err(LoopError::Flag(format!(
            "--fleet with real agents: the board differs from {base} ({first}); the fleet's hosts build each brief from the board at the base: commit it first"
        )));
    }
    Ok(Some(rel))
}
