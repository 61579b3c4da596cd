//! Shared by the benchmarks (`latency`, `idle`, `engine`, `fleet`): a supervisor in its
//! own temp state dir that is shut down when dropped, sim panes, sim traces,
//! `/proc` readings and percentiles. Included with `#[path]`; not a bench target itself.

#![allow(dead_code)]

use drover::daemon::Client;
use serde_json::{Value, json};
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The sim profile of pane `i`: Claude and Codex, alternately.
pub fn profile(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "claude"
    } else {
        "codex"
    }
}

/// The value after `--name` on the command line, parsed; `default` otherwise.
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The drover binary the bench runs: `$DROVER` when set (e.g. an older
/// build, to compare supervisors under the same bench), else the one built
/// with this bench.
pub static EXE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    std::env::var("DROVER").unwrap_or_else(|_| env!("CARGO_BIN_EXE_drover").to_string())
});

/// How long the supervisor gets to stop after `shutdown` before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A supervisor with its own state dir; `shutdown` (then SIGKILL) on drop.
pub struct Supervisor {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
    pub socket: PathBuf,
    pub pid: u32,
    client: Client,
}

impl Supervisor {
    /// Start a supervisor for a fresh temp state dir.
    pub fn start() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let raw = dir.path().join("state");
        std::fs::create_dir_all(&raw).map_err(|e| format!("state dir: {e}"))?;
        // Resolved exactly as the CLI resolves it, so `drover wait` finds the same socket.
        let state = drover::paths::resolve_state_dir(Some(&raw)).map_err(|e| e.to_string())?;
        let state = drover::statedir::StateDirBuf::from(state);
        let socket = drover::paths::socket_path(&state).map_err(|e| e.to_string())?;
        let mut client = Client::connect_or_start(&state, &socket, Some(Path::new(EXE.as_str())))
            .map_err(|e| format!("start supervisor: {e}"))?;
        let pid = client
            .call_raw("ping", json!({}))
            .map_err(|e| format!("ping: {e}"))?["pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or("ping did not return a pid")?;
        Ok(Supervisor {
            dir,
            state: state.into_path_buf(),
            socket,
            pid,
            client,
        })
    }

    /// A request on the bench's own connection.
    pub fn call(&mut self, op: &str, args: Value) -> Result<Value, String> {
        self.client
            .call_raw(op, args)
            .map_err(|e| format!("{op}: {e}"))
    }

    /// A new connection (for a waiter on another thread).
    pub fn connect(&self) -> Result<Client, String> {
        Client::connect(&self.socket).map_err(|e| e.to_string())
    }

    /// Create a sim pane (`drover sim-agent --profile P [--script S]`), 120×40,
    /// on the bench's backend ([`backend`]).
    pub fn sim_pane(
        &mut self,
        name: &str,
        profile: &str,
        script: Option<&Path>,
        env: &[(&str, String)],
    ) -> Result<Value, String> {
        self.sim_pane_on(name, profile, script, env, &backend())
    }

    /// [`Self::sim_pane`] on a given backend.
    pub fn sim_pane_on(
        &mut self,
        name: &str,
        profile: &str,
        script: Option<&Path>,
        env: &[(&str, String)],
        backend: &str,
    ) -> Result<Value, String> {
        let mut argv = vec![
            EXE.to_string(),
            "sim-agent".into(),
            "--profile".into(),
            profile.into(),
        ];
        if let Some(s) = script {
            argv.push("--script".into());
            argv.push(s.display().to_string());
        }
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        self.call(
            "pane.new",
            json!({"spec": {
                "name": name, "argv": argv, "env": env,
                "cwd": self.dir.path(), "cols": 120, "rows": 40, "agent": "sim",
            }, "backend": backend}),
        )
    }

    /// Block until every pane is in one of `until` (library barrier).
    pub fn wait_all(
        &mut self,
        panes: &[String],
        until: &[&str],
        timeout: Duration,
    ) -> Result<(), String> {
        let v = self.call(
            "wait",
            json!({"panes": panes, "until": until, "mode": "all",
                   "timeout_ms": timeout.as_millis() as u64}),
        )?;
        if v["matched"].as_bool() == Some(true) {
            Ok(())
        } else {
            Err(format!("panes did not reach {until:?}: {}", v["snapshots"]))
        }
    }
}

impl Supervisor {
    /// When the bench is interrupted (SIGINT, SIGTERM, SIGHUP) — which skips
    /// every `Drop` — run `also`, stop the supervisor and remove the temp dir.
    pub fn cleanup_on_signal(&self, also: impl FnOnce() + Send + 'static) -> Result<(), String> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            .map_err(|e| format!("signal handler: {e}"))?;
        let (socket, pid, dir) = (self.socket.clone(), self.pid, self.dir.path().to_path_buf());
        std::thread::spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!("interrupted: stopping the supervisor");
                also();
                if let Ok(mut c) = Client::connect(&socket) {
                    let _ = c.call_raw("shutdown", json!({}));
                }
                stop(pid);
                let _ = std::fs::remove_dir_all(&dir);
                std::process::exit(128 + sig);
            }
        });
        Ok(())
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = self.client.call_raw("shutdown", json!({}));
        stop(self.pid);
    }
}

/// Wait for a supervisor asked to shut down to exit; SIGKILL it after a grace time.
fn stop(pid: u32) {
    let deadline = Instant::now() + STOP_GRACE;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        eprintln!("supervisor {pid} did not stop; killing it");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Whether `pid` runs (a zombie does not).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => stat_fields(&s).is_some_and(|f| f.first() != Some(&"Z")),
        Err(_) => false,
    }
}

/// The fields of a `/proc/*/stat` line after `(comm)`: index 0 is the state
/// (field 3 of proc(5)), so proc(5)'s field N is index N - 3.
fn stat_fields(s: &str) -> Option<Vec<&str>> {
    let rest = &s[s.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// utime + stime of a process (all its threads, living and exited), in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = stat_fields(&s)?;
    let utime: u64 = f.get(14 - 3)?.parse().ok()?;
    let stime: u64 = f.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// Milliseconds per clock tick (`sysconf(_SC_CLK_TCK)`; 10 ms when unknown).
pub fn ms_per_tick() -> f64 {
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&h| h > 0)
        .unwrap_or(100);
    1000.0 / hz as f64
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
pub fn status_kb(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Per living thread of a process, by thread id: CPU time in ns
/// (`schedstat`, finer than clock ticks) and context switches (`status`,
/// voluntary + involuntary: how often it ran).
pub type TaskStats = std::collections::HashMap<u32, (u64, u64)>;

/// Read [`TaskStats`] from `/proc/<pid>/task/*`.
pub fn task_stats(pid: u32) -> TaskStats {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Default::default();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let sched = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            let ns = sched.split_whitespace().next()?.parse().ok()?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let switches = status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
            Some((tid, (ns, switches)))
        })
        .collect()
}

/// Between two readings, over the threads alive at the end: CPU ns, context
/// switches, and how many threads exited in between (their share is lost).
pub fn task_delta(before: &TaskStats, after: &TaskStats) -> (u64, u64, usize) {
    let (mut ns, mut sw) = (0, 0);
    for (tid, &(a_ns, a_sw)) in after {
        let (b_ns, b_sw) = before.get(tid).copied().unwrap_or((0, 0));
        ns += a_ns.saturating_sub(b_ns);
        sw += a_sw.saturating_sub(b_sw);
    }
    let exited = before.keys().filter(|t| !after.contains_key(t)).count();
    (ns, sw, exited)
}

/// How many threads a process has.
pub fn threads(pid: u32) -> u64 {
    status_kb(pid, "Threads").unwrap_or(0)
}

/// The 1-minute load average.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Count, p50, p99 and max of `v` (nearest rank).
pub fn stats(mut v: Vec<f64>) -> (usize, f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (
        v.len(),
        percentile(&v, 50.0),
        percentile(&v, 99.0),
        v.last().copied().unwrap_or(f64::NAN),
    )
}

/// The backend benchmark panes go on: `$DROVER_BENCH_BACKEND` (native).
pub fn backend() -> String {
    std::env::var("DROVER_BENCH_BACKEND").unwrap_or_else(|_| "native".into())
}

/// Reads a sim trace file as it grows.
pub struct TraceCursor {
    path: PathBuf,
    offset: u64,
}

impl TraceCursor {
    pub fn new(path: PathBuf) -> Self {
        TraceCursor { path, offset: 0 }
    }

    /// The stamp of the next traced change to `state` (earlier lines are
    /// skipped); waits for the sim to append it.
    pub fn next(&mut self, state: &str, timeout: Duration) -> Result<i128, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ns) = self.scan(state)? {
                return Ok(ns);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{}: no `{state}` line after byte {}",
                    self.path.display(),
                    self.offset
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn scan(&mut self, state: &str) -> Result<Option<i128>, String> {
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        f.seek(std::io::SeekFrom::Start(self.offset))
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        f.read_to_string(&mut text).map_err(|e| e.to_string())?;
        let mut used = 0usize;
        for line in text.split_inclusive('\n') {
            if !line.ends_with('\n') {
                break;
            }
            used += line.len();
            let mut it = line.split_whitespace();
            let ns = it.next().and_then(|n| n.parse::<i128>().ok());
            if let (Some(ns), Some(st)) = (ns, it.next())
                && st == state
            {
                self.offset += used as u64;
                return Ok(Some(ns));
            }
        }
        self.offset += used as u64;
        Ok(None)
    }
}
