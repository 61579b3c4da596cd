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
