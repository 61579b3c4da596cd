//! The one reader of `/proc`: process state, parents, sessions and start
//! times (from `stat`, parsed from its last `)`: a command name may hold
//! spaces and parentheses), environments, command lines and working dirs,
//! so a process is found and signalled only while it is still the one
//! drover means. Every module that asks `/proc` about a process asks here.

use std::path::PathBuf;

/// A pidfd for process `pid` (`pidfd_open(2)`): it turns readable when the
/// process ends, and names that process even if its pid is reused. `ESRCH`
/// when there is no such process.
pub fn pidfd_open(pid: u32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let pid = nix::libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::from_raw_os_error(nix::libc::ESRCH))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Wait at most `timeout` until one of `fds` is readable (for a pidfd: its
/// process ended); whether one is. An interrupted wait counts as not yet.
pub fn wait_readable(fds: &[&std::os::fd::OwnedFd], timeout: std::time::Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut pfds: Vec<nix::libc::pollfd> = fds
        .iter()
        .map(|fd| nix::libc::pollfd {
            fd: fd.as_raw_fd(),
            events: nix::libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = nix::libc::c_int::try_from(timeout.as_millis()).unwrap_or(nix::libc::c_int::MAX);
    // SAFETY: valid pollfds for fds the caller owns, for the length given.
    unsafe { nix::libc::poll(pfds.as_mut_ptr(), pfds.len() as nix::libc::nfds_t, ms) > 0 }
}

/// The fields of `/proc/<pid>/stat` drover needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// State letter (`R`, `S`, `Z`, …).
    pub state: char,
    pub ppid: i64,
    pub pgrp: i64,
    pub session: i64,
    /// The foreground process group of the process's controlling terminal
    /// (-1 without one).
    pub tpgid: i64,
    /// Start time in clock ticks since boot.
    pub starttime: u64,
}

/// Parse `/proc/<pid>/stat` text. The command name may hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state(0) ppid(1) pgrp(2) session(3) tty_nr(4) tpgid(5) …
    // starttime(19).
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        tpgid: f.get(5)?.parse().ok()?,
        starttime: f.get(19)?.parse().ok()?,
    })
}

/// The stat of one process.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Start time of a process (clock ticks since boot).
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.starttime)
}

/// Whether `pid` is still the process recorded with `start` (never a newer
/// process that reuses the id).
pub fn same_process(pid: u32, start: Option<u64>) -> bool {
    match (start_time(pid), start) {
        (Some(now), Some(then)) => now == then,
        _ => false,
    }
}

/// Whether `pid` is a zombie (`Z`) or dead (`X`); `None` when it cannot be
/// read (gone, or reaped).
pub fn exited(pid: u32) -> Option<bool> {
    stat(pid).map(|s| matches!(s.state, 'Z' | 'X'))
}

/// Every process id `/proc` lists now.
pub fn pids() -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .collect()
}

/// Every process's stat, by pid.
pub fn all() -> Vec<(u32, Stat)> {
    pids()
        .into_iter()
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// `pid`'s initial environment, raw (`NAME=value` entries, NUL-separated);
/// `None` when it cannot be read.
pub fn environ(pid: u32) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/environ")).ok()
}

/// `pid`'s argv, raw (NUL-separated; empty for a zombie); `None` when it
/// cannot be read.
pub fn cmdline(pid: u32) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/cmdline")).ok()
}

/// The kernel's table of file locks (`/proc/locks`).
pub fn locks() -> Option<String> {
    std::fs::read_to_string("/proc/locks").ok()
}

/// Whether `pid` ignores signal number `sig` (its `SigIgn` mask in
/// `/proc/<pid>/status`); `None` when it cannot be read.
pub fn ignores(pid: u32, sig: i32) -> Option<bool> {
    if !(1..=64).contains(&sig) {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
    let mask = u64::from_str_radix(mask.trim(), 16).ok()?;
    Some(mask & (1u64 << (sig - 1)) != 0)
}

/// Whether `pid` is in `/proc` (running, or a zombie not yet reaped).
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// What `pid`'s file descriptor `fd` points at.
pub fn fd_target(pid: u32, fd: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()
}

/// What each of `pid`'s open file descriptors points at (none when it
/// cannot be read).
pub fn fd_paths(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The children of `pid`'s main thread (`/proc/<pid>/task/<pid>/children`;
/// none when it has exited).
pub fn main_thread_children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect()
}

/// `pid`'s working directory.
pub fn cwd(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// The children of `pid` (every thread's), from `/proc/<pid>/task/*/children`
/// (none when it has exited meanwhile).
fn children_of(pid: u32) -> Vec<u32> {
    task_children(pid).unwrap_or_default()
}

/// The children of `pid` (every thread's) from the kernel's lists
/// `/proc/<pid>/task/*/children`; `None` when no list could be read (a
/// kernel without them, or `pid` gone).
pub fn task_children(pid: u32) -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut listed = false;
    let mut out = Vec::new();
    for text in tasks
        .filter_map(|e| e.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
    {
        listed = true;
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    listed.then_some(out)
}

/// This process's descendants with their stat, walked down the kernel's
/// children lists: costs what the tree holds, not what the machine runs.
/// `None` when the kernel keeps no children lists. The lists can miss a
/// process forked during the walk, so this is for refreshing what is known,
/// not for ending a tree (which scans every process, see `all`).
pub fn own_descendants() -> Option<Vec<(u32, Stat)>> {
    let me = std::process::id();
    if !std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists() {
        return None;
    }
    let mut todo = vec![me];
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    while let Some(pid) = todo.pop() {
        for kid in children_of(pid) {
            if seen.insert(kid)
                && let Some(st) = stat(kid)
            {
                out.push((kid, st));
                todo.push(kid);
            }
        }
    }
    Some(out)
}

/// `pid` and its ancestors, nearest first, up to (not including) pid 1,
/// read from each process's `stat` (at most `max` of them; a process that
/// exits meanwhile ends the walk).
pub fn lineage(pid: u32, max: usize) -> Vec<(u32, Stat)> {
    let mut out = Vec::new();
    let mut p = pid;
    while p > 1 && out.len() < max {
        let Some(st) = stat(p) else { break };
        out.push((p, st));
        match u32::try_from(st.ppid) {
            Ok(pp) if pp != p => p = pp,
            _ => break,
        }
    }
    out
}

/// Whether `pid`'s initial environment holds `NAME=value` exactly.
pub fn environ_has(pid: u32, entry: &[u8]) -> bool {
    environ(pid).is_some_and(|raw| raw.split(|b| *b == 0).any(|kv| kv == entry))
}

/// The terminal size (cols, rows) `pid` sees on its stdin, if
/// that is a terminal.
pub fn pty_size(pid: u32) -> Option<(u16, u16)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOCTTY | nix::libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/0"))
        .ok()?;
    let mut ws = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills one winsize through a valid pointer on a fd we own.
    let r = unsafe { nix::libc::ioctl(f.as_raw_fd(), nix::libc::TIOCGWINSZ, &mut ws) };
    (r == 0).then_some((ws.ws_col, ws.ws_row))
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): a pid and start time
/// mean the same process only within one boot.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether a process group other than `pid`'s own holds the foreground of
/// `pid`'s terminal: a shell's command is running. `None` when `pid` is gone
/// or has no terminal. Works for any pane whose processes are local.
pub fn foreground_job(pid: u32) -> Option<bool> {
    let s = stat(pid)?;
    (s.tpgid > 0).then_some(s.tpgid != s.pgrp)
}

/// Whether `pid` is a shell running a command in its own foreground process
/// group: a command run without job control, as a startup file's are before
/// the first prompt (a `.bashrc` stuck in `pyenv rehash`). False when `pid`
/// is gone, has no terminal or is not a shell.
pub fn shell_child_in_foreground(pid: u32) -> bool {
    let Some(s) = stat(pid) else {
        return false;
    };
    s.tpgid > 0
        && s.tpgid == s.pgrp
        && is_shell(pid)
        && main_thread_children(pid)
            .into_iter()
            .filter_map(stat)
            .any(|c| c.pgrp == s.pgrp && c.state != 'Z')
}

/// The shells whose commands may run in the shell's own process group.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox",
];

/// Whether `pid` runs a shell (its `comm`, the program's name).
fn is_shell(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| SHELLS.contains(&c.trim_end()))
}

/// Clock ticks since boot, now.
pub fn uptime_ticks() -> u64 {
    let secs: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    (secs * hz) as u64
}

/// The values of `names` in a live process's environment
/// (`/proc/<pid>/environ`; none where it cannot be read). Only those are
/// kept, in memory: for a respawn of a re-adopted pane, or where an agent
/// keeps its files.
pub fn env_values(pid: u32, names: &[&str]) -> Vec<(String, String)> {
    let raw = environ(pid).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter_map(|kv| {
            let i = kv.iter().position(|b| *b == b'=')?;
            let k = std::str::from_utf8(&kv[..i]).ok()?;
            names.contains(&k).then(|| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(&kv[i + 1..]).into_owned(),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pidfd turns readable when its process ends, not before; a process
    /// that is gone has none (ESRCH, which the herdr watcher reads as gone).
    #[test]
    fn a_pidfd_wakes_when_its_process_ends() {
        use std::time::Duration;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = pidfd_open(child.id()).expect("pidfd");
        assert!(
            !wait_readable(&[&fd], Duration::from_millis(20)),
            "still running"
        );
        child.kill().unwrap();
        assert!(wait_readable(&[&fd], Duration::from_secs(10)), "ended");
        let pid = child.id();
        child.wait().unwrap();
        let e = pidfd_open(pid).expect_err("reaped");
        assert_eq!(e.raw_os_error(), Some(nix::libc::ESRCH), "{e}");
    }

    #[test]
    fn own_descendants_finds_a_grandchild() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id() as i64;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            let tree = own_descendants().expect("children lists");
            let sh = tree.iter().any(|(p, st)| *p == child.id() && st.ppid == me);
            let sleep = tree.iter().any(|(_, st)| st.ppid == i64::from(child.id()));
            if (sh && sleep) || std::time::Instant::now() >= deadline {
                break sh && sleep;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(found, "the shell and its sleep are not in the tree");
    }

    #[test]
    fn task_children_lists_a_child_and_nothing_for_a_gone_pid() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let kids = task_children(std::process::id()).expect("children lists");
        let _ = child.kill();
        let _ = child.wait();
        assert!(kids.contains(&child.id()), "{kids:?}");
        assert_eq!(task_children(u32::MAX), None);
    }

    /// A process's ignored signals are read from its mask: what it ignores
    /// and not what it does not; a pid that is gone reads as unknown.
    #[test]
    fn ignores_reads_a_process_s_ignored_signals() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; exec sleep 30"])
            .spawn()
            .unwrap();
        let (term, hup) = (nix::libc::SIGTERM, nix::libc::SIGHUP);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ignores(child.id(), term) != Some(true) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let seen = (ignores(child.id(), term), ignores(child.id(), hup));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, (Some(true), Some(false)));
        assert_eq!(ignores(u32::MAX, term), None);
        assert_eq!(ignores(std::process::id(), 0), None);
    }

    #[test]
    fn parses_stat_with_awkward_names() {
        let line = "1234 (a (weird) name) S 1 1234 1234 34816 1234 4194560 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.pgrp, s.session, s.starttime), (1234, 1234, 98765));
        assert_eq!((s.state, s.ppid), ('S', 1));
        assert_eq!(s.tpgid, 1234);
        assert!(parse_stat("garbage").is_none());
    }

    /// A live process whose command name is built to fool a parser that
    /// splits at the first `)`: its state and parent still read right, and
    /// so does every reader built on `stat`.
    #[test]
    fn a_process_with_a_hostile_name_reads_right() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a) b (c", "x) Z 9 9 9 9 9"] {
            let exe = dir.path().join(name);
            std::fs::copy("/bin/sleep", &exe).unwrap();
            // Another test's fork between the copy's write and this exec holds
            // the copy open for writing until its own exec: ETXTBSY, asked
            // again until that passes.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut child = loop {
                match std::process::Command::new(&exe).arg("30").spawn() {
                    Err(e)
                        if e.kind() == std::io::ErrorKind::ExecutableFileBusy
                            && std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    spawned => break spawned.unwrap(),
                }
            };
            let pid = child.id();
            let comm = || std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while comm().trim_end() != name && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let named = comm().trim_end() == name;
            let st = stat(pid);
            let start = start_time(pid);
            let same = same_process(pid, start);
            let ancestry = lineage(pid, 2);
            let _ = child.kill();
            let _ = child.wait();
            assert!(named, "the kernel names it {name:?}");
            let st = st.unwrap_or_else(|| panic!("stat of {name:?}"));
            assert_eq!(st.ppid, i64::from(std::process::id()), "{name:?}");
            assert_ne!(st.state, 'Z', "{name:?}");
            assert!(st.starttime <= uptime_ticks() + 1, "{name:?}");
            assert_eq!(start, Some(st.starttime), "{name:?}");
            assert!(same, "{name:?}");
            assert_eq!(ancestry.get(1).map(|(p, _)| *p), Some(std::process::id()));
        }
    }

    #[test]
    fn reads_this_process() {
        let me = stat(std::process::id()).unwrap();
        assert!(me.starttime <= uptime_ticks() + 1);
    }

    #[test]
    fn env_values_reads_only_the_names_asked_for() {
        let me = std::process::id();
        let home = std::env::var("HOME").ok();
        let got = env_values(me, &["HOME", "NO_SUCH_VARIABLE_HERE"]);
        assert_eq!(
            got.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            if home.is_some() { vec!["HOME"] } else { vec![] }
        );
        assert_eq!(got.first().map(|(_, v)| v.clone()), home);
        assert!(env_values(u32::MAX, &["HOME"]).is_empty());
    }
}
