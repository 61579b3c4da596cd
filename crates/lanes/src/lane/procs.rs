//! What `/proc` says about lanes: the boot id, processes working in a
//! worktree, and a recorded pane process that outlived its supervisor.

use crate::pane::procfs;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a stopped lane's processes get to exit.
pub const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Stands in for the boot id lanes record and compare (tests simulate a
/// reboot with it; docs/lanes.md). Only the lane layer reads it.
pub const BOOT_ID_ENV: &str = crate::statedir::env::BOOT_ID;

/// `/proc/sys/kernel/random/boot_id`: changes at every reboot; a non-empty
/// [`BOOT_ID_ENV`] overrides it.
pub fn boot_id() -> Option<String> {
    if let Some(v) = std::env::var(BOOT_ID_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        return Some(v.trim().to_string());
    }
    Some(procfs::boot_id()).filter(|s| !s.is_empty())
}

pub use crate::procfs::{same_process, start_time};

/// Pids (not ours) whose working directory is `dir` or below it.
pub fn cwd_users(dir: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return Vec::new();
    };
    let me = std::process::id();
    procfs::pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| procfs::cwd(*pid).is_some_and(|c| c.starts_with(&dir)))
        .collect()
}

/// Kill the process group of a recorded pane process that is still the same
/// process (a pane orphaned by a supervisor killed with -9), and wait until
/// it is gone. True when something was killed.
pub fn kill_orphan(pid: u32, start: Option<u64>) -> bool {
    if !same_process(pid, start) {
        return false;
    }
    let p = nix::unistd::Pid::from_raw(pid as i32);
    let group = procfs::stat(pid).is_some_and(|s| s.pgrp == i64::from(pid));
    let _ = if group {
        nix::sys::signal::killpg(p, nix::sys::signal::Signal::SIGKILL)
    } else {
        nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL)
    };
    wait_gone(pid, start, EXIT_WAIT);
    true
}

/// Wait until the recorded process is gone (or a zombie nobody reaps).
pub fn wait_gone(pid: u32, start: Option<u64>, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let alive =
            same_process(pid, start) && procfs::stat(pid).map(|s| s.state == 'Z') != Some(true);
        if !alive {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_start_time_is_stable_and_a_wrong_one_is_not_us() {
        let me = std::process::id();
        let t = start_time(me);
        assert!(t.is_some());
        assert!(same_process(me, t));
        assert!(!same_process(me, t.map(|x| x + 1)));
        assert!(!same_process(me, None));
    }

    #[test]
    fn a_child_in_a_dir_is_a_cwd_user() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(d.path())
            .spawn()
            .unwrap();
        let users = cwd_users(d.path());
        let _ = child.kill();
        let _ = child.wait();
        assert!(users.contains(&child.id()), "{users:?}");
    }
}
