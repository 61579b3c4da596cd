//! A pane's process record, `<state>/panes/<name>.json`: who its processes
//! are, so that a supervisor killed with `kill -9` leaves enough behind for
//! the next one to report its panes as lost and end what still runs — by
//! pid *and* start time, never a recycled pid. Written (atomically, 0600)
//! when a generation starts, removed once its processes are ended.

use super::reap::{Member, TreeKey, marker};
use crate::statedir::StateDir;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record format's version.
pub const RECORD_SCHEMA: u32 = 1;

/// One pane's record (docs/architecture.md describes every field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneRecord {
    pub schema_version: u32,
    pub name: String,
    /// `native`, `tmux`, …
    pub backend: super::Backend,
    /// The backend's own id of the pane (a tmux `%N`); none for native panes.
    pub backend_pane_id: Option<String>,
    /// The leader's pid.
    pub pid: u32,
    /// The leader's start time: `/proc/<pid>/stat` field 22 (clock ticks since boot).
    pub pid_start_time: u64,
    pub pgid: u32,
    pub generation: u64,
    /// `/proc/sys/kernel/random/boot_id` when written: pids mean nothing across boots.
    pub boot_id: String,
    /// When the generation started (RFC 3339).
    pub created_at: String,
    pub agent: String,
    /// Other processes of the pane seen when the record was written.
    #[serde(default)]
    pub descendants: Vec<Member>,
}

/// Errors reading or writing records; each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{}: {message}", path.display())]
    Bad { path: PathBuf, message: String },
}

/// The directory of the records.
pub fn dir(state_dir: &StateDir) -> PathBuf {
    state_dir.panes_dir()
}

/// The record file of pane `name`.
pub fn path(state_dir: &StateDir, name: &str) -> PathBuf {
    state_dir.pane_record(name)
}

impl PaneRecord {
    /// The record of a native pane's current generation.
    pub fn native(pane: &super::NativePane, descendants: Vec<Member>) -> Self {
        let ids = pane.proc_ids();
        PaneRecord {
            schema_version: RECORD_SCHEMA,
            name: pane.name().to_string(),
            backend: super::Backend::Native,
            backend_pane_id: None,
            pid: ids.pid,
            pid_start_time: ids.start_time,
            pgid: ids.pid,
            generation: ids.generation,
            boot_id: super::procfs::boot_id(),
            created_at: ids.created_at,
            agent: pane.info().agent,
            descendants,
        }
    }

    /// How this record's processes are found on `/proc`.
    pub fn tree_key(&self) -> TreeKey {
        let mut key = TreeKey::new(
            self.pid,
            self.pid_start_time,
            &marker(&self.name, self.generation, &self.created_at),
        );
        key.known = self.descendants.clone();
        let leader_alive = super::procfs::stat(self.pid)
            .is_some_and(|s| s.starttime == self.pid_start_time && s.state != 'Z');
        if !leader_alive {
            // The leader's id (and so its session id) may belong to someone
            // else now: only the marker and known pids identify members.
            key.session_until = Some(self.pid_start_time);
        }
        key
    }

    /// The record's processes still running (none from another boot). A
    /// zombie runs nothing: its parent (often not us) reaps it when it will.
    pub fn leftovers(&self) -> Vec<Member> {
        if self.boot_id != super::procfs::boot_id() {
            return Vec::new();
        }
        super::reap::members(&self.tree_key(), true)
            .into_iter()
            .filter(|m| {
                super::procfs::stat(m.pid)
                    .is_some_and(|s| s.starttime == m.start_time && s.state != 'Z')
            })
            .collect()
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> String {
    super::procfs::boot_id()
}

/// A process's start time (`/proc/<pid>/stat` field 22).
pub fn start_time(pid: u32) -> Option<u64> {
    super::procfs::stat(pid).map(|s| s.starttime)
}

/// Write `rec` atomically, private to the user.
pub fn write(state_dir: &StateDir, rec: &PaneRecord) -> Result<(), RecordError> {
    use std::os::unix::fs::PermissionsExt;
    let d = dir(state_dir);
    if !d.is_dir() {
        std::fs::create_dir_all(&d)
            .map_err(|e| crate::store::StoreError::io("create dir", &d, e))?;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    }
    let p = path(state_dir, &rec.name);
    crate::store::write_json_atomic(&p, rec)?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| crate::store::StoreError::io("chmod", &p, e))?;
    Ok(())
}

/// Remove pane `name`'s record (absent is fine).
pub fn remove(state_dir: &StateDir, name: &str) -> Result<(), RecordError> {
    let p = path(state_dir, name);
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(crate::store::StoreError::io("remove", &p, e).into()),
    }
}

/// Every record in the state dir, each with its file; a corrupt or
/// unknown-version file is an error naming it (never removed).
pub fn load_all(state_dir: &StateDir) -> Vec<(PathBuf, Result<PaneRecord, RecordError>)> {
    let Ok(rd) = std::fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .map(|p| {
            let r = load(&p);
            (p, r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn load(p: &Path) -> Result<PaneRecord, RecordError> {
    let bad = |message: String| RecordError::Bad {
        path: p.to_path_buf(),
        message,
    };
    let rec: PaneRecord = crate::store::read_json(p)?.ok_or_else(|| bad("vanished".into()))?;
    if rec.schema_version != RECORD_SCHEMA {
        return Err(bad(format!(
            "schema_version {} is not {RECORD_SCHEMA}: written by another drover version",
            rec.schema_version
        )));
    }
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
    if stem.as_deref() != Some(rec.name.as_str()) {
        return Err(bad(format!(
            "records pane {:?} but is named after another",
            rec.name
        )));
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> PaneRecord {
        PaneRecord {
            schema_version: RECORD_SCHEMA,
            name: name.into(),
            backend: crate::pane::Backend::Native,
            backend_pane_id: None,
            pid: 4242,
            pid_start_time: 777,
            pgid: 4242,
            generation: 2,
            boot_id: "b".into(),
            created_at: "2026-12-01T10:00:00.000000001Z".into(),
            agent: "none".into(),
            descendants: vec![Member {
                pid: 4243,
                start_time: 778,
            }],
        }
    }

    #[test]
    fn record_has_exactly_the_documented_shape() {
        let v = serde_json::to_value(sample("w")).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "agent",
                "backend",
                "backend_pane_id",
                "boot_id",
                "created_at",
                "descendants",
                "generation",
                "name",
                "pgid",
                "pid",
                "pid_start_time",
                "schema_version"
            ]
        );
        assert_eq!(
            v["descendants"][0],
            serde_json::json!({"pid": 4243, "start_time": 778})
        );
        assert!(v["backend_pane_id"].is_null());
    }

    #[test]
    fn round_trip_private_and_corrupt_files_named() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let sd = StateDir::new(tmp.path());
        write(sd, &sample("w")).unwrap();
        let mode = std::fs::metadata(path(sd, "w"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir(sd).join("x.json"), "{not json").unwrap();
        std::fs::copy(path(sd, "w"), dir(sd).join("y.json")).unwrap();
        let all = load_all(sd);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].1.as_ref().unwrap(), &sample("w"));
        let e = all[1].1.as_ref().unwrap_err().to_string();
        assert!(e.contains("x.json"), "{e}");
        let e = all[2].1.as_ref().unwrap_err().to_string();
        assert!(e.contains("y.json"), "{e}");
        remove(sd, "w").unwrap();
        remove(sd, "w").unwrap();
        assert_eq!(load_all(sd).len(), 2);
    }
}
