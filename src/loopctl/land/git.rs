//! Running git for the loop: every call names its directory, a failure is an
//! error carrying git's own message, commits carry drover's identity.

use crate::loopctl::LoopError;
use std::path::Path;
use std::process::{Command, Output};

/// The e-mail of the loop's commits ([`IDENTITY`]).
pub const IDENTITY_EMAIL: &str = "loop@drover.invalid";

/// The identity of the loop's commits on the integration branch.
pub const IDENTITY: [&str; 4] = [
    "-c",
    "user.name=drover loop",
    "-c",
    "user.email=loop@drover.invalid",
];

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(dir).args(IDENTITY).args(args);
    // The caller's repository variables must not redirect a worktree's git.
    for v in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"] {
        c.env_remove(v);
    }
    c.stdin(std::process::Stdio::null());
    c
}

/// Run git and return its output whatever the exit.
pub fn output(dir: &Path, args: &[&str]) -> Result<Output, LoopError> {
    output_with_index(dir, None, args)
}

/// Run git with its index at `index` (a temporary one, so nothing the
/// worktree's own index holds is touched), returning its output whatever
/// the exit.
pub fn output_with_index(
    dir: &Path,
    index: Option<&Path>,
    args: &[&str],
) -> Result<Output, LoopError> {
    let mut c = command(dir, args);
    if let Some(i) = index {
        c.env("GIT_INDEX_FILE", i);
    }
    c.output().map_err(|e| LoopError::Git {
        args: args.join(" "),
        message: format!("cannot run git: {e}"),
    })
}

/// Run git; a non-zero exit is an error with its stderr. Returns stdout.
pub fn run(dir: &Path, args: &[&str]) -> Result<String, LoopError> {
    let out = output(dir, args)?;
    if !out.status.success() {
        return Err(LoopError::Git {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run git; a non-zero exit is an error with its stderr. Returns stdout as
/// bytes, exactly (a patch is bytes end to end).
pub fn run_bytes(dir: &Path, args: &[&str]) -> Result<Vec<u8>, LoopError> {
    let out = output(dir, args)?;
    if !out.status.success() {
        return Err(LoopError::Git {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}

/// Run git for a trimmed one-line answer.
pub fn line(dir: &Path, args: &[&str]) -> Result<String, LoopError> {
    Ok(run(dir, args)?.trim().to_string())
}

/// The commit a ref names.
pub fn rev(dir: &Path, r: &str) -> Result<String, LoopError> {
    line(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{r}^{{commit}}"),
        ],
    )
}

/// The repository's default base: `main`, else `master`, else HEAD's branch.
pub fn default_base(repo: &Path) -> Result<String, LoopError> {
    for b in ["main", "master"] {
        if rev(repo, &format!("refs/heads/{b}")).is_ok() {
            return Ok(b.to_string());
        }
    }
    line(repo, &["rev-parse", "--abbrev-ref", "HEAD"])
}

/// Whether the worktree at `wt` holds anything its `base` does not: an
/// uncommitted change (untracked files included) or a commit. When git
/// cannot tell, it does: work is never called absent on a guess.
pub fn has_work(wt: &Path, base: &str) -> bool {
    let dirty = run(wt, &["status", "--porcelain", "--untracked-files=all"])
        .map(|s| !s.trim().is_empty())
        .unwrap_or(true);
    let ahead = line(wt, &["rev-list", "--count", &format!("{base}..HEAD")])
        .map(|n| n != "0")
        .unwrap_or(true);
    dirty || ahead
}

/// Add a worktree on a new branch from `base`.
pub fn add_worktree(repo: &Path, path: &Path, branch: &str, base: &str) -> Result<(), LoopError> {
    if let Some(parent) = path.parent() {
        // The worktrees dir is the state dir's: 0700 whatever the umask.
        crate::store::create_private_dir(parent)?;
    }
    let p = path.to_string_lossy();
    run(repo, &["worktree", "add", "-q", "-b", branch, &p, base]).map(|_| ())
}
