//! The engine's long crash test (`cargo bench --bench engine -- --crash 1000`):
//! `--workers` processes make `progress` transitions, each on its own job,
//! and are all `kill -9`ed at a random point, over and over, until at least
//! the asked number of kills. After every round of kills the state dir must
//! hold: every file parses; every acknowledged transition is in its record
//! and in the audit log; replaying the audit log, plus each killed worker's
//! transition in flight where it committed before its audit entry, gives
//! exactly the records; the mirror is never ahead of a record; the next seq
//! is above every seq seen. Every fifth round the seq hint is removed first,
//! as a power cut can lose it. The short version, one kill at every crash
//! point, is `tests/it/engine_crash.rs`.

use drover::engine::record::format_time;
use drover::engine::{Action, Actor, AuditEntry, Engine, Outcome, Request, Status, replay};
use serde_json::{Map, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The progress request a worker makes as its `i`-th.
fn progress(job: &str, w: usize, i: u64) -> Request {
    let mut set = Map::new();
    set.insert(format!("w{w}-{i}"), Value::String(i.to_string()));
    Request::new(job, Action::Progress { set }, Actor::agent())
}

fn job(w: usize) -> String {
    format!("c{w}")
}

/// A crash worker: `progress` on its own job until killed, saying `REQ i`
/// before each request and `ACK i seq` once it is acknowledged.
pub fn worker(state: &Path, w: usize, from: u64) -> Result<(), String> {
    let engine = Engine::open(drover::statedir::StateDir::new(state)).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    for i in from.. {
        writeln!(out, "REQ {i}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
        let applied = engine
            .transition(&progress(&job(w), w, i))
            .map_err(|e| e.to_string())?;
        writeln!(out, "ACK {i} {}", applied.record().transition_seq).map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A small xorshift PRNG, seeded from the clock (the seed is printed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Run the long crash test: returns the number of violated invariants (0).
pub fn run(kills: usize, workers: usize) -> Result<usize, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let state = tmp.path();
    let engine = Engine::open(drover::statedir::StateDir::new(state)).map_err(|e| e.to_string())?;
    for w in 0..workers {
        let id = job(w);
        let create = Request::new(&id, Action::Create { deadline: None }, Actor::operator());
        engine.transition(&create).map_err(|e| e.to_string())?;
        let claim = Request::new(
            &id,
            Action::Claim {
                session: "crash".into(),
            },
            Actor::agent(),
        );
        engine.transition(&claim).map_err(|e| e.to_string())?;
    }
    let seed = drover::paths::now_ms() | 1;
    let mut rng = Rng(seed);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // Per worker: the next request number and what was acknowledged.
    let mut next: Vec<u64> = vec![0; workers];
    let mut acked: Vec<(usize, u64, u64)> = Vec::new();
    let mut in_flight: Vec<AuditEntry> = Vec::new();
    let (mut killed, mut rounds, mut violations) = (0usize, 0usize, 0usize);
    let start = Instant::now();
    while killed < kills {
        rounds += 1;
        if rounds.is_multiple_of(5) {
            let _ = std::fs::remove_file(engine.dir().join("seq.hint"));
        }
        let mut kids: Vec<Child> = (0..workers)
            .map(|w| {
                Command::new(&exe)
                    .args(["--worker", "crash"])
                    .arg(state)
                    .args([w.to_string(), next[w].to_string()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("spawn crash worker: {e}"))
            })
            .collect::<Result<_, _>>()?;
        // A random point: up to 8 ms after the workers are spawned, which
        // lands anywhere from start-up to the middle of a transition.
        std::thread::sleep(Duration::from_micros(rng.below(8000)));
        for k in kids.iter_mut() {
            let _ = k.kill();
        }
        for (w, mut k) in kids.into_iter().enumerate() {
            let _ = k.wait();
            killed += 1;
            let Some(out) = k.stdout.take() else { continue };
            let mut last_req = None;
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let f: Vec<&str> = line.split(' ').collect();
                match (
                    f.first().copied(),
                    f.get(1).and_then(|v| v.parse::<u64>().ok()),
                ) {
                    (Some("REQ"), Some(i)) => last_req = Some(i),
                    (Some("ACK"), Some(i)) => {
                        let seq = f.get(2).and_then(|v| v.parse().ok()).unwrap_or(0);
                        acked.push((w, i, seq));
                        last_req = None;
                        next[w] = i + 1;
                    }
                    _ => {}
                }
            }
            // The request in flight when it died: committed or not, it is
            // not made again (its key would be a second request).
            if let Some(i) = last_req {
                next[w] = i + 1;
                if let Some(e) = committed_unaudited(&engine, w, i)? {
                    in_flight.push(e);
                }
            }
        }
        violations += check(&engine, &acked, &in_flight, rounds)?;
        if violations > 0 {
            break;
        }
    }
    let committed = engine
        .list()
        .map_err(|e| e.to_string())?
        .iter()
        .map(|r| r.metadata.len())
        .sum::<usize>();
    println!(
        "engine crash: {killed} kill -9 in {rounds} rounds of {workers} writers ({:.1} s, seed {seed}): \
         {} acknowledged, {committed} committed, {} committed but unaudited at the kill, \
         invariant violations {violations}",
        start.elapsed().as_secs_f64(),
        acked.len(),
        in_flight.len()
    );
    Ok(violations)
}

/// The in-flight request `i` of worker `w`, if it committed without its audit
/// entry: its record (only this worker writes that job) carries its key.
fn committed_unaudited(engine: &Engine, w: usize, i: u64) -> Result<Option<AuditEntry>, String> {
    let rec = engine.show(&job(w)).map_err(|e| e.to_string())?;
    if !rec.metadata.contains_key(&format!("w{w}-{i}")) {
        return Ok(None);
    }
    let audit = engine.audit(Some(&job(w))).map_err(|e| e.to_string())?;
    if audit.iter().any(|e| e.seq == Some(rec.transition_seq)) {
        return Ok(None);
    }
    Ok(Some(AuditEntry {
        seq: Some(rec.transition_seq),
        at: format_time(rec.updated_at),
        job_id: job(w),
        outcome: Outcome::Accepted,
        from: Some(Status::Running),
        to: Some(rec.status),
        rule: None,
        reason: None,
        new_attempt_id: None,
        request: progress(&job(w), w, i),
        pid: 0,
    }))
}

/// The invariants after a round of kills; prints and counts what fails.
fn check(
    engine: &Engine,
    acked: &[(usize, u64, u64)],
    in_flight: &[AuditEntry],
    round: usize,
) -> Result<usize, String> {
    let mut bad = 0;
    let mut fail = |what: String| {
        eprintln!("round {round}: {what}");
        bad += 1;
    };
    // Every file parses (records, audit, mirror; the hint checks itself).
    let records = match engine.list() {
        Ok(r) => r,
        Err(e) => {
            fail(format!("records: {e}"));
            return Ok(bad);
        }
    };
    let audit = match engine.audit(None) {
        Ok(a) => a,
        Err(e) => {
            fail(format!("audit: {e}"));
            return Ok(bad);
        }
    };
    let mirror = engine.mirror();
    for (w, i, seq) in acked {
        let Some(r) = records.iter().find(|r| r.job_id == job(*w)) else {
            fail(format!("job {} gone", job(*w)));
            continue;
        };
        if !r.metadata.contains_key(&format!("w{w}-{i}")) {
            fail(format!("acknowledged w{w}-{i} lost"));
        }
        if !audit.iter().any(|e| e.seq == Some(*seq)) {
            fail(format!("acknowledged seq {seq} not audited"));
        }
    }
    let mut entries = audit.clone();
    entries.extend(in_flight.iter().cloned());
    match replay(&entries) {
        Ok(replayed) => {
            let on_disk = records.iter().map(|r| (r.job_id.clone(), r.clone()));
            if replayed != on_disk.collect() {
                fail("replay differs from the records".into());
            }
        }
        Err(m) => fail(format!("replay diverged: {m:?}")),
    }
    match mirror {
        Ok(Some(m)) => {
            for r in &records {
                if m.jobs
                    .get(&r.job_id)
                    .is_some_and(|e| e.transition_seq > r.transition_seq)
                {
                    fail(format!("mirror ahead of {}", r.job_id));
                }
            }
        }
        Ok(None) => {}
        Err(e) => fail(format!("mirror: {e}")),
    }
    let highest = records
        .iter()
        .map(|r| r.transition_seq)
        .chain(entries.iter().filter_map(|e| e.seq))
        .max()
        .unwrap_or(0);
    match engine.last_seq() {
        Ok(last) if last >= highest => {}
        Ok(last) => fail(format!("seq counter {last} below seq {highest} in use")),
        Err(e) => fail(format!("seq counter: {e}")),
    }
    Ok(bad)
}
