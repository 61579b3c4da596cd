//! Detection-latency benchmark (docs/performance.md, issue 3): from the moment the sim
//! agent writes a state change to its PTY to the moment `drover wait` returns
//! the new state, over hundreds of changes; p50/p99/max against the targets
//! and beside herdr's figure from docs/performance.md.
//!
//! `cargo bench --bench latency [-- --cycles 200 --work-ms 160 --flood 8]`
//!
//! `DROVER_BENCH_BACKEND=tmux` puts the sim panes on the tmux backend;
//! `DROVER_BENCH_BACKEND=native,tmux` runs a pair on each, side by side in
//! one run (the cycles take the panes in turn). `--flood N` adds N native
//! panes that print ANSI lines (`--flood-rate` bytes/s each, 1 MiB/s by
//! default; 0 for as fast as drover takes them); they are
//! stopped (SIGSTOP) and let go (SIGCONT) in alternate blocks of
//! `--flood-block` cycles, so quiet and flooded changes are measured side by
//! side in one run.
//!
//! Two sim panes (claude and codex profiles) run a script whose every turn is
//! `work N ms, finish`. Each cycle sends one prompt with `pane.send` and
//! measures two changes: `done → working` (the prompt is submitted) and
//! `working → done` (the turn finishes N ms later).
//! - Start: the sim stamps `<unix ns> <state>` into a trace file just before it
//!   writes the frame that shows a new state (`DROVER_SIM_TRACE`).
//! - End: the waiter has the answer. Cycles alternate between the real CLI (a
//!   `drover wait PANE --until S` process; the end is when its stdout line is
//!   read) and the library client (`Client::call("wait")` on a thread; the end
//!   is when the call returns).
//! - Each waiter is started before the change and confirmed blocked first:
//!   its thread sleeps in a read on its socket (`/proc/<tid>/syscall`), so the
//!   request has been sent. A waiter that was not blocked before the change
//!   is counted as late and left out.

#[path = "flood.rs"]
mod flood;
#[path = "herdr_fake.rs"]
mod herdr_fake;
#[path = "support.rs"]
mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{EXE, Supervisor, TraceCursor, stats};

const TARGET_P50_MS: f64 = 10.0;
const TARGET_P99_MS: f64 = 50.0;
/// The tmux backend's p50 target (its p99 target is the same as native's).
const TMUX_P50_MS: f64 = 15.0;
/// Native p99 while 8 other panes flood output.
const FLOOD_P99_MS: f64 = 20.0;
/// herdr 0.8.2's `agent wait` after a stub Claude screen changed (docs/performance.md).
const HERDR_P50_MS: f64 = 300.0;
const HERDR_RANGE_MS: (f64, f64) = (190.0, 305.0);
/// A waiter must be blocked within this long, or the run fails.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// Barrier timeout given to every waiter.
const WAIT_TIMEOUT_MS: u64 = 10_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Method {
    Cli,
    Lib,
}

impl Method {
    fn label(self) -> &'static str {
        match self {
            Method::Cli => "cli (drover wait)",
            Method::Lib => "library client",
        }
    }
}

struct Sample {
    backend: String,
    flood: bool,
    profile: &'static str,
    method: Method,
    state: &'static str,
    /// Sim wrote the frame → the waiter had the answer.
    total_ms: f64,
    /// Sim wrote the frame → the supervisor published the state (`since_ms`,
    /// millisecond resolution).
    publish_ms: f64,
}

struct Opts {
    cycles: usize,
    work_ms: u64,
    flood: usize,
    flood_block: usize,
    /// Bytes per second each flood pane prints (0: as fast as it can).
    flood_rate: usize,
    backends: Vec<String>,
}

/// What a flood pane prints, over and over (`yes`): a line with colours.
const FLOOD_LINE: &str = "\x1b[1;32mflood\x1b[0m \x1b[38;5;208m0123456789\x1b[0m abcdefghijklmnopqrstuvwxyz \x1b[7mABCDEFGHIJKLMNOPQRSTUVWXYZ\x1b[0m";

fn main() -> ExitCode {
    let o = Opts {
        cycles: support::arg("--cycles", 200),
        work_ms: support::arg("--work-ms", 160),
        flood: support::arg("--flood", 0),
        flood_block: support::arg("--flood-block", 10).max(1),
        flood_rate: support::arg("--flood-rate", 1 << 20),
        backends: support::backend()
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .map(String::from)
            .collect(),
    };
    // herdr panes run on the fake herdr unless `$DROVER_HERDR` names one.
    let r = herdr_fake::FakeHerdr::start_if_needed(&o.backends).and_then(|fake| {
        let r = run(&o);
        drop(fake);
        r
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench latency: {e}");
            ExitCode::from(1)
        }
    }
}

fn unix_ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn run(o: &Opts) -> Result<(), String> {
    let load_before = support::loadavg();
    let mut sup = Supervisor::start()?;
    sup.cleanup_on_signal(|| {})?;
    let script = sup.dir.path().join("turn.toml");
    std::fs::write(
        &script,
        format!(
            "[[turn]]\nsteps = [ {{ work = {} }}, \"finish\" ]\n",
            o.work_ms
        ),
    )
    .map_err(|e| e.to_string())?;
    let profiles = ["claude", "codex"];
    // (backend, profile, pane) in the order the cycles take them.
    let mut panes: Vec<(String, &'static str, String)> = Vec::new();
    let mut traces = Vec::new();
    for b in &o.backends {
        for p in profiles {
            let name = format!("lat-{p}-{b}");
            let trace = sup.dir.path().join(format!("trace-{p}-{b}.txt"));
            sup.sim_pane_on(
                &name,
                p,
                Some(&script),
                &[(drover::agent::sim::TRACE_ENV, trace.display().to_string())],
                b,
            )?;
            traces.push(TraceCursor::new(trace));
            panes.push((b.clone(), p, name));
        }
    }
    let names: Vec<String> = panes.iter().map(|p| p.2.clone()).collect();
    sup.wait_all(&names, &["idle"], Duration::from_secs(20))?;
    let flood = flood::Flood::start(&mut sup, o.flood, FLOOD_LINE, o.flood_rate)?;

    let mut lib = LibWaiter::start(&sup)?;
    let mut samples = Vec::new();
    let mut late = 0usize;
    let mut startups = Vec::new();
    let started = Instant::now();
    for i in 0..o.cycles {
        let k = i % panes.len();
        let method = if (i / panes.len()).is_multiple_of(2) {
            Method::Cli
        } else {
            Method::Lib
        };
        let flooding = o.flood > 0 && !(i / o.flood_block).is_multiple_of(2);
        flood.set(flooding);
        let (backend, profile, pane) = &panes[k];
        for state in ["working", "done"] {
            let (ready_at, mut cli) = match method {
                Method::Lib => (lib.request(pane, state)?, None),
                Method::Cli => {
                    let c = CliWaiter::start(&sup.state, pane, state)?;
                    startups.push(c.startup.as_secs_f64() * 1e3);
                    (c.ready_at, Some(c))
                }
            };
            if state == "working" {
                sup.call(
                    "pane.send",
                    json!({"pane": pane, "text": format!("bench prompt {i}")}),
                )?;
            }
            let (returned, snap) = match cli.as_mut() {
                Some(c) => c.finish()?,
                None => lib.finish()?,
            };
            if snap["state"] != state {
                return Err(format!("{pane}: waited for {state}, got {snap}"));
            }
            let changed = traces[k].next(state, Duration::from_secs(5))?;
            if unix_ns(ready_at) >= changed {
                late += 1;
                continue;
            }
            let since_ms = snap["since_ms"].as_u64().unwrap_or(0) as f64;
            samples.push(Sample {
                backend: backend.clone(),
                flood: flooding,
                profile,
                method,
                state,
                total_ms: (unix_ns(returned) - changed) as f64 / 1e6,
                publish_ms: since_ms - changed as f64 / 1e6,
            });
        }
    }
    let elapsed = started.elapsed();
    flood.set(true);
    drop(lib);
    drop(sup);
    report(o, &samples, late, &startups, elapsed, &load_before);
    Ok(())
}

fn report(
    o: &Opts,
    samples: &[Sample],
    late: usize,
    startups: &[f64],
    elapsed: Duration,
    load_before: &str,
) {
    println!("detection latency: sim writes a state change to its PTY → `drover wait` returns it");
    println!(
        "  {} cycles of `work {} ms, finish` on a claude and a codex sim pane per backend ({}), {:.1} s; \
         {} changes measured, {} left out (waiter not yet blocked)",
        o.cycles,
        o.work_ms,
        o.backends.join(", "),
        elapsed.as_secs_f64(),
        samples.len(),
        late
    );
    if o.flood > 0 {
        println!(
            "  {} native panes flood output (an ANSI line, {} each) in every other block of {} cycles",
            o.flood,
            if o.flood_rate == 0 {
                "as fast as drover takes it".to_string()
            } else {
                format!("{} KiB/s", o.flood_rate / 1024)
            },
            o.flood_block
        );
    }
    println!(
        "  {:<34} {:>5} {:>9} {:>9} {:>9}",
        "", "n", "p50 ms", "p99 ms", "max ms"
    );
    let row = |label: &str, f: &dyn Fn(&Sample) -> bool| {
        let (n, p50, p99, max) = stats(
            samples
                .iter()
                .filter(|s| f(s))
                .map(|s| s.total_ms)
                .collect(),
        );
        println!("  {label:<34} {n:>5} {p50:>9.2} {p99:>9.2} {max:>9.2}");
        (p50, p99, max)
    };
    let all = row("all", &|_| true);
    let cli = row("cli (drover wait process)", &|s| s.method == Method::Cli);
    row("library client", &|s| s.method == Method::Lib);
    let mut groups = Vec::new();
    for b in &o.backends {
        for flood in [false, true] {
            if flood && o.flood == 0 {
                continue;
            }
            let label = format!("{b}{}", if flood { " under flood" } else { "" });
            let r = row(&label, &|s| &s.backend == b && s.flood == flood);
            groups.push((b.clone(), flood, r));
        }
    }
    for m in [Method::Cli, Method::Lib] {
        for p in ["claude", "codex"] {
            for st in ["working", "done"] {
                row(&format!("{} {p} →{st}", m.label()), &|s| {
                    s.method == m && s.profile == p && s.state == st
                });
            }
        }
    }
    let (_, pub50, pub99, pubmax) = stats(samples.iter().map(|s| s.publish_ms).collect());
    println!(
        "  of which sim write → supervisor publishes (since_ms, ±1 ms): p50 {pub50:.1} p99 {pub99:.1} max {pubmax:.1}"
    );
    let (n, p50, _, max) = stats(startups.to_vec());
    println!(
        "  a `drover wait` process took p50 {p50:.1} ms, max {max:.1} ms from spawn to blocked on its socket (n = {n}; not part of the latency)"
    );
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "target: p50 ≤ {TARGET_P50_MS} ms: {} ({:.2}); p99 ≤ {TARGET_P99_MS} ms: {} ({:.2})",
        verdict(all.0 <= TARGET_P50_MS),
        all.0,
        verdict(all.1 <= TARGET_P99_MS),
        all.1
    );
    let quiet = |b: &str| groups.iter().find(|g| g.0 == b && !g.1).map(|g| g.2);
    for (b, flood, (p50, p99, _)) in &groups {
        match (b.as_str(), flood) {
            ("tmux", false) => println!(
                "target tmux: p50 ≤ {TMUX_P50_MS} ms: {} ({p50:.2}); p99 ≤ {TARGET_P99_MS} ms: {} ({p99:.2})",
                verdict(*p50 <= TMUX_P50_MS),
                verdict(*p99 <= TARGET_P99_MS)
            ),
            ("native", true) => println!(
                "target native under flood: p99 ≤ {FLOOD_P99_MS} ms: {} ({p99:.2})",
                verdict(*p99 <= FLOOD_P99_MS)
            ),
            _ => {}
        }
        let base = if *flood {
            quiet(b)
        } else if b != "native" {
            quiet("native")
        } else {
            None
        };
        if let Some(base) = base {
            println!(
                "  {b}{}: p50 {:.2}× and p99 {:.2}× {} in the same run",
                if *flood { " under flood" } else { "" },
                p50 / base.0,
                p99 / base.1,
                if *flood {
                    "its quiet changes"
                } else {
                    "native's"
                }
            );
        }
    }
    println!(
        "peer: herdr `agent wait` returned {}–{} ms after a change (p50 ≈ {HERDR_P50_MS} ms); \
         drover cli p50 {:.2} ms → herdr/drover = {:.0}×; drover's max {:.1} ms vs herdr's min {} ms",
        HERDR_RANGE_MS.0,
        HERDR_RANGE_MS.1,
        cli.0,
        HERDR_P50_MS / cli.0,
        all.2,
        HERDR_RANGE_MS.0
    );
    println!(
        "load (1 min) before {load_before}, after {}",
        support::loadavg()
    );
}

/// Wait until the thread at `task` (`/proc/<pid>` or `/proc/<pid>/task/<tid>`)
/// sleeps in a read on a socket: its request is sent and it waits for the answer.
fn wait_blocked(task: &Path, fds: &Path) -> Result<SystemTime, String> {
    let reads = [
        nix::libc::SYS_read,
        nix::libc::SYS_recvfrom,
        nix::libc::SYS_recvmsg,
    ];
    let deadline = Instant::now() + BLOCK_TIMEOUT;
    loop {
        let text = std::fs::read_to_string(task.join("syscall"))
            .map_err(|e| format!("{}: {e}", task.join("syscall").display()))?;
        let mut it = text.split_whitespace();
        let nr = it.next().and_then(|n| n.parse::<i64>().ok());
        let fd = it
            .next()
            .and_then(|f| i64::from_str_radix(f.trim_start_matches("0x"), 16).ok());
        if let (Some(nr), Some(fd)) = (nr, fd)
            && reads.contains(&nr)
            && std::fs::read_link(fds.join(fd.to_string()))
                .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        {
            return Ok(SystemTime::now());
        }
        if Instant::now() >= deadline {
            return Err(format!("{} never blocked on its socket", task.display()));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A `drover wait PANE --until STATE` process, blocked.
struct CliWaiter {
    child: Child,
    ready_at: SystemTime,
    /// From spawn to blocked on its socket.
    startup: Duration,
}

impl CliWaiter {
    fn start(state_dir: &Path, pane: &str, state: &str) -> Result<Self, String> {
        let spawned = Instant::now();
        let mut child = Command::new(EXE.as_str())
            .arg("--state-dir")
            .arg(state_dir)
            .arg("--no-autostart")
            .args(["wait", pane, "--until", state, "--timeout-ms"])
            .arg(WAIT_TIMEOUT_MS.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn drover wait: {e}"))?;
        let proc_dir = PathBuf::from(format!("/proc/{}", child.id()));
        match wait_blocked(&proc_dir, &proc_dir.join("fd")) {
            Ok(ready_at) => Ok(CliWaiter {
                child,
                ready_at,
                startup: spawned.elapsed(),
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// The moment its stdout line arrived, and the snapshot it printed.
    fn finish(&mut self) -> Result<(SystemTime, Value), String> {
        let out = self.child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let at = SystemTime::now();
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            let mut err = String::new();
            if let Some(mut e) = self.child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(format!("drover wait: {status}: {}", err.trim()));
        }
        let v = serde_json::from_str(&line).map_err(|e| format!("{e}: {line:?}"))?;
        Ok((at, v))
    }
}

impl Drop for CliWaiter {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

type Answer = Result<(SystemTime, Value), String>;

/// A thread with its own connection that runs one `wait` at a time.
struct LibWaiter {
    tid: i32,
    tx: Option<mpsc::Sender<(String, String)>>,
    rx: mpsc::Receiver<Answer>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LibWaiter {
    fn start(sup: &Supervisor) -> Result<Self, String> {
        let mut client = sup.connect()?;
        let (tx, req_rx) = mpsc::channel::<(String, String)>();
        let (ans_tx, rx) = mpsc::channel::<Answer>();
        let (tid_tx, tid_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let _ = tid_tx.send(nix::unistd::gettid().as_raw());
            for (pane, state) in req_rx {
                let r = client.call_raw(
                    "wait",
                    json!({"panes": [pane], "until": [state], "mode": "all",
                           "timeout_ms": WAIT_TIMEOUT_MS}),
                );
                let at = SystemTime::now();
                let ans = match r {
                    Ok(v) if v["matched"] == true => Ok((at, v["snapshots"][0].clone())),
                    Ok(v) => Err(format!("library wait did not match: {v}")),
                    Err(e) => Err(e.to_string()),
                };
                if ans_tx.send(ans).is_err() {
                    return;
                }
            }
        });
        let tid = tid_rx.recv().map_err(|e| e.to_string())?;
        Ok(LibWaiter {
            tid,
            tx: Some(tx),
            rx,
            thread: Some(thread),
        })
    }

    /// Start a barrier; returns once the thread is blocked on it.
    fn request(&mut self, pane: &str, state: &str) -> Result<SystemTime, String> {
        self.tx
            .as_ref()
            .ok_or("waiter stopped")?
            .send((pane.to_string(), state.to_string()))
            .map_err(|e| e.to_string())?;
        wait_blocked(
            Path::new(&format!("/proc/self/task/{}", self.tid)),
            Path::new("/proc/self/fd"),
        )
    }

    fn finish(&mut self) -> Answer {
        self.rx
            .recv_timeout(Duration::from_millis(WAIT_TIMEOUT_MS + 1000))
            .map_err(|e| e.to_string())?
    }
}

impl Drop for LibWaiter {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
