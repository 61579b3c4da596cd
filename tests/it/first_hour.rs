//! What bit a new user in the first hour, each fixed with the test that
//! would have caught it.

use crate::common;
use std::path::Path;
use std::process::{Command, Output};

/// drover run from `dir` with no `--state-dir` (the default state dir).
fn drover_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .current_dir(dir)
        .args(args)
        .env_remove("DROVER_STATE_DIR")
        .output()
        .unwrap()
}

fn repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    common::git(tmp.path(), &["init", "-q", "-b", "main"]);
    common::git(tmp.path(), &["commit", "-q", "--allow-empty", "-m", "initial"]);
    tmp
}

/// Guards `?? .drover/` in `git status` after the first drover command in a
/// repository: the state dir keeps itself out of git without a tracked file
/// of the user's being edited.
#[test]
fn the_default_state_dir_is_not_in_git_status() {
    let tmp = repo();
    let out = drover_in(tmp.path(), &["job", "create", "J1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(tmp.path().join(".drover").is_dir());
    let status = common::git(tmp.path(), &["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(status, "", "git status shows drover's own dir");
    assert!(!tmp.path().join(".gitignore").exists(), "the user's files are not edited");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(tmp.path().join(".drover/.gitignore")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o077, 0, "private like everything in the state dir: {mode:o}");
}
