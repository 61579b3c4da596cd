//! The files a backend whose panes outlive the supervisor (tmux, herdr)
//! keeps per pane for re-adoption: written private and atomically, read back
//! with unreadable or other-version files reported and left in place.

use super::spec::{PaneSpec, PaneSpecExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What every such backend saves of a pane beside its own ids: its name,
/// its process, its generation and its spec (env names only, never values).
/// Flattened into each backend's file, so the fields sit at its top level.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SavedProcess {
    pub(crate) name: String,
    pub(crate) pid: u32,
    pub(crate) pid_start_time: u64,
    pub(crate) generation: u64,
    pub(crate) argv: Vec<String>,
    pub(crate) env_names: Vec<String>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) cols: u16,
    pub(crate) rows: u16,
    pub(crate) agent: String,
    pub(crate) created_at: String,
}

impl SavedProcess {
    /// Generation `generation` of `spec`, led by `pid`, made at `created_at`.
    pub(crate) fn of(spec: &PaneSpec, pid: u32, generation: u64, created_at: &str) -> Self {
        SavedProcess {
            name: spec.name.clone(),
            pid,
            pid_start_time: super::record::start_time(pid).unwrap_or(0),
            generation,
            argv: spec.argv.clone(),
            env_names: spec.env_names(),
            cwd: spec.cwd.clone(),
            cols: spec.cols,
            rows: spec.rows,
            agent: spec.agent.clone(),
            created_at: created_at.to_string(),
        }
    }

    /// Whether the saved process still runs: the same pid with the same
    /// start time (not a later process that reused the pid).
    pub(crate) fn still_runs(&self) -> bool {
        super::record::start_time(self.pid) == Some(self.pid_start_time)
    }

    /// The spec to re-adopt the pane with, its env values read back from
    /// the running process (they were never saved).
    pub(crate) fn spec(&self) -> PaneSpec {
        let names: Vec<&str> = self.env_names.iter().map(String::as_str).collect();
        PaneSpec {
            name: self.name.clone(),
            argv: self.argv.clone(),
            env: super::env_values(self.pid, &names),
            cwd: self.cwd.clone(),
            cols: self.cols,
            rows: self.rows,
            agent: self.agent.clone(),
        }
    }
}

/// Write `doc` atomically as JSON at `path`, the file 0600 in a 0700 dir.
pub(crate) fn write_private<T: Serialize>(path: &Path, doc: &T) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        crate::store::create_private_dir(parent).map_err(|e| e.to_string())?;
    }
    crate::store::write_json_atomic(path, doc).map_err(|e| e.to_string())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// One saved pane: its schema version and name.
pub(crate) trait Saved: DeserializeOwned {
    fn schema_version(&self) -> u32;
    fn name(&self) -> &str;
}

/// Every `*.json` in `dir` of schema `schema`, by name; `what` names the
/// backend in the warning for a file that is corrupt or of another version
/// (left alone, never reset).
pub(crate) fn load_all<T: Saved>(dir: &Path, schema: u32, what: &str) -> Vec<T> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<T> = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let hidden = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden || p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        match crate::store::read_json::<T>(&p) {
            Ok(Some(s)) if s.schema_version() == schema => out.push(s),
            Ok(Some(s)) => {
                tracing::warn!(file = %p.display(), version = s.schema_version(), "{what} pane state of another version; left alone")
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(file = %p.display(), error = %e, "corrupt {what} pane state; left alone")
            }
        }
    }
    out.sort_by(|a, b| a.name().cmp(b.name()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize)]
    struct Doc {
        schema_version: u32,
        name: String,
    }
    impl Saved for Doc {
        fn schema_version(&self) -> u32 {
            self.schema_version
        }
        fn name(&self) -> &str {
            &self.name
        }
    }

    #[test]
    fn other_versions_and_corrupt_files_are_left_in_place() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("panes");
        let doc = |v, n: &str| Doc {
            schema_version: v,
            name: n.into(),
        };
        write_private(&d.join("b.json"), &doc(1, "b")).unwrap();
        write_private(&d.join("a.json"), &doc(1, "a")).unwrap();
        write_private(&d.join("old.json"), &doc(0, "old")).unwrap();
        std::fs::write(d.join("bad.json"), "{not json").unwrap();
        std::fs::write(d.join(".tmp.json"), "{").unwrap();
        let names: Vec<String> = load_all::<Doc>(&d, 1, "test")
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            std::fs::read_to_string(d.join("bad.json")).unwrap(),
            "{not json"
        );
        assert!(d.join("old.json").exists());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d.join("a.json")), 0o600);
        assert_eq!(mode(&d), 0o700);
    }
}
