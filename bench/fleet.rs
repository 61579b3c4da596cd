//! Fleet benchmark (docs/performance.md, "Fleet"), against a real
//! nats-server on loopback with a user and password per host:
//!
//! - **Event latency, host → the coordinator's feed.** Hosts A and B are
//!   two supervisors joined to fleet `lab`. A sim pane on A runs a script
//!   whose every turn is `work N ms, finish`; each cycle sends one prompt and
//!   measures two state changes (`working`, `done`). Start: the sim stamps
//!   `<unix ns> <state>` into a trace file just before it writes the frame
//!   (`DROVER_SIM_TRACE`). End: the line of that `pane.state` event is read
//!   from the stdout of `drover events --follow --fleet lab` run against B's
//!   state dir (what a coordinator follows) and, for the same event in the
//!   same run, of `drover events --follow` on A (the local feed). The two are
//!   printed side by side with their ratio, and per event the difference
//!   (what the hop through NATS JetStream adds).
//! - **Idle CPU of a joined host**: utime + stime of A's supervisor from
//!   `/proc/<pid>/stat` over a window (60 s; `DROVER_BENCH_FLEET_IDLE_S`
//!   shortens it), beside an unjoined supervisor over the same window; the
//!   nats-server's own CPU is shown too. Neither has a pane.
//!
//! `cargo bench --bench fleet [-- --cycles 100 --work-ms 40]`

#[path = "nats.rs"]
mod nats;
#[path = "support.rs"]
mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{EXE, Supervisor, TraceCursor, cpu_ticks, ms_per_tick, stats};

/// Goals: an event reaches the coordinator's feed in p50 ≤ 5 ms, p99 ≤ 25 ms.
const TARGET_P50_MS: f64 = 5.0;
const TARGET_P99_MS: f64 = 25.0;
/// An idle joined host: ≤ 1 % of one core.
const TARGET_CPU_PCT: f64 = 1.0;
/// The idle window unless `DROVER_BENCH_FLEET_IDLE_S` says otherwise.
const IDLE_SECS: u64 = 60;
/// After joining, before the idle window: the join's own work is done.
const SETTLE: Duration = Duration::from_secs(2);
/// How long one event may take to show before the run fails.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);
/// The bench's NATS users (one per host), for a server that lives only as
/// long as the bench.
const USERS: [(&str, &str); 2] = [("bench-a", "bench-pw-a-7Qx"), ("bench-b", "bench-pw-b-3Kz")];
const PANE: &str = "fleet-sim";

struct Opts {
    cycles: usize,
    work_ms: u64,
    idle_secs: u64,
}

fn main() -> ExitCode {
    let o = Opts {
        cycles: support::arg("--cycles", 100),
        work_ms: support::arg("--work-ms", 40),
        idle_secs: std::env::var("DROVER_BENCH_FLEET_IDLE_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(IDLE_SECS),
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench fleet: {e}");
            ExitCode::from(1)
        }
    }
}

/// `fleet join lab` for `sup` as host `host`, the password in a 0600 file.
fn join(sup: &Supervisor, url: &str, host: &str, (user, pw): (&str, &str)) -> Result<(), String> {
    let f = sup.dir.path().join("nats.pw");
    std::fs::write(&f, format!("{pw}\n")).map_err(|e| format!("password file: {e}"))?;
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("password file: {e}"))?;
    let out = Command::new(EXE.as_str())
        .arg("--state-dir")
        .arg(&sup.state)
        .args(["fleet", "join", "lab", "--nats", url, "--host", host])
        .args(["--user", user, "--password-file"])
        .arg(&f)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("drover fleet join: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "fleet join {host}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn run(o: &Opts) -> Result<(), String> {
    let load_before = support::loadavg();
    let nats = nats::Nats::start(&USERS)?;
    let mut a = Supervisor::start()?;
    let b = Supervisor::start()?;
    let lone = Supervisor::start()?;
    let (b_sock, lone_sock, nats_pid) = (b.socket.clone(), lone.socket.clone(), nats.pid());
    a.cleanup_on_signal(move || {
        for s in [b_sock, lone_sock] {
            if let Ok(mut c) = drover::daemon::Client::connect(&s) {
                let _ = c.call_raw("shutdown", json!({}));
            }
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(nats_pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    })?;
    join(&a, &nats.url(), "host-a", USERS[0])?;
    join(&b, &nats.url(), "host-b", USERS[1])?;

    let idle = idle(&[a.pid, lone.pid, nats.pid()], o.idle_secs)?;
    let samples = latency(&mut a, &b, o)?;
    drop(lone);
    drop(b);
    drop(a);
    drop(nats);
    report(o, &samples, &idle, &load_before);
    Ok(())
}

/// Each process over the idle window.
struct Idle {
    /// utime + stime, ms (clock ticks).
    cpu_ms: Vec<f64>,
    /// Run time of the threads alive at both ends (schedstat), ms.
    sched_ms: Vec<f64>,
    /// Context switches of those threads.
    woke: Vec<u64>,
    window: Duration,
}

/// Read each process's CPU over a window of `secs`.
fn idle(pids: &[u32], secs: u64) -> Result<Idle, String> {
    std::thread::sleep(SETTLE);
    let read = |p: u32| cpu_ticks(p).ok_or(format!("/proc/{p}/stat unreadable"));
    let tasks = |p: u32| support::task_stats(p);
    let before: Vec<u64> = pids.iter().map(|&p| read(p)).collect::<Result<_, _>>()?;
    let before_tasks: Vec<_> = pids.iter().map(|&p| tasks(p)).collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let after: Vec<u64> = pids.iter().map(|&p| read(p)).collect::<Result<_, _>>()?;
    let window = t0.elapsed();
    let deltas: Vec<_> = pids
        .iter()
        .zip(&before_tasks)
        .map(|(&p, b)| support::task_delta(b, &tasks(p)))
        .collect();
    let tick = ms_per_tick();
    Ok(Idle {
        cpu_ms: before
            .iter()
            .zip(&after)
            .map(|(b, a)| a.saturating_sub(*b) as f64 * tick)
            .collect(),
        sched_ms: deltas.iter().map(|d| d.0 as f64 / 1e6).collect(),
        woke: deltas.iter().map(|d| d.1).collect(),
        window,
    })
}

/// A `drover events --follow …` process; each line it prints, stamped when read.
struct Follower {
    child: Child,
    rx: mpsc::Receiver<(SystemTime, Value)>,
}

impl Follower {
    fn start(state: &Path, args: &[&str]) -> Result<Follower, String> {
        let mut child = Command::new(EXE.as_str())
            .arg("--state-dir")
            .arg(state)
            .arg("--no-autostart")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("drover events: {e}"))?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let at = SystemTime::now();
                let Ok(line) = line else { return };
                let v = serde_json::from_str(&line).unwrap_or(Value::Null);
                if tx.send((at, v)).is_err() {
                    return;
                }
            }
        });
        Ok(Follower { child, rx })
    }

    /// When the next `pane.state` line of [`PANE`] into `state` was read.
    fn until(&self, state: &str, what: &str) -> Result<SystemTime, String> {
        let deadline = Instant::now() + EVENT_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, v) = self.rx.recv_timeout(left).map_err(|_| {
                format!("{what}: no `{state}` event of {PANE} in {EVENT_TIMEOUT:?}")
            })?;
            if v["kind"] == "pane.state" && v["pane"] == PANE && v["state"] == state {
                return Ok(at);
            }
        }
    }

    /// Wait for its first line: it is reading (replayed events come first).
    fn ready(&self, what: &str) -> Result<(), String> {
        self.rx
            .recv_timeout(Duration::from_secs(20))
            .map(drop)
            .map_err(|_| format!("{what} printed nothing in 20 s"))
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One state change: sim write → the local feed printed it, → the fleet feed printed it (ms).
struct Sample {
    state: &'static str,
    local_ms: f64,
    fleet_ms: f64,
}

fn unix_ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn latency(a: &mut Supervisor, b: &Supervisor, o: &Opts) -> Result<Vec<Sample>, String> {
    let script = a.dir.path().join("turn.toml");
    std::fs::write(
        &script,
        format!(
            "[[turn]]\nsteps = [ {{ work = {} }}, \"finish\" ]\n",
            o.work_ms
        ),
    )
    .map_err(|e| e.to_string())?;
    let trace = a.dir.path().join("trace.txt");
    a.sim_pane(
        PANE,
        "claude",
        Some(&script),
        &[(drover::agent::sim::TRACE_ENV, trace.display().to_string())],
    )?;
    a.wait_all(&[PANE.to_string()], &["idle"], Duration::from_secs(20))?;
    let mut trace = TraceCursor::new(trace);
    // Both replay from their start, so neither misses an event it was
    // started too late for; they are live once their first line shows.
    let filter = ["--jsonl", "--pane", PANE, "--kind", "pane.state"];
    let mut args = vec!["events", "--follow", "--since", "0"];
    args.extend(filter);
    let local = Follower::start(&a.state, &args)?;
    args.extend(["--fleet", "lab"]);
    let fleet = Follower::start(&b.state, &args)?;
    local.ready("the local feed")?;
    fleet.ready("the fleet feed")?;
    let mut samples = Vec::new();
    for i in 0..o.cycles {
        a.call(
            "pane.send",
            json!({"pane": PANE, "text": format!("bench prompt {i}")}),
        )?;
        for state in ["working", "done"] {
            let changed = trace.next(state, EVENT_TIMEOUT)?;
            let l = local.until(state, "the local feed")?;
            let f = fleet.until(state, "the fleet feed (host B)")?;
            samples.push(Sample {
                state,
                local_ms: (unix_ns(l) - changed) as f64 / 1e6,
                fleet_ms: (unix_ns(f) - changed) as f64 / 1e6,
            });
        }
    }
    Ok(samples)
}

fn report(o: &Opts, samples: &[Sample], idle: &Idle, load_before: &str) {
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "fleet event latency: a sim on host A writes a state change → its pane.state line is read from \
         `drover events --follow` on A (local feed) and from `drover events --follow --fleet lab` on host B"
    );
    println!(
        "  {} cycles of `work {} ms, finish`, {} changes; nats-server on loopback, user and password per host",
        o.cycles,
        o.work_ms,
        samples.len()
    );
    println!(
        "  {:<36} {:>5} {:>9} {:>9} {:>9}",
        "", "n", "p50 ms", "p99 ms", "max ms"
    );
    let row = |label: &str, v: Vec<f64>| {
        let (n, p50, p99, max) = stats(v);
        println!("  {label:<36} {n:>5} {p50:>9.2} {p99:>9.2} {max:>9.2}");
        (p50, p99)
    };
    let local = row(
        "local feed (host A)",
        samples.iter().map(|s| s.local_ms).collect(),
    );
    let fleet = row(
        "fleet feed (host B, through NATS)",
        samples.iter().map(|s| s.fleet_ms).collect(),
    );
    for st in ["working", "done"] {
        row(
            &format!("fleet feed →{st}"),
            samples
                .iter()
                .filter(|s| s.state == st)
                .map(|s| s.fleet_ms)
                .collect(),
        );
    }
    row(
        "fleet − local, per event (the hop)",
        samples.iter().map(|s| s.fleet_ms - s.local_ms).collect(),
    );
    println!(
        "  fleet/local: p50 {:.2}×, p99 {:.2}× in the same run",
        fleet.0 / local.0,
        fleet.1 / local.1
    );
    println!(
        "target: fleet feed p50 ≤ {TARGET_P50_MS} ms: {} ({:.2}); p99 ≤ {TARGET_P99_MS} ms: {} ({:.2})",
        verdict(fleet.0 <= TARGET_P50_MS),
        fleet.0,
        verdict(fleet.1 <= TARGET_P99_MS),
        fleet.1
    );
    let (cpu, woke) = (&idle.cpu_ms, &idle.woke);
    let secs = idle.window.as_secs_f64();
    let pct = |ms: f64| ms / (secs * 1000.0) * 100.0;
    println!(
        "idle: {secs:.1} s, no pane, after joining and {} s to settle (heartbeat every 5 s)",
        SETTLE.as_secs()
    );
    println!(
        "  {:<36} {:>8} {:>11} {:>9} {:>9}",
        "", "CPU ms", "% of a core", "sched ms", "wakeups"
    );
    let labels = [
        "joined supervisor (host A)",
        "unjoined supervisor",
        "nats-server",
    ];
    for (i, label) in labels.iter().enumerate() {
        println!(
            "  {label:<36} {:>8.0} {:>10.3}% {:>9.2} {:>9}",
            cpu[i],
            pct(cpu[i]),
            idle.sched_ms[i],
            woke[i]
        );
    }
    println!(
        "  (CPU from /proc/<pid>/stat utime+stime, {:.0} ms ticks; sched ms and wakeups: run time (schedstat) and context switches of the threads alive at both ends)",
        ms_per_tick()
    );
    println!(
        "target: joined host ≤ {TARGET_CPU_PCT} % of a core: {} ({:.3} %; unjoined {:.3} %)",
        verdict(pct(cpu[0]) <= TARGET_CPU_PCT),
        pct(cpu[0]),
        pct(cpu[1])
    );
    println!(
        "load (1 min) before {load_before}, after {}",
        support::loadavg()
    );
}
