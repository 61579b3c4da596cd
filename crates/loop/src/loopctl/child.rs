//! The loop's own child processes — the charter's gate, `--ship-cmd`,
//! `--notify-cmd` — run bounded: each in its own process group, ended at
//! its deadline or when the run must stop (an emergency stop, the
//! wall-clock budget), and always ended with its whole group, so nothing it
//! started in the background outlives it. Every group running is
//! registered; [`end_on_signals`] makes a SIGTERM, SIGINT or SIGHUP of the
//! loop end them at once and the run stop (a `kill -9` of the loop cannot be
//! caught: the direct child then gets SIGKILL from the kernel, its
//! parent-death signal).

use std::collections::BTreeSet;
use std::process::{Child, Command, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a running child is checked for its exit.
const POLL: Duration = Duration::from_millis(50);
/// How often the stop condition is asked (it may read a file).
const STOP_POLL: Duration = Duration::from_millis(250);
/// How long a group asked to stop (SIGTERM) gets before SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// Process groups of the loop's children now running.
static GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// The variable every child of a run carries (its value: the run dir), so
/// what a killed loop left behind is found and ended by [`end_marked`].
pub const MARK_ENV: &str = crate::statedir::env::LOOP_CHILD;

/// What bounds one child.
pub struct Bounds<'a> {
    /// Longest it may run.
    pub timeout: Duration,
    /// Asked while it runs: `Some(why)` ends it now.
    pub stop: Box<dyn Fn() -> Option<String> + 'a>,
    /// Set as [`MARK_ENV`] in its environment (inherited by all it starts).
    pub mark: Option<String>,
}

impl Bounds<'_> {
    /// Bounded by time alone.
    pub fn timeout(timeout: Duration) -> Bounds<'static> {
        Bounds {
            timeout,
            stop: Box::new(|| None),
            mark: None,
        }
    }
}

/// How a bounded child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Exited(ExitStatus),
    /// Ran past its timeout; its group was killed.
    TimedOut,
    /// The stop condition said why; its group was killed.
    Stopped(String),
}

impl Ended {
    /// The exit code, when it exited with one.
    pub fn code(&self) -> Option<i32> {
        match self {
            Ended::Exited(s) => s.code(),
            _ => None,
        }
    }

    /// One line for a record: `exit 0`, `killed by a signal`, `timed out
    /// after 30 s`, `stopped: …`.
    pub fn describe(&self, timeout: Duration) -> String {
        match self {
            Ended::Exited(s) => s
                .code()
                .map_or("killed by a signal".into(), |c| format!("exit {c}")),
            Ended::TimedOut => format!("timed out after {} s", timeout.as_secs()),
            Ended::Stopped(why) => format!("stopped: {why}"),
        }
    }
}

/// Spawn `cmd` in a new process group (with SIGKILL as its parent-death
/// signal), registered until [`wait`] ends it.
pub fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    let child = cmd.spawn()?;
    if let Ok(mut g) = GROUPS.lock() {
        g.insert(pid_of(&child));
    }
    Ok(child)
}

fn pid_of(child: &Child) -> i32 {
    i32::try_from(child.id()).unwrap_or(i32::MAX)
}

/// Wait for a child made by [`spawn`] within `bounds`; whatever the end, its
/// whole process group is ended after it (what it left in the background):
/// SIGTERM once, `GRACE` (2 s) to go, then SIGKILL.
pub fn wait(child: &mut Child, bounds: &Bounds) -> std::io::Result<Ended> {
    let started = Instant::now();
    let mut asked = Instant::now();
    let pgid = pid_of(child);
    let ended = loop {
        if let Some(s) = child.try_wait()? {
            break Ended::Exited(s);
        }
        if started.elapsed() >= bounds.timeout {
            stop_group(child, pgid);
            break Ended::TimedOut;
        }
        if asked.elapsed() >= STOP_POLL {
            asked = Instant::now();
            if let Some(why) = (bounds.stop)() {
                stop_group(child, pgid);
                break Ended::Stopped(why);
            }
        }
        std::thread::sleep(POLL);
    };
    if matches!(ended, Ended::Exited(_)) {
        end_leftovers(pgid);
    }
    if let Ok(mut g) = GROUPS.lock() {
        g.remove(&pgid);
    }
    Ok(ended)
}

/// Run `cmd` bounded ([`spawn`] then [`wait`]), marked with `bounds.mark`.
pub fn run(cmd: &mut Command, bounds: &Bounds) -> std::io::Result<Ended> {
    if let Some(m) = &bounds.mark {
        cmd.env(MARK_ENV, m);
    }
    let mut child = spawn(cmd)?;
    wait(&mut child, bounds)
}

/// Kill every process (but this one) whose environment says `MARK_ENV=mark`:
/// what a loop killed with SIGKILL left running (its direct child got the
/// parent-death signal; what that started did not). Returns how many.
pub fn end_marked(mark: &str) -> usize {
    let needle = format!("{MARK_ENV}={mark}");
    let me = std::process::id();
    let mut n = 0;
    for pid in crate::pane::procfs::pids() {
        if pid == me {
            continue;
        }
        if crate::pane::procfs::environ_has(pid, needle.as_bytes())
            && let Ok(p) = i32::try_from(pid)
            && nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
        {
            n += 1;
        }
    }
    n
}

/// SIGTERM to the group, once; [`GRACE`] for the leader and the rest of the
/// group to end (an exit trap's cleanup included: a SIGKILL the moment the
/// leader is gone would cut short what its trap started); SIGKILL to what
/// is left; reap the leader.
fn stop_group(child: &mut Child, pgid: i32) {
    let mut reaped = false;
    end_group(pgid, || {
        reaped = reaped || matches!(child.try_wait(), Ok(Some(_)) | Err(_));
        reaped && !group_alive(pgid)
    });
    let _ = child.wait();
}

/// End what a child that exited left in its group; nothing when the group
/// is empty.
fn end_leftovers(pgid: i32) {
    if group_alive(pgid) {
        end_group(pgid, || !group_alive(pgid));
    }
}

/// SIGTERM to the group once, [`GRACE`] for `ended` to say so, then SIGKILL
/// to what of the group is left.
fn end_group(pgid: i32, mut ended: impl FnMut() -> bool) {
    kill_group(pgid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + GRACE;
    while !ended() && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    if group_alive(pgid) {
        kill_group(pgid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Whether process group `pgid` has a member (a signal 0 reaches it).
fn group_alive(pgid: i32) -> bool {
    pgid > 1 && nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None).is_ok()
}

fn kill_group(pgid: i32, sig: nix::sys::signal::Signal) {
    if pgid > 1 {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-pgid), sig);
    }
}

/// The signal that asked this process to stop (0: none yet).
static STOP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The name of the signal that asked the loop to stop (`SIGINT`, …), once
/// one did: the runner stops in a controlled way (a decision line, its lanes
/// down, the run left `interrupted` for `--resume`).
pub fn stop_requested() -> Option<&'static str> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    match STOP_SIGNAL.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        SIGINT => Some("SIGINT"),
        SIGTERM => Some("SIGTERM"),
        SIGHUP => Some("SIGHUP"),
        _ => Some("a signal"),
    }
}

/// From now on, a SIGTERM, SIGINT or SIGHUP of this process kills every
/// registered child group at once and asks the runner to stop
/// ([`stop_requested`]); a second one ends the process as the signal would
/// have. Idempotent.
pub fn end_on_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let mut result = Ok(());
    INSTALLED.call_once(|| {
        let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) {
            Ok(s) => s,
            Err(e) => {
                result = Err(e);
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("loop-children".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let groups: Vec<i32> = GROUPS
                        .lock()
                        .map(|g| g.iter().copied().collect())
                        .unwrap_or_default();
                    for pgid in groups {
                        kill_group(pgid, nix::sys::signal::Signal::SIGKILL);
                    }
                    let first = STOP_SIGNAL
                        .compare_exchange(
                            0,
                            sig,
                            std::sync::atomic::Ordering::SeqCst,
                            std::sync::atomic::Ordering::SeqCst,
                        )
                        .is_ok();
                    if !first {
                        // Asked twice: the operator means now.
                        let _ = signal_hook::low_level::emulate_default_handler(sig);
                        std::process::exit(128 + sig);
                    }
                }
            });
        if let Err(e) = spawned {
            result = Err(e);
        }
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    /// Whether `pid` still runs 2 s from now (SIGKILL lands asynchronously).
    fn alive(pid: i32) -> bool {
        let running = || {
            u32::try_from(pid)
                .ok()
                .and_then(crate::pane::procfs::stat)
                .is_some_and(|s| s.state != 'Z')
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while running() {
            if Instant::now() > deadline {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn a_child_past_its_timeout_is_ended_with_its_group() {
        let tmp = tempfile::tempdir().unwrap();
        let pidf = tmp.path().join("bg.pid");
        let script = format!("sleep 600 & echo $! > {}; wait", pidf.display());
        let t0 = Instant::now();
        let e = run(
            &mut sh(&script),
            &Bounds::timeout(Duration::from_millis(500)),
        )
        .unwrap();
        assert_eq!(e, Ended::TimedOut);
        assert!(t0.elapsed() < Duration::from_secs(5));
        let bg: i32 = std::fs::read_to_string(&pidf)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!alive(bg), "the background sleep outlived its group");
    }

    #[test]
    fn a_stop_ends_it_and_an_exit_ends_what_it_left_behind() {
        let e = run(
            &mut sh("exec sleep 600"),
            &Bounds {
                timeout: Duration::from_secs(600),
                stop: Box::new(|| Some("emergency stop".to_string())),
                mark: None,
            },
        )
        .unwrap();
        assert_eq!(e, Ended::Stopped("emergency stop".into()));
        let tmp = tempfile::tempdir().unwrap();
        let pidf = tmp.path().join("bg.pid");
        let script = format!("sleep 600 & echo $! > {}; exit 3", pidf.display());
        let e = run(&mut sh(&script), &Bounds::timeout(Duration::from_secs(60))).unwrap();
        assert_eq!(e.code(), Some(3));
        let bg: i32 = std::fs::read_to_string(&pidf)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!alive(bg), "what it left in the background is ended");
    }

    /// What a child left running is asked to end with SIGTERM before any
    /// SIGKILL: its trap's cleanup runs. (It was SIGKILLed the moment the
    /// child exited.)
    #[test]
    fn what_a_child_left_behind_gets_term_first_and_its_trap_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let (ready, cleaned) = (tmp.path().join("ready"), tmp.path().join("cleaned"));
        let script = format!(
            "(trap 'echo done > {c}; exit 0' TERM; : > {r}; while :; do sleep 0.1; done) & \
             while [ ! -e {r} ]; do sleep 0.01; done; exit 0",
            c = cleaned.display(),
            r = ready.display()
        );
        let e = run(&mut sh(&script), &Bounds::timeout(Duration::from_secs(60))).unwrap();
        assert_eq!(e.code(), Some(0));
        assert!(cleaned.exists(), "the leftover's TERM trap never ran");
    }
}
