//! Lanes on the tmux backend (docs/lanes.md, docs/tmux.md): `lane up
//! --backend tmux --sim` makes tmux panes, `lane ls` lists them, a
//! supervisor killed with them up comes back with the same panes re-adopted
//! (same pid, same generation, no respawn), and `lane down` leaves nothing.
//! These pin `--backend tmux` whatever `DROVER_TEST_BACKEND` says.

use crate::common;
use crate::lanes_common;

use common::{Drover, TmuxGuard, pid_alive, wait_until};
use lanes_common::*;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

/// Guards: tmux lanes are tmux panes (never silently native), are listed,
/// are re-adopted, not respawned, by the next supervisor after `kill -9`,
/// keep being observed, and `lane down` removes every worktree, branch,
/// pane and process.
#[test]
fn tmux_lanes_come_up_survive_a_supervisor_kill_and_go_down() {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "tmux is not installed: this test needs tmux >= 3.2");
    let d = Drover::new();
    let _g = TmuxGuard(drover::pane::tmux::socket_name(
        drover::statedir::StateDir::new(&d.state),
    ));
    let r = repo(&d);
    up(&d, &r, "reviewer,implementer", &["--backend", "tmux"]);
    let before = records(&d);
    assert_eq!(before.len(), 4, "{before:?}");
    let up_ids = lane_ids(&d);
    let panes = d.ls();
    assert_eq!(panes.len(), 4);
    for p in &panes {
        assert_eq!(p["backend"], "tmux", "{p}");
        assert!(p["attach_command"].as_str().is_some(), "{p}");
    }
    wait_idle(&d, &up_ids);
    let listed = lanes(&d);
    assert_eq!(listed.len(), 4);
    let text = d.ok(&["lane", "ls"]);
    for id in &up_ids {
        assert!(text.contains(id.as_str()), "{text}");
    }

    // kill -9 of the supervisor: the tmux panes keep running.
    let pid = d.server_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_until(T, || common::all_threads_gone(pid)));
    for l in &before {
        let p = l["pid"].as_i64().unwrap_or(0) as i32;
        assert!(
            pid_alive(p),
            "tmux lane process {p} died with the supervisor"
        );
    }

    // The next supervisor re-adopts them: same pids, same generations.
    d.ok(&["serve", "--daemon"]);
    assert!(wait_until(T, || d.ls().len() == 4));
    let after = records(&d);
    assert_eq!(lane_ids(&d), up_ids);
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(b["pid"], a["pid"], "re-adopted, not respawned: {b}");
        assert_eq!(b["generation"], a["generation"], "{b}");
        assert_eq!(b["worktree"], a["worktree"]);
    }
    for p in d.ls() {
        assert_eq!(p["backend"], "tmux", "{p}");
    }
    // Still observed: a prompt to one lane is confirmed working (`send`
    // waits for it), and the turn ends.
    let first = &up_ids[0];
    d.ok(&["send", first, "hello after the restart"]);
    d.ok(&[
        "wait",
        first,
        "--until",
        "idle,done",
        "--timeout-ms",
        "60000",
    ]);
    let again = d.ok(&["lane", "reconcile"]);
    assert_eq!(again.matches(" ok").count(), 4, "{again}");
    assert_eq!(records(&d)[0]["generation"], after[0]["generation"]);

    d.ok(&["lane", "down", "--all"]);
    assert!(drover_branches(&r).is_empty(), "{:?}", drover_branches(&r));
    assert!(
        linked_worktrees(&r).is_empty(),
        "{:?}",
        linked_worktrees(&r)
    );
    assert!(d.ls().is_empty());
    assert!(wait_until(T, || lane_processes(&d).is_empty()));
}
