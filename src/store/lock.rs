use super::StoreError;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// An exclusive advisory lock (flock) held until dropped.
#[derive(Debug)]
pub struct LockGuard {
    file: File,
    path: PathBuf,
}

impl LockGuard {
    /// Take an exclusive lock on `lock_file`, creating it if needed; blocks.
    pub fn exclusive(lock_file: &Path) -> Result<Self, StoreError> {
        let file = open_lock_file(lock_file)?;
        file.lock()
            .map_err(|e| StoreError::io("lock", lock_file, e))?;
        Ok(LockGuard {
            file,
            path: lock_file.to_path_buf(),
        })
    }

    /// Try to take the lock without blocking; `Ok(None)` when another holder has it.
    pub fn try_exclusive(lock_file: &Path) -> Result<Option<Self>, StoreError> {
        let file = open_lock_file(lock_file)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(LockGuard {
                file,
                path: lock_file.to_path_buf(),
            })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(StoreError::io("lock", lock_file, e)),
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open lock file (e.g. to write the holder's pid into it).
    pub fn file(&self) -> &File {
        &self.file
    }
}

fn open_lock_file(lock_file: &Path) -> Result<File, StoreError> {
    if let Some(dir) = lock_file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create dir", dir, e))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock_file)
        .map_err(|e| StoreError::io("open lock", lock_file, e))
}

/// `doc.json` → `doc.json.lock`.
pub fn lock_path_for(doc: &Path) -> PathBuf {
    let mut s = doc.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

/// Lock the lock file beside a multi-writer document.
pub fn lock_beside(doc: &Path) -> Result<LockGuard, StoreError> {
    LockGuard::exclusive(&lock_path_for(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_try_lock_fails_while_held() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let g = LockGuard::exclusive(&p).unwrap();
        assert!(LockGuard::try_exclusive(&p).unwrap().is_none());
        drop(g);
        assert!(LockGuard::try_exclusive(&p).unwrap().is_some());
    }
}
