//! Applying one queued candidate to the integration worktree and committing
//! it with its `Task:` trailer. `git apply --check` first; a candidate that
//! no longer applies to the integration head is retried as a three-way
//! apply (`git apply --3way`) against the blobs of the base it was captured
//! on (the patch is written with `--full-index`, so it names them) — tried
//! first in a temporary index, so a conflict leaves the worktree and its
//! index as they were. Bytes end to end (`--binary`): what lands is the
//! patch git wrote.

use crate::loopctl::LoopError;
use crate::loopctl::land::{Queued, git};
use std::path::Path;

/// How one candidate went onto the integration worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Committed as `sha`; `three_way` when only the three-way apply took it.
    Committed { sha: String, three_way: bool },
    /// It does not apply, not even three-way: `conflicts` are the files the
    /// three-way apply left unmerged (empty when it could not be tried).
    Refused {
        reason: String,
        conflicts: Vec<String>,
    },
}

/// Apply `q` on `wt` (HEAD is where it lands) and commit it; `scratch` is a
/// directory of the caller's for the temporary index.
pub fn apply_one(wt: &Path, q: &Queued, scratch: &Path) -> Result<Applied, LoopError> {
    let p = q.patch.to_string_lossy();
    let check = git::output(wt, &["apply", "--check", "--index", "--binary", &p])?;
    let three_way = if check.status.success() {
        git::run(wt, &["apply", "--index", "--binary", &p])?;
        false
    } else {
        let why = first_line(&String::from_utf8_lossy(&check.stderr));
        match three_way_check(wt, q, scratch)? {
            Ok(()) => {
                git::run(wt, &["apply", "--3way", "--index", "--binary", &p])?;
                true
            }
            Err(conflicts) => {
                let reason = if conflicts.is_empty() {
                    format!("does not apply: {why}")
                } else {
                    format!(
                        "does not apply, not even three-way: conflicts in {}",
                        conflicts.join(", ")
                    )
                };
                return Ok(Applied::Refused { reason, conflicts });
            }
        }
    };
    let msg = format!("{}: {}\n\nTask: {}\n", q.task, q.title, q.task);
    git::run(wt, &["commit", "-q", "--no-verify", "-m", &msg])?;
    Ok(Applied::Committed {
        sha: git::line(wt, &["rev-parse", "HEAD"])?,
        three_way,
    })
}

/// Whether `q` applies three-way onto `wt`'s HEAD, tried in a temporary
/// index: `Err(files)` names the files left unmerged (empty when a
/// three-way apply cannot be tried: no recorded base, or its blobs are gone).
fn three_way_check(
    wt: &Path,
    q: &Queued,
    scratch: &Path,
) -> Result<Result<(), Vec<String>>, LoopError> {
    let Some(base) = &q.base else {
        return Ok(Err(Vec::new()));
    };
    // The base it was captured on must still be in the repository: the
    // three-way apply reads the base's blobs.
    if !git::output(wt, &["cat-file", "-e", &format!("{base}^{{commit}}")])?
        .status
        .success()
    {
        return Ok(Err(Vec::new()));
    }
    crate::store::create_private_dir(scratch)?;
    let index = scratch.join(format!(
        "three-way-{}.index",
        crate::loopctl::run::runner::slug(&q.task)
    ));
    let _ = std::fs::remove_file(&index);
    let result = (|| {
        let idx = Some(index.as_path());
        let read = git::output_with_index(wt, idx, &["read-tree", "HEAD"])?;
        if !read.status.success() {
            return Err(LoopError::Git {
                args: "read-tree HEAD".into(),
                message: String::from_utf8_lossy(&read.stderr).trim().to_string(),
            });
        }
        let p = q.patch.to_string_lossy();
        let out =
            git::output_with_index(wt, idx, &["apply", "--3way", "--cached", "--binary", &p])?;
        if out.status.success() {
            return Ok(Ok(()));
        }
        // `<mode> <blob> <stage>\t<path>`, one entry per stage of each path.
        let unmerged = git::output_with_index(wt, idx, &["ls-files", "-u", "-z"])?;
        let mut files: Vec<String> = String::from_utf8_lossy(&unmerged.stdout)
            .split('\0')
            .filter_map(|e| e.split_once('\t').map(|(_, p)| p.to_string()))
            .collect();
        files.dedup();
        Ok(Err(files))
    })();
    let _ = std::fs::remove_file(&index);
    result
}

/// The first line of git's message, at most 200 characters.
pub fn first_line(s: &str) -> String {
    s.trim()
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}
