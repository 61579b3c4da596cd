//! What a lane's pane runs: the agent with its session's permissions, always
//! an explicit permission mode (see `docs/lanes.md`):
//!
//! | lane | Claude Code | Codex |
//! |---|---|---|
//! | Implementer (writes) | `--permission-mode acceptEdits` | `--no-daemon -s workspace-write -c disable_paste_burst=true -a on-request` |
//! | every other role (read-only) | `--permission-mode plan` | `--no-daemon -s read-only -c disable_paste_burst=true -a on-request` |
//!
//! A sim lane runs `drover sim-agent --profile <agent>` instead. Resuming a
//! conversation in the same worktree is `claude --continue` and
//! `codex resume --last`. A lane given an effort level (the loop's lane
//! autotune) ends its argv with Claude's `--effort <level>` or Codex's
//! `-c model_reasoning_effort=<level>`; without one the argv is unchanged.

use crate::registry::Agent;
use std::path::Path;

/// The permission flags of a lane.
pub fn permission_args(agent: Agent, writes: bool) -> Vec<String> {
    let v: &[&str] = match (agent, writes) {
        (Agent::Claude, true) => &["--permission-mode", "acceptEdits"],
        (Agent::Claude, false) => &["--permission-mode", "plan"],
        (Agent::Codex, true) => &["-s", "workspace-write", "-a", "on-request"],
        (Agent::Codex, false) => &["-s", "read-only", "-a", "on-request"],
    };
    v.iter().map(|s| s.to_string()).collect()
}

/// Claude Code's allow rule for exactly `drover report` (spelled `cmd
/// report`, as the lane runs it), so an implementer reports with no
/// permission dialog; nothing else is pre-approved.
pub fn report_allow_arg(cmd: &str) -> String {
    format!("--allowedTools=Bash({cmd} report:*)")
}

/// The agent's program name.
pub fn program(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "claude",
        Agent::Codex => "codex",
    }
}

/// A lane's command and, where the agent can resume, its resuming command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub argv: Vec<String>,
    pub resume_argv: Option<Vec<String>>,
    /// How the supervisor reads the screen: `claude`, `codex` or `sim`.
    pub pane_agent: &'static str,
}

/// The launch of a real agent lane: the agent layer's launch (`docs/agents.md`:
/// Claude `--permission-mode plan|acceptEdits`; Codex `--no-daemon -s
/// read-only|workspace-write -c disable_paste_burst=true`), plus Codex's
/// approval policy `-a on-request`.
pub fn agent_launch(agent: Agent, writes: bool) -> Launch {
    use crate::agent::adapter::{self, Access, LaunchOptions};
    use crate::agent::state::AgentKind;
    let (kind, resume_words): (AgentKind, &[&str]) = match agent {
        Agent::Claude => (AgentKind::Claude, &["--continue"]),
        Agent::Codex => (AgentKind::Codex, &["resume", "--last"]),
    };
    let mut opts = LaunchOptions::new(if writes {
        Access::Write
    } else {
        Access::ReadOnly
    });
    if agent == Agent::Codex {
        opts.extra_args = vec!["-a".into(), "on-request".into()];
    }
    // Claude and Codex launches cannot fail (only a shell pane without a command can).
    let argv = adapter::launch(kind, &opts)
        .map(|l| l.argv)
        .unwrap_or_else(|_| vec![program(agent).to_string()]);
    let mut resume = vec![argv[0].clone()];
    resume.extend(resume_words.iter().map(|w| w.to_string()));
    resume.extend(argv[1..].iter().cloned());
    Launch {
        argv,
        resume_argv: Some(resume),
        pane_agent: program(agent),
    }
}

/// Whether lanes wire the agents' own signals, given `DROVER_SIGNALS`:
/// everything but `off` (any case) leaves them on.
pub fn signals_on(var: Option<&str>) -> bool {
    !var.is_some_and(|v| v.trim().eq_ignore_ascii_case("off"))
}

/// `launch` with the agent's signals wired unless `DROVER_SIGNALS=off` in
/// drover's environment (see [`with_signals`]).
pub fn with_signals_unless_off(
    launch: Launch,
    agent: Agent,
    exe: &Path,
    state_dir: &crate::statedir::StateDir,
    pane: &str,
) -> Result<Launch, crate::agent::AgentError> {
    let var = std::env::var(crate::statedir::env::SIGNALS).ok();
    if !signals_on(var.as_deref()) {
        return Ok(launch);
    }
    with_signals(launch, agent, exe, state_dir, pane)
}

/// `launch` with the agent's own signals wired for pane `pane` (docs/agents.md,
/// "The agents' own signals"): Claude's `--settings <file>` (the file written
/// under the state dir) or Codex's `-c notify=[…]`, right after the program
/// name in the argv and the resuming argv, each naming `exe`, drover's
/// absolute path. Never the user's or the repository's own settings.
pub fn with_signals(
    mut launch: Launch,
    agent: Agent,
    exe: &Path,
    state_dir: &crate::statedir::StateDir,
    pane: &str,
) -> Result<Launch, crate::agent::AgentError> {
    use crate::agent::signal_wire;
    let kind = match agent {
        Agent::Claude => crate::agent::state::AgentKind::Claude,
        Agent::Codex => crate::agent::state::AgentKind::Codex,
    };
    let flags = signal_wire::wire(kind, exe, state_dir, pane)?;
    signal_wire::insert_after_program(&mut launch.argv, flags.clone());
    if let Some(r) = launch.resume_argv.as_mut() {
        signal_wire::insert_after_program(r, flags);
    }
    Ok(launch)
}

/// The launch of a sim lane: drover's simulated agent with the agent's
/// profile and the lane's permission mode (a read-only sim carries out no
/// `write` step), following `script` when there is one. The sim keeps no
/// conversation, so there is nothing to resume.
pub fn sim_launch(exe: &Path, agent: Agent, writes: bool, script: Option<&Path>) -> Launch {
    let mut argv = vec![
        exe.display().to_string(),
        "sim-agent".into(),
        "--profile".into(),
        agent.as_str().into(),
    ];
    if let Some(s) = script {
        argv.extend(["--script".to_string(), s.display().to_string()]);
    }
    argv.extend(permission_args(agent, writes));
    Launch {
        argv,
        resume_argv: None,
        pane_agent: "sim",
    }
}

/// The flags that start `agent` at effort `level`.
pub fn effort_args(agent: Agent, level: &str) -> Vec<String> {
    match agent {
        Agent::Claude => vec!["--effort".into(), level.into()],
        Agent::Codex => vec!["-c".into(), format!("model_reasoning_effort={level}")],
    }
}

/// `launch` at effort `level` (its argv and resuming argv end with the
/// effort flags); `None` leaves it as it is.
pub fn with_effort(mut launch: Launch, agent: Agent, level: Option<&str>) -> Launch {
    if let Some(level) = level {
        launch.argv.extend(effort_args(agent, level));
        if let Some(r) = launch.resume_argv.as_mut() {
            r.extend(effort_args(agent, level));
        }
    }
    launch
}

/// Whether `program` resolves to an executable on this process's PATH.
pub fn installed(program: &str) -> bool {
    let path_var = std::env::var("PATH").unwrap_or_default();
    crate::pane::find_executable(program, &path_var, None).is_some()
}

/// The version `<program> --version` reports (found on `PATH` the way exec
/// finds it), through the agent layer's cached probe; `None` when it cannot
/// be run or names no version.
pub fn version(program: &str) -> Option<String> {
    let path_var = std::env::var("PATH").unwrap_or_default();
    let bin = crate::pane::find_executable(program, &path_var, None)?;
    crate::agent::version::version(&bin).ok()
}

#[cfg(test)]
mod tests {
    /// Claude's allow rule names exactly the path the brief tells the
    /// agent to run: the running binary's, absolute.
    #[test]
    fn the_allow_rule_names_the_absolute_command() {
        let word = crate::report::own_command_word();
        assert!(word.starts_with('/'), "{word}");
        assert_eq!(
            super::report_allow_arg(&word),
            format!("--allowedTools=Bash({word} report:*)")
        );
    }

    use super::*;

    #[test]
    fn only_the_writer_writes_and_every_lane_names_its_mode() {
        assert_eq!(
            agent_launch(Agent::Claude, false).argv,
            ["claude", "--permission-mode", "plan"]
        );
        assert_eq!(
            agent_launch(Agent::Claude, true).argv,
            ["claude", "--permission-mode", "acceptEdits"]
        );
        assert_eq!(
            agent_launch(Agent::Codex, false).argv,
            [
                "codex",
                "--no-daemon",
                "-s",
                "read-only",
                "-c",
                "disable_paste_burst=true",
                "-a",
                "on-request"
            ]
        );
        assert_eq!(
            agent_launch(Agent::Codex, true).argv[..4],
            ["codex", "--no-daemon", "-s", "workspace-write"]
        );
    }

    #[test]
    fn a_sim_lane_carries_the_lanes_permission_mode() {
        let exe = Path::new("/bin/drover");
        let ro = sim_launch(exe, Agent::Claude, false, None).argv;
        assert_eq!(ro[4..], ["--permission-mode", "plan"]);
        let rw = sim_launch(exe, Agent::Codex, true, Some(Path::new("s.toml"))).argv;
        assert_eq!(
            rw[4..],
            [
                "--script",
                "s.toml",
                "-s",
                "workspace-write",
                "-a",
                "on-request"
            ]
        );
    }

    #[test]
    fn resuming_keeps_the_permission_mode() {
        assert_eq!(
            agent_launch(Agent::Claude, false).resume_argv.unwrap(),
            ["claude", "--continue", "--permission-mode", "plan"]
        );
        assert_eq!(
            agent_launch(Agent::Codex, false).resume_argv.unwrap()[..3],
            ["codex", "resume", "--last"]
        );
        assert!(
            sim_launch(Path::new("/bin/drover"), Agent::Codex, false, None)
                .resume_argv
                .is_none()
        );
    }

    #[test]
    fn an_effort_ends_the_argv_and_none_changes_nothing() {
        let exe = Path::new("/bin/drover");
        for agent in [Agent::Claude, Agent::Codex] {
            for l in [
                agent_launch(agent, true),
                sim_launch(exe, agent, true, None),
            ] {
                assert_eq!(with_effort(l.clone(), agent, None), l);
            }
        }
        let c = with_effort(
            agent_launch(Agent::Claude, true),
            Agent::Claude,
            Some("medium"),
        );
        assert_eq!(
            c.argv,
            [
                "claude",
                "--permission-mode",
                "acceptEdits",
                "--effort",
                "medium"
            ]
        );
        assert_eq!(
            c.resume_argv.unwrap()[..2],
            ["claude".to_string(), "--continue".to_string()]
        );
        let x = with_effort(agent_launch(Agent::Codex, false), Agent::Codex, Some("low"));
        assert_eq!(
            x.argv[x.argv.len() - 2..],
            ["-c", "model_reasoning_effort=low"]
        );
        let s = with_effort(
            sim_launch(exe, Agent::Codex, false, None),
            Agent::Codex,
            Some("xhigh"),
        );
        assert_eq!(
            s.argv[s.argv.len() - 2..],
            ["-c", "model_reasoning_effort=xhigh"]
        );
    }

    #[test]
    fn signals_go_after_the_program_in_both_argvs() {
        let tmp = tempfile::tempdir().unwrap();
        let exe = Path::new("/bin/drover");
        let c = with_signals(
            agent_launch(Agent::Claude, true),
            Agent::Claude,
            exe,
            crate::statedir::StateDir::new(tmp.path()),
            "s-claude",
        )
        .unwrap();
        let file = tmp.path().join("signals/s-claude/claude-settings.json");
        assert!(file.is_file());
        let f = file.display().to_string();
        assert_eq!(c.argv[..3], ["claude", "--settings", f.as_str()]);
        assert_eq!(
            c.resume_argv.unwrap()[..4],
            ["claude", "--settings", f.as_str(), "--continue"]
        );
        let x = with_signals(
            agent_launch(Agent::Codex, false),
            Agent::Codex,
            exe,
            crate::statedir::StateDir::new(tmp.path()),
            "s-codex",
        )
        .unwrap();
        let notify = format!(
            r#"notify=["/bin/drover","signal","codex-notify","--state-dir","{}"]"#,
            tmp.path().display()
        );
        let notify = notify.as_str();
        assert_eq!(x.argv[..3], ["codex", "-c", notify]);
        assert_eq!(
            x.resume_argv.unwrap()[..4],
            ["codex", "-c", notify, "resume"]
        );
        assert!(!tmp.path().join("signals/s-codex").exists());
    }

    #[test]
    fn a_version_is_the_number_and_a_missing_program_is_none() {
        let v = version("git").unwrap();
        assert!(v.chars().next().is_some_and(|c| c.is_ascii_digit()), "{v}");
        assert_eq!(version("drover-no-such-program"), None);
    }
}
