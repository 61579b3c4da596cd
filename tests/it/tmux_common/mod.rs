//! Helpers for the suites that pin `--backend tmux`: whether tmux is here,
//! a tmux pane, and tmux itself on the state dir's own server.
#![allow(dead_code)]

use crate::common::Drover;
use std::process::{Command, Output};

/// Whether a `tmux` that answers `-V` is on `PATH`.
pub fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Fail the test, saying why, when tmux is not installed (CI installs it).
pub fn need_tmux() {
    if !have_tmux() {
        panic!("tmux is not installed: these tests need tmux >= 3.2");
    }
}

/// `pane new NAME --backend tmux FLAGS… -- CMD…`.
pub fn tmux_pane(d: &Drover, name: &str, flags: &[&str], cmd: &[&str]) -> serde_json::Value {
    let mut f = vec!["--backend", "tmux"];
    f.extend_from_slice(flags);
    d.new_pane(name, &f, cmd)
}

/// The `-L` socket of this state dir's tmux server.
pub fn socket(d: &Drover) -> String {
    drover::pane::tmux::socket_name(drover::statedir::StateDir::new(&d.state))
}

/// `tmux -L <socket> ARGS…` on this state dir's server.
pub fn tmux(d: &Drover, args: &[&str]) -> Output {
    Command::new("tmux")
        .args(["-L", &socket(d)])
        .args(args)
        .output()
        .unwrap()
}

/// `kill -9` the supervisor, start the next one and wait until it has
/// re-adopted the tmux pane `name` (same leader, not lost).
pub fn kill_supervisor_and_readopt(d: &Drover, name: &str) {
    let leader = crate::common::pid_of(&d.pane(name).expect("the pane is listed"));
    d.kill_supervisor();
    d.serve();
    assert!(
        crate::common::wait_until(crate::common::T, || d
            .pane(name)
            .is_some_and(|p| crate::common::pid_of(&p) == leader && p["lost"] != true)),
        "the tmux pane was not re-adopted: {:?}",
        d.ls()
    );
}
