//! `drover rehearse` plumbing without npm: a stand-in agent (a shell script)
//! shows what the real one would get — env, argv, HOME config — and the mock
//! model it points at is listening.

use drover::daemon::Client;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(20);

struct Rehearsal {
    _root: tempfile::TempDir,
    client: Client,
    info: Value,
}

impl Drop for Rehearsal {
    fn drop(&mut self) {
        let _ = self.client.call_raw("shutdown", json!({}));
    }
}

fn fake_agent(dir: &Path) -> PathBuf {
    let p = dir.join("fake-agent");
    std::fs::write(
        &p,
        "#!/bin/sh\nprintf 'ARGS=%s\\n' \"$*\"\nprintf 'BASE=%s\\n' \"$ANTHROPIC_BASE_URL\"\n\
         printf 'CODEX_HOME=%s\\n' \"$CODEX_HOME\"\nprintf 'HOME=%s\\n' \"$HOME\"\nexec sleep 60\n",
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn rehearse(agent: &str, extra: &[&str]) -> Rehearsal {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let fake = fake_agent(root.path());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .arg("--state-dir")
        .arg(&state)
        .args(["rehearse", "--json", "--agent", agent])
        .arg(format!("--{agent}-bin"))
        .arg(&fake)
        .args(extra)
        .output()
        .unwrap();
    if !out.status.success() {
        // The command may have started a supervisor before failing: stop it.
        let _ = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
            .arg("--state-dir")
            .arg(&state)
            .arg("kill-server")
            .output();
        panic!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    let state = drover::paths::resolve_state_dir(Some(&state)).unwrap();
    let client = Client::connect(
        &drover::paths::socket_path(drover::statedir::StateDir::new(&state)).unwrap(),
    )
    .unwrap();
    Rehearsal {
        _root: root,
        client,
        info,
    }
}

impl Rehearsal {
    /// The pane's screen once it contains `what`.
    fn screen_with(&mut self, pane: &str, what: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let v = self
                .client
                .call_raw("pane.read", json!({"pane": pane}))
                .unwrap();
            let text = v["text"].as_str().unwrap_or_default().to_string();
            if text.contains(what) {
                return text;
            }
            assert!(Instant::now() < deadline, "no {what:?} in:\n{text}");
            // Wakes on the pane's next output burst or its end.
            self.client
                .call_raw(
                    "wait",
                    json!({"panes": [pane], "until": ["working", "exited"], "mode": "any",
                           "timeout_ms": 200}),
                )
                .unwrap();
        }
    }
}

#[test]
fn claude_gets_the_mock_url_and_a_trusting_home() {
    let mut r = rehearse("claude", &[]);
    let port = r.info["port"].as_u64().unwrap();
    let home = PathBuf::from(r.info["home"].as_str().unwrap());
    let cwd = r.info["cwd"].as_str().unwrap().to_string();
    let screen = r.screen_with("rehearse-claude", "HOME=");
    assert!(
        screen.contains(&format!("BASE=http://127.0.0.1:{port}")),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("HOME={}", home.display())),
        "{screen}"
    );
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(cfg["hasCompletedOnboarding"], true);
    assert_eq!(cfg["projects"][&cwd]["hasTrustDialogAccepted"], true);
    assert!(
        Path::new(&cwd).join(".git").is_dir(),
        "the default project is a git repository"
    );
    // The mock runs in its own pane and listens on the port the agent was given.
    r.screen_with("rehearse-claude-mock", "listening on http://127.0.0.1:");
    std::net::TcpStream::connect(("127.0.0.1", port as u16)).expect("the mock listens");
}

#[test]
fn codex_runs_without_daemon_against_its_config() {
    let mut r = rehearse("codex", &["--", "-c", "disable_paste_burst=true"]);
    let port = r.info["port"].as_u64().unwrap();
    let home = PathBuf::from(r.info["home"].as_str().unwrap());
    let screen = r.screen_with("rehearse-codex", "HOME=");
    assert!(
        screen.contains("ARGS=--no-daemon -c disable_paste_burst=true"),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("CODEX_HOME={}", home.join(".codex").display())),
        "{screen}"
    );
    let cfg = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap();
    assert!(
        cfg.contains(&format!("base_url = \"http://127.0.0.1:{port}/v1\"")),
        "{cfg}"
    );
}

#[test]
fn missing_agent_names_the_install_script() {
    let root = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .arg("--state-dir")
        .arg(root.path().join("state"))
        .args(["--no-autostart", "rehearse", "--agent", "codex"])
        .env("PATH", "/nonexistent")
        .env("DROVER_AGENTS_DIR", root.path().join("agents"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scripts/install-agents.sh"), "{err}");
}
