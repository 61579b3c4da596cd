//! Where drover keeps its state and its socket (docs/cli.md "State dir").

use std::path::{Path, PathBuf};

/// Errors resolving the state dir or the socket path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no state dir: set DROVER_STATE_DIR, run inside a git checkout, or set XDG_STATE_HOME/HOME"
    )]
    NoStateDir,
    #[error(
        "no drover state at {}: nothing has been created there yet (check --state-dir / DROVER_STATE_DIR)",
        path.display()
    )]
    Missing { path: PathBuf },
    #[error(
        "{path} is not private: it is owned by {owner} with mode {mode:o}; drover needs it to be yours ({me}) and 0700 — remove it or set XDG_RUNTIME_DIR to a private dir"
    )]
    NotPrivate {
        path: PathBuf,
        mode: u32,
        /// The owner, as `name (uid N)` when the name is known.
        owner: String,
        /// The user drover runs as, the same way.
        me: String,
    },
}

/// The top of the git checkout containing `dir`, if any.
pub fn git_toplevel(dir: &Path) -> Option<PathBuf> {
    let out = crate::git::Git::new(dir)
        .args(["rev-parse", "--show-toplevel"])
        .command()
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim_end_matches('\n');
    (!s.is_empty()).then(|| PathBuf::from(s))
}

/// Resolve the state dir: explicit value (e.g. `--state-dir` or
/// `$DROVER_STATE_DIR`; a relative value is resolved against the control root),
/// else `<git toplevel>/.drover`, else `$XDG_STATE_HOME/drover`
/// (`~/.local/state/drover`). The directory is created.
pub fn resolve_state_dir(explicit: Option<&Path>) -> Result<PathBuf, PathError> {
    let dir = state_dir_path(explicit)?;
    make_private_state_dir(&dir)?;
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

/// Create the state dir 0700, or make an existing one 0700 if others can
/// read it, saying so (once: afterwards it is private).
fn make_private_state_dir(dir: &Path) -> Result<(), PathError> {
    let create = |e: crate::store::StoreError| PathError::Create {
        path: dir.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    };
    crate::store::create_private_dir(dir).map_err(create)?;
    tighten_state_dir(dir);
    ignore_in_git(dir);
    Ok(())
}

/// Keep the state dir out of `git status` in the repository around it (a
/// `.gitignore` of `*` inside it, so no tracked file of the user's is
/// edited). One that is there already is left as it is; one that cannot be
/// written (a read-only state dir) only costs the `?? .drover/` line.
fn ignore_in_git(dir: &Path) {
    let path = crate::statedir::StateDir::new(dir).gitignore();
    if path.symlink_metadata().is_ok() {
        return;
    }
    let body = b"# drover's state dir: nothing in it belongs in git.\n*\n";
    if let Err(e) = crate::store::write_bytes_atomic(&path, body) {
        tracing::debug!("state dir not ignored by git: {e}");
    }
}

/// Make an existing state dir 0700 if others can read or enter it; say so
/// when it held something (an empty dir just made by `mkdir` exposed nothing).
fn tighten_state_dir(dir: &Path) {
    let exposed = std::fs::read_dir(dir).is_ok_and(|mut r| r.next().is_some());
    match crate::store::tighten_dir(dir) {
        Ok(Some(_)) if !exposed => {}
        Ok(Some(was)) => tracing::warn!(
            "made the state dir {} private (mode {was:o} -> 700): it describes your jobs and your work",
            dir.display()
        ),
        Ok(None) => {}
        // A state dir we cannot chmod (read-only mount) is still usable for reads.
        Err(e) => tracing::warn!("the state dir is readable by others and stays so: {e}"),
    }
}

/// The state dir as [`resolve_state_dir`] finds it, for commands that only
/// read: nothing is created, and a missing dir is [`PathError::Missing`].
pub fn existing_state_dir(explicit: Option<&Path>) -> Result<PathBuf, PathError> {
    let dir = state_dir_path(explicit)?;
    match std::fs::canonicalize(&dir) {
        Ok(d) if d.is_dir() => {
            tighten_state_dir(&d);
            Ok(d)
        }
        _ => Err(PathError::Missing { path: dir }),
    }
}

/// Where the state dir is, without touching the file system beyond `git`.
pub fn state_dir_path(explicit: Option<&Path>) -> Result<PathBuf, PathError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    // git runs only when the answer depends on the checkout.
    let dir = match explicit {
        Some(p) if p.is_absolute() => p.to_path_buf(),
        Some(p) => git_toplevel(&cwd).unwrap_or(cwd).join(p),
        None => match git_toplevel(&cwd) {
            Some(r) => r.join(".drover"),
            None => xdg_state_home()?.join("drover"),
        },
    };
    Ok(dir)
}

fn xdg_state_home() -> Result<PathBuf, PathError> {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or(PathError::NoStateDir)?;
    Ok(PathBuf::from(home).join(".local/state"))
}

/// FNV-1a, 64 bit: a stable hash for naming sockets after state dirs.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The private directory holding sockets: `$XDG_RUNTIME_DIR/drover` or
/// `/tmp/drover-<uid>`, created 0700 and checked to be ours and private.
pub fn socket_dir() -> Result<PathBuf, PathError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let uid = nix::unistd::getuid().as_raw();
    let dir = socket_dir_path();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => return Err(PathError::Create { path: dir, source }),
    }
    let md = std::fs::symlink_metadata(&dir).map_err(|source| PathError::Create {
        path: dir.clone(),
        source,
    })?;
    let mode = md.permissions().mode() & 0o777;
    if !md.is_dir() || md.uid() != uid || mode & 0o077 != 0 {
        return Err(PathError::NotPrivate {
            path: dir,
            mode,
            owner: user_label(md.uid()),
            me: user_label(uid),
        });
    }
    Ok(dir)
}

/// Where [`socket_dir`] is, without creating or checking it.
pub fn socket_dir_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        Some(x) => PathBuf::from(x).join("drover"),
        None => PathBuf::from(format!("/tmp/drover-{}", nix::unistd::getuid().as_raw())),
    }
}

/// `name (uid N)`, or `uid N` when the user has no name.
fn user_label(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("{} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// The supervisor's socket for a state dir: named after a hash of its path.
pub fn socket_path(state_dir: &crate::statedir::StateDir) -> Result<PathBuf, PathError> {
    let h = fnv1a64(state_dir.as_os_str().as_encoded_bytes());
    Ok(socket_dir()?.join(format!("{h:016x}.sock")))
}

/// RFC 3339 UTC timestamp with millisecond precision, e.g. `2026-11-30T01:00:00.123Z`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_state_dir_is_resolved_and_created() {
        let d = tempfile::tempdir().unwrap();
        let abs = d.path().join("st");
        let got = resolve_state_dir(Some(&abs)).unwrap();
        assert!(got.is_dir());
        assert!(got.ends_with("st"));
    }

    /// Guards: `--state-dir /nonexistent/x/y job ls` created the path.
    #[test]
    fn a_missing_state_dir_is_reported_not_created() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x").join("y");
        assert!(matches!(
            existing_state_dir(Some(&p)),
            Err(PathError::Missing { .. })
        ));
        assert!(!d.path().join("x").exists());
    }

    #[test]
    fn socket_names_differ_per_state_dir() {
        assert_ne!(fnv1a64(b"/a"), fnv1a64(b"/b"));
        assert_eq!(fnv1a64(b"/a"), fnv1a64(b"/a"));
    }
}
