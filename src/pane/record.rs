//! The pane record: what a supervisor leaves on disk about each live pane,
//! `<state>/panes/<name>.json`, so the next supervisor can re-adopt panes
//! that outlive it (tmux) or report and end what a dead one left (native).
//! Never holds an env value.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record format's version.
pub const RECORD_SCHEMA: u32 = 1;

/// A process that belonged to the pane, identified across pid reuse.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProcId {
    pub pid: u32,
    /// `/proc/<pid>/stat` field 22 (clock ticks since boot).
    pub start_time: u64,
}

/// One pane's record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PaneRecord {
    pub schema_version: u32,
    pub name: String,
    /// `native`, `tmux` or `herdr`.
    pub backend: String,
    /// The backend's own id for the pane (tmux `%N`, a herdr pane id).
    pub backend_pane_id: Option<String>,
    pub pid: u32,
    pub pid_start_time: u64,
    pub pgid: u32,
    pub generation: u64,
    pub boot_id: String,
    /// RFC 3339.
    pub created_at: String,
    pub agent: String,
    #[serde(default)]
    pub descendants: Vec<ProcId>,
}

/// Errors reading or writing records; each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(
        "pane record {path} has schema_version {found}, not {RECORD_SCHEMA}: written by another drover version"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("pane record {path} names pane {name:?}: the file name and the record disagree")]
    NameMismatch { path: PathBuf, name: String },
}

/// The directory of pane records.
pub fn records_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("panes")
}

/// The record file of pane `name`.
pub fn record_path(state_dir: &Path, name: &str) -> PathBuf {
    records_dir(state_dir).join(format!("{name}.json"))
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): a record from another
/// boot describes processes that no longer exist.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Write a record atomically, private to the user.
pub fn write(state_dir: &Path, rec: &PaneRecord) -> Result<(), RecordError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = records_dir(state_dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| crate::store::StoreError::io("create dir", &dir, e))?;
    let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
    let path = record_path(state_dir, &rec.name);
    crate::store::write_json_atomic(&path, rec)?;
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    Ok(())
}

/// Remove a record (gone already is fine).
pub fn remove(state_dir: &Path, name: &str) {
    let _ = std::fs::remove_file(record_path(state_dir, name));
}

/// Read one record; a bad version or a name that disagrees with the file is
/// an error naming the file, never silently skipped.
pub fn read(path: &Path) -> Result<Option<PaneRecord>, RecordError> {
    let Some(rec) = crate::store::read_json::<PaneRecord>(path)? else {
        return Ok(None);
    };
    if rec.schema_version != RECORD_SCHEMA {
        return Err(RecordError::Version {
            path: path.to_path_buf(),
            found: rec.schema_version,
        });
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if stem != rec.name {
        return Err(RecordError::NameMismatch {
            path: path.to_path_buf(),
            name: rec.name,
        });
    }
    Ok(Some(rec))
}

/// Every record in the state dir (each read or its error).
pub fn read_all(state_dir: &Path) -> Vec<Result<PaneRecord, RecordError>> {
    let Ok(rd) = std::fs::read_dir(records_dir(state_dir)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    paths.sort();
    paths.iter().filter_map(|p| read(p).transpose()).collect()
}

/// A process's start time (`/proc/<pid>/stat` field 22).
pub fn start_time(pid: u32) -> Option<u64> {
    super::procfs::stat(pid).map(|s| s.starttime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str) -> PaneRecord {
        PaneRecord {
            schema_version: RECORD_SCHEMA,
            name: name.into(),
            backend: "tmux".into(),
            backend_pane_id: Some("%3".into()),
            pid: 42,
            pid_start_time: 7,
            pgid: 42,
            generation: 2,
            boot_id: boot_id(),
            created_at: crate::paths::now_rfc3339(),
            agent: "sim".into(),
            descendants: vec![],
        }
    }

    #[test]
    fn round_trips_and_checks_names() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &rec("a")).unwrap();
        let all = read_all(dir.path());
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].as_ref().unwrap(), &rec("a").clone_with_time(&all[0]));
        // A record whose name disagrees with its file is corrupt.
        let bad = rec("b");
        crate::store::write_json_atomic(&record_path(dir.path(), "c"), &bad).unwrap();
        let all = read_all(dir.path());
        assert!(
            all.iter()
                .any(|r| matches!(r, Err(RecordError::NameMismatch { .. })))
        );
    }

    impl PaneRecord {
        fn clone_with_time(&self, other: &Result<PaneRecord, RecordError>) -> PaneRecord {
            let mut r = self.clone();
            if let Ok(o) = other {
                r.created_at = o.created_at.clone();
            }
            r
        }
    }
}
