//! The `claimed_files` scope of a lease: which changed files a task may touch.

use super::lease::{check_file, list};
use super::{RegistryError, validate_id};
use crate::statedir::StateDir;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// The answer of a scope check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scope {
    /// The files outside `claimed_files`.
    pub out_of_scope: Vec<String>,
    /// True when the lease claims no files, so nothing is enforced.
    pub unenforced: bool,
}

/// Check changed files against a lease's `claimed_files` (pure).
pub fn scope_of(claimed: &[String], files: &[String]) -> Scope {
    if claimed.is_empty() {
        return Scope {
            out_of_scope: Vec::new(),
            unenforced: true,
        };
    }
    let out_of_scope = files
        .iter()
        .filter(|f| {
            let f = f.trim_start_matches("./");
            !claimed.iter().any(|c| claim_matches(c, f))
        })
        .cloned()
        .collect();
    Scope {
        out_of_scope,
        unenforced: false,
    }
}

/// Whether one claimed entry covers a file: the same path, a directory above
/// it (`src` or `src/`), or a glob (`*` within a segment, `**` across).
pub fn claim_matches(claim: &str, file: &str) -> bool {
    let claim = claim.trim_start_matches("./");
    if claim.contains('*') {
        let c: Vec<&str> = claim.split('/').collect();
        let f: Vec<&str> = file.split('/').collect();
        return glob_segments(&c, &f);
    }
    let dir = claim.trim_end_matches('/');
    file == dir
        || file
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn glob_segments(c: &[&str], f: &[&str]) -> bool {
    match c.split_first() {
        None => f.is_empty(),
        Some((&"**", rest)) => (0..=f.len()).any(|i| glob_segments(rest, &f[i..])),
        Some((seg, rest)) => {
            !f.is_empty()
                && glob_one(seg.as_bytes(), f[0].as_bytes())
                && glob_segments(rest, &f[1..])
        }
    }
}

fn glob_one(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob_one(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob_one(rest, &s[1..]),
    }
}

impl Scope {
    /// The refusal to report when files are out of scope.
    pub fn refusal(&self, task: &str) -> Option<RegistryError> {
        (!self.out_of_scope.is_empty()).then(|| {
            RegistryError::refused(
                format!("lease check-scope {task}"),
                format!(
                    "out of the lease's claimed_files: {}",
                    self.out_of_scope.join(", ")
                ),
            )
        })
    }
}

/// Check files against the task's lease. `Refused` when there is no lease;
/// files out of scope are listed in the answer (see [`Scope::refusal`]).
pub fn check_scope(
    state_dir: &StateDir,
    task: &str,
    files: &[String],
    now: DateTime<Utc>,
) -> Result<Scope, RegistryError> {
    validate_id("TASK", task)?;
    for f in files {
        check_file("FILE", f)?;
    }
    let Some(lease) = list(state_dir, now)?
        .into_iter()
        .find(|l| l.eligible() && l.task_id.as_deref() == Some(task))
    else {
        return Err(RegistryError::refused(
            format!("lease check-scope {task}"),
            format!("no lease for task {task}"),
        ));
    };
    Ok(scope_of(&lease.claimed_files, files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_matching() {
        let claimed = vec![
            "src/registry/".to_string(),
            "docs/registry.md".into(),
            "tests/registry_*.rs".into(),
            "src/gate".into(),
        ];
        let files: Vec<String> = [
            "src/registry/mod.rs",
            "./docs/registry.md",
            "tests/registry_cli.rs",
            "src/gate/mod.rs",
            "src/gateway.rs",
            "tests/other.rs",
            "src/registry.rs",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = scope_of(&claimed, &files);
        assert_eq!(
            s.out_of_scope,
            ["src/gateway.rs", "tests/other.rs", "src/registry.rs"]
        );
        assert!(claim_matches("src/**/*.rs", "src/a/b/c.rs"));
        assert!(claim_matches("src/**", "src/x"));
        assert!(!claim_matches("src/*.rs", "src/a/b.rs"));
        assert!(scope_of(&[], &files).unenforced);
    }
}
