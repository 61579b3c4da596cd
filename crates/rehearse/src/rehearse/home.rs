//! A fresh, hermetic HOME for each agent CLI (docs/rehearsal.md): config files that skip
//! onboarding, trust the working folder and point the CLI at the mock server,
//! and the environment that goes with them. A [`SetupFault`] leaves one piece
//! out on purpose, to rehearse the setup dialogs.

use super::Agent;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The API key handed to Claude; any value works against the mock.
pub const CLAUDE_KEY: &str = "sk-ant-mock-rehearsal-0123456789abcdefghij";
/// The env var Codex reads its key from (named in `config.toml`).
pub const CODEX_KEY_VAR: &str = "MOCK_API_KEY";

/// Errors preparing a HOME.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HomeError {
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{fault} does not apply to {agent}; use one of: {allowed}")]
    FaultNotApplicable {
        fault: &'static str,
        agent: &'static str,
        allowed: &'static str,
    },
}

/// A setup left wrong on purpose, so the agent shows a setup dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupFault {
    /// The working folder is not trusted (Claude `Accessing workspace:`, Codex `Trust this folder?`).
    Untrusted,
    /// Claude: the custom API key was never approved (`Detected a custom API key`).
    UnapprovedKey,
    /// Codex: no model provider configured (`Sign in with ChatGPT`).
    NoProvider,
}

impl SetupFault {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SetupFault::Untrusted => "untrusted",
            SetupFault::UnapprovedKey => "unapproved-key",
            SetupFault::NoProvider => "no-provider",
        }
    }
}

/// What a prepared HOME gives the pane: env to set and arguments to add.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub home: PathBuf,
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
}

fn write(path: &Path, text: &str) -> Result<(), HomeError> {
    let io = |source| HomeError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, text).map_err(io)
}

fn base_env(home: &Path) -> Vec<(String, String)> {
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    vec![
        ("HOME".into(), s(home.to_path_buf())),
        ("XDG_CONFIG_HOME".into(), s(home.join(".config"))),
        ("XDG_DATA_HOME".into(), s(home.join(".local/share"))),
        ("XDG_STATE_HOME".into(), s(home.join(".local/state"))),
        ("XDG_CACHE_HOME".into(), s(home.join(".cache"))),
    ]
}

/// Whether `fault` can be rehearsed with `agent`.
pub fn check_fault(agent: Agent, fault: Option<SetupFault>) -> Result<(), HomeError> {
    match (agent, fault) {
        (Agent::Claude, Some(SetupFault::NoProvider)) => Err(HomeError::FaultNotApplicable {
            fault: "no-provider",
            agent: "claude",
            allowed: "untrusted, unapproved-key",
        }),
        (Agent::Codex, Some(SetupFault::UnapprovedKey)) => Err(HomeError::FaultNotApplicable {
            fault: "unapproved-key",
            agent: "codex",
            allowed: "untrusted, no-provider",
        }),
        _ => Ok(()),
    }
}

/// The API key handed to Claude as a subscription (OAuth) token instead, with
/// [`Options::subscription`]; any value works against the mock.
pub const CLAUDE_OAUTH_TOKEN: &str = "sk-ant-oat01-mock-rehearsal-token";

/// Extra choices for a rehearsal HOME.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Claude: sign in with a (mock) subscription token instead of an API key,
    /// so usage limits show as a subscription's (`You've hit your limit ·
    /// resets …` and the limit menu) instead of a bare API error.
    pub subscription: bool,
    /// `TZ` for the agent (the zone its reset times are printed in).
    pub tz: Option<String>,
}

/// Write the config for `agent` into `home` (created if missing) for a mock on
/// `port`, working in `cwd`.
pub fn prepare(
    agent: Agent,
    home: &Path,
    cwd: &Path,
    port: u16,
    fault: Option<SetupFault>,
) -> Result<Prepared, HomeError> {
    prepare_with(agent, home, cwd, port, fault, &Options::default())
}

/// [`prepare`] with [`Options`].
pub fn prepare_with(
    agent: Agent,
    home: &Path,
    cwd: &Path,
    port: u16,
    fault: Option<SetupFault>,
    opts: &Options,
) -> Result<Prepared, HomeError> {
    check_fault(agent, fault)?;
    let cwd_s = cwd.to_string_lossy();
    let mut env = base_env(home);
    if let Some(tz) = &opts.tz {
        env.push(("TZ".into(), tz.clone()));
    }
    match agent {
        Agent::Claude => {
            let tail: String = {
                let chars: Vec<char> = CLAUDE_KEY.chars().collect();
                chars[chars.len().saturating_sub(20)..].iter().collect()
            };
            let approved = if fault == Some(SetupFault::UnapprovedKey) {
                vec![]
            } else {
                vec![tail]
            };
            let trusted = fault != Some(SetupFault::Untrusted);
            let cfg = json!({
                "hasCompletedOnboarding": true,
                "customApiKeyResponses": {"approved": approved, "rejected": []},
                "projects": {cwd_s.as_ref(): {"hasTrustDialogAccepted": trusted,
                                              "hasCompletedProjectOnboarding": true}},
            });
            write(&home.join(".claude.json"), &format!("{cfg:#}\n"))?;
            env.push(if opts.subscription {
                ("CLAUDE_CODE_OAUTH_TOKEN".into(), CLAUDE_OAUTH_TOKEN.into())
            } else {
                ("ANTHROPIC_API_KEY".into(), CLAUDE_KEY.into())
            });
            env.extend([
                (
                    "ANTHROPIC_BASE_URL".into(),
                    format!("http://127.0.0.1:{port}"),
                ),
                ("DISABLE_AUTOUPDATER".into(), "1".into()),
                (
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                    "1".into(),
                ),
            ]);
            if nix::unistd::geteuid().is_root() {
                // Lets `--dangerously-skip-permissions` run as root (docs/rehearsal.md).
                env.push(("IS_SANDBOX".into(), "1".into()));
            }
            Ok(Prepared {
                home: home.to_path_buf(),
                env,
                args: vec![],
            })
        }
        Agent::Codex => {
            let codex_home = home.join(".codex");
            write(
                &codex_home.join("config.toml"),
                &codex_config(&cwd_s, port, fault),
            )?;
            env.extend([
                (
                    "CODEX_HOME".into(),
                    codex_home.to_string_lossy().into_owned(),
                ),
                (CODEX_KEY_VAR.into(), "mock-key".into()),
            ]);
            Ok(Prepared {
                home: home.to_path_buf(),
                env,
                args: vec!["--no-daemon".into()],
            })
        }
    }
}

/// Codex's `config.toml` for a mock on `port` (docs/rehearsal.md).
pub fn codex_config(cwd: &str, port: u16, fault: Option<SetupFault>) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = String::new();
    if fault != Some(SetupFault::NoProvider) {
        out.push_str("model = \"mock-model\"\nmodel_provider = \"mock\"\n");
    }
    out.push_str(
        "approval_policy = \"on-request\"\n\
         sandbox_mode = \"workspace-write\"\n\
         check_for_update_on_startup = false\n\n",
    );
    if fault != Some(SetupFault::NoProvider) {
        out.push_str(&format!(
            "[model_providers.mock]\nname = \"mock\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
             env_key = \"{CODEX_KEY_VAR}\"\nwire_api = \"responses\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n\n"
        ));
    }
    if fault != Some(SetupFault::Untrusted) {
        out.push_str(&format!(
            "[projects.{}]\ntrust_level = \"trusted\"\n\n",
            q(cwd)
        ));
    }
    out.push_str("[tui]\nscreen_reader_detection_done = true\n\n[analytics]\nenabled = false\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_config_parses_and_points_at_the_mock() {
        let text = codex_config("/w/a \"b\"", 4242, None);
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["model_provider"].as_str(), Some("mock"));
        assert_eq!(
            v["model_providers"]["mock"]["base_url"].as_str(),
            Some("http://127.0.0.1:4242/v1")
        );
        assert_eq!(
            v["projects"]["/w/a \"b\""]["trust_level"].as_str(),
            Some("trusted")
        );
    }

    #[test]
    fn faults_leave_out_exactly_their_piece() {
        let untrusted: toml::Value =
            toml::from_str(&codex_config("/w", 1, Some(SetupFault::Untrusted))).unwrap();
        assert!(untrusted.get("projects").is_none());
        assert!(untrusted.get("model_providers").is_some());
        let noprov: toml::Value =
            toml::from_str(&codex_config("/w", 1, Some(SetupFault::NoProvider))).unwrap();
        assert!(noprov.get("model_providers").is_none());
        assert!(noprov.get("projects").is_some());
    }

    #[test]
    fn claude_json_approves_the_key_tail_and_trusts_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let p = prepare(Agent::Claude, dir.path(), Path::new("/w/p"), 9, None).unwrap();
        let cfg: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(".claude.json")).unwrap(),
        )
        .unwrap();
        let tail = &CLAUDE_KEY[CLAUDE_KEY.len() - 20..];
        assert_eq!(cfg["customApiKeyResponses"]["approved"][0], tail);
        assert_eq!(cfg["projects"]["/w/p"]["hasTrustDialogAccepted"], true);
        assert!(
            p.env
                .iter()
                .any(|(k, v)| k == "ANTHROPIC_BASE_URL" && v == "http://127.0.0.1:9")
        );
    }
}
