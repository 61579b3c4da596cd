//! "Done until seen", kept across `top` runs: which finished panes an
//! operator has looked at (selected or attached), as pane name → the
//! `since_ms` of the `done` state seen. Private under the state dir
//! (`top/seen.json`), written atomically under its lock, so two `top`s
//! merge what each has seen. A corrupt file is reported, never reset.

use crate::statedir::StateDir;
use crate::store::{self, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The schema version of `top/seen.json`.
pub const SCHEMA_VERSION: u64 = 1;

/// `top/seen.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeenDoc {
    pub schema_version: u64,
    #[serde(default)]
    pub seen: BTreeMap<String, u64>,
}

impl Default for SeenDoc {
    fn default() -> Self {
        SeenDoc {
            schema_version: SCHEMA_VERSION,
            seen: BTreeMap::new(),
        }
    }
}

/// `<state>/top/seen.json`.
pub fn path(state_dir: &StateDir) -> PathBuf {
    state_dir.top_seen()
}

/// What earlier runs saw (empty when nothing was recorded).
pub fn load(state_dir: &StateDir) -> Result<BTreeMap<String, u64>, StoreError> {
    Ok(store::read_json::<SeenDoc>(&path(state_dir))?
        .map(|d| d.seen)
        .unwrap_or_default())
}

/// Merge `seen` into the file. Entries for panes not in `live` are dropped
/// (their pane is gone, so is its `done`); `live` empty keeps everything.
pub fn save(
    state_dir: &StateDir,
    seen: &BTreeMap<String, u64>,
    live: &BTreeSet<String>,
) -> Result<(), StoreError> {
    store::update_json(&path(state_dir), SeenDoc::default, |doc: &mut SeenDoc| {
        for (k, v) in seen {
            doc.seen.insert(k.clone(), *v);
        }
        if !live.is_empty() {
            doc.seen.retain(|k, _| live.contains(k));
        }
        Ok::<(), StoreError>(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn seen_round_trips_merges_prunes_and_a_corrupt_file_is_reported_not_reset() {
        let dir = tempfile::tempdir().unwrap();
        let st = StateDir::new(dir.path());
        assert!(load(st).unwrap().is_empty());
        let one = BTreeMap::from([("a".to_string(), 5)]);
        save(st, &one, &BTreeSet::new()).unwrap();
        let two = BTreeMap::from([("b".to_string(), 7)]);
        let live = BTreeSet::from(["b".to_string(), "c".to_string()]);
        save(st, &two, &live).unwrap();
        assert_eq!(load(st).unwrap(), BTreeMap::from([("b".to_string(), 7)]));
        let mode = std::fs::metadata(path(st)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(path(st), b"{not json").unwrap();
        assert!(load(st).is_err());
        assert!(save(st, &two, &live).is_err());
        assert_eq!(std::fs::read(path(st)).unwrap(), b"{not json");
    }
}
