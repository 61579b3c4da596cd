//! Helpers for the loop tests: a real repository with a Backlog.md board, sim
//! lanes on the test's supervisor, and a run configuration.
#![allow(dead_code)]

use crate::common::{self, Drover, git};
use drover::loopctl::board::charter;
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::ops::{LaneSpec, Role};
use drover::loopctl::run::runner::RunConfig;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A reviewer that passes every candidate (heartbeat and report).
pub const REVIEWER_PASS: &str = "[[turn]]\nsteps = [{ work = 100 }, { heartbeat = { status = \"pass\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n";

/// A Backlog.md task file, as the `backlog` CLI writes one.
pub fn task_file(dir: &Path, n: u32, title: &str, files: &[&str]) {
    let files: String = files.iter().map(|f| format!("  - {f}\n")).collect();
    let text = format!(
        "---\nid: TASK-{n}\ntitle: {title}\nstatus: To Do\nassignee: []\nlabels: []\ndependencies: []\nmodified_files:\n{files}priority: medium\n---\n\n## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\n{title}.\n<!-- SECTION:DESCRIPTION:END -->\n\n## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 {title} is done\n<!-- AC:END -->\n"
    );
    std::fs::write(
        dir.join(format!("task-{n} - {}.md", title.replace(' ', "-"))),
        text,
    )
    .unwrap();
}

/// A repo with `n` tasks, TASK-k ("Task k") claiming `f<k>.txt`, and a
/// charter with `charter_lines` (one `- key: value` per line).
pub fn board_repo(d: &Drover, n: u32, charter_lines: &str) -> (PathBuf, PathBuf) {
    let root = d.scratch();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    for k in 1..=n {
        task_file(&tasks, k, &format!("Task {k}"), &[&format!("f{k}.txt")]);
    }
    let charter = root.join("CHARTER.md");
    std::fs::write(&charter, format!("# Night run\n\n{charter_lines}")).unwrap();
    (repo, charter)
}

/// Sim lanes on the test's supervisor: the implementer runs `imp`, the
/// reviewer `rev`.
pub fn sim_lanes(d: &Drover, imp: String, rev: String) -> SimLanes {
    let exe = PathBuf::from(common::BIN);
    let client = drover::daemon::Client::connect_or_start(
        drover::statedir::StateDir::new(&d.state),
        &d.socket(),
        Some(&exe),
    )
    .unwrap();
    let scripts = move |s: &LaneSpec| match s.role {
        Role::Implementer => imp.clone(),
        Role::Reviewer => rev.clone(),
    };
    SimLanes::new(
        drover::statedir::StateDir::new(&d.state),
        client,
        &exe,
        Box::new(scripts),
    )
}

/// A run over `repo`'s board with auto-completion on.
pub fn run_config(
    d: &Drover,
    repo: &Path,
    charter: &Path,
    repair_rounds: u32,
    turn_timeout: Duration,
    u: Unattended,
) -> RunConfig {
    RunConfig {
        state_dir: d.state.clone(),
        repo: repo.to_path_buf(),
        board_dir: repo.join("backlog"),
        charter: charter::load(charter).unwrap(),
        base: None,
        pool: None,
        ship_cmd: None,
        autocomplete: true,
        repair_rounds,
        turn_timeout,
        unattended: u,
    }
}

/// `drover loop run` as a child process, its stderr appended to `log`.
pub fn spawn_loop(d: &Drover, args: &[&str], log: &Path) -> std::process::Child {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    d.cmd()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(err))
        .spawn()
        .unwrap()
}

/// Wait up to `timeout` for `child` to exit.
pub fn wait_exit(
    child: &mut std::process::Child,
    timeout: Duration,
) -> Option<std::process::ExitStatus> {
    let mut status = None;
    common::wait_until(timeout, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status
}

/// How often each of TASK-1..=n was committed on run 1's integration branch.
pub fn trailers(repo: &Path, n: u32) -> Vec<(u32, usize)> {
    let log = std::process::Command::new("git")
        .args(["log", "--format=%B", "drover/integration/loop1", "--"])
        .current_dir(repo)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&log.stdout).into_owned();
    (1..=n)
        .map(|k| {
            let t = format!("Task: TASK-{k}");
            (k, text.lines().filter(|l| l.trim() == t).count())
        })
        .collect()
}

/// Run 1's `run.json` (`Null` while it is not there yet).
pub fn run_json(d: &Drover) -> serde_json::Value {
    std::fs::read_to_string(d.state.join("loop1/run.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The ids of the tasks in `phase` in `run.json`.
pub fn in_phase(v: &serde_json::Value, phase: &str) -> Vec<String> {
    v["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["phase"] == phase)
        .filter_map(|t| t["id"].as_str().map(str::to_string))
        .collect()
}

/// Whether run 1's integration branch holds `path`.
pub fn at_integration(repo: &Path, path: &str) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "cat-file",
            "-e",
            &format!("drover/integration/loop1:{path}"),
        ])
        .status()
        .unwrap()
        .success()
}

/// `drover loop run --charter C --repo R` on sim lanes that follow the
/// implementer's and the reviewer's scripts, with `extra` flags.
pub fn loop_run_sim(
    d: &Drover,
    charter: &Path,
    repo: &Path,
    scripts: (&Path, &Path),
    extra: &[&str],
) -> std::process::Output {
    let (imp, rev) = (
        scripts.0.display().to_string(),
        scripts.1.display().to_string(),
    );
    let (charter, repo) = (charter.display().to_string(), repo.display().to_string());
    let mut args = vec!["loop", "run", "--charter", &charter, "--repo", &repo];
    args.extend_from_slice(extra);
    args.extend(["--sim-implementer", &imp, "--sim-reviewer", &rev]);
    d.run(&args)
}
