//! What a lane's pane runs: the agent with its session's permissions, always
//! an explicit permission mode (see `docs/lanes.md`):
//!
//! | lane | Claude Code | Codex |
//! |---|---|---|
//! | Implementer (writes) | `--permission-mode acceptEdits` | `-s workspace-write -a on-request` |
//! | every other role (read-only) | `--permission-mode plan` | `-s read-only -a on-request` |
//!
//! A sim lane runs `drover sim-agent --profile <agent>` instead. Resuming a
//! conversation in the same worktree is `claude --continue` and
//! `codex resume --last`.

use crate::registry::Agent;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `<program> --version` may take.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

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

/// The launch of a real agent lane.
pub fn agent_launch(agent: Agent, writes: bool) -> Launch {
    let perms = permission_args(agent, writes);
    let prog = program(agent).to_string();
    let mut argv = vec![prog.clone()];
    argv.extend(perms.iter().cloned());
    let mut resume = vec![prog];
    match agent {
        Agent::Claude => resume.push("--continue".into()),
        Agent::Codex => resume.extend(["resume".to_string(), "--last".to_string()]),
    }
    resume.extend(perms);
    Launch {
        argv,
        resume_argv: Some(resume),
        pane_agent: program(agent),
    }
}

/// The launch of a sim lane: drover's simulated agent with the agent's
/// profile, following `script` when there is one. The sim keeps no
/// conversation, so there is nothing to resume.
pub fn sim_launch(exe: &Path, agent: Agent, script: Option<&Path>) -> Launch {
    let mut argv = vec![
        exe.display().to_string(),
        "sim-agent".into(),
        "--profile".into(),
        agent.as_str().into(),
    ];
    if let Some(s) = script {
        argv.extend(["--script".to_string(), s.display().to_string()]);
    }
    Launch {
        argv,
        resume_argv: None,
        pane_agent: "sim",
    }
}

/// The first line `<program> --version` prints, within [`VERSION_TIMEOUT`];
/// `None` when it cannot be run or says nothing.
pub fn version(program: &str) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    use std::io::Read;
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    out.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(120).collect())
}

#[cfg(test)]
mod tests {
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
            ["codex", "-s", "read-only", "-a", "on-request"]
        );
        assert_eq!(
            agent_launch(Agent::Codex, true).argv[..3],
            ["codex", "-s", "workspace-write"]
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
            sim_launch(Path::new("/bin/drover"), Agent::Codex, None)
                .resume_argv
                .is_none()
        );
    }

    #[test]
    fn a_version_is_the_first_line_and_a_missing_program_is_none() {
        assert!(version("git").is_some_and(|v| v.starts_with("git version")));
        assert_eq!(version("drover-no-such-program"), None);
    }
}
