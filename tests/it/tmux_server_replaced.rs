//! A tmux server killed under drover and the new one the next tmux pane
//! starts (docs/tmux.md, "Faults"). The new server numbers its windows and
//! panes from the start again, so a pane of the killed server holds the
//! very `%N` a pane of the new one gets: drover must never take one for the
//! other (re-pipe it, kill its window, unregister it, route its output).
//! These pin `--backend tmux` whatever `DROVER_TEST_BACKEND` says.

use crate::common;
use crate::tmux_common;
use common::*;
use std::time::Duration;
use tmux_common::*;

const T: Duration = Duration::from_secs(15);

/// `victim` on a server that is then killed, and `fresh` on the new server
/// with the same pane id: the precondition of the aliasing.
fn killed_then_fresh(d: &Drover) -> (serde_json::Value, serde_json::Value) {
    need_tmux();
    let victim = tmux_pane(d, "victim", &[], &["sleep", "1000"]);
    assert_eq!(tmux(d, &["kill-server"]).status.code(), Some(0));
    assert!(wait_until(T, || {
        !d.pane("victim").unwrap()["transport_error"].is_null()
    }));
    let fresh = tmux_pane(d, "fresh", &["--env", "PS1=$ "], &["sh"]);
    assert_eq!(
        fresh["backend_pane_id"], victim["backend_pane_id"],
        "the new tmux server no longer reuses pane ids: this test no longer pins the aliasing"
    );
    d.ok(&["pane", "send", "fresh", "echo one-$((0+1))"]);
    d.wait_text("fresh", "one-1", T);
    (victim, fresh)
}

/// The flake of `tmux_server_killed_under_drover_is_a_transport_error`:
/// drover's reconnect took the new server for the old one back and
/// re-piped the dead server's pane by its `%N` — the new pane's — so the
/// new pane's output went to the dead pane and its screen stayed blank.
/// Killing the dead pane then closed the new pane's window (or dropped its
/// registration). The dead pane stays an error and shows none of it.
#[test]
fn killing_a_pane_of_a_killed_tmux_server_leaves_the_new_servers_pane_alone() {
    let d = Drover::new();
    let (_, fresh) = killed_then_fresh(&d);
    let v = d.pane("victim").unwrap();
    assert!(!v["transport_error"].is_null(), "{v}");
    assert!(
        !d.read("victim").contains("one-1"),
        "the dead pane shows the new pane's output"
    );
    d.ok(&["pane", "kill", "victim"]);
    d.ok(&["pane", "send", "fresh", "echo two-$((1+1))"]);
    d.wait_text("fresh", "two-2", T);
    assert!(
        pid_alive(pid_of(&fresh)),
        "killing the dead pane ended the new one"
    );
    d.ok(&["pane", "kill", "fresh"]);
}

/// Respawning a pane of the killed server makes it a window of its own on
/// the new server; the pane already there keeps its window and its output.
#[test]
fn respawning_a_pane_of_a_killed_tmux_server_leaves_the_new_servers_pane_alone() {
    let d = Drover::new();
    let (victim, fresh) = killed_then_fresh(&d);
    d.ok(&["pane", "respawn", "victim"]);
    let v = d.pane("victim").unwrap();
    assert!(v["transport_error"].is_null(), "{v}");
    assert_ne!(v["backend_pane_id"], victim["backend_pane_id"], "{v}");
    d.ok(&["pane", "send", "fresh", "echo two-$((1+1))"]);
    d.wait_text("fresh", "two-2", T);
    assert!(
        pid_alive(pid_of(&fresh)),
        "respawning the dead pane ended the new one"
    );
    d.ok(&["pane", "kill", "victim"]);
    d.ok(&["pane", "kill", "fresh"]);
}
