//! The hosts of one supervisor's panes: creating a pane on the backend its
//! spec asks for, re-adopting panes that outlived the last supervisor, and
//! stopping the backends' servers at shutdown.

use super::backend::{Backend, PaneBackend};
use super::herdr::{HerdrHost, Place, SplitDirection};
use super::tmux::TmuxHost;
use super::{NativePane, PaneError, PaneEvents, PaneSpec};
use crate::statedir::{StateDir, StateDirBuf};
use std::sync::{Arc, OnceLock};

/// Every backend's host for one state dir; each started on first use.
#[derive(Debug)]
pub struct Hosts {
    state_dir: StateDirBuf,
    tmux: OnceLock<Arc<TmuxHost>>,
    herdr: OnceLock<Arc<HerdrHost>>,
}

impl Hosts {
    /// Hosts for `state_dir`; nothing starts until a pane needs it.
    pub fn new(state_dir: &StateDir) -> Self {
        Hosts {
            state_dir: state_dir.to_buf(),
            tmux: OnceLock::new(),
            herdr: OnceLock::new(),
        }
    }

    fn tmux(&self) -> &Arc<TmuxHost> {
        self.tmux.get_or_init(|| TmuxHost::new(&self.state_dir))
    }

    fn herdr(&self) -> &Arc<HerdrHost> {
        self.herdr.get_or_init(|| HerdrHost::new(&self.state_dir))
    }

    /// Create a pane on `backend`.
    pub fn spawn(
        &self,
        backend: Backend,
        spec: PaneSpec,
        events: Arc<dyn PaneEvents>,
    ) -> Result<Arc<dyn PaneBackend>, PaneError> {
        match backend {
            Backend::Native => Ok(NativePane::spawn(spec, events)?),
            Backend::Tmux => Ok(self.tmux().spawn(spec, events)?),
            Backend::Herdr => Ok(self.herdr().spawn(spec, Place::Workspace, events)?),
        }
    }

    /// Create a herdr pane split from the herdr pane `of` (herdr's id), in
    /// its workspace.
    pub fn spawn_herdr_split(
        &self,
        spec: PaneSpec,
        of: String,
        direction: SplitDirection,
        events: Arc<dyn PaneEvents>,
    ) -> Result<Arc<dyn PaneBackend>, PaneError> {
        Ok(self
            .herdr()
            .spawn(spec, Place::Split { of, direction }, events)?)
    }

    /// Re-adopt the panes a previous supervisor left that are still alive
    /// (tmux, herdr). `events` makes each pane's callbacks.
    pub fn adopt(&self, events: &dyn Fn(&str) -> Arc<dyn PaneEvents>) -> Vec<Arc<dyn PaneBackend>> {
        let mut out: Vec<Arc<dyn PaneBackend>> = self
            .tmux()
            .adopt(events)
            .into_iter()
            .map(|p| p as Arc<dyn PaneBackend>)
            .collect();
        out.extend(
            self.herdr()
                .adopt(events)
                .into_iter()
                .map(|p| p as Arc<dyn PaneBackend>),
        );
        out
    }

    /// Stop the backends' clients and the servers drover started (after
    /// every pane was killed).
    pub fn shutdown(&self) {
        if let Some(t) = self.tmux.get() {
            t.shutdown();
        }
        if let Some(h) = self.herdr.get() {
            h.shutdown();
        }
    }
}
