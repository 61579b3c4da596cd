//! What the herdr backend keeps in the state dir per pane, so a new
//! supervisor can re-adopt the pane (`<state>/herdr/panes/NAME.json`):
//! herdr's ids, the wrapper's pid and start time, the generation and the
//! spec. Env names only, never values.

use super::pane::{HerdrPane, lock};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const SCHEMA: u32 = 1;

/// One pane as the herdr backend saved it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SavedPane {
    pub(super) schema_version: u32,
    pub(super) name: String,
    pub(super) workspace_id: String,
    pub(super) pane_id: String,
    pub(super) terminal_id: Option<String>,
    /// The direction the pane was split in, when it was made by `pane split`.
    #[serde(default)]
    pub(super) split: Option<String>,
    pub(super) pid: u32,
    pub(super) pid_start_time: u64,
    pub(super) generation: u64,
    pub(super) status_file: PathBuf,
    pub(super) argv: Vec<String>,
    pub(super) env_names: Vec<String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) cols: u16,
    pub(super) rows: u16,
    pub(super) agent: String,
    pub(super) created_at: String,
}

fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("herdr").join("panes")
}

fn pane_path(state_dir: &Path, name: &str) -> PathBuf {
    dir(state_dir).join(format!("{name}.json"))
}

/// Save a pane's re-adoption state (its current generation).
pub(super) fn save(state_dir: &Path, pane: &HerdrPane) {
    use std::os::unix::fs::PermissionsExt;
    let g = lock(&pane.inner);
    let saved = SavedPane {
        schema_version: SCHEMA,
        name: g.spec.name.clone(),
        workspace_id: g.workspace_id.clone(),
        pane_id: g.pane_id.clone(),
        terminal_id: g.terminal_id.clone(),
        split: g.split.clone(),
        pid: g.pid,
        pid_start_time: crate::pane::record::start_time(g.pid).unwrap_or(0),
        generation: g.generation,
        status_file: g.status_file.clone(),
        argv: g.spec.argv.clone(),
        env_names: g.spec.env_names(),
        cwd: g.spec.cwd.clone(),
        cols: g.spec.cols,
        rows: g.spec.rows,
        agent: g.spec.agent.clone(),
        created_at: g.created_at.clone(),
    };
    drop(g);
    let d = dir(state_dir);
    let r = crate::store::create_private_dir(&d)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            let p = pane_path(state_dir, &saved.name);
            crate::store::write_json_atomic(&p, &saved).map_err(|e| e.to_string())?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())
        });
    if let Err(e) = r {
        tracing::warn!(pane = %saved.name, error = %e, "cannot save herdr pane state");
    }
}

/// Drop a pane's re-adoption state (its processes are ended).
pub(super) fn remove(state_dir: &Path, name: &str) {
    let _ = std::fs::remove_file(pane_path(state_dir, name));
}

/// Every saved pane (unreadable files are reported and left in place).
pub(super) fn load(state_dir: &Path) -> Vec<SavedPane> {
    let Ok(rd) = std::fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let hidden = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden || p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        match crate::store::read_json::<SavedPane>(&p) {
            Ok(Some(s)) if s.schema_version == SCHEMA => out.push(s),
            Ok(Some(s)) => {
                tracing::warn!(file = %p.display(), version = s.schema_version, "herdr pane state of another version; left alone")
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(file = %p.display(), error = %e, "corrupt herdr pane state; left alone")
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The values of `names` in a live process's environment (read back for a
/// re-adopted pane, so a respawn can set them again; kept in memory only).
pub(super) fn env_from_proc(pid: u32, names: &[String]) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let mut out = Vec::new();
    for kv in raw.split(|b| *b == 0) {
        let Some(i) = kv.iter().position(|b| *b == b'=') else {
            continue;
        };
        let k = String::from_utf8_lossy(&kv[..i]);
        if names.iter().any(|n| *n == k) {
            out.push((
                k.into_owned(),
                String::from_utf8_lossy(&kv[i + 1..]).into_owned(),
            ));
        }
    }
    out
}
