//! How a pane's agent is told to hand drover its own signals (docs/agents.md,
//! "The agents' own signals"): per pane, by flags and a file drover owns,
//! never by the user's `~/.claude/settings.json`, `~/.codex/config.toml` or
//! a repository's `.claude/`.
//!
//! - Claude Code: `--settings <state>/signals/<pane>/claude-settings.json`,
//!   a file holding a `command` hook for every event drover reads and a
//!   status line, each `<absolute drover> signal claude-hook|claude-status`
//!   (Claude merges it with the user's settings; hook arrays concatenate).
//! - Codex: `-c notify=["<absolute drover>","signal","codex-notify",…]`,
//!   which replaces the user's own `notify` for that pane.
//!
//! [`plan`] is pure; [`wire`] writes the plan's file (atomically, 0600)
//! and returns the flags to put after the agent's program name.

use super::AgentError;
use super::state::AgentKind;
use crate::statedir::StateDir;
use std::path::{Path, PathBuf};

/// The Claude Code hook events drover reads (`agent::signals::parse`).
pub const CLAUDE_EVENTS: [&str; 13] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
];

/// The events whose matcher is a tool's name: matched with `*`.
const TOOL_EVENTS: [&str; 4] = [
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
];

/// The timeout Claude Code gives each hook, in seconds. `drover signal`
/// gives up on its own after 300 ms; this only bounds a binary that could
/// not even start.
pub const HOOK_TIMEOUT_S: u32 = 2;

/// What starting an agent with its signals takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Wiring {
    /// The flags to put right after the agent's program name.
    pub args: Vec<String>,
    /// A file to write first (path, JSON), for Claude's settings.
    pub file: Option<(PathBuf, serde_json::Value)>,
}

/// The shell command that runs `drover signal <what> --state-dir <state>`
/// with `exe`, the absolute path of drover, each path quoted for the shell.
/// The state dir only says which supervisor to ask first (a hint: the
/// supervisor finds the caller's pane from its peer credentials).
pub fn command(exe: &Path, state_dir: &Path, what: &str) -> String {
    format!(
        "{} signal {what} --state-dir {}",
        crate::shell::quote(&exe.display().to_string()),
        crate::shell::quote(&state_dir.display().to_string())
    )
}

/// Claude Code's settings: a hook per event in [`CLAUDE_EVENTS`] (the
/// tool events matching every tool) and the status line, each a call of
/// `exe`.
pub fn claude_settings(exe: &Path, state_dir: &Path) -> serde_json::Value {
    let hook = serde_json::json!({
        "type": "command",
        "command": command(exe, state_dir, "claude-hook"),
        "timeout": HOOK_TIMEOUT_S,
    });
    let mut hooks = serde_json::Map::new();
    for ev in CLAUDE_EVENTS.iter() {
        let entry = if TOOL_EVENTS.contains(ev) {
            serde_json::json!({"matcher": "*", "hooks": [hook.clone()]})
        } else {
            serde_json::json!({"hooks": [hook.clone()]})
        };
        hooks.insert((*ev).to_string(), serde_json::Value::Array(vec![entry]));
    }
    serde_json::json!({
        "hooks": hooks,
        "statusLine": {"type": "command", "command": command(exe, state_dir, "claude-status")},
    })
}

/// Codex's `-c notify=[…]` value: a TOML array of `exe`, `signal`,
/// `codex-notify`, `--state-dir`, `state_dir` (Codex appends its JSON as
/// the last argument).
pub fn codex_notify_value(exe: &Path, state_dir: &Path) -> String {
    let words = [
        exe.display().to_string(),
        "signal".into(),
        "codex-notify".into(),
        "--state-dir".into(),
        state_dir.display().to_string(),
    ];
    let quoted: Vec<String> = words
        .iter()
        .map(|w| toml::Value::String(w.clone()).to_string())
        .collect();
    format!("notify=[{}]", quoted.join(","))
}

/// What starting an agent of `kind` with its signals takes, `exe` being
/// drover's absolute path, `state_dir` its supervisor's and `settings`
/// where Claude's settings file goes. `None` for an agent without signals
/// (a shell, the sim).
pub fn plan(kind: AgentKind, exe: &Path, state_dir: &Path, settings: &Path) -> Option<Wiring> {
    match kind {
        AgentKind::Claude => Some(Wiring {
            args: vec!["--settings".into(), settings.display().to_string()],
            file: Some((settings.to_path_buf(), claude_settings(exe, state_dir))),
        }),
        AgentKind::Codex => Some(Wiring {
            args: vec!["-c".into(), codex_notify_value(exe, state_dir)],
            file: None,
        }),
        AgentKind::Shell | AgentKind::Sim => None,
    }
}

/// Write `pane`'s wiring under `state_dir` (Claude's settings file,
/// atomically, 0600) and return the flags to put after the program name;
/// none for an agent without signals. `exe` must be absolute.
pub fn wire(
    kind: AgentKind,
    exe: &Path,
    state_dir: &StateDir,
    pane: &str,
) -> Result<Vec<String>, AgentError> {
    if !exe.is_absolute() {
        return Err(AgentError::Launch {
            message: format!("drover's path {} is not absolute", exe.display()),
        });
    }
    let settings = state_dir.claude_settings(pane);
    let Some(w) = plan(kind, exe, state_dir.path(), &settings) else {
        return Ok(Vec::new());
    };
    if let Some((path, doc)) = &w.file {
        crate::store::write_json_atomic(path, doc).map_err(|e| AgentError::Launch {
            message: format!("cannot write {}: {e}", path.display()),
        })?;
    }
    Ok(w.args)
}

/// Whether a Codex `argv` carries drover's `notify` (as [`plan`] puts it):
/// the one mark of a Codex pane started with its signals, so a pane
/// started with `--no-signals` (or a user's own `notify`) has none.
pub fn codex_wired(argv: &[String]) -> bool {
    argv.windows(2).any(|w| {
        w[0] == "-c" && w[1].starts_with("notify=[") && w[1].contains(r#""signal","codex-notify""#)
    })
}

/// Remove pane `pane`'s signals folder (`<state>/signals/<pane>/`, Claude's
/// settings file) if there is one; whether it was there. Nothing outside
/// `<state>/signals/` is touched: a name that is not one plain path
/// component removes nothing.
pub fn unwire(state_dir: &StateDir, pane: &str) -> Result<bool, AgentError> {
    let mut parts = Path::new(pane).components();
    let plain = matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    );
    if !plain {
        return Ok(false);
    }
    let dir = state_dir.signals_dir().join(pane);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(AgentError::Launch {
            message: format!("cannot remove {}: {e}", dir.display()),
        }),
    }
}

/// Remove every signals folder whose pane `live` does not name: folders
/// left by panes that ended without a `pane kill` (a supervisor stopped by
/// `kill -9`, a lost pane). Returns the names removed. Safe while nothing
/// starts a pane: whatever starts an agent that names its settings file
/// writes it again first ([`rewire_if_gone`]). A folder that cannot be
/// removed is left and reported in the error; the others are still swept.
pub fn sweep(state_dir: &StateDir, live: impl Fn(&str) -> bool) -> Result<Vec<String>, AgentError> {
    let dir = state_dir.signals_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(AgentError::Launch {
                message: format!("cannot list {}: {e}", dir.display()),
            });
        }
    };
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if live(&name) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        match unwire(state_dir, &name) {
            Ok(true) => removed.push(name),
            Ok(false) => {}
            Err(e) => failed.push(e.to_string()),
        }
    }
    removed.sort();
    if failed.is_empty() {
        Ok(removed)
    } else {
        Err(AgentError::Launch {
            message: failed.join("; "),
        })
    }
}

/// Write pane `pane`'s Claude settings file again when `argv` names it
/// (`--settings <state>/signals/<pane>/claude-settings.json`) and it is
/// gone: Claude Code refuses to start on a missing settings file, and a
/// lane's pane started again (or a pane respawned) after its folder was
/// removed would never come up. The hooks name the running drover.
/// Whether it was written.
pub fn rewire_if_gone(
    state_dir: &StateDir,
    pane: &str,
    argv: &[String],
) -> Result<bool, AgentError> {
    let settings = state_dir.claude_settings(pane);
    let named = argv
        .windows(2)
        .any(|w| w[0] == "--settings" && Path::new(&w[1]) == settings);
    if !named || settings.exists() {
        return Ok(false);
    }
    let doc = claude_settings(&own_exe()?, state_dir.path());
    crate::store::write_json_atomic(&settings, &doc).map_err(|e| AgentError::Launch {
        message: format!("cannot write {}: {e}", settings.display()),
    })?;
    Ok(true)
}

/// `argv` with `flags` put right after its program name.
pub fn insert_after_program(argv: &mut Vec<String>, flags: Vec<String>) {
    if argv.is_empty() {
        return;
    }
    let tail = argv.split_off(1);
    argv.extend(flags);
    argv.extend(tail);
}

/// The running drover's absolute path (a binary replaced on disk while it
/// runs reads as `<path> (deleted)`: the path is where the new one is).
pub fn own_exe() -> Result<PathBuf, AgentError> {
    let e = std::env::current_exe().map_err(|e| AgentError::Launch {
        message: format!("cannot find the drover binary: {e}"),
    })?;
    let s = e.display().to_string();
    Ok(match s.strip_suffix(" (deleted)") {
        Some(p) => PathBuf::from(p),
        None => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_gets_a_settings_file_naming_the_absolute_drover_for_every_event() {
        let exe = Path::new("/opt/my tools/drover");
        let w = plan(
            AgentKind::Claude,
            exe,
            Path::new("/s"),
            Path::new("/s/signals/p/claude-settings.json"),
        )
        .unwrap();
        assert_eq!(w.args, ["--settings", "/s/signals/p/claude-settings.json"]);
        let (_, doc) = w.file.unwrap();
        let hook_cmd = "'/opt/my tools/drover' signal claude-hook --state-dir /s";
        for ev in CLAUDE_EVENTS.iter() {
            let entry = &doc["hooks"][ev][0];
            assert_eq!(entry["hooks"][0]["type"], "command", "{ev}");
            assert_eq!(entry["hooks"][0]["command"], hook_cmd, "{ev}");
            assert_eq!(entry["hooks"][0]["timeout"], HOOK_TIMEOUT_S, "{ev}");
            let tool = TOOL_EVENTS.contains(ev);
            assert_eq!(entry.get("matcher").is_some(), tool, "{ev}");
        }
        assert_eq!(
            doc["statusLine"],
            serde_json::json!({"type":"command","command":"'/opt/my tools/drover' signal claude-status --state-dir /s"})
        );
    }

    #[test]
    fn codex_gets_a_notify_array_of_the_absolute_drover() {
        let w = plan(
            AgentKind::Codex,
            Path::new("/usr/bin/dro\"ver"),
            Path::new("/my state"),
            Path::new("/x"),
        )
        .unwrap();
        assert!(w.file.is_none());
        assert_eq!(w.args[0], "-c");
        let v: toml::Table = toml::from_str(&w.args[1]).unwrap();
        assert_eq!(
            v["notify"],
            toml::Value::Array(vec![
                "/usr/bin/dro\"ver".into(),
                "signal".into(),
                "codex-notify".into(),
                "--state-dir".into(),
                "/my state".into()
            ])
        );
        let none = |k| plan(k, Path::new("/d"), Path::new("/s"), Path::new("/x"));
        assert!(none(AgentKind::Shell).is_none());
        assert!(none(AgentKind::Sim).is_none());
    }

    #[test]
    fn wire_writes_a_private_settings_file_and_refuses_a_relative_drover() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let exe = Path::new("/bin/drover");
        let args = wire(AgentKind::Claude, exe, StateDir::new(tmp.path()), "lane-a").unwrap();
        let file = tmp.path().join("signals/lane-a/claude-settings.json");
        assert_eq!(args, ["--settings".to_string(), file.display().to_string()]);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(doc, claude_settings(exe, tmp.path()));
        assert!(
            wire(
                AgentKind::Codex,
                Path::new("drover"),
                StateDir::new(tmp.path()),
                "x"
            )
            .is_err()
        );
        assert!(
            wire(AgentKind::Shell, exe, StateDir::new(tmp.path()), "y")
                .unwrap()
                .is_empty()
        );
        assert!(!tmp.path().join("signals/y").exists());
    }

    #[test]
    fn codex_wired_is_the_notify_plan_puts_and_nothing_else() {
        let exe = Path::new("/opt/d r/drover");
        let w = plan(AgentKind::Codex, exe, Path::new("/s"), Path::new("/x")).unwrap();
        let mut argv = vec!["codex".to_string(), "hi".to_string()];
        assert!(!codex_wired(&argv));
        insert_after_program(&mut argv, w.args);
        assert!(codex_wired(&argv));
        let own = ["codex", "-c", r#"notify=["notify-send"]"#].map(String::from);
        assert!(!codex_wired(&own));
    }

    #[test]
    fn unwire_removes_the_panes_signals_folder_only() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let exe = Path::new("/usr/bin/drover");
        wire(AgentKind::Claude, exe, StateDir::new(&state), "p1").unwrap();
        wire(AgentKind::Claude, exe, StateDir::new(&state), "p2").unwrap();
        let sd = crate::statedir::StateDir::new(&state);
        assert!(unwire(StateDir::new(&state), "p1").unwrap());
        assert!(!sd.claude_settings("p1").exists());
        assert!(sd.claude_settings("p2").exists());
        assert!(
            !unwire(StateDir::new(&state), "p1").unwrap(),
            "gone already"
        );
        for bad in ["..", "", "p2/..", "/tmp", "."] {
            assert!(!unwire(StateDir::new(&state), bad).unwrap(), "{bad:?}");
        }
        assert!(sd.claude_settings("p2").exists());
        assert!(state.exists());
    }

    #[test]
    fn a_gone_settings_file_named_by_the_argv_is_written_again() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let settings = crate::statedir::StateDir::new(&state).claude_settings("p");
        let argv: Vec<String> = vec![
            "claude".into(),
            "--settings".into(),
            settings.display().to_string(),
        ];
        assert!(rewire_if_gone(StateDir::new(&state), "p", &argv).unwrap());
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
        assert!(doc["hooks"]["Stop"].is_array());
        assert!(
            !rewire_if_gone(StateDir::new(&state), "p", &argv).unwrap(),
            "there already"
        );
        assert!(
            !rewire_if_gone(StateDir::new(&state), "q", &argv).unwrap(),
            "another pane's"
        );
        assert!(!rewire_if_gone(StateDir::new(&state), "r", &["claude".to_string()]).unwrap());
        assert!(
            !crate::statedir::StateDir::new(&state)
                .claude_settings("r")
                .exists()
        );
    }

    #[test]
    fn sweep_removes_the_folders_of_panes_not_live_only() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(d.path());
        for p in ["live", "gone", "gone2"] {
            std::fs::create_dir_all(state.signals_dir().join(p)).unwrap();
            std::fs::write(state.claude_settings(p), "{}").unwrap();
        }
        // A stray file is not a pane's folder: left alone.
        std::fs::write(state.signals_dir().join("notes.txt"), "x").unwrap();
        let removed = sweep(state, |n| n == "live").unwrap();
        assert_eq!(removed, ["gone", "gone2"]);
        assert!(state.claude_settings("live").exists());
        assert!(!state.signals_dir().join("gone").exists());
        assert!(state.signals_dir().join("notes.txt").exists());
        // Nothing to sweep, and no signals folder at all: nothing removed.
        assert!(sweep(state, |_| false).unwrap() == ["live"]);
        std::fs::remove_dir_all(state.signals_dir()).unwrap();
        assert!(sweep(state, |_| false).unwrap().is_empty());
    }

    #[test]
    fn flags_go_right_after_the_program() {
        let mut argv = vec![
            "claude".to_string(),
            "--permission-mode".into(),
            "plan".into(),
        ];
        insert_after_program(&mut argv, vec!["--settings".into(), "/f".into()]);
        assert_eq!(
            argv,
            ["claude", "--settings", "/f", "--permission-mode", "plan"]
        );
        let mut empty: Vec<String> = Vec::new();
        insert_after_program(&mut empty, vec!["x".into()]);
        assert!(empty.is_empty());
    }
}
