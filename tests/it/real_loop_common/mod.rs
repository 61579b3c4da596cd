//! What the real-TUI loop suites (`real_loop`, `real_loop_brief`) share: the
//! mock model started on a free port, the agents' hermetic HOME trusting
//! every lane's worktree, the installed agents' bin dirs, and guards that end
//! the mock, a stuck run and the run's supervisor whatever the test does.

use crate::common;

use drover::rehearse::{Agent, discover, home};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the mock model may take to write its port.
const MOCK_TIMEOUT: Duration = Duration::from_secs(20);

/// Kills its child on drop (the mock model, a stuck `loop run`).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops the run's supervisor on drop (it took the agents' panes down).
pub struct Supervisor(pub PathBuf);

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = Command::new(common::BIN)
            .arg("--state-dir")
            .arg(&self.0)
            .arg("kill-server")
            .stdin(Stdio::null())
            .output();
    }
}

/// The bin dir of an installed agent version (panics naming the installer).
pub fn bin_dir(agent: Agent, version: &str) -> PathBuf {
    let bin = discover::cached_version(agent, version).unwrap_or_else(|| {
        panic!(
            "{agent:?} {version} is not installed in {}: run scripts/install-agents.sh",
            discover::cache_root().display()
        )
    });
    bin.parent().unwrap().to_path_buf()
}

/// `PATH` with Claude `claude_v` and Codex `codex_v` first.
pub fn agents_path(claude_v: &str, codex_v: &str) -> String {
    format!(
        "{}:{}:{}",
        bin_dir(Agent::Claude, claude_v).display(),
        bin_dir(Agent::Codex, codex_v).display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `drover mock-model --port 0 ARGS…` on a free port, its stdout to `log`;
/// returns it (ended on drop) and its port once written to `port_file`.
pub fn mock<I, S>(args: I, port_file: &Path, log: &Path) -> (Reaped, u16)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = std::fs::File::create(log).unwrap();
    let child = Command::new(common::BIN)
        .args(["mock-model", "--port", "0"])
        .args(args)
        .arg("--port-file")
        .arg(port_file)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = Reaped(child);
    let t = Instant::now();
    loop {
        if let Some(p) = std::fs::read_to_string(port_file)
            .ok()
            .and_then(|s| s.trim().parse::<u16>().ok())
        {
            return (child, p);
        }
        assert!(t.elapsed() < MOCK_TIMEOUT, "the mock model did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The agents' hermetic HOME (docs/rehearsal.md) for a mock on `port`, every
/// one of `dirs` trusted; returns the env the lanes get.
pub fn hermetic_home(home_dir: &Path, dirs: &[PathBuf], port: u16) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for agent in [Agent::Claude, Agent::Codex] {
        let p = home::prepare(agent, home_dir, &dirs[0], port, None).unwrap();
        for (k, v) in p.env {
            if !env.iter().any(|(n, _)| *n == k) {
                env.push((k, v));
            }
        }
    }
    let cj = home_dir.join(".claude.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
    let mut toml = std::fs::read_to_string(home_dir.join(".codex/config.toml")).unwrap();
    for d in &dirs[1..] {
        let key = d.to_string_lossy().into_owned();
        cfg["projects"][&key] = serde_json::json!({"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true});
        toml.push_str(&format!(
            "\n[projects.{}]\ntrust_level = \"trusted\"\n",
            toml::Value::String(key)
        ));
    }
    std::fs::write(&cj, format!("{cfg:#}\n")).unwrap();
    std::fs::write(home_dir.join(".codex/config.toml"), toml).unwrap();
    env
}

/// Where `drover` is for a loop run and its agents' shells (issue 35: a user
/// has it on the PATH their terminal gives them; the agents' shells may not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DroverOnPath {
    /// Not on the loop's PATH at all: the loop is run by its absolute path.
    No,
    /// Installed in the agents' HOME as `cargo install` would (`~/.cargo/bin`),
    /// that dir put on PATH by a line appended to `~/.bashrc` only, and the
    /// loop run from there with its PATH holding the dir, as from the user's
    /// terminal. A login shell does not get it: Debian's skeleton `.profile`
    /// adds `~/bin` and `~/.local/bin`, and its `.bashrc` returns at once when
    /// not interactive — so Codex, whose commands take a login shell's PATH
    /// (`/etc/profile` resets it), finds no `drover` there.
    Bashrc,
}

/// The line appended to `~/.bashrc` for [`DroverOnPath::Bashrc`].
pub const BASHRC_PATH_LINE: &str = "export PATH=\"$HOME/.cargo/bin:$PATH\"";

/// Gives `home` a new user's dotfiles: every file of the distribution's
/// skeleton (`/etc/skel`), or, where there is none, a `.bashrc` that stops
/// when not interactive and a `.profile` that reads it, as Debian's do.
pub fn skeleton_dotfiles(home: &Path) {
    std::fs::create_dir_all(home).unwrap();
    let mut copied = false;
    if let Ok(rd) = std::fs::read_dir("/etc/skel") {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                std::fs::copy(e.path(), home.join(e.file_name())).unwrap();
                copied = true;
            }
        }
    }
    if !copied {
        std::fs::write(
            home.join(".bashrc"),
            "case $- in\n    *i*) ;;\n      *) return;;\nesac\n",
        )
        .unwrap();
        std::fs::write(
            home.join(".profile"),
            "if [ -n \"$BASH_VERSION\" ] && [ -f \"$HOME/.bashrc\" ]; then\n    . \"$HOME/.bashrc\"\nfi\n",
        )
        .unwrap();
    }
}

/// Installs the drover under test into `home/.cargo/bin` (a hard link where
/// it may, else a copy) and appends [`BASHRC_PATH_LINE`] to `home/.bashrc`;
/// returns the installed binary.
pub fn install_drover_via_bashrc(home: &Path) -> PathBuf {
    use std::io::Write;
    let bin = home.join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("drover");
    let _ = std::fs::remove_file(&exe);
    if std::fs::hard_link(common::BIN, &exe).is_err() {
        std::fs::copy(common::BIN, &exe).unwrap();
    }
    let mut rc = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.join(".bashrc"))
        .unwrap();
    writeln!(rc, "\n{BASHRC_PATH_LINE}").unwrap();
    exe
}

/// `path` without the dirs that hold a `drover` executable.
pub fn without_drover(path: &str) -> String {
    path.split(':')
        .filter(|d| drover::pane::find_executable("drover", d, None).is_none())
        .collect::<Vec<_>>()
        .join(":")
}
