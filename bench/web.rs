//! `drover web` benchmark (docs/performance.md, "The web view").
//!
//! `cargo bench --bench web [-- --changes 40 --panes 16 --secs 60]`
//!
//! Update latency: one sim pane is sent `--changes` prompts in turn (each
//! makes it change state: working, then done); `drover events --follow`
//! and a client of `drover web`'s `/api/events` run side by side. For each
//! `pane.state` line, the delay from the supervisor's timestamp (`at`) to
//! the line on `events --follow`, and to the first `view` event whose seq
//! reaches it; p50/p99 of both and their ratio.
//!
//! Idle cost: `--panes` idle sim panes; the supervisor's CPU time and RSS
//! over `--secs` without `drover web`, then with `drover web` and one
//! `/api/events` client (its CPU and RSS beside).

#[path = "support.rs"]
mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};
use support::{EXE, Supervisor, cpu_ticks, ms_per_tick, percentile, status_kb};

const READY: Duration = Duration::from_secs(30);
/// Longer than the supervisor's settle re-checks after a burst.
const SETTLE: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    let changes: usize = support::arg("--changes", 40);
    let panes: usize = support::arg("--panes", 16);
    let secs: u64 = support::arg("--secs", 60);
    match latency(changes).and_then(|()| idle(panes, secs)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench web: {e}");
            ExitCode::from(1)
        }
    }
}

/// A child killed on drop.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ms_since_epoch(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

fn at_ms(line: &Value) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(line["at"].as_str()?)
        .ok()
        .map(|t| t.timestamp_micros() as f64 / 1000.0)
}

/// `drover web` on a free loopback port, and an `/api/events` client whose
/// snapshots (arrival, seq) come out of the channel.
fn web(sup: &Supervisor) -> Result<(Kill, mpsc::Receiver<(SystemTime, u64)>), String> {
    let mut child = Command::new(EXE.as_str())
        .arg("--state-dir")
        .arg(&sup.state)
        .args(["web", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("drover web: {e}"))?;
    let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let child = Kill(child);
    let mut url = String::new();
    out.read_line(&mut url).map_err(|e| e.to_string())?;
    let url = url
        .trim()
        .strip_prefix("drover web: http://")
        .ok_or("no URL")?;
    let (addr, token) = url.split_once("/?token=").ok_or("no token")?;
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let req =
        format!("GET /api/events HTTP/1.0\r\nHost: {addr}\r\nCookie: drover_web={token}\r\n\r\n");
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _keep = out;
        let mut r = BufReader::new(s);
        let mut line = String::new();
        while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                let seq = serde_json::from_str::<Value>(data)
                    .ok()
                    .and_then(|v| v["seq"].as_u64());
                if tx.send((SystemTime::now(), seq.unwrap_or(0))).is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
    rx.recv_timeout(READY)
        .map_err(|_| "no first view event".to_string())?;
    Ok((child, rx))
}

fn latency(changes: usize) -> Result<(), String> {
    let mut sup = Supervisor::start()?;
    sup.cleanup_on_signal(|| {})?;
    sup.sim_pane("lat", "claude", None, &[])?;
    sup.wait_all(&["lat".into()], &["idle"], READY)?;
    let mut follow = Command::new(EXE.as_str())
        .arg("--state-dir")
        .arg(&sup.state)
        .args(["events", "--follow", "--jsonl"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("events --follow: {e}"))?;
    let out = follow.stdout.take().ok_or("no stdout")?;
    let _follow = Kill(follow);
    let (ev_tx, ev_rx) = mpsc::channel::<(SystemTime, Value)>();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && ev_tx.send((SystemTime::now(), v)).is_err()
            {
                return;
            }
        }
    });
    let (_web, web_rx) = web(&sup)?;
    let mut state_lines: Vec<(f64, f64, u64)> = Vec::new();
    for i in 0..changes {
        sup.call(
            "deliver",
            json!({"pane": "lat", "text": format!("change {i}"), "ready_timeout_ms": 10_000, "confirm_timeout_ms": 10_000}),
        )?;
        sup.wait_all(&["lat".into()], &["done", "idle"], READY)?;
    }
    // Every line of the run, then every view up to the last seq.
    let mut last_seq = 0;
    while let Ok((t, v)) = ev_rx.recv_timeout(SETTLE) {
        if v["kind"] == "pane.state"
            && let (Some(at), Some(seq)) = (at_ms(&v), v["seq"].as_u64())
        {
            state_lines.push((at, ms_since_epoch(t), seq));
            last_seq = last_seq.max(seq);
        }
    }
    let mut views: Vec<(f64, u64)> = Vec::new();
    while views.last().is_none_or(|v| v.1 < last_seq) {
        match web_rx.recv_timeout(READY) {
            Ok((t, seq)) => views.push((ms_since_epoch(t), seq)),
            Err(_) => return Err(format!("no view reached seq {last_seq}")),
        }
    }
    let (mut ev_ms, mut web_ms) = (Vec::new(), Vec::new());
    for (at, arrived, seq) in &state_lines {
        let Some((t, _)) = views.iter().find(|v| v.1 >= *seq) else {
            continue;
        };
        ev_ms.push(arrived - at);
        web_ms.push(t - at);
    }
    ev_ms.sort_by(f64::total_cmp);
    web_ms.sort_by(f64::total_cmp);
    let p = |v: &[f64], q: f64| percentile(v, q);
    println!(
        "update latency over {} state changes (ms from the supervisor's timestamp):",
        ev_ms.len()
    );
    println!(
        "  events --follow  p50 {:6.1}  p99 {:6.1}",
        p(&ev_ms, 50.0),
        p(&ev_ms, 99.0)
    );
    println!(
        "  web /api/events  p50 {:6.1}  p99 {:6.1}  (ratio p50 {:.1}x, p99 {:.1}x)",
        p(&web_ms, 50.0),
        p(&web_ms, 99.0),
        p(&web_ms, 50.0) / p(&ev_ms, 50.0).max(0.001),
        p(&web_ms, 99.0) / p(&ev_ms, 99.0).max(0.001)
    );
    Ok(())
}

/// CPU ms of `pid` over `secs`, and its RSS (MB) at the end.
fn window(pids: &[u32], secs: u64) -> Vec<(f64, f64)> {
    let before: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p).unwrap_or(0)).collect();
    std::thread::sleep(Duration::from_secs(secs));
    pids.iter()
        .zip(before)
        .map(|(p, b)| {
            let cpu = cpu_ticks(*p).unwrap_or(b).saturating_sub(b) as f64 * ms_per_tick();
            let rss = status_kb(*p, "VmRSS").unwrap_or(0) as f64 / 1024.0;
            (cpu, rss)
        })
        .collect()
}

fn idle(panes: usize, secs: u64) -> Result<(), String> {
    let mut sup = Supervisor::start()?;
    sup.cleanup_on_signal(|| {})?;
    let names: Vec<String> = (0..panes).map(|i| format!("idle{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        sup.sim_pane(n, support::profile(i), None, &[])?;
    }
    sup.wait_all(&names, &["idle"], READY)?;
    std::thread::sleep(SETTLE);
    let without = window(&[sup.pid], secs);
    let (web_child, _rx) = web(&sup)?;
    let web_pid = web_child.0.id();
    std::thread::sleep(SETTLE);
    let with = window(&[sup.pid, web_pid], secs);
    println!("idle cost over {panes} idle sim panes, {secs} s:");
    println!(
        "  supervisor alone            CPU {:7.1} ms  RSS {:6.1} MB",
        without[0].0, without[0].1
    );
    println!(
        "  supervisor with drover web  CPU {:7.1} ms  RSS {:6.1} MB",
        with[0].0, with[0].1
    );
    println!(
        "  drover web + 1 SSE client   CPU {:7.1} ms  RSS {:6.1} MB",
        with[1].0, with[1].1
    );
    Ok(())
}
