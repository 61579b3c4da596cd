//! The `git` commands lanes need, run with the real `git` and a clean
//! environment (a hook's `GIT_DIR` must never redirect us to another
//! repository). drover never fetches, pushes or touches a user's branches
//! other than its own `drover/*`.

use super::LaneError;
use crate::git::{Git, GitError};
use std::path::{Path, PathBuf};
use std::process::Output;

fn lane_err(e: GitError) -> LaneError {
    match e {
        GitError::NotFound => {
            LaneError::Git("git not found on PATH: lanes need git; install it or fix PATH".into())
        }
        other => LaneError::Git(other.to_string()),
    }
}

/// Run git in `dir` (through [`crate::git`]); a failure to start it is an
/// error, a non-zero exit is not.
pub fn run(dir: &Path, args: &[&str]) -> Result<Output, LaneError> {
    Git::new(dir).args(args).output().map_err(lane_err)
}

fn first_line(bytes: &[u8]) -> String {
    crate::git::first_line(bytes)
}

/// Run git and return its trimmed stdout; a non-zero exit is an error with
/// git's own message.
pub fn ok(dir: &Path, args: &[&str]) -> Result<String, LaneError> {
    let out = run(dir, args)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(LaneError::Git(format!(
            "git {} failed in {}: {}",
            args.first().copied().unwrap_or(""),
            dir.display(),
            first_line(&out.stderr)
        )))
    }
}

/// `Some(stdout)` on success, `None` on a non-zero exit.
fn maybe(dir: &Path, args: &[&str]) -> Result<Option<String>, LaneError> {
    let out = run(dir, args)?;
    Ok(out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()))
}

/// Fail clearly when git is not installed.
pub fn check_installed() -> Result<(), LaneError> {
    ok(Path::new("."), &["--version"]).map(|_| ())
}

/// The top of the (non-bare) repository containing `dir`.
pub fn toplevel(dir: &Path) -> Result<PathBuf, LaneError> {
    if !dir.is_dir() {
        return Err(LaneError::usage(
            "--repo",
            format!("{} does not exist or is not a directory", dir.display()),
        ));
    }
    match maybe(dir, &["rev-parse", "--show-toplevel"])? {
        Some(top) if !top.is_empty() => {
            Ok(std::fs::canonicalize(&top).unwrap_or_else(|_| PathBuf::from(top)))
        }
        _ => Err(LaneError::usage(
            "--repo",
            format!(
                "{} is not a git repository (or is bare); pass --repo with a checkout",
                dir.display()
            ),
        )),
    }
}

/// Whether `refs/heads/<name>` exists.
pub fn has_branch(repo: &Path, name: &str) -> Result<bool, LaneError> {
    Ok(branch_sha(repo, name)?.is_some())
}

/// The commit of `refs/heads/<name>`.
pub fn branch_sha(repo: &Path, name: &str) -> Result<Option<String>, LaneError> {
    maybe(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{name}^{{commit}}"),
        ],
    )
}

/// The repository's default branch: `origin/HEAD`'s local branch, else
/// `init.defaultBranch`, `main` or `master`, else the branch checked out.
pub fn default_branch(repo: &Path) -> Result<String, LaneError> {
    if let Some(r) = maybe(
        repo,
        &["symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD"],
    )? && let Some(name) = r.strip_prefix("origin/")
        && has_branch(repo, name)?
    {
        return Ok(name.to_string());
    }
    let configured = maybe(repo, &["config", "--get", "init.defaultBranch"])?;
    for cand in configured
        .iter()
        .map(String::as_str)
        .chain(["main", "master"])
    {
        if !cand.is_empty() && has_branch(repo, cand)? {
            return Ok(cand.to_string());
        }
    }
    match maybe(repo, &["symbolic-ref", "-q", "--short", "HEAD"])? {
        Some(b) if has_branch(repo, &b)? => Ok(b),
        _ => Err(LaneError::usage(
            "--base",
            format!(
                "{} has no default branch with commits; pass --base",
                repo.display()
            ),
        )),
    }
}

/// The commit `r` names, if any.
pub fn resolve_commit(repo: &Path, r: &str) -> Result<Option<String>, LaneError> {
    if r.starts_with('-') {
        return Ok(None);
    }
    maybe(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{r}^{{commit}}"),
        ],
    )
}

/// The base's upstream and how many commits the base is behind it.
pub fn behind_upstream(repo: &Path, base: &str) -> Result<Option<(String, u64)>, LaneError> {
    let Some(up) = maybe(
        repo,
        &[
            "rev-parse",
            "--abbrev-ref",
            "--symbolic-full-name",
            &format!("{base}@{{upstream}}"),
        ],
    )?
    else {
        return Ok(None);
    };
    let n = maybe(repo, &["rev-list", "--count", &format!("{base}..{up}")])?
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(Some((up, n)))
}

/// How many commits reachable from `tip` none of `bases` contain.
pub fn count_not_in(repo: &Path, tip: &str, bases: &[&str]) -> Result<u64, LaneError> {
    let mut args = vec!["rev-list", "--count", tip, "--not"];
    args.extend_from_slice(bases);
    let s = ok(repo, &args)?;
    s.parse()
        .map_err(|_| LaneError::Git(format!("git rev-list printed {s:?}")))
}

/// (ahead, behind) of `a` against `b`.
pub fn ahead_behind(repo: &Path, a: &str, b: &str) -> Result<(u64, u64), LaneError> {
    let s = ok(
        repo,
        &["rev-list", "--left-right", "--count", &format!("{a}...{b}")],
    )?;
    let mut it = s.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
    Ok((it.next().unwrap_or(0), it.next().unwrap_or(0)))
}

/// Changed or untracked paths in a checkout, drover's own marker aside.
pub fn changes(dir: &Path) -> Result<Vec<String>, LaneError> {
    let out = ok(
        dir,
        &["status", "--porcelain=v1", "--untracked-files=normal"],
    )?;
    Ok(out
        .lines()
        .filter(|l| !l.is_empty() && l.get(3..) != Some(super::MARKER))
        .map(str::to_string)
        .collect())
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeEntry {
    pub path: PathBuf,
    pub branch: Option<String>,
}

/// How many times `git worktree list` is asked before its failure counts.
const LIST_TRIES: u32 = 4;

/// The repository's worktrees. A listing that races a `git worktree add`
/// of another process (its admin dir made, its `commondir` not yet
/// written: "failed to read .git/worktrees/…") is asked again.
pub fn worktrees(repo: &Path) -> Result<Vec<WorktreeEntry>, LaneError> {
    let mut tries = 0;
    let mut delay = crate::backoff::Backoff::new(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_millis(400),
    );
    let out = loop {
        tries += 1;
        match ok(repo, &["worktree", "list", "--porcelain"]) {
            Ok(out) => break out,
            Err(e) if tries < LIST_TRIES && e.to_string().contains("worktrees/") => {
                std::thread::sleep(delay.next_delay());
            }
            Err(e) => return Err(e),
        }
    };
    let mut list = Vec::new();
    let mut cur: Option<WorktreeEntry> = None;
    for line in out.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            if let Some(e) = cur.take() {
                list.push(e);
            }
            cur = Some(WorktreeEntry {
                path: PathBuf::from(p),
                branch: None,
            });
        } else if let Some(b) = line.strip_prefix("branch refs/heads/")
            && let Some(e) = cur.as_mut()
        {
            e.branch = Some(b.to_string());
        }
    }
    list.extend(cur);
    Ok(list)
}

/// The worktree registered at `path`, if any.
pub fn worktree_at(repo: &Path, path: &Path) -> Result<Option<WorktreeEntry>, LaneError> {
    let want = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(worktrees(repo)?.into_iter().find(|w| {
        std::fs::canonicalize(&w.path).unwrap_or_else(|_| w.path.clone()) == want || w.path == path
    }))
}

/// `drover/*` branches with their commits.
pub fn drover_branches(repo: &Path) -> Result<Vec<(String, String)>, LaneError> {
    let out = ok(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname:short) %(objectname)",
            "refs/heads/drover/",
        ],
    )?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect())
}

/// `git worktree add`: a new branch at `start`, or an existing branch.
pub fn worktree_add(
    repo: &Path,
    path: &Path,
    branch: &str,
    new_at: Option<&str>,
) -> Result<(), LaneError> {
    let p = path.display().to_string();
    match new_at {
        Some(sha) => ok(repo, &["worktree", "add", "-q", "-b", branch, &p, sha]),
        None => ok(repo, &["worktree", "add", "-q", &p, branch]),
    }
    .map(|_| ())
}

/// `git worktree remove` without `--force`: git itself refuses a dirty one.
pub fn worktree_remove(repo: &Path, path: &Path) -> Result<(), LaneError> {
    ok(repo, &["worktree", "remove", &path.display().to_string()]).map(|_| ())
}

/// Forget worktrees whose directories are gone.
pub fn worktree_prune(repo: &Path) -> Result<(), LaneError> {
    ok(repo, &["worktree", "prune"]).map(|_| ())
}

/// Delete `refs/heads/<branch>` only while it still points at `sha`.
pub fn delete_branch(repo: &Path, branch: &str, sha: &str) -> Result<(), LaneError> {
    ok(
        repo,
        &["update-ref", "-d", &format!("refs/heads/{branch}"), sha],
    )
    .map(|_| ())
}

/// Move `refs/heads/<branch>` from `old` to `new` (compare-and-swap).
pub fn move_branch(repo: &Path, branch: &str, new: &str, old: &str) -> Result<(), LaneError> {
    ok(
        repo,
        &["update-ref", &format!("refs/heads/{branch}"), new, old],
    )
    .map(|_| ())
}

/// List drover's own file in the worktree's `info/exclude` so it never
/// counts as dirt.
pub fn exclude_marker(worktree: &Path) -> Result<(), LaneError> {
    let rel = ok(worktree, &["rev-parse", "--git-path", "info/exclude"])?;
    let path = if Path::new(&rel).is_absolute() {
        PathBuf::from(rel)
    } else {
        worktree.join(rel)
    };
    let line = format!("/{}", super::MARKER);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    if text.lines().any(|l| l.trim() == line) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| LaneError::Git(format!("cannot create {}: {e}", dir.display())))?;
    }
    let mut new = text;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(&format!("# drover's lane marker\n{line}\n"));
    std::fs::write(&path, new)
        .map_err(|e| LaneError::Git(format!("cannot write {}: {e}", path.display())))
}

fn nul_list(dir: &Path, args: &[&str]) -> Result<Vec<String>, LaneError> {
    let out = run(dir, args)?;
    if !out.status.success() {
        return Err(LaneError::Git(format!(
            "git ls-files failed in {}: {}",
            dir.display(),
            first_line(&out.stderr)
        )));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

/// The ignored files of `repo` that its `.worktreeinclude` lists
/// (gitignore syntax): exactly what a new worktree gets copied.
pub fn worktreeinclude_files(repo: &Path) -> Result<Vec<String>, LaneError> {
    let include = repo.join(".worktreeinclude");
    if !include.is_file() {
        return Ok(Vec::new());
    }
    let inc = format!("--exclude-from={}", include.display());
    let ignored = nul_list(
        repo,
        &[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
        ],
    )?;
    let listed: std::collections::HashSet<String> =
        nul_list(repo, &["ls-files", "-z", "--others", "--ignored", &inc])?
            .into_iter()
            .collect();
    Ok(ignored.into_iter().filter(|f| listed.contains(f)).collect())
}

/// Copy the `.worktreeinclude` files of `repo` into `worktree`; never
/// overwrites. Returns how many were copied.
pub fn copy_worktreeinclude(repo: &Path, worktree: &Path) -> Result<usize, LaneError> {
    let mut n = 0;
    for rel in worktreeinclude_files(repo)? {
        let from = repo.join(&rel);
        let to = worktree.join(&rel);
        let Ok(meta) = std::fs::symlink_metadata(&from) else {
            continue;
        };
        if !meta.is_file() || to.exists() {
            continue;
        }
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| LaneError::Git(format!("cannot create {}: {e}", dir.display())))?;
        }
        std::fs::copy(&from, &to)
            .map_err(|e| LaneError::Git(format!("cannot copy {rel} into the worktree: {e}")))?;
        n += 1;
    }
    Ok(n)
}
