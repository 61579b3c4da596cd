//! The one way drover writes state: atomic JSON documents, lock files beside
//! multi-writer documents, and append-only JSONL logs that survive a torn tail.
//!
//! Every writer in the state dir goes through here (docs/architecture.md): a document is
//! written to a temp file in the same directory, fsynced, renamed over the
//! target, and the directory is fsynced, so a `kill -9` at any instant leaves
//! either the old or the new document — never a mix.

mod atomic;
mod jsonl;
mod lock;
mod private;
mod sweep;
mod tail;

pub use atomic::{
    DirSync, Replaced, Staged, read_json, replace_json_unsynced_steps, write_bytes_atomic,
    write_bytes_atomic_steps, write_bytes_renamed_steps, write_json_atomic,
    write_json_atomic_steps,
};
pub use jsonl::{
    JsonlRead, append_jsonl, check_tail, last_record, parse_jsonl, read_jsonl, sync_jsonl,
};
pub use lock::{
    LOCK_WAIT, LOCK_WAIT_ENV, LockGuard, holder_of, lock_beside, lock_path_for, lock_wait,
};
pub use private::{DIR_MODE, FILE_MODE, create_private_dir, open_private, tighten_dir};
pub use sweep::sweep_temp_files;
pub use tail::JsonlTail;

use std::path::{Path, PathBuf};

/// Errors of the state store; each names the file it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file system refused an operation.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file exists but does not parse; it is never reset silently.
    #[error("{path} is corrupt{}: {message}; fix or move the file away, drover will not overwrite it", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    Corrupt {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// A lock was held longer than the bounded wait.
    #[error("timed out after {waited_ms} ms waiting for the lock {path}{}; if that process is stuck, end it, then retry", holder.map(|p| format!(" held by pid {p}")).unwrap_or_else(|| " (holder unknown)".into()))]
    LockTimeout {
        path: PathBuf,
        waited_ms: u64,
        holder: Option<u32>,
    },
    /// A value could not be serialised.
    #[error("cannot serialise {path}: {message}")]
    Serialize { path: PathBuf, message: String },
}

impl StoreError {
    pub fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Read, modify and atomically write a JSON document under its lock.
///
/// `default` supplies the document when the file does not exist yet. The closure
/// decides; its error aborts the update without writing.
pub fn update_json<T, R, E>(
    path: &Path,
    default: impl FnOnce() -> T,
    f: impl FnOnce(&mut T) -> Result<R, E>,
) -> Result<R, E>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
    E: From<StoreError>,
{
    let _guard = lock_beside(path)?;
    let mut doc = read_json::<T>(path)?.unwrap_or_else(default);
    let out = f(&mut doc)?;
    write_json_atomic(path, &doc)?;
    Ok(out)
}

/// Move a file that does not parse out of the way, beside itself as
/// `<name>.corrupt-<unix ms>`, for a document drover can rebuild from what
/// else it holds; returns where it went. Nothing is deleted.
pub fn keep_aside(path: &Path) -> Result<PathBuf, StoreError> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(
        ".corrupt-{}",
        chrono::Utc::now().timestamp_millis()
    ));
    let aside = PathBuf::from(aside);
    std::fs::rename(path, &aside).map_err(|e| StoreError::io("rename", path, e))?;
    Ok(aside)
}
