//! Shell panes: `working` while a command holds the terminal (its process
//! group is the terminal's foreground group), `idle` once the shell has it
//! back and its output is quiet; `wait --fresh` ignores what was seen before.

use crate::common;

use common::{Drover, stdout};
use serde_json::Value;
use std::time::{Duration, Instant};

fn shell(d: &Drover, name: &str) {
    d.new_pane(name, &[], &["bash", "--norc", "--noprofile"]);
    let out = d.wait_state(&[name], "idle", 30_000);
    assert!(
        out.status.success(),
        "shell never idle: {}",
        common::stderr(&out)
    );
}

fn wait_fresh_idle(d: &Drover, name: &str) -> Value {
    let out = d.run(&[
        "wait",
        name,
        "--fresh",
        "--until",
        "idle",
        "--timeout-ms",
        "60000",
    ]);
    assert!(
        out.status.success(),
        "wait failed: {}",
        common::stderr(&out)
    );
    serde_json::from_str(stdout(&out).trim()).unwrap()
}

/// Guards: `pane send work 'sleep 2; echo done'` then `wait --until idle`
/// returned after 0.5 s of quiet, with the command still running.
#[test]
fn shell_is_working_until_its_command_finishes() {
    let d = Drover::new();
    shell(&d, "work");
    let t = Instant::now();
    d.ok(&["pane", "send", "work", "-q", "sleep 2; echo fin$((1+1))"]);
    let snap = wait_fresh_idle(&d, "work");
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "idle after {:?}, before the command ended: {snap}",
        t.elapsed()
    );
    let screen = d.read("work");
    assert!(
        screen.lines().any(|l| l.trim() == "fin2"),
        "idle before the command printed; screen:\n{screen}"
    );
}

/// Guards: a silent command (`sleep 3`) read as `idle` once output was quiet.
#[test]
fn a_silent_command_reads_working_from_the_foreground_group() {
    let d = Drover::new();
    shell(&d, "quiet");
    let t = Instant::now();
    d.ok(&["pane", "send", "quiet", "-q", "sleep 3"]);
    // While it runs, the observation says why it is working.
    let saw_job = common::wait_until(Duration::from_secs(30), || {
        d.pane("quiet").is_some_and(|p| {
            p["observation"]["state"] == "working"
                && p["observation"]["evidence"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|x| x == "fg:job"))
        })
    });
    assert!(
        saw_job || t.elapsed() >= Duration::from_secs(3),
        "never saw fg:job"
    );
    wait_fresh_idle(&d, "quiet");
    assert!(
        t.elapsed() >= Duration::from_secs(3),
        "idle after {:?}, while sleep 3 still ran",
        t.elapsed()
    );
}

/// Guards: `wait` right after a send matched the idle state from before it.
#[test]
fn fresh_wait_does_not_match_the_state_before_the_call() {
    let d = Drover::new();
    shell(&d, "f");
    // Once the start-up burst's settle re-checks are over, nothing new is
    // observed: a fresh wait times out (exit 4, empty stdout) ...
    let fresh = || {
        d.run(&[
            "wait",
            "f",
            "--fresh",
            "--until",
            "idle,working",
            "--timeout-ms",
            "300",
        ])
    };
    let timed_out = common::wait_until(Duration::from_secs(30), || {
        let out = fresh();
        out.status.code() == Some(4) && out.stdout.is_empty()
    });
    assert!(timed_out, "a fresh wait kept matching an old observation");
    // ... while a plain wait matches the current state at once.
    assert!(d.wait_state(&["f"], "idle", 5_000).status.success());
    // Output after the call began is fresh.
    d.ok(&["pane", "send", "f", "-q", "echo hi"]);
    wait_fresh_idle(&d, "f");
}

/// A shell whose startup file is still running draws nothing, and its
/// command runs in the shell's own process group (no job control yet): it
/// is `starting` however long that takes — before, a blank pane read `idle`
/// once `SHELL_EMPTY_MS` had passed, and text sent to it was lost to the
/// startup file. Idle comes with the prompt, after the startup file ends.
#[test]
fn a_shell_still_in_its_startup_file_is_not_idle() {
    let d = Drover::new();
    let rc = d.scratch().join("slowrc");
    // Twice SHELL_EMPTY_MS: past the grace a blank pane used to get.
    std::fs::write(&rc, "sleep 6\nPS1='ready$ '\n").unwrap();
    let t = Instant::now();
    d.new_pane(
        "slow",
        &[],
        &[
            "bash",
            "--noprofile",
            "--rcfile",
            rc.to_str().unwrap(),
            "-i",
        ],
    );
    let out = d.wait_state(&["slow"], "idle", 30_000);
    assert!(out.status.success(), "never idle: {}", common::stderr(&out));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_secs(6),
        "idle after {took:?}, while the startup file still ran"
    );
    let screen = d.ok(&["pane", "read", "slow"]);
    assert!(screen.contains("ready$"), "the prompt: {screen}");
}
