//! Reading a lane's report and checking its declared side effects.
//!
//! `report.json` (written by the lane, atomically):
//! ```json
//! {"attempt_id": "A1", "session_id": "implementer", "state": "finalized",
//!  "manifest": {"attempt_id": "A1", "files": ["out/result.txt"], "commits": ["<sha>"]}}
//! ```
//! Instead of `manifest`, a report may list `side_effects`:
//! `[{"kind": "file", "path": "…"}, {"kind": "commit", "id": "<sha>"}]`.
//! A report declaring neither declares nothing, and verification fails
//! closed: only an explicit (possibly empty) declaration can be proven.

use serde::Deserialize;
use std::path::{Component, Path};

/// A lane's report.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Report {
    #[serde(default, alias = "attempt")]
    pub attempt_id: Option<String>,
    #[serde(default, alias = "session")]
    pub session_id: Option<String>,
    pub state: crate::evidence::LaneReportState,
    #[serde(default)]
    pub manifest: Option<Manifest>,
    #[serde(default)]
    pub side_effects: Option<Vec<SideEffect>>,
    /// What the agent said of its turn (`done`, `failed`, `blocked`;
    /// absent: done).
    #[serde(default)]
    pub outcome: Option<String>,
    /// Why it failed or is blocked.
    #[serde(default)]
    pub reason: Option<String>,
}

/// One declared side effect in the `side_effects` form.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SideEffect {
    pub kind: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default, alias = "sha")]
    pub id: Option<String>,
    /// `added`, `modified` or `deleted` (a deleted file is proven absent).
    #[serde(default)]
    pub change: Option<String>,
}

impl Report {
    /// The declared side effects, whichever form the report used.
    pub fn declared(&self) -> Option<Manifest> {
        if let Some(m) = &self.manifest {
            return Some(m.clone());
        }
        let list = self.side_effects.as_ref()?;
        let mut m = Manifest {
            attempt_id: None,
            files: Vec::new(),
            commits: Vec::new(),
            deleted: Vec::new(),
        };
        for se in list {
            match (se.kind.as_str(), &se.path, &se.id) {
                ("file", Some(p), _) if se.change.as_deref() == Some("deleted") => {
                    m.deleted.push(p.clone())
                }
                ("file", Some(p), _) => m.files.push(p.clone()),
                ("commit", _, Some(id)) => m.commits.push(id.clone()),
                // An effect we cannot check must not pass as checked.
                _ => m.files.push(String::new()),
            }
        }
        Some(m)
    }
}

/// Declared side effects.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Manifest {
    #[serde(default)]
    pub attempt_id: Option<String>,
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub commits: Vec<String>,
    /// Files the work deleted: proven by their absence.
    #[serde(default)]
    pub deleted: Vec<String>,
}

/// Read a report; `None` when absent or unreadable (mid-write, corrupt): an
/// unreadable report is no report, which the policy holds on.
pub fn read_report(path: &Path) -> Option<Report> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The outcome of a manifest check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub proven: bool,
    pub detail: String,
}

fn safe_relative(p: &str) -> bool {
    let path = Path::new(p);
    !p.is_empty()
        && !p.contains('\0')
        && path.is_relative()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Check every declared side effect in `worktree`: named files exist (inside
/// it), named commits exist and are on its current branch. Fails closed.
pub fn verify_manifest(report: &Report, worktree: Option<&Path>) -> Verified {
    let no = |detail: String| Verified {
        proven: false,
        detail,
    };
    let Some(m) = report.declared() else {
        return no("the report declares no side effects".into());
    };
    let Some(wt) = worktree else {
        return no("no worktree recorded for the dispatch".into());
    };
    if !wt.is_dir() {
        return no("the worktree is missing".into());
    }
    for f in &m.files {
        if !safe_relative(f) {
            if f.is_empty() {
                return no("a declared side effect cannot be checked".into());
            }
            return no(format!(
                "declared file {f:?} is not a relative path inside the worktree"
            ));
        }
        if !wt.join(f).exists() {
            return no(format!("declared file {f} does not exist"));
        }
    }
    for f in &m.deleted {
        if !safe_relative(f) {
            return no(format!(
                "declared file {f:?} is not a relative path inside the worktree"
            ));
        }
        if wt.join(f).exists() {
            return no(format!("declared deleted file {f} still exists"));
        }
    }
    for c in &m.commits {
        if c.is_empty() || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
            return no(format!("declared commit {c:?} is not a commit id"));
        }
        let on_branch = crate::git::Git::new(wt)
            .args(["merge-base", "--is-ancestor", c, "HEAD"])
            .read_only()
            .succeeds();
        if !on_branch {
            return no(format!("declared commit {c} is not on the lane branch"));
        }
    }
    Verified {
        proven: true,
        detail: format!(
            "{} file(s), {} commit(s) verified",
            m.files.len(),
            m.commits.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(manifest: Option<Manifest>) -> Report {
        Report {
            attempt_id: Some("A1".into()),
            session_id: Some("s".into()),
            state: crate::evidence::LaneReportState::Finalized,
            manifest,
            side_effects: None,
            outcome: None,
            reason: None,
        }
    }

    #[test]
    fn files_must_exist_inside_the_worktree() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "x").unwrap();
        let m = |files: &[&str]| {
            Some(Manifest {
                attempt_id: None,
                files: files.iter().map(|s| s.to_string()).collect(),
                commits: vec![],
                deleted: vec![],
            })
        };
        assert!(verify_manifest(&report(m(&["a.txt"])), Some(d.path())).proven);
        assert!(!verify_manifest(&report(m(&["b.txt"])), Some(d.path())).proven);
        assert!(!verify_manifest(&report(m(&["../a.txt"])), Some(d.path())).proven);
        assert!(!verify_manifest(&report(m(&["/etc/passwd"])), Some(d.path())).proven);
        assert!(
            !verify_manifest(&report(None), Some(d.path())).proven,
            "fails closed"
        );
        assert!(!verify_manifest(&report(m(&[])), None).proven);
        assert!(verify_manifest(&report(m(&[])), Some(d.path())).proven);
    }

    #[test]
    fn side_effects_form_is_checked_too() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "x").unwrap();
        let r: Report = serde_json::from_str(
            r#"{"attempt_id":"A","state":"finalized","side_effects":[{"kind":"file","path":"a.txt"}]}"#,
        )
        .unwrap();
        assert!(verify_manifest(&r, Some(d.path())).proven);
        let r: Report = serde_json::from_str(
            r#"{"attempt_id":"A","state":"finalized","side_effects":[{"kind":"database","path":"x"}]}"#,
        )
        .unwrap();
        assert!(
            !verify_manifest(&r, Some(d.path())).proven,
            "unknown kinds fail closed"
        );
    }

    #[test]
    fn commits_must_be_on_the_branch() {
        let d = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let o = crate::git::Git::new(d.path()).args(args).output().unwrap();
            assert!(
                o.status.success(),
                "{:?}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8(o.stdout).unwrap().trim().to_string()
        };
        git(&["init", "-q"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "c1",
        ]);
        let sha = git(&["rev-parse", "HEAD"]);
        let r = report(Some(Manifest {
            attempt_id: None,
            files: vec![],
            commits: vec![sha],
            deleted: vec![],
        }));
        assert!(verify_manifest(&r, Some(d.path())).proven);
        let bad = report(Some(Manifest {
            attempt_id: None,
            files: vec![],
            commits: vec!["deadbeef".into()],
            deleted: vec![],
        }));
        assert!(!verify_manifest(&bad, Some(d.path())).proven);
    }
}
