//! A pane on a herdr server: drover's screen model drawn from `pane read`,
//! input through `pane send-text`/`send-keys`/`agent prompt`, exit from the
//! wrapper's pidfd and status file, herdr's own state from `agent wait`.

use super::{CLI_TIMEOUT, Created, HerdrHost, REQUEST_TIMEOUT, watch};
use crate::pane::backend::{Backend, PaneBackend};
use crate::pane::core::{PaneCore, core_backend_methods, core_fields};
use crate::pane::{ExitInfo, KILL_GRACE, PaneError, PaneEvents, PaneSpec, ScreenMeta, key_bytes};
use crate::screen::Screen;
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long kill waits for a SIGKILLed group to be gone.
const REAP_TIMEOUT: Duration = Duration::from_secs(3);

pub(crate) use crate::pane::core::lock;

pub(crate) struct Inner {
    core: PaneCore,
    pub(crate) workspace_id: String,
    pub(crate) pane_id: String,
    pub(crate) terminal_id: Option<String>,
    /// The split direction, for a pane made by `pane split`.
    pub(crate) split: Option<String>,
    pub(crate) status_file: PathBuf,
    pub(crate) created_at: String,
    /// The last text `pane read` returned (the screen is redrawn on change).
    pub(crate) last_text: Option<String>,
    /// The last terminal title herdr showed (`pane.get`).
    title: Option<String>,
    /// Why herdr cannot be reached now.
    pub(crate) transport: Option<String>,
    /// herdr's own reading of the agent (`agent wait`).
    pub(crate) backend_state: Option<String>,
    /// drover is ending the process (its exit is a kill).
    pub(crate) stopping: bool,
    /// The command the wrapper runs (its child), once found: the shell
    /// of a shell pane, whose process group holding the terminal means
    /// idle at its prompt (the wrapper's never does once bash runs).
    pub(crate) command_pid: Option<u32>,
}
core_fields!(Inner);

/// A pane of a herdr server.
pub struct HerdrPane {
    name: String,
    pub(crate) host: Arc<HerdrHost>,
    pub(crate) inner: Mutex<Inner>,
    cv: Condvar,
    pub(crate) events: Arc<dyn PaneEvents>,
}

impl std::fmt::Debug for HerdrPane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HerdrPane")
            .field("name", &self.name)
            .finish()
    }
}

impl HerdrPane {
    pub(crate) fn start(
        host: Arc<HerdrHost>,
        spec: PaneSpec,
        c: Created,
        generation: u64,
        events: Arc<dyn PaneEvents>,
    ) -> Arc<Self> {
        let pane = Arc::new(HerdrPane {
            name: spec.name.clone(),
            host,
            inner: Mutex::new(Inner {
                core: PaneCore::new(spec, generation, c.pid, c.env_verified),
                workspace_id: c.workspace_id,
                pane_id: c.pane_id,
                terminal_id: c.terminal_id,
                split: c.split,
                status_file: c.status_file,
                created_at: c.created_at,
                last_text: None,
                title: None,
                transport: None,
                backend_state: None,
                stopping: false,
                command_pid: None,
            }),
            cv: Condvar::new(),
            events,
        });
        watch::start(&pane, generation);
        pane
    }

    pub(crate) fn name_str(&self) -> &str {
        &self.name
    }

    /// Draw `text` (a `pane read`) into the screen when it changed; true
    /// when it did.
    pub(crate) fn show(&self, generation: u64, text: String) -> bool {
        let mut g = lock(&self.inner);
        if g.generation != generation {
            return false;
        }
        let changed = g.last_text.as_deref() != Some(text.as_str());
        let cleared = g.transport.take().is_some();
        if changed {
            // The screen model has the size herdr gave the pane's terminal
            // (its layout's, not the spec's): an agent wraps its text to it,
            // and detection joins the rows it wrapped by that width. Read on
            // a change only: an app redraws when its size changes.
            if let Some((cols, rows)) = crate::pane::procfs::pty_size(g.pid)
                .filter(|&(c, r)| c > 0 && r > 0 && (c, r) != g.screen.size())
            {
                g.screen.resize(cols, rows);
            }
            let bytes = watch::draw(&text, g.screen.size());
            g.screen.process(&bytes);
            let _ = g.screen.take_replies();
            g.last_text = Some(text);
            g.last_output = Instant::now();
            if let Some(a) = &g.attach {
                a.changed();
            }
        }
        drop(g);
        if cleared {
            self.events.transport_changed();
        } else if changed {
            self.events.output();
        }
        changed
    }

    /// herdr shows a new terminal title: it goes into the screen model as
    /// the app's OSC 2, so title-based detection works as on other panes.
    pub(crate) fn set_title(&self, generation: u64, title: String) {
        let mut g = lock(&self.inner);
        if g.generation != generation || g.title.as_deref() == Some(title.as_str()) {
            return;
        }
        let clean: String = title.chars().filter(|c| !c.is_control()).collect();
        g.screen.process(format!("\x1b]2;{clean}\x07").as_bytes());
        g.title = Some(title);
        drop(g);
        self.events.output();
    }

    /// herdr could not be reached (`Some`) or answered again (`None`).
    /// herdr's server gone is the generation's last word: a read that
    /// failed meanwhile does not replace it.
    pub(crate) fn set_transport(&self, generation: u64, err: Option<String>) {
        let mut g = lock(&self.inner);
        let settled = g
            .transport
            .as_deref()
            .is_some_and(|t| t.starts_with(super::watch::WENT_AWAY));
        if g.generation != generation || g.transport == err || settled {
            return;
        }
        g.transport = err;
        drop(g);
        self.events.transport_changed();
    }

    /// herdr's reading of the agent changed.
    pub(crate) fn set_backend_state(&self, generation: u64, state: Option<String>) {
        let mut g = lock(&self.inner);
        if g.generation != generation || g.backend_state == state {
            return;
        }
        g.backend_state = state;
        drop(g);
        self.events.output();
    }

    pub(crate) fn record_exit(&self, generation: u64, info: ExitInfo) {
        let mut g = lock(&self.inner);
        if g.generation != generation || g.exit.is_some() {
            return;
        }
        g.exit = Some(info.clone());
        if let Some(a) = &g.attach {
            a.exited(info);
        }
        drop(g);
        self.cv.notify_all();
        self.events.exited();
    }

    fn transport_err(&self, message: String) -> PaneError {
        PaneError::Transport {
            pane: self.name.clone(),
            message,
        }
    }

    fn fault_err(&self, what: &str, f: super::Fault) -> PaneError {
        self.transport_err(format!("herdr {what}: {f}"))
    }

    /// The pane id, when the pane can take input.
    fn usable(&self) -> Result<(String, String), PaneError> {
        let g = lock(&self.inner);
        if let Some(t) = &g.transport {
            return Err(self.transport_err(t.clone()));
        }
        if g.exit.is_some() {
            return Err(PaneError::Exited(self.name.clone()));
        }
        Ok((g.pane_id.clone(), g.spec.agent.clone()))
    }

    /// Text as a paste: `pane.send_input` brackets it when the app enabled
    /// bracketed paste (`pane.send_text` writes the bytes raw).
    fn send_plain(&self, pane_id: &str, text: &str) -> Result<(), PaneError> {
        if text.is_empty() {
            return Ok(());
        }
        self.host
            .client()
            .request(
                "pane.send_input",
                json!({"pane_id": pane_id, "text": text}),
                REQUEST_TIMEOUT,
                true,
            )
            .map(|_| ())
            .map_err(|f| self.fault_err("pane send-text", f))
    }

    fn send_named(&self, pane_id: &str, keys: &[String]) -> Result<(), PaneError> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut args = vec!["pane", "send-keys", pane_id];
        args.extend(keys.iter().map(String::as_str));
        self.host
            .client()
            .cli(&args, CLI_TIMEOUT)
            .map(|_| ())
            .map_err(|f| self.fault_err("pane send-keys", f))
    }

    fn wait_exit(&self, generation: u64, timeout: Duration) -> bool {
        crate::pane::core::wait_exit(&self.inner, &self.cv, generation, timeout)
    }

    /// End the current process: TERM and HUP to its group, a grace period,
    /// then KILL, then the rest of its tree seen before.
    fn stop_process(&self) {
        let (pid, generation, exited) = {
            let mut g = lock(&self.inner);
            g.stopping = true;
            (g.pid, g.generation, g.exit.is_some())
        };
        if exited || !watch::is_leader(pid) {
            return;
        }
        crate::pane::reap::stop_tree(pid, KILL_GRACE, REAP_TIMEOUT, |d| {
            self.wait_exit(generation, d)
        });
    }

    /// Close the pane in herdr (herdr closes its workspace with the last
    /// pane) and drop its status and re-adoption files.
    fn close(&self) {
        let (pane_id, file) = {
            let g = lock(&self.inner);
            (g.pane_id.clone(), g.status_file.clone())
        };
        self.host.close_pane(&pane_id);
        let _ = std::fs::remove_file(super::seen_file(&file));
        let _ = std::fs::remove_file(file);
        super::state::remove(self.host.state_dir(), &self.name);
    }
}

impl PaneBackend for HerdrPane {
    core_backend_methods!(Backend::Herdr);
    fn with_screen_dyn(&self, f: &mut dyn FnMut(&mut Screen, &ScreenMeta)) {
        let mut g = lock(&self.inner);
        let command = g.command_pid;
        // The pane's shell is the wrapper's command: an interactive bash
        // takes a process group of its own under the wrapper.
        g.with_screen(&mut |screen, meta| match command {
            Some(pid) => f(
                screen,
                &ScreenMeta {
                    pid,
                    ..meta.clone()
                },
            ),
            None => f(screen, meta),
        })
    }
    fn pastes_bracketed(&self) -> bool {
        // herdr pastes text by the app's own mode, which a screen drawn from
        // text reads never shows: the agents all switch it on.
        lock(&self.inner).spec.agent != "shell"
    }
    fn write_input(&self, bytes: &[u8]) -> Result<(), PaneError> {
        let (pane_id, _) = self.usable()?;
        // Keys as keys, text as text: herdr pastes whatever goes by text.
        for part in super::keys::split_input(bytes) {
            match part {
                super::keys::Input::Text(t) => self.send_plain(&pane_id, &t)?,
                super::keys::Input::Keys(k) => self
                    .host
                    .client()
                    .request(
                        "pane.send_keys",
                        json!({"pane_id": pane_id, "keys": k}),
                        REQUEST_TIMEOUT,
                        true,
                    )
                    .map(|_| ())
                    .map_err(|f| self.fault_err("pane send-keys", f))?,
            }
        }
        Ok(())
    }
    fn send_text(&self, text: &str, enter: bool) -> Result<(), PaneError> {
        let (pane_id, agent) = self.usable()?;
        if enter && agent != "shell" {
            // herdr pastes (bracketed when the app enabled it) and submits.
            match self.host.client().request(
                "agent.prompt",
                json!({"target": pane_id, "text": text}),
                REQUEST_TIMEOUT,
                true,
            ) {
                Ok(_) => return Ok(()),
                Err(f) if matches!(f.code(), Some("agent_not_found" | "agent_not_running")) => {
                    tracing::debug!(pane = %self.name, "herdr sees no agent; sending the text plainly");
                }
                Err(f) => return Err(self.fault_err("agent prompt", f)),
            }
        }
        self.send_plain(&pane_id, text)?;
        if enter {
            self.send_named(&pane_id, &["enter".to_string()])?;
        }
        Ok(())
    }
    fn send_keys(&self, keys: &[String]) -> Result<(), PaneError> {
        let (pane_id, _) = self.usable()?;
        let bytes: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| key_bytes(k, false))
            .collect::<Result<_, _>>()?;
        // In order: runs of named keys in one send-keys; characters and keys
        // herdr has no name for as their bytes.
        let mut named: Vec<String> = Vec::new();
        for (k, b) in keys.iter().zip(&bytes) {
            match super::herdr_key(k) {
                Some(n) => named.push(n),
                None => {
                    self.send_named(&pane_id, &std::mem::take(&mut named))?;
                    self.send_plain(&pane_id, &String::from_utf8_lossy(b))?;
                }
            }
        }
        self.send_named(&pane_id, &named)
    }
    fn resize(&self, _cols: u16, _rows: u16) -> Result<(), PaneError> {
        // herdr's `pane.resize` only moves a split edge by a direction and
        // an amount of its layout; no request sets a pane's columns × rows.
        Err(PaneError::Unsupported {
            backend: "herdr",
            operation: "resize",
            message: "herdr sizes its panes by its own layout and the terminal it is shown in; \
                      resize the pane in herdr"
                .into(),
        })
    }
    fn kill(&self) {
        self.stop_process();
        self.close();
    }
    fn respawn(self: Arc<Self>) -> Result<u64, PaneError> {
        self.stop_process();
        self.close();
        let (spec, generation, workspace_id, old, split) = {
            let g = lock(&self.inner);
            (
                g.spec.clone(),
                g.generation + 1,
                g.workspace_id.clone(),
                g.pane_id.clone(),
                g.split.clone(),
            )
        };
        let place = self
            .host
            .respawn_place(&workspace_id, &old, split.as_deref());
        let created_at = crate::paths::now_rfc3339();
        let c = self.host.create(&spec, generation, &created_at, &place)?;
        {
            let mut g = lock(&self.inner);
            g.generation = generation;
            g.workspace_id = c.workspace_id;
            g.pane_id = c.pane_id;
            g.terminal_id = c.terminal_id;
            g.split = c.split;
            g.pid = c.pid;
            g.status_file = c.status_file;
            g.created_at = c.created_at;
            g.env_verified = c.env_verified;
            g.screen = Screen::new(g.spec.cols, g.spec.rows);
            g.last_text = None;
            g.title = None;
            g.exit = None;
            g.transport = None;
            g.backend_state = None;
            g.stopping = false;
            g.command_pid = None;
            g.started_at_ms = crate::paths::now_ms();
            g.started = Instant::now();
            g.last_output = Instant::now();
        }
        super::state::save(self.host.state_dir(), &self);
        watch::start(&self, generation);
        self.cv.notify_all();
        self.events.output();
        Ok(generation)
    }
    fn backend_pane_id(&self) -> Option<String> {
        Some(lock(&self.inner).pane_id.clone())
    }
    fn process_record(
        &self,
        descendants: Vec<crate::pane::Member>,
    ) -> Option<crate::pane::record::PaneRecord> {
        use crate::pane::record;
        let g = lock(&self.inner);
        Some(record::PaneRecord {
            schema_version: record::RECORD_SCHEMA,
            name: self.name.clone(),
            backend: crate::pane::Backend::Herdr,
            backend_pane_id: Some(g.pane_id.clone()),
            pid: g.pid,
            pid_start_time: record::start_time(g.pid).unwrap_or(0),
            pgid: g.pid,
            generation: g.generation,
            boot_id: record::boot_id(),
            created_at: g.created_at.clone(),
            agent: g.spec.agent.clone(),
            descendants,
        })
    }
    fn members(&self) -> Vec<crate::pane::Member> {
        let pid = lock(&self.inner).pid;
        let key = crate::pane::reap::TreeKey::new(
            pid,
            crate::pane::record::start_time(pid).unwrap_or(0),
            "",
        );
        crate::pane::reap::members(&key, false)
    }
    fn attach_command(&self) -> Option<String> {
        let g = lock(&self.inner);
        let mut words = vec!["herdr".to_string()];
        words.extend(self.host.client().session_args());
        match &g.terminal_id {
            Some(t) => words.extend(["terminal".into(), "attach".into(), t.clone()]),
            None => words.extend(["agent".into(), "attach".into(), g.pane_id.clone()]),
        }
        Some(words.join(" "))
    }
    fn backend_state(&self) -> Option<String> {
        lock(&self.inner).backend_state.clone()
    }
}
