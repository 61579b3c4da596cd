//! Finding the agent binaries: an explicit path, then `PATH`, then the cache
//! that `scripts/install-agents.sh` fills with every supported version side by
//! side (`claude-code-<v>/`, `codex-<v>/`; the list is `scripts/agent-versions`).

use super::Agent;
use std::path::{Path, PathBuf};

/// The Claude Code version `rehearse` picks from the cache by default (the
/// oldest supported; every supported version is in `scripts/agent-versions`).
pub const CLAUDE_VERSION: &str = "2.1.197";
/// The Codex version `rehearse` picks from the cache by default.
pub const CODEX_VERSION: &str = "0.171.0";
/// The supported versions, one `<agent> <version>` a line (`#` comments).
pub const SUPPORTED_VERSIONS: &str = include_str!("../../../../scripts/agent-versions");
/// Overrides [`SUPPORTED_VERSIONS`] for the real-agent suite and the canary:
/// `claude 2.1.332,codex 0.171.0` (commas or newlines).
pub const VERSIONS_VAR: &str = crate::statedir::env::AGENT_VERSIONS;
/// Overrides the cache root (default `${XDG_CACHE_HOME:-~/.cache}/drover/agents`).
pub const AGENTS_DIR_VAR: &str = crate::statedir::env::AGENTS_DIR;

/// Errors finding an agent binary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    #[error("{} is not an executable file", path.display())]
    NotExecutable { path: PathBuf },
    #[error(
        "{agent} not found on PATH or in {}; install the pinned agents with `scripts/install-agents.sh` (npm install --prefix {} @anthropic-ai/claude-code@{CLAUDE_VERSION} @openai/codex@{CODEX_VERSION}) or pass --{agent}-bin",
        cache.display(), cache.display()
    )]
    NotFound { agent: &'static str, cache: PathBuf },
}

/// The `<agent> <version>` pairs of a versions list, in order.
pub fn parse_versions(text: &str) -> Vec<(Agent, String)> {
    text.split([',', '\n'])
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let agent = match w.next()? {
                "claude" => Agent::Claude,
                "codex" => Agent::Codex,
                _ => return None,
            };
            Some((agent, w.next()?.to_string()))
        })
        .collect()
}

/// The versions of `agent` to run: [`VERSIONS_VAR`] when set, else the supported list.
pub fn versions(agent: Agent) -> Vec<String> {
    let text = std::env::var(VERSIONS_VAR)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| SUPPORTED_VERSIONS.to_string());
    parse_versions(&text)
        .into_iter()
        .filter(|(a, _)| *a == agent)
        .map(|(_, v)| v)
        .collect()
}

/// The cache root: `$DROVER_AGENTS_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/drover/agents`.
pub fn cache_root() -> PathBuf {
    std::env::var_os(AGENTS_DIR_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(|c| PathBuf::from(c).join("drover/agents"))
        })
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/drover/agents")))
        .unwrap_or_else(|| PathBuf::from(".cache/drover/agents"))
}

/// Where the install script puts `agent` at `version`.
pub fn version_dir(agent: Agent, version: &str) -> PathBuf {
    let pkg = match agent {
        Agent::Claude => "claude-code",
        Agent::Codex => "codex",
    };
    cache_root().join(format!("{pkg}-{version}"))
}

/// The binary of `agent` at `version` in the cache, if installed.
pub fn cached_version(agent: Agent, version: &str) -> Option<PathBuf> {
    let p = version_dir(agent, version)
        .join("node_modules/.bin")
        .join(agent.name());
    is_executable(&p).then_some(p)
}

/// The directory of the default version of `agent` in the cache.
pub fn cache_dir() -> PathBuf {
    cache_root()
}

/// The default version's binary in the cache, if installed.
pub fn cached(agent: Agent) -> Option<PathBuf> {
    let v = match agent {
        Agent::Claude => CLAUDE_VERSION,
        Agent::Codex => CODEX_VERSION,
    };
    cached_version(agent, v)
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Find `agent`: `explicit` if given (it must be executable), else `PATH`, else the cache.
pub fn find(agent: Agent, explicit: Option<&Path>) -> Result<PathBuf, DiscoverError> {
    if let Some(p) = explicit {
        let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(DiscoverError::NotExecutable { path: p })
        };
    }
    let path_var = std::env::var("PATH").unwrap_or_default();
    if let Some(p) = crate::pane::find_executable(agent.name(), &path_var, None) {
        return Ok(p);
    }
    cached(agent).ok_or_else(|| DiscoverError::NotFound {
        agent: agent.name(),
        cache: cache_dir(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_path_must_be_executable() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("claude");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        let e = find(Agent::Claude, Some(&f)).unwrap_err();
        assert!(matches!(e, DiscoverError::NotExecutable { .. }));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find(Agent::Claude, Some(&f)).unwrap(), f);
    }

    #[test]
    fn versions_list_parses_and_names_both_claude_versions() {
        let v =
            parse_versions("# c\nclaude 2.1.197\nclaude 2.1.332 # new\ncodex 0.171.0,bogus 1\n");
        assert_eq!(
            v,
            vec![
                (Agent::Claude, "2.1.197".to_string()),
                (Agent::Claude, "2.1.332".to_string()),
                (Agent::Codex, "0.171.0".to_string()),
            ]
        );
        let supported = parse_versions(SUPPORTED_VERSIONS);
        assert!(supported.contains(&(Agent::Claude, "2.1.332".to_string())));
        assert!(supported.contains(&(Agent::Claude, CLAUDE_VERSION.to_string())));
        assert!(supported.contains(&(Agent::Codex, CODEX_VERSION.to_string())));
    }

    #[test]
    fn not_found_names_the_install_command() {
        let e = DiscoverError::NotFound {
            agent: "codex",
            cache: PathBuf::from("/c"),
        };
        let msg = e.to_string();
        assert!(msg.contains("scripts/install-agents.sh"), "{msg}");
        assert!(msg.contains("@openai/codex@0.171.0"), "{msg}");
        assert!(msg.contains("--codex-bin"), "{msg}");
    }
}
