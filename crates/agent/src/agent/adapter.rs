//! Per-kind adapters: how an agent is started (argv, env, config files) for a
//! lane or a rehearsal against a mock model server, when it is ready, and the
//! writes that deliver a prompt (docs/agents.md, docs/registry.md, docs/rehearsal.md). Pure functions: nothing
//! here touches the disk or a process.

use super::AgentError;
use super::sim::Profile;
use super::state::{AgentKind, Observation, State};
use std::fmt;
use std::path::PathBuf;

/// Pause before the Enter that follows a bracketed paste.
pub const ENTER_AFTER_PASTE_MS: u64 = 30;
/// Pause before Enter when Codex gets typed text without bracketed paste: longer
/// than its paste-burst window, so the Enter submits instead of adding a newline.
pub const CODEX_ENTER_AFTER_TYPING_MS: u64 = 150;
/// Characters of the prompt's first line looked for on screen to confirm delivery.
pub const PROBE_CHARS: usize = 40;

/// What a lane's agent may do (docs/registry.md: only the Implementer writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reviewers, auditors, planners.
    ReadOnly,
    /// The Implementer.
    Write,
}

/// Claude Code's `--permission-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudePermission {
    /// `plan`: read-only planning.
    Plan,
    /// `default`: asks before each edit and command.
    Default,
    /// `acceptEdits`: writes and simple commands without asking.
    AcceptEdits,
}

impl ClaudePermission {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaudePermission::Plan => "plan",
            ClaudePermission::Default => "default",
            ClaudePermission::AcceptEdits => "acceptEdits",
        }
    }

    /// The mode for an access level: read-only → `plan`, write → `acceptEdits`.
    pub fn for_access(a: Access) -> Self {
        match a {
            Access::ReadOnly => ClaudePermission::Plan,
            Access::Write => ClaudePermission::AcceptEdits,
        }
    }
}

/// The arguments that set an agent's permission mode explicitly (Claude Code
/// 2.1.332 otherwise starts in auto mode, which needs the vendor's server-side
/// check and else asks a human): Claude `--permission-mode plan` for read-only
/// roles and `acceptEdits` for the writer; Codex `-s read-only` /
/// `-s workspace-write`. Other kinds take none.
pub fn permission_args(kind: AgentKind, read_only: bool) -> Vec<String> {
    let access = if read_only {
        Access::ReadOnly
    } else {
        Access::Write
    };
    match kind {
        AgentKind::Claude => vec![
            "--permission-mode".into(),
            ClaudePermission::for_access(access).as_str().into(),
        ],
        AgentKind::Codex => vec!["-s".into(), codex_sandbox(access).into()],
        AgentKind::Sim | AgentKind::Shell => vec![],
    }
}

/// True when `args` already choose a permission mode (so none is added).
pub fn sets_permission_mode(kind: AgentKind, args: &[String]) -> bool {
    let flags: &[&str] = match kind {
        AgentKind::Claude => &[
            "--permission-mode",
            "--dangerously-skip-permissions",
            "--allow-dangerously-skip-permissions",
        ],
        AgentKind::Codex => &[
            "-s",
            "--sandbox",
            "--full-auto",
            "--dangerously-bypass-approvals-and-sandbox",
        ],
        AgentKind::Sim | AgentKind::Shell => return false,
    };
    args.iter().any(|a| {
        flags
            .iter()
            .any(|f| a == f || a.starts_with(&format!("{f}=")))
    })
}

/// Codex's sandbox (`-s`) for an access level.
pub fn codex_sandbox(a: Access) -> &'static str {
    match a {
        Access::ReadOnly => "read-only",
        Access::Write => "workspace-write",
    }
}

/// Inputs of [`launch`].
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Read-only or write.
    pub access: Access,
    /// The executable (default: `claude`, `codex`, `drover` for the sim).
    pub program: Option<String>,
    /// Overrides the permission mode derived from `access` (Claude only).
    pub claude_permission: Option<ClaudePermission>,
    /// Arguments appended after the adapter's own.
    pub extra_args: Vec<String>,
    /// Which screens the sim draws (sim only).
    pub sim_profile: Profile,
    /// The sim's script (sim only).
    pub sim_script: Option<PathBuf>,
    /// The command of a shell pane (shell only; must not be empty).
    pub shell_argv: Vec<String>,
}

impl LaunchOptions {
    /// Defaults for an access level.
    pub fn new(access: Access) -> Self {
        LaunchOptions {
            access,
            program: None,
            claude_permission: None,
            extra_args: Vec::new(),
            sim_profile: Profile::Claude,
            sim_script: None,
            shell_argv: Vec::new(),
        }
    }
}

/// A config file to write before the agent starts.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// Where.
    pub path: PathBuf,
    /// What (may hold secrets: never log it).
    pub contents: String,
}

impl fmt::Debug for ConfigFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigFile")
            .field("path", &self.path)
            .field("contents", &format_args!("<{} bytes>", self.contents.len()))
            .finish()
    }
}

/// How to start an agent: set on the child when the pane is created (docs/architecture.md).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LaunchSpec {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Variables to set on the child.
    pub env: Vec<(String, String)>,
    /// Variables to remove from the child's environment.
    pub env_remove: Vec<String>,
    /// Files to write first (rehearsal configs).
    pub files: Vec<ConfigFile>,
}

impl fmt::Debug for LaunchSpec {
    /// Env values are never printed (docs/architecture.md).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("LaunchSpec")
            .field("argv", &self.argv)
            .field("env", &names)
            .field("env_remove", &self.env_remove)
            .field("files", &self.files)
            .finish()
    }
}

/// Variables an agent must not inherit (it would talk to the wrong tmux).
const ENV_REMOVE: [&str; 2] = ["TMUX", "TMUX_PANE"];

/// argv and env to start an agent of `kind` in a lane.
pub fn launch(kind: AgentKind, o: &LaunchOptions) -> Result<LaunchSpec, AgentError> {
    let prog = |default: &str| o.program.clone().unwrap_or_else(|| default.to_string());
    let mut argv = match kind {
        AgentKind::Claude => {
            let mode = o
                .claude_permission
                .unwrap_or(ClaudePermission::for_access(o.access));
            vec![
                prog("claude"),
                "--permission-mode".into(),
                mode.as_str().into(),
            ]
        }
        AgentKind::Codex => vec![
            prog("codex"),
            // Otherwise it leaves a detached app-server behind (docs/rehearsal.md).
            "--no-daemon".into(),
            "-s".into(),
            codex_sandbox(o.access).into(),
            // Belt and braces with bracketed paste: fast input is not a paste burst.
            "-c".into(),
            "disable_paste_burst=true".into(),
        ],
        AgentKind::Sim => {
            let mut v = vec![
                prog("drover"),
                "sim-agent".into(),
                "--profile".into(),
                o.sim_profile.as_str().into(),
            ];
            if let Some(s) = &o.sim_script {
                v.push("--script".into());
                v.push(s.display().to_string());
            }
            v
        }
        AgentKind::Shell => {
            if o.shell_argv.is_empty() || o.shell_argv[0].is_empty() {
                return Err(AgentError::Launch {
                    message: "a shell pane needs a command".into(),
                });
            }
            o.shell_argv.clone()
        }
    };
    argv.extend(o.extra_args.iter().cloned());
    Ok(LaunchSpec {
        argv,
        env: Vec::new(),
        env_remove: ENV_REMOVE.iter().map(|s| s.to_string()).collect(),
        files: Vec::new(),
    })
}

/// A hermetic run against a local mock model server (docs/rehearsal.md).
#[derive(Clone)]
pub struct Rehearsal {
    /// A fresh HOME for this run.
    pub home: PathBuf,
    /// The agent's working directory (trusted in the generated config).
    pub cwd: PathBuf,
    /// The mock server, e.g. `http://127.0.0.1:4100` (no trailing `/v1`).
    pub base_url: String,
    /// Any key; the mock does not check it.
    pub api_key: String,
}

impl fmt::Debug for Rehearsal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rehearsal")
            .field("home", &self.home)
            .field("cwd", &self.cwd)
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .finish()
    }
}

/// argv, env and config files for a rehearsal of `kind` against a mock server.
/// Claude and Codex only; other kinds need no config and get [`launch`]'s spec.
pub fn rehearsal(
    kind: AgentKind,
    r: &Rehearsal,
    o: &LaunchOptions,
) -> Result<LaunchSpec, AgentError> {
    let mut spec = launch(kind, o)?;
    let home = r.home.display().to_string();
    let base = r.base_url.trim_end_matches('/');
    match kind {
        AgentKind::Claude => {
            let key = &r.api_key;
            let tail: String = {
                let chars: Vec<char> = key.chars().collect();
                chars[chars.len().saturating_sub(20)..].iter().collect()
            };
            let cwd = r.cwd.display().to_string();
            let doc = serde_json::json!({
                "hasCompletedOnboarding": true,
                "customApiKeyResponses": {"approved": [tail], "rejected": []},
                "projects": {cwd: {"hasTrustDialogAccepted": true}},
            });
            spec.env = vec![
                ("HOME".into(), home),
                ("ANTHROPIC_API_KEY".into(), key.clone()),
                ("ANTHROPIC_BASE_URL".into(), base.to_string()),
                ("DISABLE_AUTOUPDATER".into(), "1".into()),
                (
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                    "1".into(),
                ),
            ];
            spec.files.push(ConfigFile {
                path: r.home.join(".claude.json"),
                contents: format!("{doc:#}\n"),
            });
        }
        AgentKind::Codex => {
            let codex_home = r.home.join(".codex");
            let q = |s: &str| toml::Value::String(s.to_string()).to_string();
            let cwd = r.cwd.display().to_string();
            let contents = format!(
                "model = \"mock-model\"\n\
                 model_provider = \"mock\"\n\
                 approval_policy = \"on-request\"\n\
                 sandbox_mode = {sandbox}\n\
                 check_for_update_on_startup = false\n\
                 \n\
                 [model_providers.mock]\n\
                 name = \"mock\"\n\
                 base_url = {url}\n\
                 env_key = \"MOCK_API_KEY\"\n\
                 wire_api = \"responses\"\n\
                 request_max_retries = 0\n\
                 stream_max_retries = 0\n\
                 \n\
                 [projects.{proj}]\n\
                 trust_level = \"trusted\"\n\
                 \n\
                 [tui]\n\
                 screen_reader_detection_done = true\n\
                 \n\
                 [analytics]\n\
                 enabled = false\n",
                sandbox = q(codex_sandbox(o.access)),
                url = q(&format!("{base}/v1")),
                proj = q(&cwd),
            );
            spec.env = vec![
                ("HOME".into(), home),
                ("CODEX_HOME".into(), codex_home.display().to_string()),
                ("MOCK_API_KEY".into(), r.api_key.clone()),
            ];
            spec.files.push(ConfigFile {
                path: codex_home.join("config.toml"),
                contents,
            });
        }
        AgentKind::Shell | AgentKind::Sim => {}
    }
    Ok(spec)
}

/// One write to the pane's PTY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Milliseconds to wait before this write.
    pub delay_ms: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Prompt text made safe to paste: no escape or other control characters
/// (an embedded `ESC [201~` would end the paste early), line ends as `\n`.
pub fn sanitize_prompt(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

/// The writes that deliver `text` to an agent of `kind` (docs/agents.md): with
/// bracketed paste enabled, the text as one paste, then Enter as a separate
/// write; without it, the text then Enter (for Codex after its paste-burst
/// window). The text is sanitised first.
pub fn delivery_plan(kind: AgentKind, text: &str, bracketed_paste_enabled: bool) -> Vec<Write> {
    let text = sanitize_prompt(text);
    let (body, enter_delay) = if bracketed_paste_enabled {
        let mut b = Vec::with_capacity(text.len() + 12);
        b.extend_from_slice(b"\x1b[200~");
        b.extend_from_slice(text.as_bytes());
        b.extend_from_slice(b"\x1b[201~");
        (b, ENTER_AFTER_PASTE_MS)
    } else {
        let delay = match kind {
            AgentKind::Codex => CODEX_ENTER_AFTER_TYPING_MS,
            _ => 0,
        };
        (text.into_bytes(), delay)
    };
    vec![
        Write {
            delay_ms: 0,
            bytes: body,
        },
        Write {
            delay_ms: enter_delay,
            bytes: b"\r".to_vec(),
        },
    ]
}

/// True when an agent in this observation accepts a prompt: `idle` or `done`.
pub fn is_ready(kind: AgentKind, o: &Observation) -> bool {
    let _ = kind; // every kind agrees today; kept for per-kind rules
    matches!(o.state, State::Idle | State::Done)
}

/// What to look for on screen to confirm a prompt arrived: the start of its
/// first non-blank line (long lines wrap, so only a prefix is reliable).
pub fn prompt_probe(text: &str) -> String {
    let s = sanitize_prompt(text);
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    collapse(line).chars().take(PROBE_CHARS).collect()
}

/// Characters of the prompt's last line looked for in a composer: a tall
/// prompt's first line may have scrolled above the composer's bottom rows.
pub const TAIL_CHARS: usize = 16;

/// The end of the prompt's last non-blank line, whitespace collapsed.
pub fn prompt_tail(text: &str) -> String {
    let s = sanitize_prompt(text);
    let line = collapse(s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(""));
    let n = line.chars().count();
    line.chars().skip(n.saturating_sub(TAIL_CHARS)).collect()
}

/// What the real TUIs show instead of a long paste: Claude Code
/// `[Pasted text #1 +N lines]`, Codex `[Pasted Content N chars]`.
pub const PASTE_PLACEHOLDERS: [&str; 2] = ["[Pasted text", "[Pasted Content"];

fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True when `screen` (text, one line per row) shows `probe` — compared with
/// whitespace collapsed, since TUIs pad and indent — or a paste placeholder.
/// An empty probe is trivially shown.
pub fn shows_prompt(screen: &str, probe: &str) -> bool {
    if probe.is_empty() {
        return true;
    }
    let collapsed: Vec<String> = screen.lines().map(collapse).collect();
    let collapsed = collapsed.join("\n");
    collapsed.contains(probe) || PASTE_PLACEHOLDERS.iter().any(|p| collapsed.contains(p))
}

/// True when the prompt's probe is visible on some row.
pub fn prompt_visible(rows: &[String], text: &str) -> bool {
    let p = prompt_probe(text);
    !p.is_empty() && shows_prompt(&rows.join("\n"), &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_takes_the_first_line_collapsed() {
        assert_eq!(prompt_probe("\n  fix   the bug\nmore"), "fix the bug");
        assert_eq!(prompt_probe(&"x".repeat(100)).len(), PROBE_CHARS);
    }

    #[test]
    fn shows_prompt_ignores_wrapping_whitespace_and_knows_placeholders() {
        assert!(shows_prompt("❯ fix  the bug\n", "fix the bug"));
        assert!(shows_prompt("[Pasted text #1 +40 lines]", "anything"));
        // Codex 0.171.0's placeholder for a long paste: without it a retry
        // would paste a second copy next to the first.
        assert!(shows_prompt("› [Pasted Content 1993 chars]", "anything"));
        assert!(!shows_prompt("❯ \n", "fix the bug"));
    }

    #[test]
    fn claude_permission_modes_follow_access() {
        let ro = launch(AgentKind::Claude, &LaunchOptions::new(Access::ReadOnly)).unwrap();
        assert_eq!(ro.argv, ["claude", "--permission-mode", "plan"]);
        let rw = launch(AgentKind::Claude, &LaunchOptions::new(Access::Write)).unwrap();
        assert_eq!(rw.argv, ["claude", "--permission-mode", "acceptEdits"]);
        let mut o = LaunchOptions::new(Access::ReadOnly);
        o.claude_permission = Some(ClaudePermission::Default);
        o.program = Some("/opt/claude".into());
        let d = launch(AgentKind::Claude, &o).unwrap();
        assert_eq!(d.argv, ["/opt/claude", "--permission-mode", "default"]);
        assert_eq!(d.env_remove, ["TMUX", "TMUX_PANE"]);
    }

    #[test]
    fn permission_args_are_explicit_per_access() {
        assert_eq!(
            permission_args(AgentKind::Claude, true),
            ["--permission-mode", "plan"]
        );
        assert_eq!(
            permission_args(AgentKind::Claude, false),
            ["--permission-mode", "acceptEdits"]
        );
        assert_eq!(permission_args(AgentKind::Codex, true), ["-s", "read-only"]);
        assert!(permission_args(AgentKind::Shell, true).is_empty());
        let given = ["--permission-mode=default".to_string()];
        assert!(sets_permission_mode(AgentKind::Claude, &given));
        assert!(!sets_permission_mode(
            AgentKind::Claude,
            &["--verbose".into()]
        ));
    }

    #[test]
    fn codex_argv_has_no_daemon_sandbox_and_paste_burst_off() {
        let ro = launch(AgentKind::Codex, &LaunchOptions::new(Access::ReadOnly)).unwrap();
        assert_eq!(
            ro.argv,
            [
                "codex",
                "--no-daemon",
                "-s",
                "read-only",
                "-c",
                "disable_paste_burst=true"
            ]
        );
        let rw = launch(AgentKind::Codex, &LaunchOptions::new(Access::Write)).unwrap();
        assert!(rw.argv.windows(2).any(|w| w == ["-s", "workspace-write"]));
    }

    #[test]
    fn sim_and_shell_argv() {
        let mut o = LaunchOptions::new(Access::Write);
        o.sim_profile = Profile::Codex;
        o.sim_script = Some(PathBuf::from("s.toml"));
        let s = launch(AgentKind::Sim, &o).unwrap();
        assert_eq!(
            s.argv,
            [
                "drover",
                "sim-agent",
                "--profile",
                "codex",
                "--script",
                "s.toml"
            ]
        );
        assert!(
            launch(AgentKind::Shell, &o).is_err(),
            "shell needs a command"
        );
        o.shell_argv = vec!["bash".into(), "-l".into()];
        assert_eq!(launch(AgentKind::Shell, &o).unwrap().argv, ["bash", "-l"]);
    }

    fn rehearsal_input() -> Rehearsal {
        Rehearsal {
            home: PathBuf::from("/h"),
            cwd: PathBuf::from("/w/repo"),
            base_url: "http://127.0.0.1:4100/".into(),
            api_key: "sk-ant-api03-0123456789abcdefghijKLMNOPQRST".into(),
        }
    }

    #[test]
    fn claude_rehearsal_config() {
        let s = rehearsal(
            AgentKind::Claude,
            &rehearsal_input(),
            &LaunchOptions::new(Access::Write),
        )
        .unwrap();
        let env: std::collections::HashMap<_, _> = s.env.iter().cloned().collect();
        assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:4100");
        assert_eq!(env["DISABLE_AUTOUPDATER"], "1");
        assert_eq!(env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
        assert_eq!(s.files[0].path, PathBuf::from("/h/.claude.json"));
        let doc: serde_json::Value = serde_json::from_str(&s.files[0].contents).unwrap();
        assert_eq!(doc["hasCompletedOnboarding"], true);
        assert_eq!(
            doc["customApiKeyResponses"]["approved"][0],
            "abcdefghijKLMNOPQRST"
        );
        assert_eq!(doc["projects"]["/w/repo"]["hasTrustDialogAccepted"], true);
        let dbg = format!("{s:?}");
        assert!(!dbg.contains("sk-ant"), "env values never printed: {dbg}");
    }

    #[test]
    fn codex_rehearsal_config_parses() {
        let s = rehearsal(
            AgentKind::Codex,
            &rehearsal_input(),
            &LaunchOptions::new(Access::ReadOnly),
        )
        .unwrap();
        let cfg: toml::Table = toml::from_str(&s.files[0].contents).unwrap();
        assert_eq!(cfg["model"].as_str(), Some("mock-model"));
        assert_eq!(cfg["sandbox_mode"].as_str(), Some("read-only"));
        let mock = cfg["model_providers"]["mock"].as_table().unwrap();
        assert_eq!(mock["base_url"].as_str(), Some("http://127.0.0.1:4100/v1"));
        assert_eq!(mock["wire_api"].as_str(), Some("responses"));
        assert_eq!(
            cfg["projects"]["/w/repo"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert_eq!(s.files[0].path, PathBuf::from("/h/.codex/config.toml"));
        assert!(
            s.env
                .iter()
                .any(|(k, v)| k == "CODEX_HOME" && v == "/h/.codex")
        );
    }

    #[test]
    fn delivery_is_paste_then_separate_enter() {
        let p = delivery_plan(AgentKind::Codex, "fix it\r\nnow\x1b[201~!", true);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].bytes, b"\x1b[200~fix it\nnow[201~!\x1b[201~");
        assert_eq!(p[1].bytes, b"\r");
        assert_eq!(p[1].delay_ms, ENTER_AFTER_PASTE_MS);
        let c = delivery_plan(AgentKind::Claude, "hello", false);
        assert_eq!(c[0].bytes, b"hello");
        assert_eq!((c[1].delay_ms, c[1].bytes.as_slice()), (0, &b"\r"[..]));
        let x = delivery_plan(AgentKind::Codex, "hello", false);
        assert_eq!(x[1].delay_ms, CODEX_ENTER_AFTER_TYPING_MS);
    }

    #[test]
    fn readiness_and_probe() {
        for (s, ready) in [
            (State::Idle, true),
            (State::Done, true),
            (State::Working, false),
            (State::Blocked, false),
            (State::Starting, false),
            (State::Unknown, false),
            (State::Exited, false),
        ] {
            assert_eq!(
                is_ready(AgentKind::Claude, &Observation::new(s, vec![])),
                ready,
                "{s}"
            );
        }
        assert_eq!(prompt_probe("\n  first line  \nsecond"), "first line");
        let rows = vec!["❯ first line of a prompt".to_string()];
        assert!(prompt_visible(&rows, "first line of a prompt\nmore"));
        assert!(!prompt_visible(&rows, "other"));
        assert!(!prompt_visible(&rows, "   \n"));
    }
}
