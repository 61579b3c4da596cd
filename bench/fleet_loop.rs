//! Dispatch throughput of the fleet (docs/fleet.md, docs/performance.md):
//! one board of N sim tasks worked by `loop run --sim` on one host with L
//! lanes, then by `loop run --sim --fleet` with H hosts running `fleet work
//! --slots L`, against a real nats-server on loopback (a user per host).
//! Every host is a supervisor with its own state dir on this machine, so the
//! hosts share its cores: the machine's CPU use over each run is printed
//! beside the times.
//!
//! `cargo bench --bench fleet_loop [-- --tasks 64 --hosts 4 --lanes 8 --work-ms 2000]`
//! (needs nats-server 2.10+: `DROVER_NATS_SERVER=$(scripts/install-nats.sh)`).
//!
//! `--fault kill-host|freeze-host|restart-nats|kill-coordinator|kill-node|mixed-agents` injects
//! that fault into the fleet run once an eighth of the steps have started
//! (host h1's worker and supervisor killed with SIGKILL; its worker stopped
//! with SIGSTOP past AckWait, then continued; the server killed and started
//! again on its store; the coordinator's `loop run` killed with SIGKILL and
//! resumed with `--resume`; `kill-node`: the fleet on a three-node cluster
//! with three replicas, one node killed with SIGKILL; `mixed-agents`: h1
//! takes only Codex's steps, checked), and the run is
//! checked: every task landed,
//! each in exactly one commit. `--only-fleet` skips the one-host run.

#[path = "nats.rs"]
#[allow(dead_code)]
mod nats;
#[path = "support.rs"]
mod support;

use nats::Nats;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;
use support::{EXE, arg};

/// A state dir of its own; its supervisor is stopped when dropped.
struct Host {
    dir: tempfile::TempDir,
    state: PathBuf,
    workers: Vec<Child>,
}

impl Host {
    fn new() -> Result<Host, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
        Ok(Host {
            dir,
            state,
            workers: Vec::new(),
        })
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(EXE.as_str());
        c.arg("--state-dir").arg(&self.state);
        c
    }

    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = self.cmd().args(args).output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "drover {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Join the servers at `url` (comma-separated), streams made with `replicas` copies.
    fn join(&self, url: &str, replicas: usize, id: &str, slots: usize) -> Result<(), String> {
        let pw = self.dir.path().join("nats.pw");
        std::fs::write(&pw, format!("pw-{id}\n")).map_err(|e| e.to_string())?;
        std::fs::set_permissions(
            &pw,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600),
        )
        .map_err(|e| e.to_string())?;
        let slots = slots.to_string();
        let replicas = replicas.to_string();
        self.run(&[
            "fleet",
            "join",
            "lab",
            "--nats",
            url,
            "--replicas",
            &replicas,
            "--host",
            id,
            "--user",
            id,
            "--password-file",
            pw.to_str().unwrap_or_default(),
            "--slots",
            &slots,
        ])
        .map(|_| ())
    }

    /// `fleet work` taking the steps of `agents` (sim lanes: nothing needs
    /// to be installed).
    fn work(&mut self, slots: usize, agents: &[&str]) -> Result<(), String> {
        let mut cmd = self.cmd();
        cmd.args(["fleet", "work", "--slots", &slots.to_string()]);
        for a in agents {
            cmd.args(["--agent", a]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        self.workers.push(child);
        Ok(())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = self.cmd().arg("kill-server").output();
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .status()
        .map_err(|e| e.to_string())?
        .success();
    if ok {
        Ok(())
    } else {
        Err(format!("git {}", args.join(" ")))
    }
}

/// A repo with `n` tasks (TASK-i claims TASK-i.txt), a charter of `lanes`
/// lanes, and the sim scripts; (repo, charter, implementer, reviewer).
fn board(root: &Path, n: usize, lanes: usize, work_ms: u64) -> Result<[PathBuf; 4], String> {
    let repo = root.join("r");
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).map_err(|e| e.to_string())?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README"), "base\n").map_err(|e| e.to_string())?;
    git(&repo, &["add", "README"])?;
    git(&repo, &["commit", "-q", "-m", "initial"])?;
    for i in 1..=n {
        let id = format!("TASK-{i}");
        std::fs::write(
            tasks.join(format!("task-{i} - T.md")),
            format!("---\nid: {id}\ntitle: Task {id}\nstatus: To Do\nlabels: []\ndependencies: []\nmodified_files: [{id}.txt]\n---\n\n## Description\nDo {id}.\n"),
        )
        .map_err(|e| e.to_string())?;
    }
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        format!("# Bench\nlanes: {lanes}\npool: {lanes}\ngate: true\n"),
    )
    .map_err(|e| e.to_string())?;
    let imp = root.join("imp.toml");
    std::fs::write(&imp, format!("[[turn]]\nsteps = [{{ work = {work_ms} }}, {{ write = {{ path = \"{{task}}.txt\", content = \"done\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n")).map_err(|e| e.to_string())?;
    let rev = root.join("rev.toml");
    std::fs::write(&rev, "[[turn]]\nsteps = [{ work = 100 }, { heartbeat = { status = \"pass\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n").map_err(|e| e.to_string())?;
    Ok([repo, charter, imp, rev])
}

/// Busy and total jiffies of the whole machine (`/proc/stat`).
fn machine_cpu() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = s
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = f.iter().sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

struct Measured {
    secs: f64,
    landed: usize,
    cpu: f64,
}

/// How many steps the coordinator's record says hosts started.
fn started(coord: &Host) -> usize {
    std::fs::read_dir(coord.state.join("fleet"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .filter(|l| {
                    l.contains("\"event\":\"start\"") && l.contains("\"reply\":\"started\"")
                })
                .count()
        })
        .sum()
}

/// Steps started again after a delivery that was not acked (delivery > 1),
/// and results the coordinator refused, from its record.
fn redone(coord: &Host) -> (usize, usize) {
    let mut again = 0;
    let mut refused = 0;
    for e in std::fs::read_dir(coord.state.join("fleet"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.path().extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        for l in std::fs::read_to_string(e.path())
            .unwrap_or_default()
            .lines()
        {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
                continue;
            };
            if v["event"] == "start"
                && v["reply"]["reply"] == "started"
                && v["delivered"].as_i64() > Some(1)
            {
                again += 1;
            }
            if v["event"] == "finish" && v["reply"]["reply"] == "refused" {
                refused += 1;
            }
        }
    }
    (again, refused)
}

/// Steps of each agent `host` was started on, from the coordinator's record.
fn agents_started_by(coord: &Host, host: &str) -> std::collections::BTreeMap<String, usize> {
    let mut queued = std::collections::BTreeMap::new();
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(coord.state.join("fleet"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let recs: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        for v in &recs {
            if v["event"] == "queued" {
                queued.insert(
                    v["job"].to_string(),
                    v["agent"].as_str().unwrap_or("").to_string(),
                );
            }
        }
        for v in &recs {
            if v["event"] == "start" && v["host"] == host && v["reply"]["reply"] == "started" {
                let a = queued
                    .get(&v["job"].to_string())
                    .cloned()
                    .unwrap_or_default();
                *out.entry(a).or_insert(0) += 1;
            }
        }
    }
    out
}

/// Commits on the run's integration branch that touch `path`.
fn commits_touching(repo: &Path, path: &str) -> usize {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["log", "--format=%H", "drover/integration/loop1", "--", path])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().count())
        .unwrap_or(0)
}

/// The pid of the `loop run` working on state dir `state`.
fn loop_pid(state: &Path) -> Option<u32> {
    let want = state.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_loop = args.iter().any(|a| a == "loop") && args.iter().any(|a| a == "run");
        (is_loop && args.contains(&want)).then_some(pid)
    })
}

/// The pid a state dir's supervisor holds its lock with.
fn supervisor_pid(state: &Path) -> Option<u32> {
    std::fs::read_to_string(state.join("supervisor.lock"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// Run the loop on `coord` and time it.
fn timed(coord: &Host, files: &[PathBuf; 4], extra: &[&str]) -> Result<Measured, String> {
    let [repo, charter, imp, rev] = files;
    let mut args = vec![
        "loop",
        "run",
        "--charter",
        charter.to_str().unwrap_or_default(),
        "--repo",
        repo.to_str().unwrap_or_default(),
        "--sim",
        "--sim-implementer",
        imp.to_str().unwrap_or_default(),
        "--sim-reviewer",
        rev.to_str().unwrap_or_default(),
        "--turn-timeout-s",
        "600",
        "--json",
    ];
    args.extend_from_slice(extra);
    timed_args(coord, &args)
}

/// Run `drover ARGS` (a `loop run … --json`) on `coord` and time it.
fn timed_args(coord: &Host, args: &[&str]) -> Result<Measured, String> {
    let (b0, t0) = machine_cpu();
    let start = Instant::now();
    let out = coord.run(args)?;
    let secs = start.elapsed().as_secs_f64();
    let (b1, t1) = machine_cpu();
    let st: serde_json::Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
    let landed = st["tasks"]
        .as_array()
        .map(|t| t.iter().filter(|t| t["phase"] == "landed").count())
        .unwrap_or(0);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cpu = (b1 - b0) as f64 / (t1 - t0).max(1) as f64 * cores;
    Ok(Measured { secs, landed, cpu })
}

fn main() -> Result<(), String> {
    let tasks: usize = arg("--tasks", 64);
    let hosts: usize = arg("--hosts", 4);
    let lanes: usize = arg("--lanes", 8);
    let work_ms: u64 = arg("--work-ms", 2000);
    println!(
        "fleet_loop: {tasks} sim tasks (implementer works {work_ms} ms), 1 host x {lanes} lanes vs {hosts} hosts x {lanes} slots; {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    let fault: String = arg("--fault", "none".to_string());
    let only_fleet = std::env::args().any(|a| a == "--only-fleet");
    let faults = [
        "none",
        "kill-host",
        "freeze-host",
        "restart-nats",
        "kill-coordinator",
        "kill-node",
        "mixed-agents",
    ];
    if !faults.contains(&fault.as_str()) {
        return Err(format!(
            "--fault {fault:?}: use one of {}",
            faults.join(", ")
        ));
    }

    // One host.
    let single = if only_fleet {
        None
    } else {
        let one = Host::new()?;
        let files = board(one.dir.path(), tasks, lanes, work_ms)?;
        Some(timed(&one, &files, &[])?)
    };

    // The fleet: a coordinator and `hosts` hosts on one server.
    let mut ids = vec!["c".to_string()];
    ids.extend((1..=hosts).map(|i| format!("h{i}")));
    let pws: Vec<String> = ids.iter().map(|u| format!("pw-{u}")).collect();
    let users: Vec<(&str, &str)> = ids
        .iter()
        .map(String::as_str)
        .zip(pws.iter().map(String::as_str))
        .collect();
    // `kill-node`: a three-node cluster, every stream with three copies.
    let mut servers = if fault == "kill-node" {
        Nats::cluster(&users)?
    } else {
        vec![Nats::start(&users)?]
    };
    let url: Vec<String> = servers.iter().map(Nats::url).collect();
    let url = url.join(",");
    let replicas = servers.len();
    let coord = Host::new()?;
    coord.join(&url, replicas, "c", lanes)?;
    let mut fleet = Vec::new();
    for i in 1..=hosts {
        let mut h = Host::new()?;
        h.join(&url, replicas, &format!("h{i}"), lanes)?;
        // `mixed-agents`: h1 takes only Codex's steps.
        let agents: &[&str] = if fault == "mixed-agents" && i == 1 {
            &["codex"]
        } else {
            &["claude", "codex"]
        };
        h.work(lanes, agents)?;
        fleet.push(h);
    }
    // The coordinator's cap counts the hosts' lanes in flight too.
    let files = board(coord.dir.path(), tasks, lanes * (hosts + 1), work_ms)?;
    let ack_wait = if fault == "none" { "30000" } else { "3000" };
    let h1 = (
        fleet[0].workers.first().map(|w| w.id()),
        supervisor_pid(&fleet[0].state),
    );
    let start = Instant::now();
    let (many, injected) = std::thread::scope(|s| {
        let injector = s.spawn(|| -> Result<String, String> {
            if fault == "none" {
                return Ok(String::new());
            }
            let deadline = Instant::now() + std::time::Duration::from_secs(600);
            while started(&coord) < tasks.div_ceil(8) {
                if Instant::now() > deadline {
                    return Err("no steps started".into());
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let at = started(&coord);
            match fault.as_str() {
                "kill-host" => {
                    for pid in [h1.0, h1.1].into_iter().flatten() {
                        signal(pid, "-KILL");
                    }
                }
                "kill-coordinator" => {
                    let pid = loop_pid(&coord.state).ok_or("no loop run to kill")?;
                    signal(pid, "-KILL");
                }
                "freeze-host" => {
                    if let Some(pid) = h1.0 {
                        signal(pid, "-STOP");
                        std::thread::sleep(std::time::Duration::from_secs(6));
                        signal(pid, "-CONT");
                    }
                }
                "kill-node" => servers[0].kill(),
                // Nothing to do mid-run: h1 has taken only Codex from the start.
                "mixed-agents" => {}
                _ => servers[0].restart()?,
            }
            Ok(format!("{fault} after {at} steps started"))
        });
        let many = timed(
            &coord,
            &files,
            &["--fleet", "lab", "--fleet-ack-wait-ms", ack_wait],
        );
        (many, injector.join())
    });
    let injected = injected.map_err(|_| "the fault thread panicked".to_string())??;
    let many = if fault == "kill-coordinator" {
        // The coordinator's loop died (its run failed); resume it.
        let first = many.err().unwrap_or_default();
        let [_, _, imp, rev] = &files;
        let resumed = timed_args(
            &coord,
            &[
                "loop",
                "run",
                "--resume",
                "1",
                "--sim",
                "--sim-implementer",
                imp.to_str().unwrap_or_default(),
                "--sim-reviewer",
                rev.to_str().unwrap_or_default(),
                "--turn-timeout-s",
                "600",
                "--json",
                "--fleet",
                "lab",
                "--fleet-ack-wait-ms",
                ack_wait,
            ],
        )
        .map_err(|e| format!("resume after: {first}: {e}"))?;
        // The wall time from the first start; the CPU is the resumed part's.
        Measured {
            secs: start.elapsed().as_secs_f64(),
            ..resumed
        }
    } else {
        many?
    };
    let repo = &files[0];
    let once = (1..=tasks)
        .filter(|i| commits_touching(repo, &format!("TASK-{i}.txt")) == 1)
        .count();

    let rate = |m: &Measured| m.landed as f64 / m.secs * 60.0;
    println!("| run | landed | wall s | tasks/min | machine CPU (cores busy) |");
    println!("|---|---|---|---|---|");
    if let Some(single) = &single {
        println!(
            "| 1 host x {lanes} lanes | {}/{tasks} | {:.1} | {:.1} | {:.2} |",
            single.landed,
            single.secs,
            rate(single),
            single.cpu
        );
    }
    println!(
        "| {hosts} hosts x {lanes} slots (fleet) | {}/{tasks} | {:.1} | {:.1} | {:.2} |",
        many.landed,
        many.secs,
        rate(&many),
        many.cpu
    );
    if let Some(single) = &single {
        println!(
            "ratio: {:.2}x tasks/minute (goal >= 3.2x on hosts with cores of their own)",
            rate(&many) / rate(single).max(f64::MIN_POSITIVE)
        );
    }
    if !injected.is_empty() {
        let (again, refused) = redone(&coord);
        println!(
            "fault: {injected}; steps started on a later delivery (a lost host's, and reviews their implementer's host handed back): {again}; late results refused: {refused}"
        );
    }
    println!("landed in exactly one commit: {once}/{tasks}");
    if fault == "mixed-agents" {
        let h1 = agents_started_by(&coord, "h1");
        println!("h1 (Codex only) started: {h1:?}");
        if h1.keys().any(|a| a != "codex") {
            return Err(format!(
                "h1 took a step of an agent it does not take: {h1:?}"
            ));
        }
    }
    if once != tasks || many.landed != tasks {
        return Err(format!(
            "{} of {tasks} landed, {once} in exactly one commit",
            many.landed
        ));
    }
    Ok(())
}
