//! What the third red-team pass broke in the tmux backend's process
//! tracking (issue 37 item 9): a process that left its pane's session and
//! dropped drover's marker (`env -i setsid`) survived `pane kill`, and
//! `kill-server` after a supervisor `kill -9` and re-adoption.

use crate::common;
use crate::tmux_common;

use common::{Drover, T, TmuxGuard, cmdline, pid_of, stat, wait_until};

/// A tag unique to test `k` of this run.
fn tag(k: u32) -> u32 {
    500_000 + (std::process::id() % 20_000) * 10 + k
}

/// The live (not zombie) process running `sleep TAG`.
fn sleeper(tag: u32) -> Option<i32> {
    let tag = tag.to_string();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            stat(*pid).is_some_and(|s| s.state != 'Z')
                && cmdline(*pid).is_some_and(|c| c.len() == 2 && c[0] == "sleep" && c[1] == tag)
        })
}

/// A tmux pane whose first command leaves `(env -i setsid sleep TAG &)`
/// behind: no marker in its environment, its own session, re-parented
/// away. Returns the escapee's pid.
fn start_unmarked_escapee(d: &Drover, name: &str, tag: u32) -> i32 {
    let script = format!("(env -i setsid sleep {tag} &)\necho started\nexec sleep 100000");
    let info = tmux_common::tmux_pane(d, name, &[], &["bash", "-c", &script]);
    d.wait_text(name, "started", T);
    let mut pid = None;
    assert!(
        wait_until(T, || {
            pid = sleeper(tag);
            pid.is_some()
        }),
        "the escapee never started"
    );
    let pid = pid.unwrap_or_default();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    assert!(
        !environ
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(drover::pane::PANE_MARKER_ENV.as_bytes())),
        "the escapee was meant to carry no marker"
    );
    let sid = |p: i32| nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(p))).ok();
    assert_ne!(
        sid(pid),
        sid(pid_of(&info)),
        "the escapee was meant to leave the pane's session"
    );
    pid
}

/// A drover on tmux where the host gives it a cgroup v2 hierarchy, and the
/// guard that ends its tmux server.
fn tmux_with_cgroups() -> (Drover, TmuxGuard) {
    tmux_common::need_tmux();
    assert!(
        drover::pane::cgroup::available(),
        "this host gives drover no cgroup v2 hierarchy"
    );
    let d = Drover::new();
    let g = TmuxGuard(tmux_common::socket(&d));
    (d, g)
}

fn assert_ended(pid: i32, after: &str) {
    assert!(
        wait_until(T, || stat(pid).is_none_or(|s| s.state == 'Z')),
        "after {after}, the unmarked escapee {pid} still runs"
    );
}

/// Guards issue 37 item 9: `pane kill` ends an escapee without a marker.
#[test]
#[ignore = "needs a writable cgroup v2 hierarchy (root or a delegated one)"]
fn tmux_pane_kill_ends_an_escapee_without_a_marker() {
    let (d, _g) = tmux_with_cgroups();
    let pid = start_unmarked_escapee(&d, "esc", tag(0));
    d.ok(&["pane", "kill", "esc"]);
    assert_ended(pid, "pane kill");
}

/// Guards issue 37 item 9: after `kill -9` of the supervisor and the next
/// one's re-adoption, `kill-server` ends an escapee without a marker.
#[test]
#[ignore = "needs a writable cgroup v2 hierarchy (root or a delegated one)"]
fn tmux_kill_server_after_readoption_ends_an_escapee_without_a_marker() {
    let (d, _g) = tmux_with_cgroups();
    let pid = start_unmarked_escapee(&d, "esc", tag(1));
    tmux_common::kill_supervisor_and_readopt(&d, "esc");
    d.ok(&["kill-server"]);
    assert_ended(pid, "kill -9, re-adoption and kill-server");
}
