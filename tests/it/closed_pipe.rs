//! Guards issue 42 item 3: a closed pipe (`drover … | head -1`) is a quiet
//! exit for a command that prints, never a panic (exit 101), and never stops
//! a `loop run`: its progress goes on into `logs/loop.log` and the run closes
//! out as usual. Every child gets a real pipe whose read end is already
//! closed, so its first write fails with EPIPE.

use crate::common::{self, Drover, git};
use std::process::{Output, Stdio};

/// A pipe whose reader is gone: (stdout side, stderr side) of the same pipe.
fn closed_pipe() -> (Stdio, Stdio) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let other = writer.try_clone().unwrap();
    (Stdio::from(writer), Stdio::from(other))
}

/// `drover ARGS` with stdout a closed pipe (stderr kept) and then with both
/// closed (`2>&1 | head`).
fn both_ways(d: &Drover, args: &[&str]) -> (Output, Output) {
    let (out, _) = closed_pipe();
    let only_stdout = d
        .cmd()
        .args(args)
        .stdout(out)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let (out, err) = closed_pipe();
    let both = d.cmd().args(args).stdout(out).stderr(err).output().unwrap();
    (only_stdout, both)
}

/// Every command that prints, each with a closed stdout, then with stdout
/// and stderr closed: no panic, no exit 101.
#[test]
fn every_printing_command_ends_quietly_on_a_closed_pipe() {
    let d = Drover::new();
    d.serve();
    d.sim("p1", "obedient", None);
    let table: &[&[&str]] = &[
        &["completions", "bash"],
        &["completions", "zsh"],
        &["completions", "fish"],
        &["man"],
        &["man", "loop", "run"],
        &["--help"],
        &["loop", "run", "--help"],
        &["--version"],
        &["pane", "ls"],
        &["pane", "ls", "--json"],
        &["pane", "read", "p1"],
        &["status"],
        &["status", "--json"],
        &["events"],
        &["lane", "ls"],
        &["lease", "ls"],
        &["mix"],
        &["loop", "status"],
        &["fleet", "ls"],
        // An error with stderr closed: the exit code still says it.
        &["pane", "read", "no-such-pane"],
        &["loop", "rn"],
    ];
    let mut bad = Vec::new();
    for args in table {
        let (a, b) = both_ways(&d, args);
        let err = common::stderr(&a);
        for (how, o) in [("stdout closed", &a), ("stdout and stderr closed", &b)] {
            if o.status.code() == Some(101) || o.status.code().is_none() {
                bad.push(format!("drover {} ({how}): {:?}", args.join(" "), o.status));
            }
        }
        if err.contains("panicked") || err.contains("Broken pipe") {
            bad.push(format!("drover {}: {err}", args.join(" ")));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `drover loop run --sim … 2>&1 | head -4` with the pipe already closed:
/// the run goes on to its close-out, its progress in `logs/loop.log`.
#[test]
fn a_loop_run_whose_console_is_closed_runs_to_its_close_out() {
    let d = Drover::new();
    let repo = d.scratch().join("r");
    std::fs::create_dir_all(repo.join("backlog/tasks")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    std::fs::write(
        repo.join("backlog/tasks/task-1 - T.md"),
        "---\nid: TASK-1\ntitle: Task one\nstatus: To Do\nlabels: []\ndependencies: []\nmodified_files: [notes/one.md]\n---\n\n## Description\nDo it.\n",
    )
    .unwrap();
    std::fs::write(
        repo.join("backlog/tasks/task-0 - D.md"),
        "---\nid: TASK-0\ntitle: Task zero\nstatus: Done\nlabels: []\ndependencies: []\nmodified_files: [notes/zero.md]\n---\n\n## Description\nDone.\n",
    )
    .unwrap();
    let charter = d.scratch().join("CHARTER.md");
    std::fs::write(&charter, "# One task\nlanes: 2\npool: 2\ngate: true\n").unwrap();
    let (out, err) = closed_pipe();
    let o = d
        .cmd()
        .args([
            "loop",
            "run",
            "--sim",
            "--charter",
            charter.to_str().unwrap(),
            "--repo",
            repo.to_str().unwrap(),
            "--turn-timeout-s",
            "60",
        ])
        .stdout(out)
        .stderr(err)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", o.status);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.state.join("loop1/run.json")).unwrap())
            .unwrap();
    assert!(run["closeout"].is_string(), "closed out: {run}");
    let log = std::fs::read_to_string(d.state.join("logs/loop.log")).unwrap();
    assert!(
        log.contains("loop: commits on the integration branch are by"),
        "{log}"
    );
    assert!(log.lines().count() > 2, "the run's progress: {log}");
    // Guards issue 42 item 10: "1 tasks on the board", and "0 tasks" for a
    // board of Done tasks, never saying what was left out.
    assert!(
        log.contains("loop1: 1 task to work, of 2 on the board (1 Done), pool"),
        "{log}"
    );
}
