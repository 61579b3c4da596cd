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

/// `drover ARGS…` in `dir`, as a hook of `other` would run it.
fn in_hook_of(d: &Drover, other: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    d.cmd()
        .current_dir(dir)
        .env("GIT_DIR", other.join(".git"))
        .env("GIT_WORK_TREE", other)
        .env("GIT_INDEX_FILE", other.join(".git").join("index"))
        .args(args)
        .output()
        .unwrap()
}

/// Guards issue 38: run inside a git hook, drover's git read and wrote the
/// hook's repository wherever a call did not scrub `GIT_*`.
#[test]
fn a_loop_run_inside_another_repositorys_hook_touches_only_its_own() {
    let d = Drover::new();
    let (repo, charter) =
        crate::loop_common::board_repo(&d, 1, "- lanes: 2\n- pool: 1\n- gate: `true`\n");
    let other = hook_repo(&d.scratch());
    let before = fingerprint(&other);
    let main_before = git(&repo, &["rev-parse", "main"]);

    let (charter, repo_arg) = (charter.to_str().unwrap(), repo.to_str().unwrap());
    let run = [
        "loop",
        "run",
        "--charter",
        charter,
        "--repo",
        repo_arg,
        "--sim",
        "--turn-timeout-s",
        "60",
    ];
    let out = in_hook_of(&d, &other, &repo, &run);
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
    assert!(landed.lines().any(|l| l == "f1.txt"), "{landed}");
    assert_eq!(
        git(&repo, &["rev-parse", "main"]),
        main_before,
        "main untouched"
    );

    let lanes = in_hook_of(&d, &other, &repo, &["lane", "ls", "--json"]);
    assert!(lanes.status.success(), "{}", stderr(&lanes));
    assert_eq!(fingerprint(&other), before, "lane ls reads only its own");
}

/// Guards issue 38: a supervisor started from inside another repository's
/// hook passed that hook's `GIT_DIR`, `GIT_WORK_TREE` and `GIT_INDEX_FILE`
/// on to every pane it made, so an agent's own git worked on the hook's
/// repository. A pane's spec may still set them on purpose.
#[test]
fn a_pane_made_inside_another_repositorys_hook_gets_none_of_its_git_env() {
    let d = Drover::new();
    let other = hook_repo(&d.scratch());
    let show = "echo \"[${GIT_DIR-unset}|${GIT_WORK_TREE-unset}|${GIT_INDEX_FILE-unset}|${GIT_NAMESPACE-unset}]\"; sleep 600";
    let out = in_hook_of(
        &d,
        &other,
        &d.scratch(),
        &["pane", "new", "hooked", "--", "sh", "-c", show],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    d.wait_text(
        "hooked",
        "[unset|unset|unset|unset]",
        std::time::Duration::from_secs(20),
    );
    let out = in_hook_of(
        &d,
        &other,
        &d.scratch(),
        &[
            "pane",
            "new",
            "chosen",
            "--env",
            "GIT_NAMESPACE=mine",
            "--",
            "sh",
            "-c",
            show,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    d.wait_text(
        "chosen",
        "[unset|unset|unset|mine]",
        std::time::Duration::from_secs(20),
    );
}
