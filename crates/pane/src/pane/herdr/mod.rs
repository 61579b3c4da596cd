//! The herdr backend: panes of a herdr server (see `docs/herdr.md`).
//!
//! A pane is a herdr workspace created with the spec's env (`workspace
//! create --env`, sent over herdr's socket so no value is in any argv);
//! drover types one `exec` line into its shell that starts the command
//! behind a small wrapper recording the exit status. The screen is what
//! `pane read` returns, drawn into drover's own screen model, so the
//! classifier and barriers are the same code as for every other backend;
//! `agent wait` adds herdr's own reading of the agent's state.

mod agent;
mod client;
mod keys;
mod pane;
mod state;
mod stream;
mod tty;
mod watch;

pub use client::{Client, Fault, MIN_VERSION, SocketLookup, parse_version, socket_path};
pub use keys::herdr_key;
pub use pane::HerdrPane;

use crate::pane::{PaneError, PaneEvents, PaneSpec, PaneSpecExt};
use crate::statedir::{StateDir, StateDirBuf};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Bound on `herdr --version`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on one request over herdr's socket (each read and write).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Bound on a short CLI command (`pane send-keys`, `workspace close`).
pub(crate) const CLI_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a new pane's shell may take to appear in `/proc`.
const FIND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the shell may take to run the typed `exec` line.
const EXEC_TIMEOUT: Duration = Duration::from_secs(10);
/// The wrapper's `$0`-free marker: its first argument names it.
const WRAPPER_SHELL: &str = "/bin/sh";
/// The window title the wrapper sets once the command has ended: when
/// herdr shows it, herdr has taken in every byte the command wrote.
pub(crate) const EXITED_TITLE: &str = "drover:exited";
/// Clears the typed line, runs the command, writes its status atomically
/// (private to the user; the umask is set in a subshell, never the command's),
/// sets [`EXITED_TITLE`], then keeps the pane open (herdr closes a pane
/// when its process ends) until drover has read the last screen and made
/// `$0.seen`, 3 s at most. Its traps let it outlive the signals that end
/// the command (which gets the default actions back at exec), so the
/// status is written.
const WRAPPER_SCRIPT: &str = "trap : INT QUIT TERM HUP; printf '\\033[H\\033[2J\\033[3J'; \"$@\"; s=$?; \
     (umask 077; printf '%s\\n' \"$s\" > \"$0.tmp\") && mv -f \"$0.tmp\" \"$0\"; \
     printf '\\033]2;drover:exited\\007'; i=0; \
     while [ ! -e \"$0.seen\" ] && [ \"$i\" -lt 30 ]; do sleep 0.1; i=$((i+1)); done; \
     rm -f \"$0.seen\"; exit \"$s\"";

fn herdr_err(message: impl Into<String>) -> PaneError {
    PaneError::Backend {
        backend: "herdr",
        message: message.into(),
    }
}

/// Where a new herdr pane goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Place {
    /// A workspace of its own (`workspace create`).
    Workspace,
    /// Beside another herdr pane, in its workspace (`pane split`).
    Split {
        /// herdr's id of the pane split.
        of: String,
        direction: SplitDirection,
    },
}

/// `pane split --direction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitDirection {
    Right,
    Down,
}

impl SplitDirection {
    /// `right` or `down`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "right" => Some(SplitDirection::Right),
            "down" => Some(SplitDirection::Down),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SplitDirection::Right => "right",
            SplitDirection::Down => "down",
        }
    }
}

/// The file the wrapper waits for after the command ended: drover has
/// read the last screen (`<status file>.seen`).
pub(crate) fn seen_file(status_file: &Path) -> PathBuf {
    let mut s = status_file.as_os_str().to_owned();
    s.push(".seen");
    PathBuf::from(s)
}

/// drover's herdr host for one state dir: the client, and the panes made.
pub struct HerdrHost {
    state_dir: StateDirBuf,
    client: Client,
    me: Weak<HerdrHost>,
    /// The version line, once `herdr --version` answered.
    version: Mutex<Option<String>>,
}

impl std::fmt::Debug for HerdrHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HerdrHost")
            .field("binary", &self.client.binary())
            .field("socket", &self.client.socket())
            .finish()
    }
}

/// One created herdr pane with its process found and its env verified.
pub(crate) struct Created {
    pub(crate) workspace_id: String,
    pub(crate) pane_id: String,
    pub(crate) terminal_id: Option<String>,
    /// The split direction, for a pane made by `pane split`.
    pub(crate) split: Option<String>,
    pub(crate) pid: u32,
    pub(crate) env_verified: bool,
    pub(crate) status_file: PathBuf,
    /// When the generation started (RFC 3339; part of its process marker).
    pub(crate) created_at: String,
}

impl HerdrHost {
    /// The host for `state_dir`; herdr is not contacted until a pane needs it.
    pub fn new(state_dir: &StateDir) -> Arc<Self> {
        Arc::new_cyclic(|me| HerdrHost {
            state_dir: state_dir.to_buf(),
            client: Client::from_env(),
            me: me.clone(),
            version: Mutex::new(None),
        })
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Check herdr can be run (once it could, it is not asked again).
    fn check(&self) -> Result<(), PaneError> {
        let mut v = pane::lock(&self.version);
        if v.is_none() {
            let line = self.client.version(VERSION_TIMEOUT).map_err(herdr_err)?;
            tracing::info!(version = %line, socket = %self.client.socket().display(), "herdr found");
            *v = Some(line);
        }
        Ok(())
    }

    /// Create a pane for `spec` on herdr, its env verified: in a new
    /// workspace, or split from another herdr pane (`place`).
    pub fn spawn(
        &self,
        spec: PaneSpec,
        place: Place,
        events: Arc<dyn PaneEvents>,
    ) -> Result<Arc<HerdrPane>, PaneError> {
        spec.validate()?;
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| herdr_err("the supervisor is stopping"))?;
        let created_at = crate::paths::now_rfc3339();
        let c = self.create(&spec, 1, &created_at, &place)?;
        let pane = HerdrPane::start(me, spec, c, 1, events);
        state::save(&self.state_dir, &pane);
        Ok(pane)
    }

    /// `workspace.create` (or `pane.split`) with the env, find the shell,
    /// type the `exec` line, verify the env of the started wrapper.
    pub(crate) fn create(
        &self,
        spec: &PaneSpec,
        generation: u64,
        created_at: &str,
        place: &Place,
    ) -> Result<Created, PaneError> {
        if let Some((k, _)) = spec
            .env
            .iter()
            .find(|(k, _)| HERDR_OWN_ENV.contains(&k.as_str()))
        {
            return Err(PaneError::HerdrOwnEnv(k.clone()));
        }
        self.check()?;
        // herdr starts a pane whose cwd does not exist in $HOME instead:
        // drover checks it (again on respawn: it may have gone since).
        let cwd = match &spec.cwd {
            Some(c) if !c.is_dir() => return Err(PaneError::MissingCwd(c.clone())),
            Some(c) => Some(std::path::absolute(c).unwrap_or_else(|_| c.clone())),
            None => None,
        };
        let marker = crate::pane::reap::marker(&spec.name, generation, created_at);
        let mut env = serde_json::Map::new();
        for (k, v) in &spec.env {
            env.insert(k.clone(), Value::String(v.clone()));
        }
        env.insert(
            crate::pane::PANE_MARKER_ENV.into(),
            Value::String(marker.clone()),
        );
        let mut params = match place {
            Place::Workspace => json!({
                "focus": false,
                "label": format!("drover:{}", spec.name),
                "env": env,
            }),
            Place::Split { of, direction } => json!({
                "target_pane_id": of,
                "direction": direction.as_str(),
                "focus": false,
                "env": env,
            }),
        };
        if let Some(cwd) = &cwd {
            params["cwd"] = Value::String(cwd.to_string_lossy().into_owned());
        }
        let spawn_err = |message: String| PaneError::Spawn {
            command: spec.argv.first().cloned().unwrap_or_default(),
            message,
        };
        let (method, what, root) = match place {
            Place::Workspace => ("workspace.create", "workspace create", "root_pane"),
            Place::Split { .. } => ("pane.split", "pane split", "pane"),
        };
        let r = self
            .client
            .request(method, params, REQUEST_TIMEOUT, true)
            .map_err(|f| spawn_err(format!("herdr {what}: {f}")))?;
        let workspace_id = match place {
            Place::Workspace => r["workspace"]["workspace_id"].as_str(),
            Place::Split { .. } => r["pane"]["workspace_id"].as_str(),
        }
        .map(String::from);
        let (Some(workspace_id), Some(pane_id)) =
            (workspace_id, r[root]["pane_id"].as_str().map(String::from))
        else {
            return Err(herdr_err(format!(
                "herdr {what} answered without the workspace id and .{root}.pane_id"
            )));
        };
        let terminal_id = r[root]["terminal_id"].as_str().map(String::from);
        let fail = |e: PaneError| {
            self.close_pane(&pane_id);
            e
        };
        let entry = format!("{}={marker}", crate::pane::PANE_MARKER_ENV);
        let pid = find_shell(entry.as_bytes()).ok_or_else(|| {
            fail(herdr_err(format!(
                "herdr pane {pane_id} has no shell with drover's marker on this machine \
                 (is the herdr server local and running as this user?)"
            )))
        })?;
        let status_file = self.status_file(&spec.name, generation).map_err(&fail)?;
        let line = exec_line(&status_file, &command_argv(spec, cwd.as_deref()));
        self.client
            .request(
                "pane.send_text",
                json!({"pane_id": pane_id, "text": line}),
                REQUEST_TIMEOUT,
                true,
            )
            .map_err(|f| fail(spawn_err(format!("herdr pane send-text: {f}"))))?;
        self.client
            .cli(&["pane", "send-keys", &pane_id, "enter"], CLI_TIMEOUT)
            .map_err(|f| fail(spawn_err(format!("herdr pane send-keys: {f}"))))?;
        if !wait_for_wrapper(pid, &status_file) {
            return Err(fail(spawn_err(format!(
                "the shell of herdr pane {pane_id} ended or did not start the command within {} s",
                EXEC_TIMEOUT.as_secs()
            ))));
        }
        let env_verified = match crate::pane::spawn::verify_env_settled(pid, &spec.env) {
            Ok(v) => v,
            Err(name) => {
                crate::pane::native::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                return Err(fail(PaneError::EnvMismatch { name }));
            }
        };
        tracing::info!(pane = %spec.name, pane_id = %pane_id, pid, "herdr pane created");
        Ok(Created {
            workspace_id,
            pane_id,
            terminal_id,
            split: match place {
                Place::Workspace => None,
                Place::Split { direction, .. } => Some(direction.as_str().to_string()),
            },
            pid,
            env_verified,
            status_file,
            created_at: created_at.to_string(),
        })
    }

    /// `herdr pane close ID`: herdr closes the workspace with its last
    /// pane (errors are logged: the pane may be gone already).
    pub(crate) fn close_pane(&self, pane_id: &str) {
        if let Err(f) = self.client.cli(&["pane", "close", pane_id], CLI_TIMEOUT) {
            tracing::debug!(pane_id = %pane_id, error = %f, "herdr pane close failed");
        }
    }

    /// Where a respawn of a pane that lived in `workspace_id` goes: split
    /// from another pane still in that workspace (`pane.list`), so panes
    /// split into one workspace stay together; else a new workspace.
    pub(crate) fn respawn_place(
        &self,
        workspace_id: &str,
        old: &str,
        split: Option<&str>,
    ) -> Place {
        let Some(direction) = split.and_then(SplitDirection::parse) else {
            return Place::Workspace;
        };
        let listed = self.client.request(
            "pane.list",
            json!({"workspace_id": workspace_id}),
            REQUEST_TIMEOUT,
            false,
        );
        let other = listed.ok().and_then(|r| {
            r["panes"].as_array()?.iter().find_map(|p| {
                let id = p["pane_id"].as_str()?;
                (id != old).then(|| id.to_string())
            })
        });
        match other {
            Some(of) => Place::Split { of, direction },
            None => Place::Workspace,
        }
    }

    /// Re-adopt the panes a previous supervisor of this state dir left
    /// running (`kill -9`): those whose wrapper still runs with the saved
    /// start time. The others' state is removed; their pane records stay,
    /// so the supervisor lists them as lost and ends what still runs.
    pub fn adopt(&self, events: &dyn Fn(&str) -> Arc<dyn PaneEvents>) -> Vec<Arc<HerdrPane>> {
        let saved = state::load(&self.state_dir);
        let Some(me) = self.me.upgrade() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for s in saved {
            let p = &s.process;
            if !(p.still_runs() && watch::is_leader(p.pid)) {
                tracing::warn!(pane = %p.name, pid = p.pid, "herdr pane's process is gone; not re-adopted");
                state::remove(&self.state_dir, &p.name);
                continue;
            }
            let c = Created {
                workspace_id: s.workspace_id.clone(),
                pane_id: s.pane_id.clone(),
                terminal_id: s.terminal_id.clone(),
                split: s.split.clone(),
                pid: p.pid,
                env_verified: true,
                status_file: s.status_file.clone(),
                created_at: p.created_at.clone(),
            };
            let pane = HerdrPane::start(me.clone(), p.spec(), c, p.generation, events(&p.name));
            tracing::info!(pane = %p.name, pane_id = %s.pane_id, generation = p.generation, "herdr pane re-adopted");
            out.push(pane);
        }
        out
    }

    pub(crate) fn state_dir(&self) -> &StateDir {
        &self.state_dir
    }

    /// `<state>/herdr/exit/<name>.<generation>`, its directory private and
    /// any stale file removed.
    fn status_file(&self, name: &str, generation: u64) -> Result<PathBuf, PaneError> {
        let dir = self.state_dir.herdr_exit_dir();
        crate::store::create_private_dir(&dir)
            .map_err(|e| herdr_err(format!("cannot create {}: {e}", dir.display())))?;
        let f = self.state_dir.herdr_exit_file(name, generation);
        let _ = std::fs::remove_file(&f);
        let _ = std::fs::remove_file(seen_file(&f));
        Ok(f)
    }

    /// The supervisor is stopping: every pane was killed (each closed its
    /// workspace); end the CLI calls still running (`agent wait`). herdr's
    /// server is never stopped: drover did not start it.
    pub fn shutdown(&self) {
        self.client.stop_running();
    }
}

/// The line typed into the pane's shell: a leading space keeps it out of
/// shells' history; every word quoted for the shell when it needs it.
fn exec_line(status_file: &Path, argv: &[String]) -> String {
    let mut words = vec![
        "exec".to_string(),
        WRAPPER_SHELL.to_string(),
        "-c".to_string(),
        crate::shell::quote(WRAPPER_SCRIPT),
        crate::shell::quote(&status_file.to_string_lossy()),
    ];
    words.extend(argv.iter().map(|a| crate::shell::quote(a)));
    format!(" {}", words.join(" "))
}

/// What herdr 0.8.2 sets in every pane it starts, naming that pane and its
/// server, over any value the request declares: one declared (copied from
/// another pane) would never arrive, and the env check would fail on it.
pub const HERDR_OWN_ENV: &[&str] = &[
    "HERDR_ENV",
    "HERDR_BIN_PATH",
    "HERDR_SOCKET_PATH",
    "HERDR_WORKSPACE_ID",
    "HERDR_TAB_ID",
    "HERDR_PANE_ID",
];

/// The argv with its command as the absolute path it has on the
/// supervisor's (or the spec's) `PATH`, as a native pane would run it: the
/// pane's shell has the herdr server's `PATH`, which may find another
/// program of that name or none.
fn command_argv(spec: &PaneSpec, cwd: Option<&Path>) -> Vec<String> {
    let mut argv = spec.argv.clone();
    if let Some(first) = argv.first_mut()
        && let Some(found) = crate::pane::spec::find_executable(first, &spec.path_var(), cwd)
    {
        // A `PATH` entry may be relative: to the pane's cwd, as exec sees it.
        let found = match cwd {
            Some(c) => c.join(found),
            None => found,
        };
        *first = std::path::absolute(&found)
            .unwrap_or(found)
            .to_string_lossy()
            .into_owned();
    }
    argv
}

/// The pane's shell: the process with drover's marker whose parent does
/// not have it.
fn find_shell(entry: &[u8]) -> Option<u32> {
    let deadline = Instant::now() + FIND_TIMEOUT;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(2), Duration::from_millis(50));
    loop {
        let all = crate::pane::procfs::all();
        let marked: Vec<(u32, i64)> = all
            .iter()
            .filter(|(pid, _)| crate::pane::procfs::environ_has(*pid, entry))
            .map(|(pid, s)| (*pid, s.ppid))
            .collect();
        let top = marked
            .iter()
            .find(|(_, ppid)| !marked.iter().any(|(p, _)| i64::from(*p) == *ppid))
            .map(|(pid, _)| *pid);
        if top.is_some() || Instant::now() >= deadline {
            return top;
        }
        std::thread::sleep(delay.next_delay());
    }
}

/// Wait until the shell `pid` has exec'd the wrapper (its argv names the
/// status file), or the wrapper has already run the command to its end
/// (the status file is there). False when neither happened in time, or the
/// shell ended first.
fn wait_for_wrapper(pid: u32, status_file: &Path) -> bool {
    let needle = status_file.as_os_str().as_encoded_bytes();
    let deadline = Instant::now() + EXEC_TIMEOUT;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(2), Duration::from_millis(50));
    loop {
        let cmdline = crate::pane::procfs::cmdline(pid);
        if cmdline
            .as_ref()
            .is_some_and(|c| c.split(|b| *b == 0).any(|a| a == needle))
            || status_file.exists()
        {
            return true;
        }
        // An empty argv is a process in the middle of exec (or a zombie):
        // only the process's state tells them apart.
        if !shell_runs(pid) || Instant::now() >= deadline {
            // Gone (or a zombie): it may have written the status just now.
            return status_file.exists();
        }
        std::thread::sleep(delay.next_delay());
    }
}

/// Whether `pid` is still a live process (not gone, not a zombie): a shell
/// whose argv reads empty while it execs the wrapper still runs.
fn shell_runs(pid: u32) -> bool {
    crate::pane::procfs::stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X' | 'x'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_line_quotes_every_word_that_needs_it() {
        let l = exec_line(Path::new("/s/x.1"), &["echo".into(), "it's $HOME".into()]);
        assert!(l.starts_with(" exec /bin/sh -c '"));
        assert!(l.ends_with(" /s/x.1 echo 'it'\\''s $HOME'"));
    }

    /// Regression: the pane's shell looked the command up on the herdr
    /// server's `PATH`, so a program only the supervisor's (or the spec's)
    /// `PATH` has did not run, or another one of that name did.
    #[test]
    fn the_command_runs_from_the_path_it_was_found_on() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("only-here");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let spec = |argv: &[&str]| PaneSpec {
            name: "p1".into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            env: vec![("PATH".into(), dir.path().to_string_lossy().into_owned())],
            cwd: None,
            cols: 120,
            rows: 40,
            agent: "shell".into(),
        };
        let argv = command_argv(&spec(&["only-here", "-x"]), None);
        assert_eq!(argv, [bin.to_string_lossy().as_ref(), "-x"]);
        let argv = command_argv(&spec(&["/bin/sh"]), None);
        assert_eq!(argv, ["/bin/sh"]);
    }
}
