//! Helpers for the lane tests: real git repositories and counts of what a
//! lane leaves behind.
#![allow(dead_code)]

use crate::common::Drover;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub use crate::common::git;

/// A repository with one commit on `main`, beside the state dir.
pub fn repo(d: &Drover) -> PathBuf {
    let r = d.scratch().join("repo");
    std::fs::create_dir_all(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    std::fs::write(r.join("README.md"), "hello\n").unwrap();
    git(&r, &["add", "README.md"]);
    git(&r, &["commit", "-q", "-m", "initial"]);
    r
}

/// `lane ls --json`.
pub fn lanes(d: &Drover) -> Vec<Value> {
    serde_json::from_str::<Value>(&d.ok(&["lane", "ls", "--json"]))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The recorded lanes file.
pub fn records(d: &Drover) -> Vec<Value> {
    let p = d.state.join("registry").join("lanes.json");
    match std::fs::read_to_string(p) {
        Ok(t) => serde_json::from_str::<Value>(&t).unwrap()["lanes"]
            .as_array()
            .unwrap()
            .clone(),
        Err(_) => Vec::new(),
    }
}

/// `drover/*` branches of a repo.
pub fn drover_branches(repo: &Path) -> Vec<String> {
    git(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/drover/",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Worktrees of a repo other than the main checkout.
pub fn linked_worktrees(repo: &Path) -> Vec<String> {
    git(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .skip(1)
        .map(str::to_string)
        .collect()
}

/// Entries under `<state>/worktrees`.
pub fn worktree_dirs(d: &Drover) -> Vec<String> {
    std::fs::read_dir(d.state.join("worktrees"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Live processes whose environment names this state dir (sim agents of
/// its lanes), zombies aside.
pub fn lane_processes(d: &Drover) -> Vec<i32> {
    let needle = format!("DROVER_STATE_DIR={}", d.state.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            crate::common::stat(*pid).is_some_and(|s| s.state != 'Z')
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                && crate::common::cmdline(*pid).is_some_and(|c| c.iter().any(|a| a == "sim-agent"))
        })
        .collect()
}

/// Open fds of a process.
pub fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

/// The environment of a process as (name, value) pairs.
pub fn environ(pid: i32) -> Vec<(String, String)> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let s = String::from_utf8_lossy(kv).into_owned();
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// `lane up --sim` for some sessions of four-role, asserting success.
pub fn up(d: &Drover, repo: &Path, sessions: &str, extra: &[&str]) -> String {
    let r = repo.display().to_string();
    let mut args = vec![
        "lane",
        "up",
        "--topology",
        "four-role",
        "--repo",
        &r,
        "--sim",
        "--sessions",
        sessions,
    ];
    args.extend_from_slice(extra);
    d.ok(&args)
}

/// The lane ids of the lane records, in order.
pub fn lane_ids(d: &Drover) -> Vec<String> {
    records(d)
        .iter()
        .map(|l| l["lane_id"].as_str().unwrap().to_string())
        .collect()
}

/// Wait until every lane in `ids` is idle (a barrier, 60 s).
pub fn wait_idle(d: &Drover, ids: &[String]) {
    let mut args = vec!["wait"];
    args.extend(ids.iter().map(String::as_str));
    args.extend(["--until", "idle", "--timeout-ms", "60000"]);
    d.ok(&args);
}
