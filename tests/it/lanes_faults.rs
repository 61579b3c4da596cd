//! `lane up` faults: each a clear error, and no worktree, branch, pane or
//! process left behind.

use crate::common;
use crate::lanes_common;

use common::{Drover, stderr, stdout, wait_until};
use lanes_common::*;
use std::path::Path;
use std::time::Duration;

fn up_args<'a>(repo: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "lane",
        "up",
        "--topology",
        "four-role",
        "--repo",
        repo,
        "--sim",
    ];
    a.extend_from_slice(extra);
    a
}

fn assert_nothing_made(d: &Drover, repo: Option<&Path>) {
    assert!(records(d).is_empty(), "{:?}", records(d));
    assert!(worktree_dirs(d).is_empty(), "{:?}", worktree_dirs(d));
    if let Some(r) = repo {
        assert!(drover_branches(r).is_empty(), "{:?}", drover_branches(r));
        assert!(linked_worktrees(r).is_empty());
    }
    assert!(lane_processes(d).is_empty());
}

#[test]
fn a_repo_that_is_not_a_git_repository_is_a_usage_error() {
    let d = Drover::new();
    let plain = d.scratch().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let p = plain.display().to_string();
    let out = d.run(&up_args(&p, &[]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not a git repository"),
        "{}",
        stderr(&out)
    );
    let out = d.run(&up_args("/nonexistent/drover-repo", &[]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("does not exist"));
    assert_nothing_made(&d, None);
}

#[test]
fn a_base_that_does_not_exist_is_a_usage_error() {
    let d = Drover::new();
    let r = repo(&d);
    let rs = r.display().to_string();
    let out = d.run(&up_args(&rs, &["--base", "no-such-branch"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"no-such-branch\" does not name a commit"),
        "{}",
        stderr(&out)
    );
    assert_nothing_made(&d, Some(&r));
}

#[test]
fn a_dirty_main_checkout_is_named_and_never_copied_into_lanes() {
    let d = Drover::new();
    let r = repo(&d);
    std::fs::write(r.join("README.md"), "uncommitted edit\n").unwrap();
    std::fs::write(r.join("new.txt"), "untracked\n").unwrap();
    let rs = r.display().to_string();
    let out = d.run(&up_args(
        &rs,
        &["--sessions", "implementer", "--agents", "claude"],
    ));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("uncommitted path(s); lanes are cut from the base main"),
        "{}",
        stderr(&out)
    );
    let wt = d.state.join("worktrees/implementer-claude");
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        "hello\n"
    );
    assert!(!wt.join("new.txt").exists());
    d.ok(&["lane", "down", "--all"]);
    assert_nothing_made(&d, Some(&r));
}

#[test]
fn an_existing_branch_with_other_commits_is_refused_and_kept() {
    let d = Drover::new();
    let r = repo(&d);
    git(&r, &["checkout", "-q", "-b", "drover/reviewer/codex"]);
    std::fs::write(r.join("mine.txt"), "someone's work\n").unwrap();
    git(&r, &["add", "mine.txt"]);
    git(&r, &["commit", "-q", "-m", "work"]);
    let tip = git(&r, &["rev-parse", "HEAD"]);
    git(&r, &["checkout", "-q", "main"]);
    let rs = r.display().to_string();
    let out = d.run(&up_args(&rs, &["--sessions", "reviewer"]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "branch drover/reviewer/codex already exists with 1 commit(s) the base main lacks"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(git(&r, &["rev-parse", "drover/reviewer/codex"]), tip);
    assert!(records(&d).is_empty() && worktree_dirs(&d).is_empty());
    assert_eq!(drover_branches(&r), ["drover/reviewer/codex"]);
    assert!(d.ls().is_empty());
}

#[test]
fn an_existing_worktree_path_that_is_not_ours_is_refused_and_untouched() {
    let d = Drover::new();
    let r = repo(&d);
    let squat = d.state.join("worktrees/implementer-codex");
    std::fs::create_dir_all(&squat).unwrap();
    std::fs::write(squat.join("precious"), "do not delete").unwrap();
    let rs = r.display().to_string();
    let out = d.run(&up_args(&rs, &["--sessions", "implementer"]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("exists and is not a lane drover recorded"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(squat.join("precious")).unwrap(),
        "do not delete"
    );
    assert!(records(&d).is_empty());
    assert!(drover_branches(&r).is_empty());
    // gc does not delete what git does not track.
    let gc = d.ok(&["lane", "gc"]);
    assert!(gc.contains("not a git worktree"), "{gc}");
    assert!(squat.join("precious").exists());
}

#[test]
fn git_missing_from_path_is_a_clear_error() {
    let d = Drover::new();
    let r = repo(&d);
    let rs = r.display().to_string();
    let empty = d.scratch().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let out = d
        .cmd()
        .args(up_args(&rs, &[]))
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("git not found on PATH"),
        "{}",
        stderr(&out)
    );
    assert_nothing_made(&d, Some(&r));
}

/// Regression: `lane up` with an agent that is not installed recorded every
/// lane, cut its worktree and branch, and left them all at `creating`
/// ("failed: command not found: claude"). It refuses before making any.
#[test]
fn an_agent_missing_from_path_is_named_and_nothing_is_made() {
    let d = Drover::new();
    let r = repo(&d);
    let rs = r.display().to_string();
    // git and a shell, nothing else: neither claude nor codex.
    let bin = d.scratch().join("only-git");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8(found.stdout).unwrap();
        std::os::unix::fs::symlink(path.trim(), bin.join(tool)).unwrap();
    }
    let out = d
        .cmd()
        .args([
            "lane",
            "up",
            "--topology",
            "four-role",
            "--repo",
            &rs,
            "--agents",
            "claude,codex",
        ])
        .env("PATH", &bin)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", stdout(&out));
    let err = stderr(&out);
    for agent in ["claude", "codex"] {
        assert_eq!(
            err.matches(&format!("{agent} is not on PATH")).count(),
            1,
            "each missing agent named once: {err}"
        );
    }
    assert_nothing_made(&d, Some(&r));
}

#[test]
fn an_unknown_backend_or_a_reserved_env_name_is_a_usage_error() {
    let d = Drover::new();
    let r = repo(&d);
    let rs = r.display().to_string();
    let out = d.run(&up_args(&rs, &["--backend", "screen"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = d.run(&up_args(&rs, &["--env", "DROVER_LANE_ID=x"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = d.run(&up_args(&rs, &["--sessions", "deep-reviewer"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_nothing_made(&d, Some(&r));
}

/// Guards: a tmux lane is a tmux pane, never silently a native one.
#[test]
fn a_tmux_lane_is_a_tmux_pane_never_native() {
    let d = Drover::new();
    let r = repo(&d);
    let rs = r.display().to_string();
    let out = d.run(&up_args(
        &rs,
        &[
            "--sessions",
            "reviewer",
            "--agents",
            "claude",
            "--backend",
            "tmux",
        ],
    ));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(d.pane("reviewer-claude").unwrap()["backend"], "tmux");
    d.ok(&["lane", "down", "--all"]);
    assert_nothing_made(&d, Some(&r));
}

/// Guards: `kill -9` of the supervisor in the middle of `lane up` leaves only
/// named lanes, which reconcile finishes; nothing is half-made and unnamed.
#[test]
fn supervisor_killed_during_lane_up_leaves_named_lanes_that_reconcile_finishes() {
    let d = Drover::new();
    let r = repo(&d);
    d.ok(&["serve", "--daemon"]);
    let pid = d.server_pid().unwrap();
    let rs = r.display().to_string();
    let child = d
        .cmd()
        .args(up_args(&rs, &[]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(30), || !d.ls().is_empty()));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "lane up cannot succeed without its supervisor: {}",
        stdout(&out)
    );
    // Everything made is named by a record.
    let recorded: Vec<String> = records(&d)
        .iter()
        .map(|l| l["lane_id"].as_str().unwrap().to_string())
        .collect();
    for w in worktree_dirs(&d) {
        assert!(recorded.contains(&w), "unnamed worktree {w}");
    }
    for b in drover_branches(&r) {
        assert!(
            records(&d).iter().any(|l| l["branch"] == b.as_str()),
            "unnamed branch {b}"
        );
    }
    // The next supervisor (auto-started) reconciles at start, racing this
    // reconcile for the lanes lock: one of them finishes the lanes, and a
    // second reconcile has nothing left to do.
    let first = d.ok(&["lane", "reconcile"]);
    let again = d.ok(&["lane", "reconcile"]);
    let recs = records(&d);
    assert_eq!(recs.len(), 8, "{first}");
    for rec in &recs {
        assert_eq!(rec["phase"], "up", "{again}");
    }
    assert_eq!(again.matches(" ok").count(), 8, "{again}");
    let ids: Vec<String> = recs
        .iter()
        .map(|l| l["lane_id"].as_str().unwrap().to_string())
        .collect();
    let mut args = vec!["wait"];
    args.extend(ids.iter().map(String::as_str));
    args.extend(["--until", "idle", "--timeout-ms", "30000"]);
    d.ok(&args);
    d.ok(&["lane", "down", "--all"]);
    assert_nothing_made(&d, Some(&r));
}

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let o = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "this test needs root to mount a small tmpfs (a real full disk): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Guards a full disk during `git worktree add`: `lane up` fails clearly,
/// nothing half-made stays recorded, and no worktree, branch or process leaks.
#[test]
#[ignore = "needs root: mounts a tmpfs"]
fn a_full_disk_during_worktree_add_leaves_nothing() {
    let d = Drover::new();
    let r = repo(&d);
    // A checkout that cannot fit: 2 MB of incompressible bytes, on a 256 KB disk.
    let big: Vec<u8> = (0..2u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(r.join("big.bin"), big).unwrap();
    common::git(&r, &["add", "big.bin"]);
    common::git(&r, &["commit", "-q", "-m", "big"]);
    let _fs = Tmpfs::mount(&d.state.join("worktrees"), "256k");
    let rs = r.display().to_string();
    let out = d.run(&up_args(
        &rs,
        &["--sessions", "implementer", "--agents", "claude"],
    ));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("implementer-claude") && err.contains("git worktree"),
        "says which lane and what failed: {err}"
    );
    assert_nothing_made(&d, Some(&r));
}
