//! A rebase round's git: the integration head merged into a task's branch
//! in its own worktree (the task's work committed first, conflict markers
//! left for its lane to resolve), the commits that caused each conflict,
//! and, once the lane reports, the checks before the candidate is captured
//! again — no conflict marker left, the merge concluded, and whether the
//! change went beyond resolving the conflicts (then it is reviewed again).

use crate::loopctl::LoopError;
use crate::loopctl::land::git;
use std::path::Path;

pub use crate::runstate::records::Merged;

/// Commit the task's work (when there is any) and merge `branch` (at
/// `onto`) into the task's worktree `wt`, leaving conflict markers.
/// `since` is the base the task's candidate was captured on; `scratch` a
/// directory of the caller's for a temporary index.
pub fn merge_in(
    wt: &Path,
    task: &str,
    branch: &str,
    onto: &str,
    since: &str,
    scratch: &Path,
) -> Result<Merged, LoopError> {
    // A merge left unfinished by an earlier round is not built on.
    if in_merge(wt) {
        git::run(wt, &["merge", "--abort"])?;
    }
    git::run(wt, &["add", "-A"])?;
    let staged = git::output(wt, &["diff", "--cached", "--quiet"])?;
    if !staged.status.success() {
        let msg = format!("{task}: its work before the integration head is merged in\n");
        git::run(wt, &["commit", "-q", "--no-verify", "-m", &msg])?;
    }
    let ours = git::line(wt, &["rev-parse", "HEAD"])?;
    let msg = format!("Merge {branch} ({onto}) into {task}'s branch\n");
    // The plain marker style whatever the user's git config says, so a
    // brief can say what the markers look like.
    let out = git::output(
        wt,
        &[
            "-c",
            "merge.conflictStyle=merge",
            "merge",
            "--no-ff",
            "-q",
            "-m",
            &msg,
            onto,
        ],
    )?;
    let conflicts = unmerged(wt)?;
    if !out.status.success() && conflicts.is_empty() {
        return Err(LoopError::Git {
            args: format!("merge {onto}"),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let causes = if conflicts.is_empty() {
        Vec::new()
    } else {
        let mut args = vec![
            "log".to_string(),
            "--format=%h %s".into(),
            format!("{since}..{onto}"),
            "--".into(),
        ];
        args.extend(conflicts.iter().cloned());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        git::run(wt, &a)?.lines().map(str::to_string).collect()
    };
    let merged_tree = worktree_tree(wt, scratch)?;
    Ok(Merged {
        onto: onto.to_string(),
        ours,
        conflicts,
        causes,
        merged_tree,
    })
}

/// Whether `wt` is in the middle of a merge.
pub fn in_merge(wt: &Path) -> bool {
    git::output(wt, &["rev-parse", "-q", "--verify", "MERGE_HEAD"])
        .is_ok_and(|o| o.status.success())
}

/// The files git holds unmerged in `wt`.
fn unmerged(wt: &Path) -> Result<Vec<String>, LoopError> {
    let out = git::run(wt, &["diff", "--name-only", "--diff-filter=U", "-z"])?;
    let mut files: Vec<String> = out
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    files.dedup();
    Ok(files)
}

/// The tree of `wt`'s files as they are now (untracked included, ignored
/// not), written through a temporary index: the worktree's own index, and
/// any conflict it records, stay as they are.
pub fn worktree_tree(wt: &Path, scratch: &Path) -> Result<String, LoopError> {
    crate::store::create_private_dir(scratch)?;
    let index = scratch.join("worktree-tree.index");
    let _ = std::fs::remove_file(&index);
    let idx = Some(index.as_path());
    let result = (|| {
        for args in [&["read-tree", "HEAD"][..], &["add", "-A"][..]] {
            let o = git::output_with_index(wt, idx, args)?;
            if !o.status.success() {
                return Err(LoopError::Git {
                    args: args.join(" "),
                    message: String::from_utf8_lossy(&o.stderr).trim().to_string(),
                });
            }
        }
        let o = git::output_with_index(wt, idx, &["write-tree"])?;
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    })();
    let _ = std::fs::remove_file(&index);
    result
}

/// The files of `files` in `wt` that still hold a conflict marker: a line
/// starting `<<<<<<<` or `>>>>>>>` (`=======` alone is a Markdown heading
/// underline as often as a marker). A file that is gone holds none.
pub fn with_markers(wt: &Path, files: &[String]) -> Vec<String> {
    files
        .iter()
        .filter(|f| {
            std::fs::read(wt.join(f)).is_ok_and(|bytes| {
                bytes
                    .split(|b| *b == b'\n')
                    .any(|l| l.starts_with(b"<<<<<<<") || l.starts_with(b">>>>>>>"))
            })
        })
        .cloned()
        .collect()
}

/// Conclude a merge the lane left open (it resolved the markers but did not
/// commit): everything staged and committed as the merge.
pub fn conclude(wt: &Path) -> Result<(), LoopError> {
    if in_merge(wt) {
        git::run(wt, &["add", "-A"])?;
        git::run(wt, &["commit", "-q", "--no-verify", "--no-edit"])?;
    }
    Ok(())
}

/// The files the lane changed beyond resolving the conflicts of `m`: a file
/// that did not conflict and changed since the merge, or a conflicted file
/// holding a line that neither side had (a resolution only keeps, drops and
/// orders the two sides' lines). Empty: the round resolved the conflicts
/// and did nothing else, so the candidate needs no new review.
pub fn beyond_resolution(wt: &Path, m: &Merged, scratch: &Path) -> Result<Vec<String>, LoopError> {
    let now = worktree_tree(wt, scratch)?;
    let changed = git::run(wt, &["diff", "--name-only", "-z", &m.merged_tree, &now])?;
    let mut beyond = Vec::new();
    for f in changed.split('\0').filter(|s| !s.is_empty()) {
        if !m.conflicts.iter().any(|c| c == f) {
            beyond.push(f.to_string());
            continue;
        }
        let side = |rev: &str| {
            git::output(wt, &["show", &format!("{rev}:{f}")]).map(|o| {
                if o.status.success() {
                    o.stdout
                } else {
                    Vec::new()
                }
            })
        };
        let (ours, theirs) = (side(&m.ours)?, side(&m.onto)?);
        let resolved = std::fs::read(wt.join(f)).unwrap_or_default();
        if !lines_from_sides(&resolved, &ours, &theirs) {
            beyond.push(f.to_string());
        }
    }
    Ok(beyond)
}

/// Whether every line of `resolved` is a line of `ours` or of `theirs` (pure).
pub fn lines_from_sides(resolved: &[u8], ours: &[u8], theirs: &[u8]) -> bool {
    let lines = |b: &[u8]| -> std::collections::BTreeSet<Vec<u8>> {
        b.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect()
    };
    let (o, t) = (lines(ours), lines(theirs));
    resolved
        .split(|c| *c == b'\n')
        .all(|l| o.contains(l) || t.contains(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards the re-review rule: a resolution that keeps and orders the
    /// sides' lines is only a resolution; a new line is more than that.
    #[test]
    fn a_resolution_keeps_only_lines_of_the_two_sides() {
        let ours = b"# greeter (v2)\n";
        let theirs = b"# greeter\n\nSays hello.\n";
        assert!(lines_from_sides(
            b"# greeter (v2)\n\nSays hello.\n",
            ours,
            theirs
        ));
        assert!(lines_from_sides(b"# greeter\n", ours, theirs));
        assert!(!lines_from_sides(
            b"# greeter (v3)\n\nSays hello.\n",
            ours,
            theirs
        ));
        assert!(!lines_from_sides(b"<<<<<<< HEAD\n", ours, theirs));
    }
}
