//! Running git for the loop: every call names its directory, a failure is an
//! error carrying git's own message, commits carry drover's identity.

use crate::git::Git;
use crate::loopctl::LoopError;
use std::path::Path;
use std::process::Output;

/// The e-mail of the loop's commits ([`IDENTITY`]).
pub const IDENTITY_EMAIL: &str = crate::git::IDENTITY_EMAIL;

/// The identity of the loop's commits on the integration branch, as `-c`
/// arguments (for a caller building its own command).
pub const IDENTITY: [&str; 4] = [
    "-c",
    "user.name=drover loop",
    "-c",
    "user.email=loop@drover.invalid",
];

static SIGN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the loop's commits sign (`drover loop run --sign`); off unless
/// asked, for the whole process.
pub fn set_sign(on: bool) {
    SIGN.store(on, std::sync::atomic::Ordering::SeqCst);
}

/// Whether the loop's commits sign.
pub fn signing() -> bool {
    SIGN.load(std::sync::atomic::Ordering::SeqCst)
}

fn command(dir: &Path, args: &[&str]) -> Git {
    Git::new(dir)
        .drover_identity()
        .sign(SIGN.load(std::sync::atomic::Ordering::SeqCst))
        .args(args)
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
        c = c.index(i);
    }
    c.output().map_err(|e| LoopError::Git {
        args: args.join(" "),
        message: e.to_string(),
    })
}

/// Run git; a non-zero exit is an error with its stderr. Returns stdout.
pub fn run(dir: &Path, args: &[&str]) -> Result<String, LoopError> {
    let out = output(dir, args)?;
    if !out.status.success() {
        return Err(LoopError::Git {
            args: args.join(" "),
            message: crate::git::first_line(&out.stderr),
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
            message: crate::git::first_line(&out.stderr),
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
