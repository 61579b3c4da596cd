//! The pre-land gate runs in a checkout of its own: the candidate (its
//! base with its patch applied, committed by drover on no branch) checked
//! out beside the task's worktree as `<worktree>.gate`. Nothing the gate
//! writes there (`.coverage`, build output, a file inside the task's claim)
//! can enter a candidate, which is captured from the task's worktree only.
//! The checkout is drover's own, not the agent's work: it holds the
//! candidate, already committed, and the gate's outputs, so it is removed
//! after each run (and a leftover of a killed run before the next one).

use crate::loopctl::LoopError;
use crate::loopctl::child::Bounds;
use crate::loopctl::land::setup::Setup;
use crate::loopctl::land::{GateRun, git, run_gate_env};
use std::path::{Path, PathBuf};

/// Where the gate's checkout of the candidate of `worktree` goes: beside it,
/// named with a `.gate` suffix (a task's slug never holds a dot, so no task's
/// worktree is ever named so).
pub fn checkout_path(worktree: &Path) -> PathBuf {
    let mut name = worktree
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".gate");
    worktree.with_file_name(name)
}

/// The candidate as a commit: `base` with `patch` applied, in a temporary
/// index (the task worktree's own index is not touched), parented on `base`,
/// made with `commit-tree` (no hook runs).
fn candidate_commit(worktree: &Path, base: &str, patch: &Path) -> Result<String, LoopError> {
    let index = checkout_path(worktree).with_extension("gate-index");
    let _ = std::fs::remove_file(&index);
    let p = patch.to_string_lossy();
    let run = |args: &[&str]| -> Result<String, LoopError> {
        let out = git::output_with_index(worktree, Some(&index), args)?;
        if !out.status.success() {
            return Err(LoopError::Git {
                args: args.join(" "),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let made = run(&["read-tree", base])
        .and_then(|_| run(&["apply", "--cached", "--binary", &p]))
        .and_then(|_| run(&["write-tree"]))
        .and_then(|tree| {
            git::line(
                worktree,
                &[
                    "commit-tree",
                    &tree,
                    "-p",
                    base,
                    "-m",
                    "drover: the candidate under its gate",
                ],
            )
        });
    let _ = std::fs::remove_file(&index);
    made
}

/// Remove the gate's checkout of the candidate of `worktree` (and git's
/// record of it), running git in `repo` (the repository or any of its
/// worktrees).
pub fn remove_checkout(repo: &Path, worktree: &Path) {
    let dir = checkout_path(worktree);
    if dir.exists() {
        let p = dir.to_string_lossy();
        if git::run(repo, &["worktree", "remove", "--force", &p]).is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = git::run(repo, &["worktree", "prune"]);
    }
}

/// Run the gate `cmd` on the candidate (`patch` on `base`) in a checkout of
/// its own, its output in `log`; the checkout is removed after.
pub fn run_gate_on_candidate(
    worktree: &Path,
    base: &str,
    patch: &Path,
    cmd: &str,
    log: &Path,
    bounds: &Bounds,
    (setup, env): (Option<&Setup>, &[(String, String)]),
) -> Result<GateRun, LoopError> {
    remove_checkout(worktree, worktree);
    // A checkout removed by hand is still registered until pruned.
    let _ = git::run(worktree, &["worktree", "prune"]);
    let commit = candidate_commit(worktree, base, patch)?;
    let dir = checkout_path(worktree);
    let p = dir.to_string_lossy();
    git::run(
        worktree,
        &["worktree", "add", "-q", "--detach", &p, &commit],
    )?;
    // A fresh checkout needs what the charter's `setup:` makes, as a
    // task's worktree does.
    if let Some(setup) = setup {
        let ran = setup.run(&dir, env);
        if !matches!(ran, Ok(Ok(()))) {
            remove_checkout(worktree, worktree);
        }
        if let Err(failed) = ran? {
            return Err(LoopError::Setup {
                lane: String::new(),
                reason: failed.reason("the gate's checkout"),
            });
        }
    }
    let g = run_gate_env(&dir, cmd, log, bounds, env);
    remove_checkout(worktree, worktree);
    g
}
