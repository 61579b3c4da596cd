//! Signal → barrier latency beside the screen path, in one run
//! (docs/performance.md, "Signals"): how long after an agent's `Stop` (a
//! `turn_ended` note sent with the `signal` op from inside the pane) a
//! blocked `wait --until done` returns, against how long after the sim
//! draws its `done` frame the same barrier returns on a pane without signals.
//!
//! `cargo bench --bench signals [-- --cycles 100 --work-ms 160]`
//!
//! Two sim panes (claude profile): `screen` runs the sim alone; `signal` runs
//! it with a small python3 client beside it in the pane (a child of the
//! pane's process) that sends each line of a fifo as a `signal` request on
//! one connection, stamping `<unix ns> <signal>` into a trace file just
//! before it writes the request. A cycle on `screen` sends a prompt, waits
//! for working, then measures sim's `done` frame → the barrier's return; a
//! cycle on `signal` sends `prompt_submitted` (working, by the turn-open
//! rule), then measures `turn_ended` written → the barrier's return, and
//! also sends `signal` a prompt to measure the screen path on a pane whose
//! agent sends signals (fusion on, the screen deciding). Each
//! waiter (the library client on a thread) is confirmed blocked on its
//! socket before the change; one that was not is left out.

#[path = "support.rs"]
mod support;

use drover::daemon::Client;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{EXE, Supervisor, TraceCursor, stats};

/// The goal for a `Stop` reaching a barrier (issue 41).
const STOP_P50_MS: f64 = 5.0;
const WAIT_TIMEOUT_MS: u64 = 10_000;

const HELPER: &str = r#"import json, socket, struct, sys, time
sock, fifo, trace = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
out = open(trace, "a", buffering=1)
def read(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit(3)
        b += c
    return b
i = 0
for line in open(fifo):
    note = json.loads(line)
    i += 1
    body = json.dumps({"v": 1, "id": i, "op": "signal", "args": note}).encode()
    out.write("%d %s\n" % (time.time_ns(), note["signal"]))
    s.sendall(struct.pack(">I", len(body) + 1) + b"\x01" + body)
    (n,) = struct.unpack(">I", read(4))
    read(n)
"#;

fn main() -> ExitCode {
    match run(
        support::arg("--cycles", 100),
        support::arg("--work-ms", 160),
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench signals: {e}");
            ExitCode::from(1)
        }
    }
}

fn unix_ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn run(cycles: usize, work_ms: u64) -> Result<(), String> {
    let load_before = support::loadavg();
    let mut sup = Supervisor::start()?;
    sup.cleanup_on_signal(|| {})?;
    let dir = sup.dir.path().to_path_buf();
    let script = dir.join("turn.toml");
    let io = |e: std::io::Error| e.to_string();
    std::fs::write(
        &script,
        format!("[[turn]]\nsteps = [ {{ work = {work_ms} }}, \"finish\" ]\n"),
    )
    .map_err(io)?;
    let screen_trace = dir.join("trace-screen.txt");
    let mixed_trace = dir.join("trace-mixed.txt");
    sup.sim_pane(
        "screen",
        "claude",
        Some(&script),
        &[(
            drover::agent::sim::TRACE_ENV,
            screen_trace.display().to_string(),
        )],
    )?;
    let (helper, fifo, sig_trace) = (
        dir.join("helper.py"),
        dir.join("notes.fifo"),
        dir.join("trace-signal.txt"),
    );
    std::fs::write(&helper, HELPER).map_err(io)?;
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map_err(io)?;
    if !st.success() {
        return Err("mkfifo failed".into());
    }
    let q = |p: &Path| format!("'{}'", p.display());
    let inner = format!(
        "python3 {} {} {} {} & exec {} sim-agent --profile claude --script {}",
        q(&helper),
        q(&sup.socket),
        q(&fifo),
        q(&sig_trace),
        q(Path::new(EXE.as_str())),
        q(&script)
    );
    sup.call(
        "pane.new",
        json!({"spec": {"name": "signal", "argv": ["sh", "-c", inner],
            "env": [[drover::agent::sim::TRACE_ENV, mixed_trace.display().to_string()]],
            "cwd": dir, "cols": 120, "rows": 40, "agent": "sim"},
            "backend": support::backend()}),
    )?;
    let mut notes = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .map_err(io)?;
    let names = ["screen".to_string(), "signal".to_string()];
    sup.wait_all(&names, &["idle"], Duration::from_secs(20))?;
    let mut screen_cur = TraceCursor::new(screen_trace);
    let mut sig_cur = TraceCursor::new(sig_trace);
    let mut mixed_cur = TraceCursor::new(mixed_trace);
    let mut mixed_ms = Vec::new();
    let mut waiter = Waiter::start(&sup)?;
    let (mut screen_ms, mut signal_ms, mut late) = (Vec::new(), Vec::new(), 0usize);
    let started = Instant::now();
    for i in 0..cycles {
        // The screen path.
        sup.call(
            "pane.send",
            json!({"pane": "screen", "text": format!("bench {i}")}),
        )?;
        sup.wait_all(&names[..1], &["working"], Duration::from_secs(5))?;
        let ready = waiter.request("screen")?;
        let (back, snap) = waiter.finish()?;
        check(&snap, "screen")?;
        let changed = screen_cur.next("done", Duration::from_secs(5))?;
        if unix_ns(ready) >= changed {
            late += 1;
        } else {
            screen_ms.push((unix_ns(back) - changed) as f64 / 1e6);
        }
        // The screen path on the pane whose agent sends signals (its ledger
        // holds the last turn's end): fusion on, the screen deciding.
        sup.call(
            "pane.send",
            json!({"pane": "signal", "text": format!("bench {i}")}),
        )?;
        sup.wait_all(&names[1..], &["working"], Duration::from_secs(5))?;
        let ready = waiter.request("signal")?;
        let (back, snap) = waiter.finish()?;
        check(&snap, "signal")?;
        let changed = mixed_cur.next("done", Duration::from_secs(5))?;
        if unix_ns(ready) >= changed {
            late += 1;
        } else {
            mixed_ms.push((unix_ns(back) - changed) as f64 / 1e6);
        }
        // The signal path.
        writeln!(notes, r#"{{"source":"hook","signal":"prompt_submitted"}}"#).map_err(io)?;
        sup.wait_all(&names[1..], &["working"], Duration::from_secs(5))?;
        let ready = waiter.request("signal")?;
        writeln!(notes, r#"{{"source":"hook","signal":"turn_ended"}}"#).map_err(io)?;
        let (back, snap) = waiter.finish()?;
        check(&snap, "signal")?;
        let sent = sig_cur.next("turn_ended", Duration::from_secs(5))?;
        if unix_ns(ready) >= sent {
            late += 1;
        } else {
            signal_ms.push((unix_ns(back) - sent) as f64 / 1e6);
        }
    }
    let elapsed = started.elapsed();
    drop(waiter);
    drop(sup);
    report(
        cycles,
        work_ms,
        [screen_ms, mixed_ms, signal_ms],
        late,
        elapsed,
        &load_before,
    );
    Ok(())
}

fn check(snap: &Value, pane: &str) -> Result<(), String> {
    if snap["state"] != "done" {
        return Err(format!("{pane}: waited for done, got {snap}"));
    }
    Ok(())
}

fn report(
    cycles: usize,
    work_ms: u64,
    [screen, mixed, signal]: [Vec<f64>; 3],
    late: usize,
    elapsed: Duration,
    load_before: &str,
) {
    println!("state change → `wait --until done` returns (library client), one run, interleaved");
    println!(
        "  {cycles} cycles of `work {work_ms} ms, finish` (screen) and prompt_submitted/turn_ended (signal), {:.1} s; {late} left out (waiter not yet blocked)",
        elapsed.as_secs_f64()
    );
    println!(
        "  {:<40} {:>5} {:>9} {:>9} {:>9}",
        "", "n", "p50 ms", "p99 ms", "max ms"
    );
    let row = |label: &str, v: Vec<f64>| {
        let r = stats(v);
        println!(
            "  {label:<40} {:>5} {:>9.2} {:>9.2} {:>9.2}",
            r.0, r.1, r.2, r.3
        );
        r
    };
    let s = row("screen, no signals: done drawn → barrier", screen);
    let m = row("screen, signals on: done drawn → barrier", mixed);
    let g = row("signal: turn_ended sent → barrier", signal);
    println!(
        "  signal/screen: p50 {:.2}×, p99 {:.2}×; screen with signals on/off: p50 {:.2}×, p99 {:.2}×",
        g.1 / s.1,
        g.2 / s.2,
        m.1 / s.1,
        m.2 / s.2
    );
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "target: a Stop reaches a barrier within {STOP_P50_MS} ms p50: {} ({:.2}); never slower than the screen (p50): {}",
        verdict(g.1 <= STOP_P50_MS),
        g.1,
        verdict(g.1 <= s.1)
    );
    println!(
        "load (1 min) before {load_before}, after {}",
        support::loadavg()
    );
}

/// A `wait` on its own connection, on a thread, confirmed blocked on its
/// socket (`/proc/self/task/<tid>/syscall`) before the change is made.
struct Waiter {
    tid: i32,
    tx: Option<mpsc::Sender<String>>,
    rx: mpsc::Receiver<Result<(SystemTime, Value), String>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Waiter {
    fn start(sup: &Supervisor) -> Result<Self, String> {
        let mut client: Client = sup.connect()?;
        let (tx, req_rx) = mpsc::channel::<String>();
        let (ans_tx, rx) = mpsc::channel();
        let (tid_tx, tid_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let _ = tid_tx.send(nix::unistd::gettid().as_raw());
            for pane in req_rx {
                let r = client
                    .call_raw(
                        "wait",
                        json!({"panes": [pane], "until": ["done"], "timeout_ms": WAIT_TIMEOUT_MS}),
                    )
                    .map_err(|e| e.to_string())
                    .map(|v| (SystemTime::now(), v["snapshots"][0].clone()));
                if ans_tx.send(r).is_err() {
                    return;
                }
            }
        });
        let tid = tid_rx.recv().map_err(|e| e.to_string())?;
        Ok(Waiter {
            tid,
            tx: Some(tx),
            rx,
            thread: Some(thread),
        })
    }

    /// Send the request; returns once the thread is blocked reading the answer.
    fn request(&mut self, pane: &str) -> Result<SystemTime, String> {
        self.tx
            .as_ref()
            .ok_or("no waiter")?
            .send(pane.to_string())
            .map_err(|e| e.to_string())?;
        let task = format!("/proc/self/task/{}/syscall", self.tid);
        let reads = [
            nix::libc::SYS_read,
            nix::libc::SYS_recvfrom,
            nix::libc::SYS_recvmsg,
        ];
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&task).map_err(|e| e.to_string())?;
            let nr = text
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<i64>().ok());
            if nr.is_some_and(|n| reads.contains(&n)) {
                return Ok(SystemTime::now());
            }
            if Instant::now() >= deadline {
                return Err("the waiter never blocked on its socket".into());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn finish(&mut self) -> Result<(SystemTime, Value), String> {
        self.rx
            .recv_timeout(Duration::from_millis(WAIT_TIMEOUT_MS + 5_000))
            .map_err(|e| e.to_string())?
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
