//! What the herdr backend keeps in the state dir per pane, so a new
//! supervisor can re-adopt the pane (`<state>/herdr/panes/NAME.json`):
//! herdr's ids, the wrapper's pid and start time, the generation and the
//! spec. Env names only, never values.

use super::pane::{HerdrPane, lock};
use crate::pane::saved::SavedProcess;
use crate::statedir::StateDir;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

const SCHEMA: u32 = 1;

/// One pane as the herdr backend saved it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SavedPane {
    pub(super) schema_version: u32,
    pub(super) workspace_id: String,
    pub(super) pane_id: String,
    pub(super) terminal_id: Option<String>,
    /// The direction the pane was split in, when it was made by `pane split`.
    #[serde(default)]
    pub(super) split: Option<String>,
    pub(super) status_file: PathBuf,
    #[serde(flatten)]
    pub(super) process: SavedProcess,
}

/// Save a pane's re-adoption state (its current generation).
pub(super) fn save(state_dir: &StateDir, pane: &HerdrPane) {
    let g = lock(&pane.inner);
    let saved = SavedPane {
        schema_version: SCHEMA,
        workspace_id: g.workspace_id.clone(),
        pane_id: g.pane_id.clone(),
        terminal_id: g.terminal_id.clone(),
        split: g.split.clone(),
        status_file: g.status_file.clone(),
        process: SavedProcess::of(&g.spec, g.pid, g.generation, &g.created_at),
    };
    drop(g);
    let p = state_dir.herdr_pane(&saved.process.name);
    if let Err(e) = crate::pane::saved::write_private(&p, &saved) {
        tracing::warn!(pane = %saved.process.name, error = %e, "cannot save herdr pane state");
    }
}

/// Drop a pane's re-adoption state (its processes are ended).
pub(super) fn remove(state_dir: &StateDir, name: &str) {
    let _ = std::fs::remove_file(state_dir.herdr_pane(name));
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
pub(super) fn load(state_dir: &StateDir) -> Vec<SavedPane> {
    crate::pane::saved::load_all(&state_dir.herdr_panes_dir(), SCHEMA, "herdr")
}
