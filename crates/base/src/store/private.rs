//! The state dir is private to its user: directories 0700 and files 0600,
//! set explicitly after creation so that no umask can widen them (jobs,
//! evidence and logs describe the user's work).

use super::StoreError;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every directory drover creates under the state dir.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file drover creates under the state dir.
pub const FILE_MODE: u32 = 0o600;

fn chmod(path: &Path, mode: u32) -> Result<(), StoreError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| StoreError::io("chmod", path, e))
}

/// Create `dir` and any missing parents; each directory created here is made
/// 0700 explicitly. Directories that already exist are left as they are.
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_private_dir(parent)?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => chmod(dir, DIR_MODE),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(StoreError::io("create dir", dir, e)),
    }
}

/// Open a file under the state dir with `opts`; a file that is ours and
/// wider than 0600 (new, or left by an older drover) is made 0600.
pub fn open_private(path: &Path, opts: &mut OpenOptions) -> Result<File, StoreError> {
    open_private_stat(path, opts).map(|(f, _)| f)
}

/// [`open_private`], with the file's metadata as it was opened (its mode
/// as before a tightening): the `fstat` the check made, for a caller that
/// needs one.
pub(crate) fn open_private_stat(
    path: &Path,
    opts: &mut OpenOptions,
) -> Result<(File, std::fs::Metadata), StoreError> {
    let f = opts
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| StoreError::io("open", path, e))?;
    let md = make_private(&f, path)?;
    Ok((f, md))
}

/// fchmod an open file to 0600 when it is a regular file of ours with other
/// bits; returns the metadata it read.
pub(crate) fn make_private(f: &File, path: &Path) -> Result<std::fs::Metadata, StoreError> {
    let md = f.metadata().map_err(|e| StoreError::io("stat", path, e))?;
    if md.is_file() && md.mode() & 0o777 != FILE_MODE && md.uid() == nix::unistd::geteuid().as_raw()
    {
        f.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| StoreError::io("chmod", path, e))?;
    }
    Ok(md)
}

/// Make the state dir's top directory 0700 if it is readable or writable by
/// others. Returns the mode it had when it was changed (the caller says so).
pub fn tighten_dir(dir: &Path) -> Result<Option<u32>, StoreError> {
    let md = std::fs::metadata(dir).map_err(|e| StoreError::io("stat", dir, e))?;
    let mode = md.mode() & 0o777;
    if mode & 0o077 == 0 || md.uid() != nix::unistd::geteuid().as_raw() {
        return Ok(None);
    }
    chmod(dir, DIR_MODE)?;
    Ok(Some(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_dirs_and_files_are_private_whatever_the_mode_asked() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        create_private_dir(&deep).unwrap();
        for p in [d.path().join("a"), d.path().join("a/b"), deep.clone()] {
            assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, DIR_MODE);
        }
        let f = deep.join("f");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        open_private(&f, OpenOptions::new().read(true)).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, FILE_MODE);
    }

    #[test]
    fn tighten_says_what_it_changed_once() {
        let d = tempfile::tempdir().unwrap();
        chmod(d.path(), 0o755).unwrap();
        assert_eq!(tighten_dir(d.path()).unwrap(), Some(0o755));
        assert_eq!(tighten_dir(d.path()).unwrap(), None);
        assert_eq!(
            std::fs::metadata(d.path()).unwrap().mode() & 0o777,
            DIR_MODE
        );
    }
}
