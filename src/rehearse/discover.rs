//! Finding the agent binaries: an explicit path, then `PATH`, then the cache
//! directory that `scripts/install-agents.sh` fills with the pinned versions.

use super::Agent;
use std::path::{Path, PathBuf};

/// The pinned Claude Code version (docs/rehearsal.md).
pub const CLAUDE_VERSION: &str = "2.1.197";
/// The pinned Codex version (docs/rehearsal.md).
pub const CODEX_VERSION: &str = "0.171.0";
/// Overrides the cache root (default `${XDG_CACHE_HOME:-~/.cache}/drover/agents`).
pub const AGENTS_DIR_VAR: &str = "DROVER_AGENTS_DIR";

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

/// The directory the install script uses for the pinned versions.
pub fn cache_dir() -> PathBuf {
    let root = std::env::var_os(AGENTS_DIR_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(|c| PathBuf::from(c).join("drover/agents"))
        })
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/drover/agents")))
        .unwrap_or_else(|| PathBuf::from(".cache/drover/agents"));
    root.join(format!(
        "claude-code-{CLAUDE_VERSION}_codex-{CODEX_VERSION}"
    ))
}

/// The binary in the cache dir, if installed.
pub fn cached(agent: Agent) -> Option<PathBuf> {
    let p = cache_dir().join("node_modules/.bin").join(agent.name());
    is_executable(&p).then_some(p)
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
