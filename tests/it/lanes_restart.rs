//! Lanes across supervisor restarts, and many up/down cycles that must leave
//! nothing behind.

use crate::common;
use crate::lanes_common;

use common::{Drover, pid_alive, stderr, wait_until};
use lanes_common::*;
use serde_json::Value;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// Guards: after `kill -9` of the supervisor the same lanes come back, each
/// a new generation, the old processes gone, and a job dispatched before the
/// crash is never completed by the policy across the restart.
#[test]
fn supervisor_killed_with_eight_lanes_up_comes_back_with_the_same_lanes() {
    let d = Drover::new();
    let r = repo(&d);
    let lane_dir = d.state.join("lanes/implementer-claude");
    std::fs::create_dir_all(&lane_dir).unwrap();
    let report = lane_dir.join("report.json");
    std::fs::write(
        lane_dir.join("sim-script.toml"),
        format!(
            "[[turn]]\nsteps = [{{ work = 4000 }}, {{ report = {{ path = {:?} }} }}, \"finish\"]\n",
            report.display().to_string()
        ),
    )
    .unwrap();
    up(
        &d,
        &r,
        "orchestrator,implementer,reviewer,ci-eval-auditor",
        &[],
    );
    let before = records(&d);
    assert_eq!(before.len(), 8);
    let ids = lane_ids(&d);

    d.ok(&["job", "create", "J-restart"]);
    let out = d
        .cmd()
        .args([
            "dispatch",
            "J-restart",
            "--pane",
            "implementer-claude",
            "--session",
            "implementer",
            "--prompt",
            "work on it",
        ])
        .env("DROVER_AUTOCOMPLETE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let pid = d.server_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_until(T, || common::all_threads_gone(pid)));

    // The next supervisor reconciles at start, with no lane command.
    d.ok(&["serve", "--daemon"]);
    assert!(wait_until(T, || d.ls().len() == 8
        && records(&d).iter().all(|l| l["generation"] == 2)));
    let rec = d.ok(&["lane", "ls"]);
    let after = records(&d);
    assert_eq!(lane_ids(&d), ids, "{rec}");
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(
            b["generation"],
            a["generation"].as_u64().unwrap() + 1,
            "{rec}"
        );
        assert_eq!(b["worktree"], a["worktree"]);
        assert_eq!(b["base_sha"], a["base_sha"]);
        assert_ne!(b["pid"], a["pid"]);
        let old = a["pid"].as_i64().unwrap() as i32;
        assert!(
            !pid_alive(old) || common::stat(old).is_some_and(|s| s.state == 'Z'),
            "the old generation's process {old} is still running"
        );
    }
    wait_idle(&d, &ids);
    assert_eq!(lane_processes(&d).len(), 8);
    // Reconciling again is a no-op: never a second respawn.
    let again = d.ok(&["lane", "reconcile"]);
    assert_eq!(again.matches(" ok").count(), 8, "{again}");
    assert_eq!(records(&d)[0]["generation"], after[0]["generation"]);

    // The job dispatched before the crash is not completed across it.
    let job: Value = serde_json::from_str(&d.ok(&["job", "show", "J-restart", "--json"])).unwrap();
    assert_eq!(job["status"], "running", "{job}");
    let ev = std::fs::read_to_string(d.state.join("evidence/J-restart.jsonl")).unwrap();
    assert!(ev.contains("supervisor restarted"), "{ev}");
    d.ok(&["lane", "down", "--all"]);
    assert!(drover_branches(&r).is_empty() && linked_worktrees(&r).is_empty());
}

fn cycles(n: usize) {
    let d = Drover::new();
    let r = repo(&d);
    // Warm up once so the supervisor's own fds are open before counting.
    up(&d, &r, "implementer", &["--agents", "claude"]);
    d.ok(&["lane", "down", "--all"]);
    let server = d.server_pid().unwrap();
    let fds = fd_count(server);
    for i in 0..n {
        up(&d, &r, "implementer,reviewer", &[]);
        assert_eq!(lane_processes(&d).len(), 4, "cycle {i}");
        let out = d.ok(&["lane", "down", "--all"]);
        assert_eq!(out.matches("removed").count(), 4, "cycle {i}: {out}");
    }
    assert!(records(&d).is_empty());
    assert!(worktree_dirs(&d).is_empty(), "{:?}", worktree_dirs(&d));
    assert!(drover_branches(&r).is_empty());
    assert!(linked_worktrees(&r).is_empty());
    assert!(d.ls().is_empty());
    assert!(wait_until(T, || lane_processes(&d).is_empty()));
    assert_eq!(
        d.server_pid(),
        Some(server),
        "the same supervisor throughout"
    );
    // Output threads and pty fds of stopped panes are released; allow a
    // little slack for fds the runtime opens lazily.
    let now = fd_count(server);
    assert!(
        now <= fds + 2,
        "supervisor fds grew from {fds} to {now} over {n} cycles"
    );
}

#[test]
fn ten_up_down_cycles_leave_no_worktree_branch_pane_process_or_fd() {
    cycles(10);
}

#[test]
#[ignore = "long: 100 cycles of 4 lanes (over a minute); CI runs it with --ignored"]
fn hundred_up_down_cycles_leave_no_worktree_branch_pane_process_or_fd() {
    cycles(100);
}

/// Guards recovery after a reboot (the boot id changes; `DROVER_BOOT_ID`
/// stands in for it): the supervisor's reconcile at start respawns every
/// lane once as a new generation and records the new boot id, and the next
/// restart in the same boot re-adopts the tmux panes — never a second respawn.
#[test]
fn after_a_reboot_each_lane_is_respawned_once_never_twice() {
    const BOOT: &str = "drover-test-boot-2";
    let d = Drover::new();
    let r = repo(&d);
    up(&d, &r, "implementer", &["--backend", "tmux"]);
    let before = records(&d);
    assert_eq!(before.len(), 2);
    let ids = lane_ids(&d);
    let kill9 = |d: &Drover| {
        let pid = d.server_pid().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(wait_until(T, || common::all_threads_gone(pid)));
    };
    let in_boot = |args: &[&str]| {
        let out = d
            .cmd()
            .env("DROVER_BOOT_ID", BOOT)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        common::stdout(&out)
    };

    // "Reboot": the supervisor comes back in another boot.
    kill9(&d);
    in_boot(&["serve", "--daemon"]);
    assert!(
        wait_until(T, || records(&d)
            .iter()
            .all(|l| l["generation"] == 2 && l["boot_id"] == BOOT)),
        "{:?}",
        records(&d)
    );
    let rebooted = records(&d);
    for (a, b) in before.iter().zip(&rebooted) {
        assert_ne!(a["pid"], b["pid"], "respawned: {b}");
        assert_eq!(b["worktree"], a["worktree"]);
        assert_eq!(b["backend"], "tmux");
    }
    wait_idle(&d, &ids);

    // A restart in the same boot: the tmux panes are kept, nothing respawns.
    kill9(&d);
    in_boot(&["serve", "--daemon"]);
    let table: Value = serde_json::from_str(&in_boot(&["lane", "reconcile", "--json"])).unwrap();
    for row in table.as_array().unwrap() {
        let action = row["action"].as_str().unwrap();
        assert!(
            action == "healthy" || action == "adopt",
            "never a second respawn: {row}"
        );
    }
    let after = records(&d);
    for (a, b) in rebooted.iter().zip(&after) {
        assert_eq!(b["generation"], 2, "{b}");
        assert_eq!(a["pid"], b["pid"], "the same processes kept running");
    }
    in_boot(&["lane", "down", "--all"]);
    assert!(drover_branches(&r).is_empty() && linked_worktrees(&r).is_empty());
    assert!(wait_until(T, || lane_processes(&d).is_empty()));
}
