//! The version of an agent binary (`claude --version`, `codex --version`),
//! asked once per binary path and modification time and cached for the
//! process: a pane records the version it started in its observations'
//! evidence (`agent_version:<v>`), so a screen rule that broke can be traced to
//! the release that moved it (docs/agents.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// How long `--version` may take (Claude Code starts Node or a bundled runtime).
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors asking a binary for its version.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// The binary could not be stat'ed or started.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// It did not answer within [`VERSION_TIMEOUT`].
    #[error("{} --version did not answer within {VERSION_TIMEOUT:?}", path.display())]
    Timeout { path: PathBuf },
    /// Its answer holds no version number.
    #[error("{} --version printed no version number", path.display())]
    NoVersion { path: PathBuf },
}

type Cache = Mutex<HashMap<(PathBuf, SystemTime), String>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The first `N.N[.N…]` word of a `--version` answer: `2.1.332 (Claude Code)`
/// → `2.1.332`, `codex-cli 0.171.0` → `0.171.0`.
pub fn parse_version(out: &str) -> Option<String> {
    out.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .map(|w| w.trim_start_matches('v'))
        .find(|w| {
            let parts: Vec<&str> = w.split('.').collect();
            parts.len() >= 2
                && parts.iter().all(|p| {
                    !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
                && parts[0].chars().all(|c| c.is_ascii_digit())
        })
        .map(str::to_string)
}

/// The version `bin --version` reports, cached per path and mtime. `bin` is
/// resolved like a shell would only when it holds a `/`; a bare name is run
/// through `PATH`.
pub fn version(bin: &Path) -> Result<String, VersionError> {
    let io = |source| VersionError::Io {
        path: bin.to_path_buf(),
        source,
    };
    let resolved = if bin.components().count() > 1 {
        std::fs::canonicalize(bin).map_err(io)?
    } else {
        let path_var = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path_var)
            .map(|d| d.join(bin))
            .find(|p| p.is_file())
            .ok_or_else(|| io(std::io::Error::from(std::io::ErrorKind::NotFound)))?
    };
    let mtime = std::fs::metadata(&resolved)
        .and_then(|m| m.modified())
        .map_err(io)?;
    let key = (resolved.clone(), mtime);
    if let Some(v) = cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(v);
    }
    let out = run_version(bin)?;
    let v = parse_version(&out).ok_or_else(|| VersionError::NoVersion {
        path: bin.to_path_buf(),
    })?;
    if let Ok(mut c) = cache().lock() {
        c.insert(key, v.clone());
    }
    Ok(v)
}

/// The agents (`claude`, `codex`) whose programs are on `PATH`, each with
/// its version; one whose version cannot be read is left out.
pub fn installed() -> std::collections::BTreeMap<String, String> {
    ["claude", "codex"]
        .into_iter()
        .filter_map(|a| version(Path::new(a)).ok().map(|v| (a.to_string(), v)))
        .collect()
}

/// Run `bin --version` in a process group of its own, killed whole when it
/// does not answer in time, and killed with this process: a probe left
/// behind by a supervisor that stopped (or was killed) mid-probe would
/// otherwise live on as long as the program waits.
fn run_version(bin: &Path) -> Result<String, VersionError> {
    use std::os::unix::process::CommandExt;
    let parent = nix::unistd::getpid();
    let mut cmd = Command::new(bin);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: between fork and exec the child only makes two system calls
    // (prctl, getppid) and builds an error from a raw code: no allocation,
    // no lock.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            // The parent may have ended before the line above.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| VersionError::Io {
        path: bin.to_path_buf(),
        source,
    })?;
    let pid = child.id();
    let mut stdout = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = stdout.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        let _ = tx.send(s);
    });
    let out = rx.recv_timeout(VERSION_TIMEOUT);
    if out.is_err() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX)),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.wait();
    out.map_err(|_| VersionError::Timeout {
        path: bin.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_agents_answers() {
        assert_eq!(
            parse_version("2.1.332 (Claude Code)\n").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(
            parse_version("codex-cli 0.171.0\n").as_deref(),
            Some("0.171.0")
        );
        assert_eq!(parse_version("no version"), None);
    }

    #[test]
    fn asks_once_per_binary_and_mtime() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("fake-agent");
        let count = dir.path().join("count");
        std::fs::write(
            &bin,
            format!(
                "#!/bin/sh\necho x >> '{}'\necho '1.2.3 (Fake)'\n",
                count.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(version(&bin).unwrap(), "1.2.3");
        assert_eq!(version(&bin).unwrap(), "1.2.3");
        let runs = std::fs::read_to_string(&count).unwrap().lines().count();
        assert_eq!(runs, 1, "--version ran {runs} times");
        assert!(matches!(
            version(&dir.path().join("missing")),
            Err(VersionError::Io { .. })
        ));
    }
}
