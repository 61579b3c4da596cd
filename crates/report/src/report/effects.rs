//! The side effects of a lane's work, computed by drover from its worktree
//! against the merge-base with the lane's base: every file added, changed
//! or deleted, committed or not, untracked files included. Read-only (no
//! index refresh is written), so it runs inside an agent's sandbox.

use super::ReportError;
use std::path::Path;

/// One file the work changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileChange {
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub change: &'static str,
}

fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, ReportError> {
    // Never write the index: a sandboxed agent cannot, and a report is a read.
    let out = crate::git::Git::new(dir)
        .args(args)
        .read_only()
        .output()
        .map_err(|e| ReportError::Git {
            worktree: dir.to_path_buf(),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(ReportError::Git {
            worktree: dir.to_path_buf(),
            message: format!(
                "git {} failed: {}",
                args.first().copied().unwrap_or(""),
                crate::git::first_line(err.as_bytes())
            ),
        });
    }
    Ok(out.stdout)
}

/// The files changed in `worktree` against the merge-base of its HEAD and
/// `base` (`None`: HEAD itself), sorted by path. A merge-base that cannot
/// be found is an error, never "nothing changed".
pub fn changes(worktree: &Path, base: Option<&str>) -> Result<Vec<FileChange>, ReportError> {
    let from = match base {
        Some(b) => {
            let mb = git(worktree, &["merge-base", "HEAD", b])?;
            String::from_utf8_lossy(&mb).trim().to_string()
        }
        None => "HEAD".to_string(),
    };
    let mut out = Vec::new();
    let diff = git(
        worktree,
        &["diff", "--name-status", "--no-renames", "-z", &from, "--"],
    )?;
    let mut fields = diff.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        let change = match status.first() {
            Some(b'A') => "added",
            Some(b'D') => "deleted",
            _ => "modified",
        };
        out.push(FileChange {
            path: String::from_utf8_lossy(path).into_owned(),
            change,
        });
    }
    let untracked = git(
        worktree,
        &["ls-files", "--others", "--exclude-standard", "-z"],
    )?;
    for p in untracked.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        out.push(FileChange {
            path: String::from_utf8_lossy(p).into_owned(),
            change: "added",
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) -> String {
        let o = crate::git::Git::new(dir)
            .identity("t", "t@e")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    }

    /// A report's effects and a lease's worktree check, in a repository
    /// whose configuration would run a program at every turn of git, run
    /// none of it.
    #[test]
    fn a_hostile_repository_runs_nothing_here() {
        let d = tempfile::tempdir().unwrap();
        let (r, marker) = crate::git::hostile::hostile_repo(d.path());
        let g = |args: &[&str]| {
            crate::git::Git::new(&r)
                .args(args.iter().copied())
                .drover_identity()
                .run()
                .unwrap()
        };
        g(&["checkout", "-q", "-b", "other"]);
        std::fs::write(r.join("a.txt"), "one\n2\nthree\n").unwrap();
        g(&["commit", "-q", "-am", "other"]);
        let effects = changes(&r, Some("main")).unwrap();
        assert!(effects.iter().any(|c| c.path == "a.txt"), "{effects:?}");
        let _ = crate::registry::worktree::inspect(&r, Some("other"));
        assert!(!marker.exists(), "a repository-defined program ran");
    }

    #[test]
    fn added_changed_deleted_and_untracked_files_against_the_merge_base() {
        let d = tempfile::tempdir().unwrap();
        let w = d.path();
        sh(w, &["init", "-q", "-b", "main"]);
        std::fs::write(w.join("keep.txt"), "a\n").unwrap();
        std::fs::write(w.join("gone.txt"), "a\n").unwrap();
        sh(w, &["add", "-A"]);
        sh(w, &["commit", "-q", "-m", "base"]);
        let base = sh(w, &["rev-parse", "HEAD"]);
        sh(w, &["checkout", "-q", "-b", "lane"]);
        std::fs::write(w.join("committed.txt"), "c\n").unwrap();
        sh(w, &["add", "committed.txt"]);
        sh(w, &["commit", "-q", "-m", "lane work"]);
        std::fs::write(w.join("keep.txt"), "b\n").unwrap();
        std::fs::remove_file(w.join("gone.txt")).unwrap();
        std::fs::create_dir(w.join("new")).unwrap();
        std::fs::write(w.join("new/file.txt"), "n\n").unwrap();
        let got = changes(w, Some(&base)).unwrap();
        let view: Vec<(&str, &str)> = got.iter().map(|c| (c.path.as_str(), c.change)).collect();
        assert_eq!(
            view,
            [
                ("committed.txt", "added"),
                ("gone.txt", "deleted"),
                ("keep.txt", "modified"),
                ("new/file.txt", "added")
            ]
        );
        assert!(changes(w, Some("no-such-ref")).is_err(), "fails closed");
    }
}
