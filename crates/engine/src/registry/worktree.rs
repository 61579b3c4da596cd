//! Inspecting a lease's worktree with the real `git`, to decide whether an
//! expired lease can be let go or needs a human (docs/registry.md "Leases").

use serde::Serialize;
use std::path::Path;

/// What `git` says about a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "check", rename_all = "kebab-case")]
pub enum WorktreeCheck {
    /// On a branch with nothing uncommitted: safe to let go.
    Clean { branch: String },
    /// Uncommitted or untracked changes.
    Dirty { changes: usize },
    /// HEAD is not on a branch.
    Detached,
    /// On another branch than the lease names.
    WrongBranch { expected: String, actual: String },
    /// The directory does not exist.
    Missing,
    /// `git` could not tell (not a worktree, git failed…).
    InspectionFailed { reason: String },
}

impl WorktreeCheck {
    /// Whether an expired lease on this worktree must become `recovery-needed`.
    pub fn needs_recovery(&self) -> bool {
        !matches!(self, WorktreeCheck::Clean { .. })
    }

    /// A short human reason.
    pub fn describe(&self) -> String {
        match self {
            WorktreeCheck::Clean { branch } => format!("clean on {branch}"),
            WorktreeCheck::Dirty { changes } => {
                format!("worktree is dirty ({changes} changed paths)")
            }
            WorktreeCheck::Detached => "worktree HEAD is detached".into(),
            WorktreeCheck::WrongBranch { expected, actual } => {
                format!("worktree is on {actual}, the lease names {expected}")
            }
            WorktreeCheck::Missing => "worktree is missing".into(),
            WorktreeCheck::InspectionFailed { reason } => {
                format!("worktree cannot be inspected: {reason}")
            }
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<std::process::Output, String> {
    // A hook's environment must not redirect us to another repository.
    crate::git::Git::new(dir)
        .args(args)
        .read_only()
        .output()
        .map_err(|e| e.to_string())
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Inspect `path`; `expected_branch` is the lease's branch, if it names one.
pub fn inspect(path: &Path, expected_branch: Option<&str>) -> WorktreeCheck {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return WorktreeCheck::InspectionFailed {
                reason: "not a directory".into(),
            };
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return WorktreeCheck::Missing,
        Err(e) => {
            return WorktreeCheck::InspectionFailed {
                reason: e.kind().to_string(),
            };
        }
    }
    let top = match git(path, &["rev-parse", "--show-toplevel"]) {
        Ok(o) if o.status.success() => first_line(&o.stdout),
        Ok(o) => {
            return WorktreeCheck::InspectionFailed {
                reason: first_line(&o.stderr),
            };
        }
        Err(reason) => return WorktreeCheck::InspectionFailed { reason },
    };
    let same = match (std::fs::canonicalize(path), std::fs::canonicalize(&top)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same {
        return WorktreeCheck::InspectionFailed {
            reason: "not the top of a git worktree".into(),
        };
    }
    let branch = match git(path, &["symbolic-ref", "-q", "--short", "HEAD"]) {
        Ok(o) if o.status.success() => first_line(&o.stdout),
        Ok(o) if o.status.code() == Some(1) => return WorktreeCheck::Detached,
        Ok(o) => {
            return WorktreeCheck::InspectionFailed {
                reason: first_line(&o.stderr),
            };
        }
        Err(reason) => return WorktreeCheck::InspectionFailed { reason },
    };
    let changes = match git(
        path,
        &["status", "--porcelain=v1", "--untracked-files=normal"],
    ) {
        Ok(o) if o.status.success() => o
            .stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        Ok(o) => {
            return WorktreeCheck::InspectionFailed {
                reason: first_line(&o.stderr),
            };
        }
        Err(reason) => return WorktreeCheck::InspectionFailed { reason },
    };
    if changes > 0 {
        return WorktreeCheck::Dirty { changes };
    }
    match expected_branch {
        Some(want) if !want.is_empty() && want != branch => WorktreeCheck::WrongBranch {
            expected: want.to_string(),
            actual: branch,
        },
        _ => WorktreeCheck::Clean { branch },
    }
}
