//! What the tmux backend keeps in the state dir: which server drover
//! started (so no other is ever touched) and, per pane, what a new
//! supervisor needs to re-adopt it. Env names only, never values.

use super::TmuxPane;
use super::pane::lock;
use crate::pane::record::{self, PaneRecord, RECORD_SCHEMA};
use crate::pane::saved::SavedProcess;
use crate::statedir::StateDir;
use serde::{Deserialize, Serialize};

const SCHEMA: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct ServerDoc {
    schema_version: u32,
    socket: String,
    pid: u32,
    start_time: u64,
}

/// One pane as the tmux backend saved it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SavedPane {
    pub(super) schema_version: u32,
    pub(super) pane_id: String,
    pub(super) window_id: String,
    #[serde(flatten)]
    pub(super) process: SavedProcess,
}

use crate::pane::saved::write_private;

/// Record that drover started the server `pid` on `socket`.
pub(super) fn record_server(state_dir: &StateDir, socket: &str, pid: u32) -> Result<(), String> {
    let doc = ServerDoc {
        schema_version: SCHEMA,
        socket: socket.to_string(),
        pid,
        start_time: record::start_time(pid).unwrap_or(0),
    };
    write_private(&state_dir.tmux_server(), &doc)
}

/// Forget the server (it was stopped).
pub(super) fn forget_server(state_dir: &StateDir) {
    let _ = std::fs::remove_file(state_dir.tmux_server());
}

/// Ok when the server `pid` answering on `socket` is the one drover
/// started; otherwise a message saying it is left alone.
pub(super) fn check_owned(state_dir: &StateDir, socket: &str, pid: u32) -> Result<(), String> {
    let path = state_dir.tmux_server();
    let not_ours = || {
        format!(
            "a tmux server drover did not start (pid {pid}) is listening on -L {socket}; drover never touches it: stop it yourself or use another state dir"
        )
    };
    let doc: ServerDoc = match crate::store::read_json(&path) {
        Ok(Some(d)) => d,
        Ok(None) => return Err(not_ours()),
        Err(e) => return Err(e.to_string()),
    };
    let started = record::start_time(pid);
    if doc.socket == socket && doc.pid == pid && started == Some(doc.start_time) {
        Ok(())
    } else {
        Err(not_ours())
    }
}

/// Save a pane's re-adoption state and its pane record.
pub(super) fn save_pane(state_dir: &StateDir, pane: &TmuxPane) {
    let g = lock(&pane.inner);
    let saved = SavedPane {
        schema_version: SCHEMA,
        pane_id: g.pane_id.clone(),
        window_id: g.window_id.clone(),
        process: SavedProcess::of(&g.spec, g.pid, g.generation, &g.created_at),
    };
    let start = saved.process.pid_start_time;
    let rec = PaneRecord {
        schema_version: RECORD_SCHEMA,
        name: g.spec.name.clone(),
        backend: crate::pane::Backend::Tmux,
        backend_pane_id: Some(g.pane_id.clone()),
        pid: g.pid,
        pid_start_time: start,
        pgid: g.pid,
        generation: g.generation,
        boot_id: record::boot_id(),
        created_at: g.created_at.clone(),
        agent: g.spec.agent.clone(),
        descendants: Vec::new(),
    };
    drop(g);
    if let Err(e) = write_private(&state_dir.tmux_pane(&saved.process.name), &saved) {
        tracing::warn!(pane = %saved.process.name, error = %e, "cannot save tmux pane state");
    }
    if let Err(e) = record::write(state_dir, &rec) {
        tracing::warn!(pane = %rec.name, error = %e, "cannot write pane record");
    }
}

/// Drop a pane's saved state and record.
pub(super) fn remove_pane(state_dir: &StateDir, name: &str) {
    remove_saved(state_dir, name);
    if let Err(e) = record::remove(state_dir, name) {
        tracing::warn!(pane = %name, error = %e, "cannot remove pane record");
    }
}

/// Whether re-adoption state of pane `name` is kept (it was re-adopted, or
/// could not be looked at: its server did not answer).
pub(super) fn has_saved(state_dir: &StateDir, name: &str) -> bool {
    state_dir.tmux_pane(name).exists()
}

/// Drop only a pane's re-adoption state: its record stays for the
/// supervisor to report the pane as lost and end what still runs of it.
pub(super) fn remove_saved(state_dir: &StateDir, name: &str) {
    let _ = std::fs::remove_file(state_dir.tmux_pane(name));
    let _ = std::fs::remove_file(state_dir.tmux_paste(name));
}

/// Note that the app turned bracketed paste on or off (an empty file made
/// or removed: no content, no write of the pane state).
pub(super) fn save_paste_mode(state_dir: &StateDir, name: &str, on: bool) {
    let path = state_dir.tmux_paste(name);
    let res = if on {
        use std::os::unix::fs::OpenOptionsExt;
        // The app can turn it on before the pane's state is first saved.
        if let Some(parent) = path.parent() {
            let _ = crate::store::create_private_dir(parent);
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map(drop)
    } else {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    };
    if let Err(e) = res {
        tracing::warn!(pane = %name, error = %e, "cannot note the pane's paste mode");
    }
}

/// Whether the pane's app had bracketed paste on when last seen.
pub(super) fn paste_mode(state_dir: &StateDir, name: &str) -> bool {
    state_dir.tmux_paste(name).exists()
}

impl crate::pane::saved::Saved for SavedPane {
    fn schema_version(&self) -> u32 {
        self.schema_version
    }
    fn name(&self) -> &str {
        &self.process.name
    }
}

/// Every saved pane (unreadable files are reported and left in place).
pub(super) fn load_panes(state_dir: &StateDir) -> Vec<SavedPane> {
    crate::pane::saved::load_all(&state_dir.tmux_panes_dir(), SCHEMA, "tmux")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pane file as the tmux backend wrote it before its process fields
    /// moved into the shared [`SavedProcess`] (all at the top level) still
    /// reads, and writes back with the same keys: re-adoption across an
    /// upgrade keeps working.
    #[test]
    fn a_flat_pane_file_reads_and_writes_back_the_same_keys() {
        let flat = serde_json::json!({
            "schema_version": 1, "name": "p", "pane_id": "%3", "window_id": "@2",
            "pid": 42, "pid_start_time": 7, "generation": 2,
            "argv": ["bash"], "env_names": ["K"], "cwd": "/tmp",
            "cols": 80, "rows": 24, "agent": "shell", "created_at": "t"
        });
        let s: SavedPane = serde_json::from_value(flat.clone()).unwrap();
        assert_eq!((s.process.name.as_str(), s.process.pid), ("p", 42));
        assert_eq!(s.process.env_names, ["K"]);
        assert_eq!(serde_json::to_value(&s).unwrap(), flat);
    }
}
