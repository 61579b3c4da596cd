//! Engine benchmark (docs/performance.md): N processes × M transitions with fsync on shared
//! jobs → transitions/s and lost updates (must be 0), beside a peer: the same
//! processes doing the bare minimum of a durable compare-and-swap (a locked
//! read-modify-write of one JSON document through `store::update_json`), and
//! that peer again behind a lock waited for in the kernel's queue, as the
//! engine's `registry.lock` is.
//!
//! `cargo bench --bench engine [-- --workers 8 --transitions 500 --jobs 20]`
//!
//! `-- --crash 1000 [--workers 4]` runs the long crash test instead: writers
//! `kill -9`ed at random points at least 1,000 times, the invariants checked
//! after every round (`engine_crash.rs`).
//!
//! Workers are real processes (this binary re-executed with `--worker`).

#[path = "engine_crash.rs"]
mod crash;
#[path = "support.rs"]
mod support;

use drover::engine::{Action, Actor, Applied, Engine, Request, replay};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

struct Opts {
    workers: usize,
    transitions: usize,
    jobs: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--worker") {
        return worker(&args[i + 1..]);
    }
    let kills: usize = support::arg("--crash", 0);
    if kills > 0 {
        return match crash::run(kills, support::arg("--workers", 4)) {
            Ok(0) => ExitCode::SUCCESS,
            Ok(_) => ExitCode::from(1),
            Err(e) => {
                eprintln!("bench engine --crash: {e}");
                ExitCode::from(1)
            }
        };
    }
    let o = Opts {
        workers: support::arg("--workers", 8),
        transitions: support::arg("--transitions", 500),
        jobs: support::arg("--jobs", 20),
    };
    match run(&o) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("bench engine: {e}");
            ExitCode::from(1)
        }
    }
}

fn job(j: usize) -> String {
    format!("b{j:02}")
}

fn run(o: &Opts) -> Result<usize, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let state = tmp.path();
    let engine = Engine::open(drover::statedir::StateDir::new(state)).map_err(|e| e.to_string())?;
    for j in 0..o.jobs {
        let id = job(j);
        let create = Request::new(&id, Action::Create { deadline: None }, Actor::operator());
        engine.transition(&create).map_err(|e| e.to_string())?;
        let claim = Request::new(
            &id,
            Action::Claim {
                session: "bench".into(),
            },
            Actor::agent(),
        );
        engine.transition(&claim).map_err(|e| e.to_string())?;
    }
    let setup = 2 * o.jobs as u64;

    let (engine_s, lat) = spawn_all(o, state, "engine")?;
    let total = o.workers * o.transitions;

    // Lost updates: every acknowledged progress must be the last value its
    // worker wrote to that job, in the final record; and the log must account
    // for every acknowledged transition exactly once.
    let mut last: BTreeMap<(String, String), u64> = BTreeMap::new();
    for w in 0..o.workers {
        let text = std::fs::read_to_string(state.join(format!("w{w}.acks")))
            .map_err(|e| format!("worker {w} results: {e}"))?;
        for l in text.lines() {
            let mut it = l.split(' ');
            let (Some(j), Some(n)) = (it.next(), it.next().and_then(|n| n.parse().ok())) else {
                return Err(format!("bad ack line {l:?}"));
            };
            last.insert((j.to_string(), format!("w{w}")), n);
        }
    }
    let records: BTreeMap<String, _> = engine
        .list()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|r| (r.job_id.clone(), r))
        .collect();
    let mut lost = 0usize;
    for ((j, key), n) in &last {
        let have = records
            .get(j)
            .and_then(|r| r.metadata.get(key))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok());
        if have != Some(*n) {
            lost += 1;
        }
    }
    let audit = engine.audit(None).map_err(|e| e.to_string())?;
    let accepted = audit
        .iter()
        .filter(|e| e.seq.is_some())
        .count()
        .saturating_sub(setup as usize);
    lost += total.saturating_sub(accepted);
    let max_seq = records
        .values()
        .map(|r| r.transition_seq)
        .max()
        .unwrap_or(0);
    if max_seq != setup + total as u64 {
        lost += 1;
        eprintln!("max seq {max_seq}, expected {}", setup + total as u64);
    }
    match replay(&audit) {
        Ok(r) if r == records => {}
        Ok(_) => {
            lost += 1;
            eprintln!("replay differs from the records");
        }
        Err(m) => {
            lost += 1;
            eprintln!("replay diverged: {m:?}");
        }
    }

    let (peer_s, peer_lat, peer_lost) = run_peer(o, "peer")?;
    let (fair_s, fair_lat, fair_lost) = run_peer(o, "fair")?;

    let tps = total as f64 / engine_s;
    let peer_tps = total as f64 / peer_s;
    let fair_tps = total as f64 / fair_s;
    println!(
        "engine: {} processes x {} transitions on {} jobs, fsync on",
        o.workers, o.transitions, o.jobs
    );
    // The max beside p99: a lock that lets a newcomer overtake its waiters
    // keeps p99 low by starving a few writes for long (the peer's).
    println!(
        "  engine.transition      {total} in {engine_s:.2} s = {tps:.0} transitions/s, \
         latency mean {:.2} ms p50 {:.2} ms p99 {:.2} ms max {:.1} ms, lost updates {lost}",
        mean(&lat),
        pct(&lat, 50),
        pct(&lat, 99),
        pct(&lat, 100)
    );
    println!(
        "  peer: store CAS write  {total} in {peer_s:.2} s = {peer_tps:.0} writes/s, \
         latency mean {:.2} ms p50 {:.2} ms p99 {:.2} ms max {:.1} ms, lost updates {peer_lost}",
        mean(&peer_lat),
        pct(&peer_lat, 50),
        pct(&peer_lat, 99),
        pct(&peer_lat, 100)
    );
    println!(
        "  peer, kernel's queue   {total} in {fair_s:.2} s = {fair_tps:.0} writes/s, \
         latency mean {:.2} ms p50 {:.2} ms p99 {:.2} ms max {:.1} ms, lost updates {fair_lost}",
        mean(&fair_lat),
        pct(&fair_lat, 50),
        pct(&fair_lat, 99),
        pct(&fair_lat, 100)
    );
    println!(
        "  ratio engine/peer: {:.2}x the time per durable write, p99 {:.1}x the peer's",
        peer_tps / tps,
        pct(&lat, 99) / pct(&peer_lat, 99).max(1e-9)
    );
    println!(
        "  ratio engine/peer with the kernel's queue: {:.2}x the time per durable write, p99 {:.2}x its",
        fair_tps / tps,
        pct(&lat, 99) / pct(&fair_lat, 99).max(1e-9)
    );
    // Little's law: W writers writing back to back keep W writes in the
    // system, so the mean latency is W / throughput under any lock; a lock
    // moves only how that time is shared (the p50 and p99).
    println!(
        "  {} writers / throughput: engine {:.2} ms, peer {:.2} ms, peer with the kernel's queue {:.2} ms (each mean latency above)",
        o.workers,
        o.workers as f64 / tps * 1000.0,
        o.workers as f64 / peer_tps * 1000.0,
        o.workers as f64 / fair_tps * 1000.0
    );
    Ok(lost + peer_lost as usize + fair_lost as usize)
}

/// The mean of `v`.
fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

/// A peer's run (`mode` "peer" or "fair") in a fresh dir: wall seconds,
/// latencies, and the writes its document lost.
fn run_peer(o: &Opts, mode: &str) -> Result<(f64, Vec<f64>, u64), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (secs, lat) = spawn_all(o, dir.path(), mode)?;
    let doc: Option<Value> =
        drover::store::read_json(&dir.path().join("peer.json")).map_err(|e| e.to_string())?;
    let count = doc.as_ref().and_then(|v| v["n"].as_u64()).unwrap_or(0);
    let total = (o.workers * o.transitions) as u64;
    Ok((secs, lat, total.saturating_sub(count)))
}

fn pct(v: &[f64], p: usize) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[(v.len() * p / 100).min(v.len() - 1)]
}

/// Run every worker at once; returns wall seconds and all latencies (ms), sorted.
fn spawn_all(o: &Opts, state: &Path, mode: &str) -> Result<(f64, Vec<f64>), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let go = state.join("go");
    let mut kids = Vec::new();
    for w in 0..o.workers {
        let child = Command::new(&exe)
            .args(["--worker", mode])
            .arg(state)
            .args([w.to_string(), o.transitions.to_string(), o.jobs.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn worker: {e}"))?;
        kids.push(child);
    }
    // Start together: the workers wait for the `go` file, so process start-up is
    // not in the measurement.
    std::fs::write(&go, b"go").map_err(|e| e.to_string())?;
    let start = Instant::now();
    for mut k in kids {
        let st = k.wait().map_err(|e| e.to_string())?;
        if !st.success() {
            return Err(format!("a {mode} worker failed: {st}"));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let mut lat = Vec::new();
    for w in 0..o.workers {
        let p = state.join(format!("w{w}.{mode}.lat"));
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        lat.extend(text.lines().filter_map(|l| l.parse::<f64>().ok()));
    }
    lat.sort_by(f64::total_cmp);
    Ok((secs, lat))
}

fn worker(args: &[String]) -> ExitCode {
    let (Some(mode), Some(state)) = (args.first(), args.get(1)) else {
        eprintln!("worker: missing mode/state");
        return ExitCode::from(2);
    };
    let num = |i: usize| {
        args.get(i)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
    };
    let (w, n, jobs) = (num(2), num(3), num(4).max(1));
    let state = PathBuf::from(state);
    if mode == "crash" {
        return match crash::worker(&state, num(2), num(3) as u64) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("crash worker: {e}");
                ExitCode::from(1)
            }
        };
    }
    let go = state.join("go");
    while !go.exists() {
        std::thread::yield_now();
    }
    let result = match mode.as_str() {
        "engine" => engine_worker(&state, w, n, jobs),
        "fair" => peer_worker(&state, w, n, true),
        _ => peer_worker(&state, w, n, false),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("worker {w}: {e}");
            ExitCode::from(1)
        }
    }
}

fn engine_worker(state: &Path, w: usize, n: usize, jobs: usize) -> Result<(), String> {
    let engine = Engine::open(drover::statedir::StateDir::new(state)).map_err(|e| e.to_string())?;
    let mut acks = String::new();
    let mut lat = String::new();
    for i in 0..n {
        // Spread over the jobs, different workers in a different order, so
        // every job sees interleaved writers.
        let j = job((i * 7 + w * 3) % jobs);
        let mut set = Map::new();
        set.insert(format!("w{w}"), Value::String(i.to_string()));
        let req = Request::new(&j, Action::Progress { set }, Actor::agent());
        let t = Instant::now();
        match engine.transition(&req) {
            Ok(Applied::Accepted { .. }) => {}
            other => return Err(format!("progress {j}: {other:?}")),
        }
        lat.push_str(&format!("{}\n", t.elapsed().as_secs_f64() * 1e3));
        acks.push_str(&format!("{j} {i}\n"));
    }
    std::fs::write(state.join(format!("w{w}.acks")), acks).map_err(|e| e.to_string())?;
    std::fs::write(state.join(format!("w{w}.engine.lat")), lat).map_err(|e| e.to_string())
}

/// The peer: `store::update_json`, whose lock is waited for by sleeping
/// between tries. `fair` first takes a lock waited for in the kernel's
/// queue, as the engine's `registry.lock` is (`LockGuard::exclusive_queued`),
/// so the document's own lock is then never contended: the same durable
/// write with the engine's kind of wait. (A flock let go wakes its waiters
/// to race for it, and a holder that takes it again at once usually wins.)
fn peer_worker(state: &Path, w: usize, n: usize, fair: bool) -> Result<(), String> {
    let doc = state.join("peer.json");
    let queue = state.join("peer.queue.lock");
    let mut lat = String::new();
    for _ in 0..n {
        let t = Instant::now();
        let _queued = fair
            .then(|| drover::store::LockGuard::exclusive_queued(&queue))
            .transpose()
            .map_err(|e| e.to_string())?;
        drover::store::update_json(
            &doc,
            || serde_json::json!({"n": 0}),
            |v: &mut Value| {
                let n = v["n"].as_u64().unwrap_or(0) + 1;
                v["n"] = Value::from(n);
                Ok::<(), drover::store::StoreError>(())
            },
        )
        .map_err(|e| e.to_string())?;
        lat.push_str(&format!("{}\n", t.elapsed().as_secs_f64() * 1e3));
    }
    let mode = if fair { "fair" } else { "peer" };
    std::fs::write(state.join(format!("w{w}.{mode}.lat")), lat).map_err(|e| e.to_string())
}
