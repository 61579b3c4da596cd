//! The board against the real `backlog` CLI (npm `backlog.md`): the CLI
//! creates a board, drover reads it and marks a task Done, the CLI reads
//! drover's marks. Install the CLI with `scripts/install-backlog.sh` (or point
//! `DROVER_BACKLOG_BIN` at a `backlog` binary).

use drover::loopctl::board;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `$DROVER_BACKLOG_BIN`, else where `scripts/install-backlog.sh` puts it.
fn backlog_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("DROVER_BACKLOG_BIN") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_default();
    let bin = cache.join("drover/backlog/backlog.md-1.52.0/node_modules/.bin/backlog");
    assert!(
        bin.exists(),
        "no backlog CLI at {}: run scripts/install-backlog.sh or set DROVER_BACKLOG_BIN",
        bin.display()
    );
    bin
}

fn run(dir: &Path, cmd: &mut Command) -> String {
    let out = cmd
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{:?}: {}{}",
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs backlog CLI"]
fn backlog_cli_board_round_trips_done_marks() {
    let bin = backlog_bin();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    let git = |args: &[&str]| {
        run(
            repo,
            Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args),
        )
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["commit", "-q", "--allow-empty", "-m", "initial"]);
    let bl = |args: &[&str]| run(repo, Command::new(&bin).args(args));
    bl(&[
        "init",
        "interop",
        "--defaults",
        "--integration-mode",
        "none",
    ]);
    bl(&[
        "task",
        "create",
        "Add greeting",
        "-d",
        "Say hello.",
        "--ac",
        "hello.txt exists",
        "--ac",
        "it says hi",
        "-l",
        "loop",
        "--priority",
        "high",
        "--modified-file",
        "hello.txt",
        "--plain",
    ]);
    bl(&[
        "task",
        "create",
        "Wait for owner",
        "-d",
        "Later.",
        "--dep",
        "task-1",
        "-l",
        "needs-owner",
        "--plain",
    ]);

    let b = board::load(repo).unwrap();
    assert_eq!(b.tasks.len(), 2, "{:?}", b.tasks);
    let t1 = b.task("TASK-1").unwrap().clone();
    assert_eq!(t1.title, "Add greeting");
    assert_eq!(t1.status, "To Do");
    assert_eq!(t1.files, vec!["hello.txt"]);
    assert_eq!(t1.labels, vec!["loop"]);
    assert_eq!(t1.priority.as_deref(), Some("high"));
    assert_eq!(t1.description, "Say hello.");
    let crit: Vec<(u32, bool, &str)> = t1
        .criteria
        .iter()
        .map(|c| (c.number, c.checked, c.text.as_str()))
        .collect();
    assert_eq!(
        crit,
        vec![(1, false, "hello.txt exists"), (2, false, "it says hi")]
    );
    let t2 = b.task("task-2").unwrap();
    assert_eq!(t2.dependencies, vec!["TASK-1"]);
    assert!(t2.has_label(board::NEEDS_OWNER));

    let before = std::fs::read_to_string(&t1.path).unwrap();
    board::write_done(&t1).unwrap();
    let after = std::fs::read_to_string(&t1.path).unwrap();
    assert_eq!(
        after,
        before
            .replace("status: To Do", "status: Done")
            .replace("- [ ] #", "- [x] #"),
        "only the status and the boxes change"
    );

    let view = bl(&["task", "view", "task-1", "--plain"]);
    assert!(view.contains("Status: ✔ Done"), "{view}");
    assert!(view.contains("- [x] #1 hello.txt exists"), "{view}");
    assert!(view.contains("- [x] #2 it says hi"), "{view}");
    let list = bl(&["task", "list", "--plain"]);
    let done = list.split("Done:").nth(1).unwrap_or_default();
    assert!(done.contains("TASK-1 - Add greeting"), "{list}");
    // The dependency is now Done for the CLI as for drover.
    let b = board::load(repo).unwrap();
    assert!(b.task("TASK-1").unwrap().is_done());
}

/// A board in a fresh repo with the CLI initialised: (tempdir, backlog runner).
fn cli_board() -> (tempfile::TempDir, impl Fn(&[&str]) -> String) {
    let bin = backlog_bin();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().to_path_buf();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["commit", "-q", "--allow-empty", "-m", "initial"][..],
    ] {
        run(
            &repo,
            Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args),
        );
    }
    let bl = move |args: &[&str]| run(&repo, Command::new(&bin).args(args));
    bl(&[
        "init",
        "interop",
        "--defaults",
        "--integration-mode",
        "none",
    ]);
    (tmp, bl)
}

/// Guards the YAML reader against every field the CLI writes: quoted titles
/// with `:` and `#`, assignees, dates, references, documentation, parent,
/// type, ordinal, the plan, notes, final summary and Definition of Done
/// sections, and the CLI's own edits afterwards.
#[test]
#[ignore = "needs backlog CLI"]
fn backlog_cli_task_with_every_field_is_read_and_marked_done() {
    let (tmp, bl) = cli_board();
    bl(&[
        "task",
        "create",
        "Parent: the 'big' one #1",
        "-d",
        "p",
        "--plain",
    ]);
    bl(&[
        "task",
        "create",
        "Fix: \"quoted\" title # not a comment",
        "-d",
        "Line one.\n\nLine two: with colon.",
        "-a",
        "@alice",
        "-a",
        "@bob",
        "-s",
        "In Progress",
        "-l",
        "loop",
        "-l",
        "needs review",
        "--priority",
        "medium",
        "--type",
        "bug",
        "--due-date",
        "2026-12-31",
        "--ac",
        "first: criterion",
        "--ac",
        "second",
        "--dod",
        "docs updated",
        "--plan",
        "1. plan\n2. more",
        "--notes",
        "some notes",
        "--final-summary",
        "summary",
        "--ordinal",
        "3000",
        "-p",
        "task-1",
        "--dep",
        "task-1",
        "--ref",
        "https://example.com/x",
        "--doc",
        "docs/d.md",
        "--modified-file",
        "src/a b.rs",
        "--modified-file",
        "src/c.rs",
        "--plain",
    ]);
    bl(&[
        "task",
        "edit",
        "task-1.1",
        "--add-label",
        "extra",
        "--append-notes",
        "more: notes",
        "--comment",
        "a comment # with hash",
        "--plain",
    ]);
    let b = board::load(tmp.path()).unwrap();
    let t = b.task("TASK-1.1").unwrap().clone();
    assert_eq!(t.title, "Fix: \"quoted\" title # not a comment");
    assert_eq!(t.status, "In Progress");
    assert_eq!(t.labels, vec!["loop", "needs review", "extra"]);
    assert_eq!(t.dependencies, vec!["TASK-1"]);
    assert_eq!(t.priority.as_deref(), Some("medium"));
    assert_eq!(t.files, vec!["src/a b.rs", "src/c.rs"]);
    assert_eq!(t.ordinal, Some(3000.0));
    assert_eq!(t.description, "Line one.\n\nLine two: with colon.");
    let crit: Vec<(u32, &str)> = t
        .criteria
        .iter()
        .map(|c| (c.number, c.text.as_str()))
        .collect();
    assert_eq!(
        crit,
        vec![(1, "first: criterion"), (2, "second")],
        "not the DoD item"
    );
    assert_eq!(b.task("TASK-1").unwrap().title, "Parent: the 'big' one #1");

    board::write_done(&t).unwrap();
    let view = bl(&["task", "view", "task-1.1", "--plain"]);
    assert!(view.contains("Status: ✔ Done"), "{view}");
    assert!(view.contains("- [x] #1 first: criterion"), "{view}");
    assert!(
        view.contains("- [ ] #1 docs updated"),
        "the DoD is not drover's: {view}"
    );
    assert!(
        board::load(tmp.path())
            .unwrap()
            .task("task-1.1")
            .unwrap()
            .is_done()
    );
}
