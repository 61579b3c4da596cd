//! `drover lane gc`: worktrees under `<state>/worktrees/` and `drover/*`
//! branches that no live lane owns, each removed only under the same
//! conditions as `lane down` (clean, nothing the base lacks, nobody working
//! there, re-checked at removal), else kept with the reason.

use super::{Desired, LaneError, git, procs};
use crate::statedir::StateDir;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One thing gc looked at.
#[derive(Debug, Clone, Serialize)]
pub struct GcItem {
    /// `worktree` or `branch`.
    pub kind: &'static str,
    pub name: String,
    pub repo: Option<PathBuf>,
    /// `removed`, `would-remove` or `kept`.
    pub action: &'static str,
    pub reason: String,
}

fn repo_of(dir: &Path) -> Option<PathBuf> {
    let common = git::ok(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .ok()?;
    let common = PathBuf::from(common);
    if common.file_name().is_some_and(|n| n == ".git") {
        common.parent().map(Path::to_path_buf)
    } else {
        None
    }
}

fn base_of(repo: &Path) -> Option<String> {
    git::default_branch(repo)
        .ok()
        .and_then(|b| git::resolve_commit(repo, &b).ok().flatten())
}

/// Why an unowned `drover/*` branch tip must be kept, if it must.
fn branch_blocker(repo: &Path, tip: &str) -> Result<Option<String>, LaneError> {
    let Some(base) = base_of(repo) else {
        return Ok(Some(
            "the repository has no default branch to compare with".into(),
        ));
    };
    let extra = git::count_not_in(repo, tip, &[&base])?;
    Ok((extra > 0).then(|| format!("{extra} commit(s) not in the default branch")))
}

/// The file a running loop holds locked in its run dir (`<state>/loop<N>/`,
/// LOOP.md); its worktrees are `<state>/worktrees/loop<N>-<task>`.
pub const LOOP_RUN_LOCK: &str = crate::statedir::RUN_LOCK;

/// The loop run (`loop<N>`) whose worktree `name` is, when that run is
/// running now (another process holds its run lock). A worktree of a run
/// that is not running is swept like any other.
pub fn live_loop_run(state_dir: &StateDir, name: &str) -> Option<String> {
    let n: String = name
        .strip_prefix("loop")?
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    if n.is_empty() || !name[4 + n.len()..].starts_with('-') {
        return None;
    }
    let run = format!("loop{n}");
    let lock = state_dir.run_lock(n.parse().ok()?);
    if !lock.is_file() {
        return None;
    }
    match crate::store::LockGuard::try_exclusive(&lock) {
        Ok(None) => Some(run),
        _ => None,
    }
}

/// Sweep (or, with `dry_run`, only list) what no lane owns.
pub fn gc(state_dir: &StateDir, dry_run: bool) -> Result<Vec<GcItem>, LaneError> {
    git::check_installed()?;
    // A dry run changes nothing: it lists without waiting for an operation.
    let _g = if dry_run {
        None
    } else {
        Some(super::op_lock(state_dir)?)
    };
    let doc = super::load(state_dir)?;
    let mut items = Vec::new();
    let mut repos: Vec<PathBuf> = doc.repos.clone();
    let root = state_dir.worktrees_dir();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    // What a dry run would remove: a branch checked out only there would
    // then be free, and is listed as the real sweep would treat it.
    let mut would_go: Vec<PathBuf> = Vec::new();
    let act = |removable: bool| match (removable, dry_run) {
        (true, true) => "would-remove",
        (true, false) => "removed",
        (false, _) => "kept",
    };
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(run) = live_loop_run(state_dir, &name) {
            items.push(GcItem {
                kind: "worktree",
                repo: repo_of(&dir),
                name,
                action: "kept",
                reason: format!(
                    "a worktree of loop run {run}, which is running (its close-out keeps or removes it)"
                ),
            });
            continue;
        }
        if let Some(rec) = doc.lanes.iter().find(|l| l.worktree == dir) {
            if rec.desired == Desired::Up {
                items.push(GcItem {
                    kind: "worktree",
                    name,
                    repo: Some(rec.repo.clone()),
                    action: "kept",
                    reason: format!("owned by lane {} (up)", rec.lane_id),
                });
                continue;
            }
            let blocker = super::down::removal_blocker(rec)?;
            let removable = blocker.is_none();
            let mut reason = blocker.unwrap_or_else(|| {
                format!(
                    "lane {} is down and its worktree is clean and merged",
                    rec.lane_id
                )
            });
            if removable && dry_run {
                would_go.push(dir.clone());
            }
            if removable && !dry_run {
                if let Some(why) = super::down::try_remove(rec)? {
                    reason = why;
                    items.push(GcItem {
                        kind: "worktree",
                        name,
                        repo: Some(rec.repo.clone()),
                        action: "kept",
                        reason,
                    });
                    continue;
                }
                super::update(state_dir, |d| {
                    d.lanes.retain(|l| l.lane_id != rec.lane_id);
                    Ok(())
                })?;
                super::down::unwire(state_dir, &rec.lane_id);
            }
            items.push(GcItem {
                kind: "worktree",
                name,
                repo: Some(rec.repo.clone()),
                action: act(removable),
                reason,
            });
            continue;
        }
        let Some(repo) = repo_of(&dir) else {
            items.push(GcItem {
                kind: "worktree",
                name,
                repo: None,
                action: "kept",
                reason: "not a git worktree: drover never deletes what git does not track".into(),
            });
            continue;
        };
        if !repos.contains(&repo) {
            repos.push(repo.clone());
        }
        let entry = git::worktree_at(&repo, &dir)?;
        let branch = entry.and_then(|e| e.branch);
        let changes = git::changes(&dir)?;
        let users = procs::cwd_users(&dir);
        let tip = match &branch {
            Some(b) => git::branch_sha(&repo, b)?,
            None => None,
        };
        let blocker = if !changes.is_empty() {
            Some(format!(
                "uncommitted work ({} changed path(s))",
                changes.len()
            ))
        } else if !users.is_empty() {
            Some("live process(es) working there".into())
        } else if let (Some(b), Some(t)) = (&branch, &tip) {
            if b.starts_with("drover/") {
                branch_blocker(&repo, t)?
            } else {
                Some(format!("on {b}, not a drover branch"))
            }
        } else {
            Some("HEAD is detached".into())
        };
        let removable = blocker.is_none();
        let mut reason = blocker.unwrap_or_else(|| "no lane owns it; clean and merged".into());
        if removable && dry_run {
            would_go.push(dir.clone());
        }
        if removable && !dry_run {
            match git::worktree_remove(&repo, &dir) {
                Ok(()) => {
                    if let (Some(b), Some(t)) = (&branch, &tip)
                        && branch_blocker(&repo, t)?.is_none()
                    {
                        let _ = git::delete_branch(&repo, b, t);
                    }
                }
                Err(e) => {
                    reason = format!("git kept it: {e}");
                    items.push(GcItem {
                        kind: "worktree",
                        name,
                        repo: Some(repo),
                        action: "kept",
                        reason,
                    });
                    continue;
                }
            }
        }
        items.push(GcItem {
            kind: "worktree",
            name,
            repo: Some(repo),
            action: act(removable),
            reason,
        });
    }
    for repo in repos.iter().filter(|r| r.is_dir()) {
        let _ = git::worktree_prune(repo);
        let checked_out: Vec<(PathBuf, Option<String>)> = git::worktrees(repo)?
            .into_iter()
            .filter(|w| !would_go.contains(&w.path))
            .map(|w| (w.path, w.branch))
            .collect();
        for (b, tip) in git::drover_branches(repo)? {
            let doc = super::load(state_dir)?;
            if let Some(rec) = doc.lanes.iter().find(|l| &l.repo == repo && l.branch == b) {
                if rec.desired == Desired::Up {
                    items.push(GcItem {
                        kind: "branch",
                        name: b,
                        repo: Some(repo.clone()),
                        action: "kept",
                        reason: format!("owned by lane {} (up)", rec.lane_id),
                    });
                }
                continue;
            }
            if let Some((p, _)) = checked_out
                .iter()
                .find(|(_, br)| br.as_deref() == Some(b.as_str()))
            {
                items.push(GcItem {
                    kind: "branch",
                    name: b,
                    repo: Some(repo.clone()),
                    action: "kept",
                    reason: format!("checked out at {}", p.display()),
                });
                continue;
            }
            let blocker = branch_blocker(repo, &tip)?;
            let removable = blocker.is_none();
            let mut reason =
                blocker.unwrap_or_else(|| "no lane owns it; merged into the default branch".into());
            if removable
                && !dry_run
                && let Err(e) = git::delete_branch(repo, &b, &tip)
            {
                reason = format!("git kept it: {e}");
                items.push(GcItem {
                    kind: "branch",
                    name: b,
                    repo: Some(repo.clone()),
                    action: "kept",
                    reason,
                });
                continue;
            }
            items.push(GcItem {
                kind: "branch",
                name: b,
                repo: Some(repo.clone()),
                action: act(removable),
                reason,
            });
        }
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = crate::git::Git::new(dir)
            .identity("t", "t@t.invalid")
            .args(args)
            .succeeds();
        assert!(ok, "git {args:?}");
    }

    /// Guards gc during a loop run: a run's clean, merged worktree between
    /// its lanes is the run's while the run holds its lock, and swept after.
    #[test]
    fn gc_keeps_a_live_loop_runs_worktree_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (repo, state) = (root.join("repo"), root.join("state"));
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
        let wt = state.join("worktrees").join("loop1-task-1");
        let wt_s = wt.to_string_lossy().into_owned();
        git(
            &repo,
            &["worktree", "add", "-q", "-b", "drover/loop1/TASK-1", &wt_s],
        );
        std::fs::create_dir_all(state.join("loop1")).unwrap();
        let lock = state.join("loop1").join(LOOP_RUN_LOCK);
        let held = crate::store::LockGuard::try_exclusive(&lock)
            .unwrap()
            .unwrap();
        assert_eq!(
            live_loop_run(StateDir::new(&state), "loop1-task-1").as_deref(),
            Some("loop1")
        );
        assert_eq!(live_loop_run(StateDir::new(&state), "loop1x-task-1"), None);
        assert_eq!(
            live_loop_run(StateDir::new(&state), "implementer-claude"),
            None
        );
        let items = gc(StateDir::new(&state), false).unwrap();
        let it = items.iter().find(|i| i.name == "loop1-task-1").unwrap();
        assert_eq!(it.action, "kept");
        assert!(
            it.reason.contains("loop run loop1, which is running"),
            "{}",
            it.reason
        );
        assert!(wt.exists());
        drop(held);
        let items = gc(StateDir::new(&state), false).unwrap();
        let it = items.iter().find(|i| i.name == "loop1-task-1").unwrap();
        assert_eq!(it.action, "removed", "{}", it.reason);
        assert!(!wt.exists());
    }
}
