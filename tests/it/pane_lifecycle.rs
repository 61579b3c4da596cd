//! Kill, respawn and wait: whole process groups, generations, barrier exit codes.

use crate::common;
use common::*;
use std::time::{Duration, Instant};

/// Processes of the group that are still there in any state (zombies too).
fn leftovers(pids: &[i32], pgrp: i32) -> Vec<Stat> {
    pids.iter()
        .filter_map(|p| stat(*p))
        .filter(|s| s.pgrp == pgrp)
        .collect()
}

/// Start a pane whose group has three members and return (leader, members).
fn three_member_group(d: &Drover, name: &str, script: &str) -> (i32, Vec<i32>) {
    let info = d.new_pane(name, &[], &["sh", "-c", script]);
    let leader = pid_of(&info);
    let mut members = Vec::new();
    assert!(
        wait_until(T, || {
            members = group_members(leader)
                .into_iter()
                .filter(|s| s.state != 'Z')
                .map(|s| s.pid)
                .collect();
            members.len() >= 3
        }),
        "group {leader} never had 3 members: {members:?}"
    );
    (leader, members)
}

/// `pane kill` takes the whole process group, and every member is reaped:
/// nothing of the group is left, not even a zombie.
#[test]
fn kill_leaves_no_process_of_the_group() {
    let d = Drover::new();
    let (leader, members) =
        three_member_group(&d, "grp", "sleep 1000 & sleep 1000 & echo started; wait");
    d.ok(&["pane", "kill", "grp"]);
    assert!(d.pane("grp").is_none());
    let ok = wait_until(T, || leftovers(&members, leader).is_empty());
    assert!(ok, "left behind: {:?}", leftovers(&members, leader));
    // The name is free again.
    d.new_pane("grp", &[], &["true"]);
}

/// A shell that ignores SIGTERM still dies (SIGHUP from the closing terminal).
#[test]
fn kill_takes_a_shell_that_ignores_sigterm() {
    let d = Drover::new();
    let (leader, members) = three_member_group(
        &d,
        "noterm",
        "trap '' TERM; sleep 1000 & sleep 1000 & while :; do wait; done",
    );
    d.ok(&["pane", "kill", "noterm"]);
    let ok = wait_until(T, || leftovers(&members, leader).is_empty());
    assert!(ok, "left behind: {:?}", leftovers(&members, leader));
}

/// A group that ignores SIGTERM and SIGHUP is SIGKILLed after the grace.
#[test]
fn kill_escalates_to_sigkill_after_grace() {
    let d = Drover::new();
    let script = "trap '' TERM HUP; \
        sh -c \"trap '' TERM HUP; while :; do sleep 1; done\" & \
        sleep 1000 & echo armed; while :; do wait; done";
    let (leader, members) = three_member_group(&d, "stubborn", script);
    d.wait_text("stubborn", "armed", T);
    let start = Instant::now();
    d.ok(&["pane", "kill", "stubborn"]);
    let took = start.elapsed();
    assert!(took >= drover::pane::KILL_GRACE / 2, "no grace: {took:?}");
    assert!(took < Duration::from_secs(8), "kill took {took:?}");
    let ok = wait_until(T, || leftovers(&members, leader).is_empty());
    assert!(ok, "left behind: {:?}", leftovers(&members, leader));
}

/// Respawn: a new generation, a new pid, a fresh screen; the old group is gone.
#[test]
fn respawn_bumps_generation_and_pid() {
    let d = Drover::new();
    let script = "echo started-$$; sleep 1000 & wait";
    let (old_pid, members) = {
        let info = d.new_pane("rs", &[], &["sh", "-c", script]);
        assert_eq!(info["generation"], 1);
        let pid = pid_of(&info);
        let mut m = Vec::new();
        assert!(wait_until(T, || {
            m = group_members(pid).into_iter().map(|s| s.pid).collect();
            m.len() >= 2
        }));
        (pid, m)
    };
    d.wait_text("rs", &format!("started-{old_pid}"), T);
    let out = d.ok(&["pane", "respawn", "rs"]);
    assert!(out.contains("generation 2"), "{out}");
    let p = d.pane("rs").unwrap();
    assert_eq!(p["generation"], 2);
    let new_pid = pid_of(&p);
    assert_ne!(new_pid, old_pid);
    assert!(wait_until(T, || leftovers(&members, old_pid).is_empty()));
    let s = d.wait_text("rs", &format!("started-{new_pid}"), T);
    assert!(
        !s.contains(&format!("started-{old_pid}")),
        "old screen kept:\n{s}"
    );
    // Respawn of an exited pane works too, and `wait` sees the new generation.
    d.new_pane("once", &[], &["sh", "-c", "exit 3"]);
    assert_eq!(
        d.wait_state(&["once"], "exited", 10_000).status.code(),
        Some(0)
    );
    d.ok(&["pane", "respawn", "once"]);
    let out = d.wait_state(&["once"], "exited", 10_000);
    let snap: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(snap["generation"], 2, "{snap}");
    assert_eq!(snap["exit_code"], 3);
}

/// `wait`: 0 when met, 4 with empty stdout on timeout, 5 for a missing pane;
/// `--any` is satisfied by one pane, the default needs all.
#[test]
fn wait_exit_codes_and_any() {
    let d = Drover::new();
    d.new_pane("fast", &[], &["sh", "-c", "exit 0"]);
    d.new_pane("slow", &[], &["sleep", "1000"]);
    let ok = d.wait_state(&["fast"], "exited", 10_000);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("\"state\":\"exited\""));

    let start = Instant::now();
    let to = d.wait_state(&["fast", "slow"], "exited", 300);
    assert_eq!(to.status.code(), Some(4), "{}", stderr(&to));
    assert!(to.stdout.is_empty(), "timeout must print nothing on stdout");
    assert!(stderr(&to).contains("timed out"), "{}", stderr(&to));
    assert!(start.elapsed() < Duration::from_secs(5));

    let any = d.run(&[
        "wait",
        "fast",
        "slow",
        "--until",
        "exited",
        "--any",
        "--timeout-ms",
        "5000",
    ]);
    assert_eq!(any.status.code(), Some(0), "{}", stderr(&any));

    let multi = d.run(&[
        "wait",
        "slow",
        "--until",
        "idle,working",
        "--timeout-ms",
        "5000",
        "--json",
    ]);
    assert_eq!(multi.status.code(), Some(0), "{}", stderr(&multi));
    let arr: serde_json::Value = serde_json::from_str(&stdout(&multi)).unwrap();
    assert_eq!(arr.as_array().unwrap().len(), 1);

    let gone = d.wait_state(&["nope"], "idle", 1000);
    assert_eq!(gone.status.code(), Some(5), "{}", stderr(&gone));
    let bad = d.wait_state(&["slow"], "sleepy", 1000);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

/// A pane killed while a barrier waits on it ends the wait with exit 5.
#[test]
fn wait_on_a_pane_that_goes_away_is_transport_error() {
    let d = Drover::new();
    d.new_pane("victim", &[], &["sleep", "1000"]);
    let waiter = d
        .cmd()
        .args([
            "wait",
            "victim",
            "--until",
            "exited",
            "--timeout-ms",
            "20000",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The barrier is registered once the wait is connected; give it a moment
    // by waiting for the pane to settle (a state the barrier does not match).
    let idle = d.wait_state(&["victim"], "idle", 5000);
    assert_eq!(idle.status.code(), Some(0));
    d.ok(&["pane", "kill", "victim"]);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

/// The interim classifier: output → working, quiet → idle, exit → exited.
#[test]
fn states_follow_output_and_exit() {
    let d = Drover::new();
    d.new_pane("st", &["--env", "PS1=$ "], &["sh"]);
    assert_eq!(d.wait_state(&["st"], "idle", 5000).status.code(), Some(0));
    d.ok(&[
        "pane",
        "send",
        "st",
        "while :; do echo tick; sleep 0.05; done",
    ]);
    assert_eq!(
        d.wait_state(&["st"], "working", 5000).status.code(),
        Some(0)
    );
    d.ok(&["pane", "keys", "st", "C-c"]);
    assert_eq!(d.wait_state(&["st"], "idle", 5000).status.code(), Some(0));
    d.ok(&["pane", "send", "st", "exit 9"]);
    let out = d.wait_state(&["st"], "exited", 5000);
    assert!(stdout(&out).contains("\"exit_code\":9"), "{}", stdout(&out));
}

/// Regression: a pane that never prints stayed `starting` forever, because the
/// detector only classified after output. It must settle like any quiet pane.
#[test]
fn silent_pane_settles_without_output() {
    let d = Drover::new();
    d.new_pane("silent", &[], &["sleep", "1000"]);
    let out = d.wait_state(&["silent"], "idle", 5000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A member that outlived its parent (re-parented away from the pane) is
/// still in the group: kill takes it, and it is reaped, not left a zombie.
#[test]
fn kill_takes_and_reaps_orphaned_members() {
    let d = Drover::new();
    let info = d.new_pane(
        "orph",
        &[],
        &[
            "sh",
            "-c",
            "(sleep 1000 &); (sleep 1000 &); echo spawned; sleep 1000",
        ],
    );
    let leader = pid_of(&info);
    d.wait_text("orph", "spawned", T);
    let mut members = Vec::new();
    assert!(wait_until(T, || {
        members = group_members(leader).into_iter().map(|s| s.pid).collect();
        members.len() >= 3
    }));
    d.ok(&["pane", "kill", "orph"]);
    let ok = wait_until(T, || leftovers(&members, leader).is_empty());
    assert!(ok, "left behind: {:?}", leftovers(&members, leader));
}

/// A flood is watched while it runs (working) and settles after (idle): the
/// reader's coalesced wake-ups must neither starve the detector nor drop the
/// end of a burst.
#[test]
fn flood_is_seen_working_then_idle() {
    let d = Drover::new();
    d.new_pane(
        "flood",
        &[],
        &[
            "sh",
            "-c",
            "head -c 30000000 /dev/zero | tr '\\0' y; echo; echo FLOOD-END; sleep 1000",
        ],
    );
    let w = d.wait_state(&["flood"], "working", 10_000);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    let i = d.wait_state(&["flood"], "idle", 30_000);
    assert_eq!(i.status.code(), Some(0), "{}", stderr(&i));
    assert!(d.read("flood").contains("FLOOD-END"));
    assert!(d.pane("flood").unwrap()["bytes"].as_u64().unwrap() >= 30_000_000);
}

/// Regression: right after `pane respawn` returned, a barrier could match the
/// previous generation's `exited` (the observation still held it until the
/// detector ran), so `wait --until exited` returned at once with generation 1.
#[test]
fn barrier_after_respawn_never_matches_the_old_generation() {
    let d = Drover::new();
    d.new_pane("again", &[], &["sh", "-c", "sleep 0.2; exit 3"]);
    let out = d.wait_state(&["again"], "exited", 10_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // One connection, no process start-up between respawn and wait: the
    // barrier lands inside the window before the detector runs.
    let mut c = drover::daemon::Client::connect(&d.socket()).unwrap();
    for generation in 2..=6 {
        let r = c
            .call_raw("pane.respawn", serde_json::json!({"pane": "again"}))
            .unwrap();
        assert_eq!(r["generation"], generation);
        let w = c
            .call_raw(
                "wait",
                serde_json::json!({"panes": ["again"], "until": ["exited"], "timeout_ms": 10000}),
            )
            .unwrap();
        assert_eq!(w["matched"], true, "{w}");
        assert_eq!(w["snapshots"][0]["generation"], generation, "{w}");
    }
}

/// Guards: a pane killed while its shell was still reading its rc file left
/// a lock file behind for good. pyenv's `eval "$(pyenv init -)"` in
/// `~/.bashrc` runs `pyenv rehash`, which holds `shims/.pyenv-shim` and
/// removes it with `rm -f` from an EXIT trap; kill asked the tree with TERM
/// and HUP, then SIGKILLed the `rm` the trap had just forked, and every
/// shell the user started after that waited 60 s for the lock. Here an
/// interactive bash's rc file starts such a lock holder; kill, respawn and
/// kill-server must each let its trap finish, and kill a cleanup the trap
/// left running in the background.
#[test]
fn an_exit_traps_cleanup_runs_to_the_end_on_kill_respawn_and_kill_server() {
    let d = Drover::new();
    let dir = d.scratch();
    // `cleanup`: what the exit trap runs, `{lock}` the lock's path.
    let rc_for = |name: &str, cleanup: &str| {
        let lock = dir.join(format!("{name}.lock"));
        let rc = dir.join(format!("{name}.rc"));
        let cleanup = cleanup.replace("{lock}", &lock.display().to_string());
        let holder = format!(
            "trap '{cleanup}' EXIT; : > {lock}; while :; do sleep 0.1; done",
            lock = lock.display()
        );
        std::fs::write(&rc, format!("bash -c \"{holder}\"\n")).unwrap();
        (rc, lock)
    };
    let start_with = |name: &str, cleanup: &str| {
        let (rc, lock) = rc_for(name, cleanup);
        d.new_pane(name, &[], &["bash", "--rcfile", rc.to_str().unwrap(), "-i"]);
        assert!(
            wait_until(T, || lock.exists()),
            "{name}: the rc file's lock holder never started"
        );
        lock
    };
    let start = |name: &str| start_with(name, "rm -f {lock}");
    let lock = start("killed");
    d.ok(&["pane", "kill", "killed"]);
    assert!(!lock.exists(), "pane kill left {}", lock.display());

    let lock = start("respawned");
    d.ok(&["pane", "respawn", "respawned"]);
    // The new generation takes the lock again: wait for it, then end it too.
    assert!(wait_until(T, || lock.exists()), "respawn: no new holder");
    d.ok(&["pane", "kill", "respawned"]);
    assert!(!lock.exists(), "respawn then kill left {}", lock.display());

    // A cleanup the trap leaves running in the background, its holder
    // gone: it is not asked to end at once either.
    let lock = start_with("detached", "(sleep 0.3; rm -f {lock}) &");
    d.ok(&["pane", "kill", "detached"]);
    assert!(!lock.exists(), "a background cleanup was cut short");

    let lock = start("served");
    d.ok(&["kill-server"]);
    assert!(!lock.exists(), "kill-server left {}", lock.display());
}

/// What escaped a pane's tree (its own session, no pane marker, re-parented
/// to the supervisor) is ended at `kill-server` as a late member of a tree
/// is: time to end on its own, then TERM, HUP and SIGKILL. It was SIGKILLed
/// at once, so a cleanup running there (a lock's `rm -f` after 0.2 s) was
/// cut short; one that ignores every asking signal still ends.
/// (On tmux, where the pane has a cgroup, they are in its tree already.)
#[test]
fn kill_server_lets_an_escaped_cleanup_finish_and_ends_what_ignores_it() {
    let d = Drover::new();
    let dir = d.scratch();
    let lock = dir.join("escaped.lock");
    let stubborn = dir.join("stubborn.pid");
    // Each escapee: out of the pane's session and marker, double-forked.
    let escape = |body: &str| format!("(env -u DROVER_PANE setsid sh -c '{body}' &);");
    let script = format!(
        "{a} {b} exec sleep 1000",
        a = escape(&format!(
            "sleep 1000 & trap \"sleep 0.2; rm -f {l}; exit\" TERM HUP; : > {l}; wait",
            l = lock.display()
        )),
        b = escape(&format!(
            "trap \"\" TERM HUP; echo $$ > {}; exec sleep 1000",
            stubborn.display()
        )),
    );
    d.new_pane("escaper", &[], &["sh", "-c", &script]);
    assert!(
        wait_until(T, || lock.exists()
            && std::fs::read_to_string(&stubborn)
                .is_ok_and(|s| s.ends_with('\n'))),
        "the escapees never started"
    );
    let pid: i32 = std::fs::read_to_string(&stubborn)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Still that `sleep 1000` (not a reused pid) and not a zombie.
    let still_there = || {
        stat(pid).is_some_and(|s| s.state != 'Z')
            && cmdline(pid).is_some_and(|c| c == ["sleep", "1000"])
    };
    assert!(still_there(), "the stubborn escapee {pid} does not run");
    let out = d
        .run_within(&["kill-server"], Duration::from_secs(15))
        .expect("kill-server still ran after 15 s");
    assert!(out.status.success(), "kill-server: {}", stderr(&out));
    assert!(
        !lock.exists(),
        "kill-server cut short an escaped process's cleanup: {} is left",
        lock.display()
    );
    assert!(
        !still_there(),
        "kill-server left the escapee {pid} that ignores TERM and HUP running"
    );
}

/// Kill asks what a pane forks while it is being killed with TERM too, and
/// stops asking at half the grace: a shell that ignores TERM and forks
/// without end (a child that takes TERM every 5 ms, and one that does not)
/// is then ended by the HUP. Without that bound the asking went on for good
/// (33,000 TERMs in 20 s, the supervisor slowed by strace); here, at full
/// speed, a child caught between its fork and its exec (TERM still
/// ignored) usually ends the asking first, so this guards that such a tree
/// is ended, not that bound alone.
#[test]
fn kill_takes_a_shell_that_ignores_sigterm_and_keeps_forking() {
    let d = Drover::new();
    let info = d.new_pane(
        "forker",
        &[],
        &[
            "sh",
            "-c",
            "trap '' TERM; echo armed; \
             while :; do env --default-signal=TERM sleep 2 & sleep 0.005; done",
        ],
    );
    let leader = pid_of(&info);
    let children = || {
        std::fs::read_to_string(format!("/proc/{leader}/task/{leader}/children"))
            .map_or(0, |c| c.split_whitespace().count())
    };
    // A tree that is never without a new process while it is read.
    assert!(
        wait_until(T, || children() >= 20),
        "the shell never had 20 children: {}",
        children()
    );
    let out = d
        .run_within(&["pane", "kill", "forker"], Duration::from_secs(10))
        .expect("pane kill still ran after 10 s");
    assert!(out.status.success(), "pane kill: {}", stderr(&out));
    let ok = wait_until(T, || stat(leader).is_none_or(|s| s.state == 'Z'));
    assert!(ok, "the shell {leader} still runs");
}
