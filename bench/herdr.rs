//! What the herdr backend costs next to the native one (docs/performance.md,
//! docs/herdr.md), on the real herdr `$DROVER_HERDR` names (started headless
//! on a private socket), else the fake:
//! - **Idle**: N idle sim panes on the herdr backend and N on the native
//!   one, each set under its own supervisor; each supervisor's CPU time over
//!   the same window, and the herdr server's.
//! - **Ingest** (`--mib M`, 0 to skip): a pane `cat`ting M MiB of ANSI-heavy
//!   output until it has all been taken in — native (until drover's exit,
//!   published once the PTY is drained into the screen), the herdr backend
//!   (until drover's exit, published once herdr shows the wrapper's exit
//!   title: herdr has parsed every byte), and plain herdr (a pane made over
//!   herdr's socket, until its title shows the end) — interleaved, `--runs`
//!   times each, medians.
//!
//! `DROVER_HERDR=… cargo bench --bench herdr [-- --panes 16 --secs 20 --mib 64 --runs 3]`
//!
//! An idle herdr pane's reader sleeps on inotify of the pane's terminal, and
//! herdr's state comes from one `events.subscribe` connection: neither asks
//! herdr anything while nothing is written. Detection latency is measured by
//! the latency bench, native and herdr pairs interleaved in one run:
//! `DROVER_HERDR=… DROVER_BENCH_BACKEND=native,herdr cargo bench --bench latency`.

#[path = "herdr_fake.rs"]
mod herdr_fake;
#[path = "support.rs"]
mod support;

use std::process::ExitCode;
use std::time::Duration;
use support::{Supervisor, cpu_ticks, ms_per_tick, profile, status_kb};

/// Longer than the supervisor's last settle re-check after a burst.
const SETTLE: Duration = Duration::from_millis(2000);
/// How long the panes get to start and draw their idle screens.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one ingest run may take.
const INGEST_TIMEOUT: Duration = Duration::from_secs(300);

fn main() -> ExitCode {
    let panes = support::arg("--panes", 16usize);
    let secs = support::arg("--secs", 20u64);
    let mib = support::arg("--mib", 64usize);
    let runs = support::arg("--runs", 3usize);
    let fake = match herdr_fake::FakeHerdr::start_if_needed(&["herdr".to_string()]).and_then(|f| {
        f.ok_or_else(|| {
            "HERDR_SOCKET_PATH is set: unset it, the bench starts its own herdr".to_string()
        })
    }) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("bench herdr: {e}");
            return ExitCode::from(1);
        }
    };
    let r = run(panes, secs, fake.pid).and_then(|()| ingest(mib, runs));
    drop(fake);
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench herdr: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(panes: usize, secs: u64, fake_pid: u32) -> Result<(), String> {
    let load_before = support::loadavg();
    let backends = ["native", "herdr"];
    let mut sups = Vec::new();
    for b in backends {
        let mut sup = Supervisor::start()?;
        let mut names = Vec::new();
        for i in 0..panes {
            let name = format!("idle-{b}-{i:02}");
            sup.sim_pane_on(&name, profile(i), None, &[], b)?;
            names.push(name);
        }
        sups.push((b, sup, names));
    }
    for (b, sup, names) in &mut sups {
        sup.wait_all(names, &["idle", "done"], READY_TIMEOUT)
            .map_err(|e| format!("{b}: {e}"))?;
    }
    std::thread::sleep(SETTLE);
    let pids: Vec<u32> = sups
        .iter()
        .map(|(_, s, _)| s.pid)
        .chain([fake_pid])
        .collect();
    let before: Vec<u64> = pids.iter().map(|&p| cpu_ticks(p).unwrap_or(0)).collect();
    std::thread::sleep(Duration::from_secs(secs));
    let after: Vec<u64> = pids.iter().map(|&p| cpu_ticks(p).unwrap_or(0)).collect();
    let tick = ms_per_tick();
    let cpu: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| a.saturating_sub(*b) as f64 * tick)
        .collect();
    let window_ms = secs as f64 * 1000.0;
    println!(
        "bench herdr: {panes} idle sim panes per backend, {secs} s window (load before: {load_before}, after: {})",
        support::loadavg()
    );
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "", "CPU ms", "% of core", "RSS MB"
    );
    for (i, (b, s, _)) in sups.iter().enumerate() {
        println!(
            "{:<28} {:>10.0} {:>10.2} {:>10.1}",
            format!("supervisor, {b} panes"),
            cpu[i],
            cpu[i] / window_ms * 100.0,
            status_kb(s.pid, "VmRSS").unwrap_or(0) as f64 / 1024.0
        );
    }
    println!(
        "{:<28} {:>10.0} {:>10.2} {:>10.1}",
        if std::env::var_os("DROVER_HERDR").is_some() {
            "herdr server"
        } else {
            "fake herdr (Python)"
        },
        cpu[2],
        cpu[2] / window_ms * 100.0,
        status_kb(fake_pid, "VmRSS").unwrap_or(0) as f64 / 1024.0
    );
    println!(
        "herdr/native supervisor CPU: {} (native {:.0} ms, herdr {:.0} ms)",
        if cpu[0] > 0.0 {
            format!("{:.1}×", cpu[1] / cpu[0])
        } else {
            "∞ (native used 0 ms)".into()
        },
        cpu[0],
        cpu[1],
    );
    drop(sups);
    Ok(())
}

/// One herdr request over its socket (the bench's plain-herdr pane).
fn herdr(method: &str, params: serde_json::Value) -> Result<serde_json::Value, String> {
    use std::io::{BufRead, Write};
    let socket = std::env::var_os("HERDR_SOCKET_PATH").ok_or("no HERDR_SOCKET_PATH")?;
    let line = format!(
        "{}\n",
        serde_json::json!({"id": "bench", "method": method, "params": params})
    );
    let mut s = std::os::unix::net::UnixStream::connect(&socket).map_err(|e| e.to_string())?;
    s.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
    let mut answer = String::new();
    std::io::BufReader::new(s)
        .read_line(&mut answer)
        .map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&answer).map_err(|e| e.to_string())?;
    v.get("result")
        .cloned()
        .ok_or_else(|| format!("herdr {method}: {}", v["error"]))
}

/// Seconds until a pane `cat`ting `file` has been taken in, on `backend`
/// (`native`, `herdr`, or `plain` herdr).
fn ingest_once(sup: &mut Supervisor, backend: &str, file: &str, run: usize) -> Result<f64, String> {
    let start = std::time::Instant::now();
    if backend == "plain" {
        let r = herdr(
            "workspace.create",
            serde_json::json!({"focus": false, "label": "bench-ingest"}),
        )?;
        let pane = r["root_pane"]["pane_id"]
            .as_str()
            .ok_or("no pane id")?
            .to_string();
        let start = std::time::Instant::now();
        let cmd =
            format!("cat '{file}'; printf '\\033]2;ingest-done-{run}\\007'; exec sleep 600\n");
        herdr(
            "pane.send_text",
            serde_json::json!({"pane_id": pane, "text": cmd}),
        )?;
        loop {
            let g = herdr("pane.get", serde_json::json!({"pane_id": pane}))?;
            if g["pane"]["terminal_title"] == format!("ingest-done-{run}").as_str() {
                break;
            }
            if start.elapsed() > INGEST_TIMEOUT {
                return Err("plain herdr ingest timed out".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let t = start.elapsed().as_secs_f64();
        let _ = herdr("pane.close", serde_json::json!({"pane_id": pane}));
        return Ok(t);
    }
    let name = format!("ingest-{backend}-{run}");
    sup.call(
        "pane.new",
        serde_json::json!({"spec": {
            "name": name, "argv": ["cat", file], "env": [],
            "cwd": sup.dir.path(), "cols": 120, "rows": 40, "agent": "shell",
        }, "backend": backend}),
    )?;
    sup.wait_all(std::slice::from_ref(&name), &["exited"], INGEST_TIMEOUT)?;
    let t = start.elapsed().as_secs_f64();
    let _ = sup.call("pane.kill", serde_json::json!({"pane": name}));
    Ok(t)
}

fn ingest(mib: usize, runs: usize) -> Result<(), String> {
    if mib == 0 {
        return Ok(());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("ansi.txt");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/ingest-gen.pl");
    let out = std::fs::File::create(&file).map_err(|e| e.to_string())?;
    let ok = std::process::Command::new("perl")
        .arg(script)
        .arg((mib * 1024 * 1024).to_string())
        .stdout(out)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err("perl bench/ingest-gen.pl failed".into());
    }
    let file = file.display().to_string();
    let mut sup = Supervisor::start()?;
    let kinds = ["native", "herdr", "plain"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for run in 0..runs {
        for (i, k) in kinds.iter().enumerate() {
            times[i].push(ingest_once(&mut sup, k, &file, run).map_err(|e| format!("{k}: {e}"))?);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        support::percentile(v, 50.0)
    };
    let m: Vec<f64> = times.iter_mut().map(median).collect();
    println!(
        "ingest: {mib} MiB of ANSI-heavy output, {runs} interleaved runs, medians (pane creation included)"
    );
    for (k, t) in kinds.iter().zip(&m) {
        println!(
            "  {:<28} {t:>8.2} s",
            match *k {
                "native" => "drover, native pane",
                "herdr" => "drover, herdr backend",
                _ => "plain herdr pane",
            }
        );
    }
    println!(
        "  herdr backend / plain herdr: {:.2}×; herdr backend / native: {:.2}×",
        m[1] / m[2],
        m[1] / m[0]
    );
    Ok(())
}
