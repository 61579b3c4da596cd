//! Leftovers of writers that died mid-write: the temp files of
//! [`super::write_bytes_atomic`] (`.<name>.tmp.<pid>.<id>`) whose pid is gone.
//! They never replaced a document, or hold the content one replaced (an
//! unsynced write exchanges the two names, then removes the old), so
//! removing them loses nothing.

use std::path::Path;

/// Directories under the state dir that are not drover's own documents.
const SKIP: &[&str] = &["worktrees", "rehearse", "logs"];

/// The pid in a temp file's name, if the name is one of ours.
fn temp_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let rest = &name[name.rfind(".tmp.")? + 5..];
    let (pid, id) = rest.split_once('.')?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Remove temp files of dead writers under `root` (up to `depth` levels);
/// returns how many were removed. Files of live pids are left alone.
pub fn sweep_temp_files(root: &Path, depth: usize) -> usize {
    let Ok(rd) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for entry in rd.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            if depth > 0 && !SKIP.contains(&name) {
                removed += sweep_temp_files(&entry.path(), depth - 1);
            }
            continue;
        }
        if let Some(pid) = temp_pid(name)
            && !crate::procfs::exists(pid)
            && std::fs::remove_file(entry.path()).is_ok()
        {
            tracing::info!(file = %entry.path().display(), "removed a dead writer's temp file");
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(temp_pid(".doc.json.tmp.123.0a1b"), Some(123));
        assert_eq!(temp_pid("doc.json.tmp.123.0a1b"), None);
        assert_eq!(temp_pid(".doc.json"), None);
        assert_eq!(temp_pid(".doc.json.tmp.x.0a1b"), None);
        assert_eq!(temp_pid(".doc.json.tmp.12.zz"), None);
    }

    #[test]
    fn removes_only_dead_writers_temp_files() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("jobs");
        std::fs::create_dir_all(&sub).unwrap();
        // pid_max is at most 2^22: this pid cannot exist.
        let dead = sub.join(".J1.job.json.tmp.99999999.abc123");
        let live = sub.join(format!(".J2.job.json.tmp.{}.abc123", std::process::id()));
        let doc = sub.join("J1.job.json");
        for p in [&dead, &live, &doc] {
            std::fs::write(p, b"{}").unwrap();
        }
        assert_eq!(sweep_temp_files(d.path(), 3), 1);
        assert!(!dead.exists());
        assert!(live.exists() && doc.exists());
    }
}
