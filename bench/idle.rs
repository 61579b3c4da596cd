//! Idle-cost benchmark (docs/performance.md, issue 3): 32 idle sim panes for 30 s — the
//! supervisor's CPU time and RSS, side by side with a tmux server hosting the
//! same 32 sim agents (the spec's reference: tmux 0 ms CPU, 4 MB).
//!
//! `cargo bench --bench idle [-- --panes 32 --secs 30]`
//!
//! Both sets of panes (half claude, half codex profile) start together. Once
//! every drover pane is `idle` and every tmux pane shows the idle footer, the
//! bench waits out the supervisor's settle re-checks, then reads
//! `/proc/<pid>/stat` (utime + stime) of each server and of the sim agents
//! before and after the window, and `/proc/<pid>/status` (VmRSS, VmHWM) at the
//! end. Context switches of all threads show how often each server woke up.

#[path = "support.rs"]
mod support;

use std::process::{Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};
use support::{
    EXE, Supervisor, TaskStats, cpu_ticks, ms_per_tick, profile, status_kb, task_delta, task_stats,
    threads,
};

/// Targets (issue 3): CPU ≤ 1 % of one core; RSS ≤ 64 MB + 1 MB per pane.
const TARGET_CPU_PCT: f64 = 1.0;
const TARGET_RSS_BASE_MB: f64 = 64.0;
const TARGET_RSS_PER_PANE_MB: f64 = 1.0;
/// docs/performance.md reference for 32 idle panes over 30 s.
const REF_TMUX: (f64, f64) = (0.0, 4.0);
const REF_HERDR: (f64, f64) = (830.0, 28.0);
/// Longer than the supervisor's last settle re-check after a burst (1020 ms).
const SETTLE: Duration = Duration::from_millis(2000);
/// How long the panes get to start and draw their idle screens.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

struct Opts {
    panes: usize,
    secs: u64,
}

fn main() -> ExitCode {
    let o = Opts {
        panes: support::arg("--panes", 32),
        secs: support::arg("--secs", 30),
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench idle: {e}");
            ExitCode::from(1)
        }
    }
}

/// A tmux server on its own socket, killed on drop.
struct Tmux {
    socket: String,
    pid: Option<u32>,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Result<Output, String> {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("tmux: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tmux {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(out)
    }

    fn text(&self, args: &[&str]) -> Result<String, String> {
        Ok(String::from_utf8_lossy(&self.cmd(args)?.stdout).into_owned())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.pid.is_some_and(support::alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Processes' readings at the start and the end of the window.
struct Usage {
    cpu_ticks: u64,
    tasks: TaskStats,
    threads: u64,
}

fn usage(pids: &[u32]) -> Usage {
    Usage {
        cpu_ticks: pids.iter().filter_map(|&p| cpu_ticks(p)).sum(),
        // Thread ids are unique across processes.
        tasks: pids.iter().flat_map(|&p| task_stats(p)).collect(),
        threads: pids.iter().map(|&p| threads(p)).sum(),
    }
}

fn run(o: &Opts) -> Result<(), String> {
    let load_before = support::loadavg();
    let mut sup = Supervisor::start()?;
    let base_rss = status_kb(sup.pid, "VmRSS").unwrap_or(0) as f64 / 1024.0;
    let mut tmux = Tmux {
        socket: format!("drover-bench-idle-{}", std::process::id()),
        pid: None,
    };
    let socket = tmux.socket.clone();
    sup.cleanup_on_signal(move || {
        let _ = Command::new("tmux")
            .args(["-L", &socket, "kill-server"])
            .output();
    })?;
    let mut names = Vec::new();
    for i in 0..o.panes {
        let name = format!("idle-{i:02}");
        sup.sim_pane(&name, profile(i), None, &[])?;
        names.push(name);
        let argv = [EXE.as_str(), "sim-agent", "--profile", profile(i)];
        if i == 0 {
            let mut a = vec![
                "new-session",
                "-d",
                "-s",
                "bench",
                "-x",
                "120",
                "-y",
                "40",
                "--",
            ];
            a.extend(argv);
            tmux.cmd(&a)?;
        } else {
            let mut a = vec!["new-window", "-d", "-t", "bench", "--"];
            a.extend(argv);
            tmux.cmd(&a)?;
        }
    }
    let tmux_version = Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "tmux".into());
    let tmux_pid: u32 = tmux
        .text(&["display-message", "-p", "#{pid}"])?
        .trim()
        .parse()
        .map_err(|e| format!("tmux pid: {e}"))?;
    tmux.pid = Some(tmux_pid);

    sup.wait_all(&names, &["idle"], READY_TIMEOUT)?;
    let tmux_panes = tmux_ready(&tmux, o.panes)?;
    std::thread::sleep(SETTLE);

    let sims: Vec<u32> = sup
        .call("pane.ls", serde_json::json!({}))?
        .as_array()
        .ok_or("pane.ls: not a list")?
        .iter()
        .filter_map(|p| p["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
        .collect();
    if sims.len() != o.panes {
        return Err(format!(
            "pane.ls listed {} panes, not {}",
            sims.len(),
            o.panes
        ));
    }
    let tmux_sims: Vec<u32> = tmux_panes.iter().map(|(_, pid)| *pid).collect();

    let t0 = Instant::now();
    let before = [
        usage(&[sup.pid]),
        usage(&[tmux_pid]),
        usage(&sims),
        usage(&tmux_sims),
    ];
    std::thread::sleep(Duration::from_secs(o.secs));
    let after = [
        usage(&[sup.pid]),
        usage(&[tmux_pid]),
        usage(&sims),
        usage(&tmux_sims),
    ];
    let window = t0.elapsed();
    let mem = |pid: u32| {
        (
            status_kb(pid, "VmRSS").unwrap_or(0) as f64 / 1024.0,
            status_kb(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0,
        )
    };
    let mems = [mem(sup.pid), mem(tmux_pid)];
    let sim_rss: f64 = sims
        .iter()
        .filter_map(|&p| status_kb(p, "VmRSS"))
        .sum::<u64>() as f64
        / 1024.0;
    // Every pane must still be idle: a crashed sim is not an idle one.
    sup.wait_all(&names, &["idle"], Duration::from_millis(100))?;
    drop(tmux);
    drop(sup);

    let tick = ms_per_tick();
    let secs = window.as_secs_f64();
    let cpu = |i: usize| after[i].cpu_ticks.saturating_sub(before[i].cpu_ticks) as f64 * tick;
    let woke = |i: usize| task_delta(&before[i].tasks, &after[i].tasks).1;
    let pct = |ms: f64| ms / (secs * 1000.0) * 100.0;
    println!(
        "idle cost: {} idle sim panes ({} claude, {} codex profile) for {secs:.1} s, after all were idle and settled",
        o.panes,
        o.panes.div_ceil(2),
        o.panes / 2
    );
    println!(
        "  {:<28} {:>8} {:>11} {:>9} {:>9} {:>9}",
        "", "CPU ms", "% of a core", "wakeups", "RSS MB", "HWM MB"
    );
    let servers = [
        "drover supervisor".to_string(),
        format!("{tmux_version} server"),
    ];
    for (i, label) in servers.iter().enumerate() {
        println!(
            "  {label:<28} {:>8.0} {:>10.3}% {:>9} {:>9.1} {:>9.1}",
            cpu(i),
            pct(cpu(i)),
            woke(i),
            mems[i].0,
            mems[i].1
        );
    }
    println!(
        "  {:<28} {:>8.0} {:>10.3}% {:>9} {:>9.1}",
        format!("{} sims under drover", sims.len()),
        cpu(2),
        pct(cpu(2)),
        woke(2),
        sim_rss
    );
    println!(
        "  {:<28} {:>8.0} {:>10.3}% {:>9}",
        format!("{} sims under tmux", tmux_sims.len()),
        cpu(3),
        pct(cpu(3)),
        woke(3)
    );
    println!(
        "  (CPU from /proc/<pid>/stat utime+stime, {tick:.0} ms ticks; wakeups = context switches of the threads alive at the end)"
    );
    for (i, label) in servers.iter().enumerate() {
        let (ns, _, exited) = task_delta(&before[i].tasks, &after[i].tasks);
        println!(
            "  {label}: threads {} → {} ({exited} exited); CPU of the threads alive at the end \
             (schedstat, ns) {:.3} ms",
            before[i].threads,
            after[i].threads,
            ns as f64 / 1e6
        );
    }
    println!(
        "  drover supervisor with no pane: RSS {base_rss:.1} MB → {:.2} MB per idle pane",
        (mems[0].0 - base_rss) / o.panes.max(1) as f64
    );
    let rss_limit = TARGET_RSS_BASE_MB + TARGET_RSS_PER_PANE_MB * o.panes as f64;
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "target: CPU ≤ {TARGET_CPU_PCT} % of a core: {} ({:.3} %); RSS ≤ {rss_limit:.0} MB: {} (RSS {:.1} MB, HWM {:.1} MB)",
        verdict(pct(cpu(0)) <= TARGET_CPU_PCT),
        pct(cpu(0)),
        verdict(mems[0].1 <= rss_limit),
        mems[0].0,
        mems[0].1
    );
    println!(
        "peer: tmux here {:.0} ms CPU, {:.1} MB RSS (docs/performance.md: tmux {} ms, {} MB; herdr {} ms, {} MB); \
         drover/tmux RSS = {:.1}×, CPU {:.0} ms vs {:.0} ms",
        cpu(1),
        mems[1].0,
        REF_TMUX.0,
        REF_TMUX.1,
        REF_HERDR.0,
        REF_HERDR.1,
        mems[0].0 / mems[1].0.max(0.1),
        cpu(0),
        cpu(1)
    );
    println!(
        "load (1 min) before {load_before}, after {}",
        support::loadavg()
    );
    Ok(())
}

/// Wait until every tmux pane shows the sim's idle footer; their ids and pids.
fn tmux_ready(tmux: &Tmux, n: usize) -> Result<Vec<(String, u32)>, String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let list = tmux.text(&["list-panes", "-a", "-F", "#{pane_id} #{pane_pid}"])?;
        let panes: Vec<(String, u32)> = list
            .lines()
            .filter_map(|l| {
                let (id, pid) = l.split_once(' ')?;
                Some((id.to_string(), pid.parse().ok()?))
            })
            .collect();
        let mut ready = 0;
        for (id, _) in &panes {
            if tmux
                .text(&["capture-pane", "-p", "-t", id])?
                .contains("? for shortcuts")
            {
                ready += 1;
            }
        }
        if panes.len() == n && ready == n {
            return Ok(panes);
        }
        if Instant::now() >= deadline {
            return Err(format!("tmux: {ready} of {n} panes idle"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
