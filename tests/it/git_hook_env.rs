//! drover run from inside a git hook of another repository: `GIT_DIR`,
//! `GIT_WORK_TREE` and `GIT_INDEX_FILE` name that repository, and every git
//! drover runs (its own, its lanes', its gate's) still works only on the
//! repository it was given. Real git, real panes, a real board.

use crate::common::{Drover, git, stderr, stdout};
use std::path::{Path, PathBuf};

/// What a repository holds that a stray git call would change: refs,
/// HEAD, the index's bytes, the worktree list and the work tree's status.
fn fingerprint(repo: &Path) -> (String, String, Vec<u8>, String, String) {
    (
        git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"]),
        git(repo, &["symbolic-ref", "HEAD"]),
        std::fs::read(repo.join(".git").join("index")).unwrap(),
        git(repo, &["worktree", "list", "--porcelain"]),
        git(repo, &["status", "--porcelain", "--untracked-files=all"]),
    )
}

/// A repository a hook would run in: one commit, a tracked file.
fn hook_repo(root: &Path) -> PathBuf {
    let other = root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q", "-b", "trunk"]);
    std::fs::write(other.join("theirs.txt"), "theirs\n").unwrap();
    git(&other, &["add", "-A"]);
    git(&other, &["commit", "-q", "-m", "theirs"]);
    other
}

/// Guards issue 38: run inside a git hook, drover's git read and wrote the
/// hook's repository wherever a call did not scrub `GIT_*`.
#[test]
fn a_loop_run_inside_another_repositorys_hook_touches_only_its_own() {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("mine");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    crate::loop_common::task_file(&tasks, 1, "Task one", &["a.txt"]);
    let charter = root.join("CHARTER.md");
    std::fs::write(&charter, "# One task\nlanes: 2\npool: 1\ngate: true\n").unwrap();
    let other = hook_repo(&root);
    let before = fingerprint(&other);
    let mine_before = git(&repo, &["rev-parse", "main"]);

    let out = d
        .cmd()
        .current_dir(&repo)
        .env("GIT_DIR", other.join(".git"))
        .env("GIT_WORK_TREE", &other)
        .env("GIT_INDEX_FILE", other.join(".git").join("index"))
        .args([
            "loop",
            "run",
            "--charter",
            charter.to_str().unwrap(),
            "--repo",
            repo.to_str().unwrap(),
            "--turn-timeout-s",
            "60",
            "--sim",
        ])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(text.contains("- TASK-1 ("), "TASK-1 landed: {text}");

    assert_eq!(
        fingerprint(&other),
        before,
        "the hook's repository is untouched"
    );
    let landed = git(
        &repo,
        &["ls-tree", "--name-only", "drover/integration/loop1"],
    );
    assert!(landed.lines().any(|l| l == "a.txt"), "{landed}");
    assert_eq!(
        git(&repo, &["rev-parse", "main"]),
        mine_before,
        "main untouched"
    );

    let lanes = d
        .cmd()
        .current_dir(&repo)
        .env("GIT_DIR", other.join(".git"))
        .env("GIT_WORK_TREE", &other)
        .env("GIT_INDEX_FILE", other.join(".git").join("index"))
        .args(["lane", "ls", "--json"])
        .output()
        .unwrap();
    assert!(lanes.status.success(), "{}", stderr(&lanes));
    assert_eq!(fingerprint(&other), before, "lane ls reads only its own");
}
