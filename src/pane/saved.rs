//! The files a backend whose panes outlive the supervisor (tmux, herdr)
//! keeps per pane for re-adoption: written private and atomically, read back
//! with unreadable or other-version files reported and left in place.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

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
