//! What herdr's polling costs drover (docs/performance.md, docs/herdr.md):
//! N idle sim panes on the herdr backend against the fake herdr, side by
//! side in one run with N idle sim panes on the native backend, each set
//! under its own supervisor; the CPU time of each supervisor over the same
//! window, and the ratio herdr/native.
//!
//! `cargo bench --bench herdr [-- --panes 16 --secs 20]`
//!
//! A herdr pane is read by `pane.read` every 100 ms (herdr has no output
//! stream drover could follow) and has one `agent wait` CLI call in flight
//! (10 s timeout), so an idle herdr pane costs the supervisor something,
//! where an idle native pane costs nothing. The fake herdr's own CPU is
//! printed too, but it is a Python stand-in: herdr's real cost is the
//! reference figure in docs/performance.md. Detection latency through the
//! polling is measured by the latency bench:
//! `DROVER_BENCH_BACKEND=native,herdr cargo bench --bench latency`.

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
/// herdr's `pane.read` polling period (`READ_EVERY` in the backend).
const READ_EVERY_MS: f64 = 100.0;

fn main() -> ExitCode {
    let panes = support::arg("--panes", 16usize);
    let secs = support::arg("--secs", 20u64);
    let fake = match herdr_fake::FakeHerdr::start() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("bench herdr: {e}");
            return ExitCode::from(1);
        }
    };
    let r = run(panes, secs, fake.pid);
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
        "fake herdr (Python)",
        cpu[2],
        cpu[2] / window_ms * 100.0,
        status_kb(fake_pid, "VmRSS").unwrap_or(0) as f64 / 1024.0
    );
    let reads = panes as f64 * window_ms / READ_EVERY_MS;
    println!(
        "herdr/native supervisor CPU: {} (native {:.0} ms, herdr {:.0} ms); \
         per pane.read: {:.3} ms ({reads:.0} reads)",
        if cpu[0] > 0.0 {
            format!("{:.1}×", cpu[1] / cpu[0])
        } else {
            "∞ (native used 0 ms)".into()
        },
        cpu[0],
        cpu[1],
        cpu[1] / reads.max(1.0)
    );
    drop(sups);
    Ok(())
}
