//! A pane's processes, all of them: the supervisor is a child subreaper, so
//! what escapes a pane's session or process group (`setsid`, `setpgid`,
//! double forks) is re-parented to it instead of to init. A pane's tree is
//! its leader's session, every process carrying the pane's marker variable,
//! and their descendants; kill ends all of it and reaps what was left to us.

use super::procfs::{self, Stat};
use super::spawn::PANE_MARKER_ENV;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::collections::HashSet;
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

/// Held (shared) while a pane's leader is spawned and registered, (exclusive)
/// while orphans are reaped: the standard library waits for a child whose
/// exec failed itself, and must not find it reaped by us.
static SPAWN: RwLock<()> = RwLock::new(());
/// Pane leaders: reaped by their pane's waiter thread, never by the sweep.
static LEADERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// How often a process tree is re-read while waiting for it to end.
const TREE_POLL: Duration = Duration::from_millis(20);

/// Set once this process is the child subreaper of what it starts.
static SUBREAPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make this process the child subreaper of everything it starts.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)?;
    SUBREAPER.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

pub(super) fn spawning() -> RwLockReadGuard<'static, ()> {
    SPAWN.read().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn add_leader(pid: u32) {
    LEADERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(pid);
}

pub(super) fn remove_leader(pid: u32) {
    LEADERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|p| *p != pid);
}

/// Undo a spawn that failed after the exec: kill and reap the leader.
pub(super) fn end_leader(pid: u32, child: &mut Box<dyn portable_pty::Child + Send + Sync>) {
    super::native::signal_group(pid, Signal::SIGKILL);
    let _ = child.wait();
    remove_leader(pid);
}

/// Who a generation's processes are: its leader and the marker they inherit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcIds {
    pub pid: u32,
    /// The leader's start time (clock ticks since boot, `/proc/<pid>/stat` field 22).
    pub start_time: u64,
    pub generation: u64,
    /// When the generation started (RFC 3339, nanoseconds: part of the marker).
    pub created_at: String,
    /// The value of [`PANE_MARKER_ENV`] in the generation's processes.
    pub marker: String,
}

impl ProcIds {
    pub(super) fn new(name: &str, generation: u64) -> Self {
        let created_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        ProcIds {
            pid: 0,
            start_time: 0,
            generation,
            marker: marker(name, generation, &created_at),
            created_at,
        }
    }

    pub(super) fn started(mut self, pid: u32) -> Self {
        self.pid = pid;
        self.start_time = procfs::stat(pid).map(|s| s.starttime).unwrap_or(0);
        self
    }
}

/// The marker value of generation `generation` of pane `name`.
pub fn marker(name: &str, generation: u64, created_at: &str) -> String {
    format!("{name}:{generation}:{created_at}")
}

/// One process: its pid and start time (together, never a recycled pid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Member {
    pub pid: u32,
    pub start_time: u64,
}

/// What identifies a tree on `/proc`.
#[derive(Debug, Clone)]
pub struct TreeKey {
    /// The leader (also the session id of everything that did not leave it).
    pub pid: u32,
    pub start_time: u64,
    /// Session members count only if they started by then (the leader was
    /// reaped then, and its id may since have been reused).
    pub session_until: Option<u64>,
    /// `NAME=value` of the marker variable.
    pub marker_entry: Vec<u8>,
    /// Known members (e.g. from a record); matched by pid and start time.
    pub known: Vec<Member>,
    /// The generation's cgroup (a tmux pane's, where the host has one):
    /// every process in it is a member, whatever its session or environment.
    pub cgroup: Option<std::path::PathBuf>,
}

impl TreeKey {
    pub fn new(pid: u32, start_time: u64, marker: &str) -> Self {
        TreeKey {
            pid,
            start_time,
            session_until: None,
            // No marker, no match by marker (not every process without one).
            marker_entry: if marker.is_empty() {
                Vec::new()
            } else {
                format!("{PANE_MARKER_ENV}={marker}").into_bytes()
            },
            known: Vec::new(),
            cgroup: super::cgroup::dir_for(marker).filter(|d| d.is_dir()),
        }
    }

    pub(super) fn of(ids: &ProcIds, reaped_ticks: Option<u64>) -> Self {
        let mut k = TreeKey::new(ids.pid, ids.start_time, &ids.marker);
        k.session_until = reaped_ticks;
        k
    }
}

/// The processes of a tree alive now (zombies included). `deep` reads the
/// environment of every process to find those that left the session and
/// are no longer our children; otherwise only orphans re-parented to us are
/// checked for the marker.
pub fn members(key: &TreeKey, deep: bool) -> Vec<Member> {
    members_in(key, deep, &procfs::all())
}

/// [`members`] (not deep) of a tree this process started: as a subreaper it
/// is an ancestor of every process of such a tree (escaped ones included),
/// so its own descendants are read instead of every process of the machine
/// (a record refresh of 16 idle panes read ~2000 `/proc` entries per pane).
/// Falls back to [`members`] when this process is no subreaper or the kernel
/// keeps no children lists.
pub fn members_of_own_tree(key: &TreeKey) -> Vec<Member> {
    if !SUBREAPER.load(std::sync::atomic::Ordering::Relaxed) {
        return members(key, false);
    }
    match own_tree() {
        Some(tree) => members_in(key, false, &tree),
        None => members(key, false),
    }
}

/// How long one walk of this process's tree serves [`members_of_own_tree`]:
/// a refresh round asks once per pane within milliseconds; one walk serves
/// them all.
const OWN_TREE_TTL: Duration = Duration::from_millis(500);
type Tree = Vec<(u32, Stat)>;
static OWN_TREE: Mutex<Option<(Instant, Tree)>> = Mutex::new(None);

fn own_tree() -> Option<Tree> {
    let mut cache = OWN_TREE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, tree)) = cache.as_ref()
        && at.elapsed() < OWN_TREE_TTL
    {
        return Some(tree.clone());
    }
    let tree = procfs::own_descendants()?;
    *cache = Some((Instant::now(), tree.clone()));
    Some(tree)
}

fn members_in(key: &TreeKey, deep: bool, all: &[(u32, Stat)]) -> Vec<Member> {
    let me = i64::from(std::process::id());
    let mut set: HashSet<u32> = HashSet::new();
    let own = |st: &Stat| st.starttime >= key.start_time;
    let grouped: HashSet<u32> = key
        .cgroup
        .as_deref()
        .map(super::cgroup::pids)
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (pid, st) in all {
        if i64::from(*pid) == me || *pid == 1 || !own(st) {
            continue;
        }
        let leader = *pid == key.pid && st.starttime == key.start_time;
        let session =
            st.session == i64::from(key.pid) && key.session_until.is_none_or(|t| st.starttime <= t);
        let known = key
            .known
            .iter()
            .any(|m| m.pid == *pid && m.start_time == st.starttime);
        let marked = !key.marker_entry.is_empty()
            && (deep || st.ppid == me)
            && procfs::environ_has(*pid, &key.marker_entry);
        if leader || session || known || marked || grouped.contains(pid) {
            set.insert(*pid);
        }
    }
    // Descendants of members are members.
    loop {
        let before = set.len();
        for (pid, st) in all {
            if !set.contains(pid)
                && own(st)
                && u32::try_from(st.ppid).is_ok_and(|pp| set.contains(&pp))
            {
                set.insert(*pid);
            }
        }
        if set.len() == before {
            break;
        }
    }
    all.iter()
        .filter(|(pid, _)| set.contains(pid))
        .map(|(pid, st)| Member {
            pid: *pid,
            start_time: st.starttime,
        })
        .collect()
}

/// Whether `m` is still that process and not yet a zombie.
pub fn running(m: &Member) -> bool {
    procfs::stat(m.pid).is_some_and(|s| s.starttime == m.start_time && s.state != 'Z')
}

/// Send `sig` to each member that is still the same process.
pub fn signal_all(members: &[Member], sig: Signal) {
    for m in members {
        if running(m) {
            let _ = nix::sys::signal::kill(Pid::from_raw(m.pid as i32), sig);
        }
    }
}

/// Wait until none of `members` runs, or `deadline`; reaps orphans meanwhile.
pub fn wait_gone(members: &[Member], deadline: Instant) -> bool {
    loop {
        reap_orphans();
        if !members.iter().any(running) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(TREE_POLL);
    }
}

/// Ask a tree to end, as a closing terminal's programs expect, without
/// cutting short the cleanup they do. SIGTERM to each of `found` (the tree
/// as read before); once every one that does not ignore TERM is gone, the
/// children the ones still running forked meanwhile (a shell that ignores
/// TERM going on with its rc file) get their TERM too, until none is new or
/// half of `grace` is over; then SIGHUP to each one still running. `found`
/// gains those children. What a member that ended left behind (a cleanup
/// it started in the background) is not asked: the HUP waits for it to end
/// (up to half of `grace` too), and [`sweep`] leaves it time. One signal at a time to each process, never one
/// to a group: bash dies at once of a signal that comes while its exit trap
/// runs, and so does the `rm` the trap just forked, and the lock file it
/// was to remove is left for good (pyenv's, run from `~/.bashrc`). Returns
/// whether all of `found` ended within `grace`.
pub fn ask_to_end(key: &TreeKey, found: &mut Vec<Member>, grace: Duration) -> bool {
    let start = Instant::now();
    let term_until = start + grace / 2;
    let mut fresh = found.clone();
    loop {
        signal_all(&fresh, Signal::SIGTERM);
        let takes_term: Vec<Member> = found
            .iter()
            .filter(|m| procfs::ignores(m.pid, Signal::SIGTERM as i32) != Some(true))
            .copied()
            .collect();
        // Past half the grace, whatever still forks (a shell that ignores
        // TERM running a loop) is left to the HUP.
        if !wait_gone(&takes_term, term_until) || Instant::now() >= term_until {
            break;
        }
        fresh = new_children(found);
        if fresh.is_empty() {
            break;
        }
        found.extend_from_slice(&fresh);
    }
    // A cleanup left running in the background by a member that ended dies
    // of the hangup the shell's end brings (the kernel's SIGHUP to the
    // terminal's foreground group): the HUP waits for it, up to half the
    // grace.
    loop {
        let left = members(key, true)
            .into_iter()
            .any(|m| running(&m) && !found.contains(&m));
        if !left || Instant::now() >= term_until {
            break;
        }
        reap_orphans();
        std::thread::sleep(TREE_POLL);
    }
    signal_all(found, Signal::SIGHUP);
    wait_gone(found, start + grace)
}

/// The running children of the members of `found` that still run, but for
/// those in `found`.
fn new_children(found: &[Member]) -> Vec<Member> {
    found
        .iter()
        .filter(|m| running(m))
        .flat_map(|m| procfs::task_children(m.pid).unwrap_or_default())
        .filter_map(|pid| {
            let st = procfs::stat(pid)?;
            let m = Member {
                pid,
                start_time: st.starttime,
            };
            (st.state != 'Z' && !found.contains(&m)).then_some(m)
        })
        .collect()
}

/// End a whole tree: [`ask_to_end`] with `grace`, then SIGKILL to whatever
/// (newly forked included) is left, until none runs or `timeout`. Returns
/// the members that were found.
pub fn end_tree(key: &TreeKey, grace: Duration, timeout: Duration) -> Vec<Member> {
    let mut found = members(key, true);
    ask_to_end(key, &mut found, grace);
    sweep(key, &mut found, timeout);
    found
}

/// End a pane's process led by `pid` from outside (a pane in another
/// server): [`stop_marked_tree`] with the marker read from the leader's
/// environment (none when it has none).
pub(crate) fn stop_tree(
    pid: u32,
    grace: Duration,
    timeout: Duration,
    exited: impl FnMut(Duration) -> bool,
) -> bool {
    let marker = leader_marker(pid).unwrap_or_default();
    stop_marked_tree(pid, &marker, grace, timeout, exited)
}

/// The value of [`PANE_MARKER_ENV`] in `pid`'s environment.
fn leader_marker(pid: u32) -> Option<String> {
    procfs::env_values(pid, &[PANE_MARKER_ENV])
        .into_iter()
        .map(|(_, v)| v)
        .find(|v| !v.is_empty())
}

/// End a pane's process led by `pid` from outside: its tree as it is now
/// (its session, descendants that left it with setsid/setpgid, and every
/// process carrying `marker`, which those that were re-parented away — a
/// double fork, `(setsid cmd &)` — still inherit) is noted and asked to end
/// ([`ask_to_end`], `grace`); a leader still running then gets KILL, and
/// `exited` waits up to `timeout`; what is left of the tree (marked
/// processes forked meanwhile included) is swept last. Returns whether the
/// exit was seen.
pub(crate) fn stop_marked_tree(
    pid: u32,
    marker: &str,
    grace: Duration,
    timeout: Duration,
    mut exited: impl FnMut(Duration) -> bool,
) -> bool {
    let mut key = TreeKey::new(pid, super::record::start_time(pid).unwrap_or(0), marker);
    // A pane in another server is no child of ours: only a deep read finds
    // its marked processes.
    let mut found = members(&key, !marker.is_empty());
    key.known = found.clone();
    // Once the leader is gone its id may be reused: session members count
    // only if they started by now (later ones descend from these).
    key.session_until = found.iter().map(|m| m.start_time).max();
    ask_to_end(&key, &mut found, grace);
    let leader = Member {
        pid,
        start_time: key.start_time,
    };
    if running(&leader) {
        super::native::signal_group(pid, Signal::SIGKILL);
    }
    let seen = exited(timeout);
    sweep(&key, &mut found, timeout);
    seen
}

/// End what is left of a pane whose leader (`pid`, started at
/// `start_time`) is gone: every process carrying `marker` and their
/// descendants (the leader's id, and so its session id, may be someone
/// else's now), asked with TERM and HUP, `grace` to go, then swept. Nothing
/// without a marker.
pub(crate) fn end_marked(
    pid: u32,
    start_time: u64,
    marker: &str,
    grace: Duration,
    timeout: Duration,
) {
    if marker.is_empty() {
        return;
    }
    let mut key = TreeKey::new(pid, start_time, marker);
    key.session_until = Some(start_time);
    let mut found = members(&key, true);
    ask_to_end(&key, &mut found, grace);
    sweep(&key, &mut found, timeout);
}

/// How long a process that joined a tree after the tree was asked to end is
/// left to end on its own before it is asked too: the cleanup an exit trap
/// forks (`rm -f` of a lock file) would die of a signal sent before it ran.
const LATE_QUIET: Duration = Duration::from_millis(1000);
/// How long a late member has after TERM before SIGKILL (HUP at half).
const LATE_GRACE: Duration = Duration::from_millis(1000);

/// End what is left of a tree whose members in `found` were asked to end
/// and had their grace: those still running get SIGKILL at once; a process
/// that joined since is ended as `end_late` ends one. Everything gets
/// SIGKILL before `timeout` runs out; returns when none runs or at
/// `timeout`.
pub fn sweep(key: &TreeKey, found: &mut Vec<Member>, timeout: Duration) {
    let asked: HashSet<Member> = found.iter().copied().collect();
    let gone = end_late(
        || {
            // Re-read each round: a member may fork while it dies.
            let now = members(key, true);
            for m in &now {
                if !found.contains(m) {
                    found.push(*m);
                }
            }
            now
        },
        &asked,
        timeout,
    );
    if gone && let Some(dir) = &key.cgroup {
        super::cgroup::remove(dir);
    }
}

/// End the processes `find` reads (again each round): those in `asked`
/// had their turn and get SIGKILL at once; any other is first left
/// `LATE_QUIET` (1 s) to end on its own, then gets TERM, HUP half of
/// `LATE_GRACE` (1 s) on, and SIGKILL at its end. Everything gets SIGKILL
/// before `timeout` runs out. Returns whether none runs (else `timeout`
/// ran out).
fn end_late(
    mut find: impl FnMut() -> Vec<Member>,
    asked: &HashSet<Member>,
    timeout: Duration,
) -> bool {
    let start = Instant::now();
    let deadline = start + timeout;
    // The last moment to kill what is still there and see it go.
    let last_call = start + timeout.saturating_sub(TREE_POLL * 10);
    // A late member: when it was first seen and how many signals it had.
    let mut late: std::collections::HashMap<Member, (Instant, u8)> = Default::default();
    loop {
        let live: Vec<Member> = find().into_iter().filter(running).collect();
        let t = Instant::now();
        if live.is_empty() || t >= deadline {
            reap_orphans();
            return live.is_empty();
        }
        let (mut kill, mut term, mut hup) = (Vec::new(), Vec::new(), Vec::new());
        for m in &live {
            if asked.contains(m) || t >= last_call {
                kill.push(*m);
                continue;
            }
            let (seen, sent) = late.entry(*m).or_insert((t, 0));
            let age = t.duration_since(*seen);
            if age >= LATE_QUIET + LATE_GRACE {
                kill.push(*m);
            } else if age >= LATE_QUIET + LATE_GRACE / 2 && *sent < 2 {
                *sent = 2;
                hup.push(*m);
            } else if age >= LATE_QUIET && *sent < 1 {
                *sent = 1;
                term.push(*m);
            }
        }
        signal_all(&kill, Signal::SIGKILL);
        signal_all(&term, Signal::SIGTERM);
        signal_all(&hup, Signal::SIGHUP);
        wait_gone(&live, (t + TREE_POLL * 10).min(deadline));
    }
}

/// This process's children with their stat: from each thread's `children`
/// list (cheap), or a scan of every process where the kernel has no such list.
fn children() -> Vec<(u32, Stat)> {
    let me = i64::from(std::process::id());
    let Some(mut pids) = procfs::task_children(std::process::id()) else {
        return procfs::all()
            .into_iter()
            .filter(|(_, st)| st.ppid == me)
            .collect();
    };
    pids.sort_unstable();
    pids.dedup();
    pids.into_iter()
        .filter_map(|pid| Some((pid, procfs::stat(pid)?)))
        .filter(|(_, st)| st.ppid == me)
        .collect()
}

/// Reap zombies re-parented to us: children in another session than ours
/// that no pane waiter owns. Children the supervisor starts itself (git)
/// share its session and are left to their own waits.
pub fn reap_orphans() -> usize {
    let _excl = SPAWN.write().unwrap_or_else(PoisonError::into_inner);
    let me = i64::from(std::process::id());
    let my_sid = nix::unistd::getsid(None)
        .map(|p| i64::from(p.as_raw()))
        .unwrap_or(-1);
    let leaders = LEADERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut n = 0;
    for (pid, st) in children() {
        if st.ppid == me && st.state == 'Z' && st.session != my_sid && !leaders.contains(&pid) {
            let flags = nix::sys::wait::WaitPidFlag::WNOHANG;
            if nix::sys::wait::waitpid(Pid::from_raw(pid as i32), Some(flags)).is_ok() {
                n += 1;
            }
        }
    }
    n
}

/// On shutdown: end everything re-parented to us that no pane claimed
/// (what escaped a pane's tree, a cleanup left running), as a late member
/// of a tree is ended (`end_late`: time to end on its own, then TERM,
/// HUP and SIGKILL), and reap it; all within `timeout`.
pub fn end_orphans(timeout: Duration) {
    let me = i64::from(std::process::id());
    let my_sid = nix::unistd::getsid(None)
        .map(|p| i64::from(p.as_raw()))
        .unwrap_or(-1);
    let orphans = || {
        reap_orphans();
        let leaders = LEADERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        children()
            .into_iter()
            .filter(|(pid, st)| st.ppid == me && st.session != my_sid && !leaders.contains(pid))
            .map(|(pid, st)| Member {
                pid,
                start_time: st.starttime,
            })
            .collect()
    };
    end_late(orphans, &HashSet::new(), timeout);
}
