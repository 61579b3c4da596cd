//! The engine under real concurrency and real crashes: separate processes racing
//! on one state dir, and `kill -9` in the middle of transitions.
//!
//! Workers are real processes: this test binary re-executes itself running only
//! `worker_entry`, with `DROVER_ENGINE_WORKER` saying what to do (library calls),
//! or the `drover` binary itself (CLI).

use crate::engine_support as support;

use drover::engine::{
    Action, Actor, Applied, Authority, Engine, EngineError, JobRecord, Outcome, Request, Status,
    replay,
};
use drover::store::{read_json, read_jsonl};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::*;

const WORKER_ENV: &str = "DROVER_ENGINE_WORKER";
const WORKERS: usize = 8;
const REQUESTS_PER_WORKER: usize = 500;
const JOBS: u64 = 20;
const CLAIMERS: usize = 16;
const KILL_ROUNDS: usize = 12;
const PAST: &str = "2000-01-01T00:00:00Z";
const FUTURE: &str = "2999-01-01T00:00:00Z";
const DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- workers

/// Entry point of the worker processes; a no-op in a normal test run.
#[test]
fn worker_entry() {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(',').collect();
    let state = PathBuf::from(parts.get(1).copied().unwrap_or_default());
    let num = |i: usize| {
        parts
            .get(i)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match parts.first().copied() {
        Some("random") => random_worker(&state, num(2), num(3) as usize, num(4)),
        Some("loop") => loop_worker(&state, parts.get(2).copied().unwrap_or("K")),
        other => panic!("unknown worker mode {other:?}"),
    }
}

fn spawn_worker(spec: &str) -> Child {
    let exe = std::env::current_exe().expect("current exe");
    let mut c = Command::new(exe);
    c.args([
        "--exact",
        "engine_races::worker_entry",
        "--nocapture",
        "--test-threads",
        "1",
        "-q",
    ])
    .env(WORKER_ENV, spec)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c.spawn().expect("spawn worker")
}

fn job_name(i: u64) -> String {
    format!("j{i:02}")
}

/// A random request against the (racily read) current state of a random job.
fn random_request(engine: &Engine, rng: &mut Rng, worker: u64, i: usize) -> Request {
    let j = rng.below(JOBS);
    let job = job_name(j);
    let cur = engine.show(&job).ok();
    let me = format!("w{worker}");
    let session = match (&cur, rng.chance(70)) {
        (Some(r), true) => r.session_id.clone().unwrap_or_else(|| me.clone()),
        _ => me.clone(),
    };
    let iteration = cur.as_ref().map_or(1, |r| r.iteration);
    let action = match rng.below(13) {
        0 => Action::Create {
            deadline: Some(if j.is_multiple_of(2) { PAST } else { FUTURE }.into()),
        },
        1 | 2 => Action::Claim { session },
        3 => Action::Started { session },
        4 | 5 => {
            let mut set = Map::new();
            set.insert(me.to_string(), Value::String(i.to_string()));
            if rng.chance(5) {
                set.insert("status".into(), Value::String("completed".into()));
            }
            Action::Progress { set }
        }
        6 => Action::Complete { reason: None },
        7 => Action::Fail { reason: None },
        8 => Action::Cancel { reason: None },
        9 => Action::Timeout,
        10 | 11 => Action::Redispatch {
            iteration: iteration + u64::from(!rng.chance(10)) + u64::from(rng.chance(5)),
        },
        _ => Action::Finalize,
    };
    let authority = match rng.below(10) {
        0..=4 => Authority::Agent,
        5..=8 => Authority::Operator,
        _ => Authority::Supervisor,
    };
    let mut req = Request::new(
        job,
        action,
        Actor {
            authority,
            lane: None,
        },
    );
    if rng.chance(15) {
        req.expected_attempt = match &cur {
            Some(r) if rng.chance(80) => r.attempt_id.clone().or(Some("none".into())),
            _ => Some("stale".into()),
        };
    }
    if rng.chance(15)
        && let Some(r) = &cur
    {
        req.expected_status = Some(r.status);
    }
    req
}

fn random_worker(state: &Path, worker: u64, n: usize, seed: u64) {
    let engine = Engine::open(drover::statedir::StateDir::new(state)).expect("engine");
    let mut rng = Rng::new(seed);
    let mut lines = String::new();
    for i in 0..n {
        let req = random_request(&engine, &mut rng, worker, i);
        match engine.transition(&req) {
            Ok(Applied::Accepted { record }) => {
                lines.push_str(&format!("A {} {}\n", record.job_id, record.transition_seq));
            }
            Ok(Applied::Ack { .. }) => lines.push_str("K\n"),
            Err(EngineError::Refused { .. }) => lines.push_str("R\n"),
            Err(e) => panic!("worker {worker}: {e}"),
        }
    }
    std::fs::write(state.join(format!("w{worker}.out")), lines).expect("write results");
}

/// Cycle one job through claim, progress ×3, complete, redispatch forever,
/// printing `ACK <seq> <progress key|->` after each acknowledged transition.
fn loop_worker(state: &Path, job: &str) {
    let engine = Engine::open(drover::statedir::StateDir::new(state)).expect("engine");
    let stdout = std::io::stdout();
    for i in 0u64.. {
        let cur = engine.show(job).expect("job exists");
        let mut key = "-".to_string();
        let action = match cur.status {
            Status::Pending => Action::Claim {
                session: "loop".into(),
            },
            Status::Running if i % 4 != 3 => {
                key = format!("n{}-{i}", std::process::id());
                let mut set = Map::new();
                set.insert(key.clone(), Value::String("1".into()));
                Action::Progress { set }
            }
            Status::Running => Action::Complete { reason: None },
            _ => Action::Redispatch {
                iteration: cur.iteration + 1,
            },
        };
        let req = Request::new(job, action, Actor::operator());
        // Another worker on the same job can win the race: a refusal is fine.
        let seq = match engine.transition(&req) {
            Ok(Applied::Accepted { record }) => record.transition_seq,
            Ok(Applied::Ack { .. }) | Err(EngineError::Refused { .. }) => continue,
            Err(e) => panic!("loop worker: {e}"),
        };
        let mut out = stdout.lock();
        writeln!(out, "ACK {seq} {key}").expect("stdout");
        out.flush().expect("flush");
    }
}

// ---------------------------------------------------------------- checks

fn audit_accepted_seqs(engine: &Engine) -> Vec<u64> {
    engine
        .audit(None)
        .expect("audit")
        .iter()
        .filter(|e| e.outcome == Outcome::Accepted)
        .map(|e| e.seq.expect("accepted entries carry a seq"))
        .collect()
}

/// Every file in jobs/ parses; returns the records.
fn all_files_parse(engine: &Engine) -> BTreeMap<String, JobRecord> {
    let dir = engine.dir();
    for ent in std::fs::read_dir(dir).expect("read dir") {
        let p = ent.expect("entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // The seq hint is not JSON; `last_seq` checks it.
        if name.starts_with('.') || name.ends_with(".lock") || name == "seq.hint" {
            continue;
        }
        if name.ends_with(".jsonl") {
            read_jsonl::<Value>(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else {
            read_json::<Value>(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    engine
        .list()
        .expect("list")
        .into_iter()
        .map(|r| (r.job_id.clone(), r))
        .collect()
}

/// The audit log replayed through the table gives exactly the records on disk.
fn replay_matches(engine: &Engine) {
    let entries = engine.audit(None).expect("audit");
    let replayed = replay(&entries).unwrap_or_else(|m| panic!("replay diverged: {m:?}"));
    let on_disk = all_files_parse(engine);
    assert_eq!(replayed.len(), on_disk.len(), "same jobs");
    for (id, rec) in &on_disk {
        assert_eq!(replayed.get(id), Some(rec), "replay reproduces {id}");
    }
}

fn mirror_matches(engine: &Engine) {
    let m = engine.mirror().expect("mirror").expect("written");
    for r in engine.list().expect("list") {
        let e = &m.jobs[&r.job_id];
        assert_eq!(
            (e.status, e.transition_seq),
            (r.status, r.transition_seq),
            "mirror of {}",
            r.job_id
        );
    }
}

// ---------------------------------------------------------------- tests

/// 16 processes claim one pending job: exactly one wins, the others are refused.
#[test]
fn sixteen_claimers_exactly_one_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    for round in 0..3 {
        let job = format!("R{round}");
        let o = run({
            let mut c = drover(st);
            c.args(["job", "create", &job]);
            c
        });
        assert_eq!(code(&o), 0);
        let children: Vec<Child> = (0..CLAIMERS)
            .map(|i| {
                let mut c = drover(st);
                c.args([
                    "job",
                    "claim",
                    &job,
                    "--session",
                    &format!("s{i}"),
                    "--as",
                    "agent",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
                c.spawn().expect("spawn claimer")
            })
            .collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait"))
            .collect();
        let winners: Vec<_> = outs.iter().filter(|o| code(o) == 0).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one claim wins");
        for o in outs.iter().filter(|o| code(o) != 0) {
            assert_eq!(code(o), 3, "losers are refused: {}", stderr(o));
            assert!(stderr(o).contains("rule from-status"), "{}", stderr(o));
        }
        let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
        let rec = engine.show(&job).expect("record");
        assert_eq!(rec.status, Status::Running);
        assert_eq!(
            rec.attempt_id.as_deref(),
            Some(stdout(winners[0]).trim()),
            "the winner's attempt is the record's"
        );
        let audit = engine.audit(Some(&job)).expect("audit");
        let claims = |o: Outcome| audit.iter().filter(|e| e.outcome == o).count();
        assert_eq!(claims(Outcome::Accepted), 2, "create + one claim");
        assert_eq!(claims(Outcome::Refused), CLAIMERS - 1);
    }
}

/// 8 processes × 500 random requests on 20 jobs (10 created up front, 10 created
/// in the race): seqs strictly increase, no seq is used twice, nothing
/// acknowledged is missing, and replaying the audit log through the table
/// reproduces every record exactly (a lost update would diverge).
#[test]
fn random_requests_from_eight_processes_replay_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    for j in 0..JOBS / 2 {
        let req = Request::new(
            job_name(j * 2 + 1),
            Action::Create {
                deadline: Some(FUTURE.into()),
            },
            Actor::operator(),
        );
        engine.transition(&req).expect("create");
    }
    let seed = drover::paths::now_ms();
    eprintln!("seed {seed}");
    let children: Vec<Child> = (0..WORKERS)
        .map(|w| {
            spawn_worker(&format!(
                "random,{},{w},{REQUESTS_PER_WORKER},{}",
                st.display(),
                seed + w as u64
            ))
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().expect("wait");
        assert!(o.status.success(), "worker failed: {}", stderr(&o));
    }
    let mut acked: Vec<u64> = Vec::new();
    let mut answered = 0;
    for w in 0..WORKERS {
        let text = std::fs::read_to_string(st.join(format!("w{w}.out"))).expect("results");
        let mut last = 0;
        for l in text.lines() {
            answered += 1;
            if let Some(rest) = l.strip_prefix("A ") {
                let seq: u64 = rest
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .expect("seq");
                assert!(seq > last, "worker {w}: seq {seq} after {last}");
                last = seq;
                acked.push(seq);
            }
        }
    }
    assert_eq!(
        answered,
        WORKERS * REQUESTS_PER_WORKER,
        "every request answered"
    );
    let audited = audit_accepted_seqs(&engine);
    let audited_set: BTreeSet<u64> = audited.iter().copied().collect();
    assert_eq!(audited_set.len(), audited.len(), "no seq used twice");
    let pre = JOBS / 2;
    assert_eq!(
        audited.len() as u64,
        acked.len() as u64 + pre,
        "every acknowledged transition is audited"
    );
    let max = audited_set.iter().max().copied().unwrap_or(0);
    assert_eq!(max, audited.len() as u64, "seqs are 1..=N without gaps");
    assert!(
        acked.len() > WORKERS * REQUESTS_PER_WORKER / 20,
        "the mix accepts a fair share ({})",
        acked.len()
    );
    for j in 0..JOBS {
        let creates = engine
            .audit(Some(&job_name(j)))
            .expect("audit")
            .iter()
            .filter(|e| e.outcome == Outcome::Accepted && e.request.action.name() == "create")
            .count();
        assert!(creates <= 1, "{}: created {creates} times", job_name(j));
    }
    eprintln!(
        "{} requests, {} accepted, {} jobs",
        answered,
        audited.len(),
        engine.list().map(|l| l.len()).unwrap_or(0)
    );
    replay_matches(&engine);
    mirror_matches(&engine);
}

/// The same race through the CLI: 8 threads, each running real `drover job`
/// processes one after another.
#[test]
fn random_cli_requests_replay_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path().to_path_buf();
    let per = 25;
    let seed = drover::paths::now_ms() ^ 0x5eed;
    let handles: Vec<_> = (0..WORKERS as u64)
        .map(|w| {
            let st = st.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(seed + w);
                let mut codes = Vec::new();
                for _ in 0..per {
                    let job = format!("c{}", rng.below(4));
                    let mut args: Vec<String> = match rng.below(8) {
                        0 => vec!["create".into(), job.clone()],
                        1 | 2 => vec![
                            "claim".into(),
                            job.clone(),
                            "--session".into(),
                            format!("w{w}"),
                        ],
                        3 => vec![
                            "progress".into(),
                            job.clone(),
                            "--set".into(),
                            format!("w{w}=x"),
                        ],
                        4 => vec![
                            "complete".into(),
                            job.clone(),
                            "--as".into(),
                            "agent".into(),
                        ],
                        5 => vec!["fail".into(), job.clone()],
                        6 => vec![
                            "redispatch".into(),
                            job.clone(),
                            "--iteration".into(),
                            "2".into(),
                        ],
                        _ => vec!["cancel".into(), job.clone()],
                    };
                    args.insert(0, "job".into());
                    let o = run({
                        let mut c = drover(&st);
                        c.args(&args);
                        c
                    });
                    codes.push((code(&o), args, stderr(&o)));
                }
                codes
            })
        })
        .collect();
    for h in handles {
        for (c, args, err) in h.join().expect("thread") {
            assert!(c == 0 || c == 3, "{args:?} exited {c}: {err}");
        }
    }
    let engine = Engine::open(drover::statedir::StateDir::new(&st)).expect("engine");
    let seqs = audit_accepted_seqs(&engine);
    assert_eq!(
        seqs.iter().copied().collect::<BTreeSet<_>>().len(),
        seqs.len()
    );
    replay_matches(&engine);
    mirror_matches(&engine);
}

/// `kill -9` two writers in the middle of their transitions, round after round:
/// every file stays parseable and every acknowledged transition is present.
#[test]
fn kill_nine_during_transitions_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    for job in ["K1", "K2"] {
        let req = Request::new(job, Action::Create { deadline: None }, Actor::operator());
        engine.transition(&req).expect("create");
    }
    let mut rng = Rng::new(drover::paths::now_ms());
    // (job, seq, progress key) of everything a worker acknowledged.
    let mut acked: Vec<(String, u64, String)> = Vec::new();
    for round in 0..KILL_ROUNDS {
        let mut kids: Vec<(String, Child)> = ["K1", "K2", "K1"]
            .iter()
            .map(|j| {
                (
                    j.to_string(),
                    spawn_worker(&format!("loop,{},{j}", st.display())),
                )
            })
            .collect();
        let want = 1 + rng.below(6) as usize;
        let first = kids[0].1.stdout.take().expect("stdout");
        let mut reader = BufReader::new(first);
        let mut seen = Vec::new();
        let got = wait_until("worker acknowledgements", DEADLINE, || {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => true,
                Ok(_) => {
                    if line.starts_with("ACK ") {
                        seen.push(line);
                    }
                    seen.len() >= want
                }
            }
        });
        assert!(
            got && seen.len() >= want,
            "round {round}: worker stopped early"
        );
        for (_, k) in kids.iter_mut() {
            let _ = k.kill(); // SIGKILL
        }
        // Whatever a worker printed before it died was acknowledged.
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut reader, &mut rest);
        seen.extend(rest.lines().map(|l| format!("{l}\n")));
        let mut outputs = vec![(kids[0].0.clone(), seen.concat())];
        for (job, k) in kids.iter_mut().skip(1) {
            let mut s = String::new();
            if let Some(mut out) = k.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut out, &mut s);
            }
            outputs.push((job.clone(), s));
        }
        for (_, k) in kids.iter_mut() {
            let _ = k.wait();
        }
        for (job, text) in outputs {
            for l in text.lines().filter(|l| l.starts_with("ACK ")) {
                let mut it = l.split(' ').skip(1);
                let seq = it.next().and_then(|s| s.parse().ok()).expect("seq");
                let key = it.next().unwrap_or("-").to_string();
                acked.push((job.clone(), seq, key));
            }
        }
        // Check after every kill.
        let records = all_files_parse(&engine);
        let audited: BTreeSet<u64> = audit_accepted_seqs(&engine).into_iter().collect();
        let last_seq = engine.last_seq().expect("the seq counter reads");
        for (job, seq, key) in &acked {
            let r = &records[job];
            assert!(audited.contains(seq), "acknowledged seq {seq} is audited");
            assert!(r.transition_seq >= *seq, "{job} went back before {seq}");
            if key != "-" {
                assert!(
                    r.metadata.contains_key(key),
                    "{job}: acked progress {key} lost"
                );
            }
        }
        for r in records.values() {
            assert!(last_seq >= r.transition_seq, "seq counter behind a record");
        }
        if let Some(m) = engine.mirror().expect("mirror parses") {
            for (id, e) in &m.jobs {
                assert!(
                    e.transition_seq <= records[id].transition_seq,
                    "mirror ahead"
                );
            }
        }
    }
    let leftovers = std::fs::read_dir(engine.dir())
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
                .count()
        })
        .unwrap_or(0);
    eprintln!(
        "{} acknowledged over {KILL_ROUNDS} kills; {leftovers} temp files left by killed writers",
        acked.len()
    );
    assert!(acked.len() >= KILL_ROUNDS, "the loop made progress");
    // The engine carries on: the mirror catches up, seqs keep increasing.
    for job in ["K1", "K2"] {
        engine.refresh_mirror(job).expect("refresh");
    }
    mirror_matches(&engine);
    let before = audit_accepted_seqs(&engine).into_iter().max().unwrap_or(0);
    let rec = engine.show("K1").expect("K1");
    let req = if rec.status.is_terminal() {
        Request::new(
            "K1",
            Action::Redispatch {
                iteration: rec.iteration + 1,
            },
            Actor::operator(),
        )
    } else {
        Request::new("K1", Action::Cancel { reason: None }, Actor::operator())
    };
    let after = engine.transition(&req).expect("transition after crashes");
    assert!(after.record().transition_seq > before);
}

/// Which file a process has open right now (from /proc), to kill it mid-phase.
fn has_open(pid: u32, needle: &str) -> bool {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    rd.filter_map(Result::ok).any(|e| {
        std::fs::read_link(e.path())
            .map(|p| p.to_string_lossy().contains(needle))
            .unwrap_or(false)
    })
}

/// `kill -9` real `drover job` processes at chosen phases — while holding
/// `registry.lock`, while writing a temp file, while appending the audit, while
/// updating the mirror — and check after each kill that every file parses, the
/// lock is free again, and every acknowledged transition is present.
#[test]
fn kill_nine_cli_at_each_phase() {
    if !Path::new("/proc/self/fd").exists() {
        eprintln!("SKIP: no /proc");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    engine
        .transition(&Request::new(
            "C",
            Action::Create { deadline: None },
            Actor::operator(),
        ))
        .expect("create");
    engine
        .transition(&Request::new(
            "C",
            Action::Claim {
                session: "s".into(),
            },
            Actor::agent(),
        ))
        .expect("claim");
    // "(none)" matches no file: that process runs to the end and is acknowledged.
    let phases = [
        "registry.lock",
        ".tmp.",
        "audit.jsonl",
        "status.json",
        "(none)",
    ];
    let mut acked: Vec<String> = Vec::new();
    let mut killed = 0;
    for round in 0..25 {
        let phase = phases[round % phases.len()];
        let key = format!("c{round}");
        let mut c = drover(st);
        c.args(["job", "progress", "C", "--set", &format!("{key}=1")])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let pid = child.id();
        let mut exited = None;
        wait_until("phase or exit", DEADLINE, || {
            if has_open(pid, phase) {
                return true;
            }
            match child.try_wait() {
                Ok(Some(s)) => {
                    exited = Some(s);
                    true
                }
                _ => false,
            }
        });
        if exited.is_none() {
            let _ = child.kill();
            killed += 1;
        }
        let out = child.wait_with_output().expect("wait");
        if out.status.code() == Some(0) {
            acked.push(key);
        }
        let records = all_files_parse(&engine);
        for k in &acked {
            assert!(
                records["C"].metadata.contains_key(k),
                "acknowledged {k} lost"
            );
        }
        let seqs = audit_accepted_seqs(&engine);
        assert_eq!(
            seqs.iter().copied().collect::<BTreeSet<_>>().len(),
            seqs.len(),
            "no seq used twice"
        );
    }
    assert!(killed > 0, "some kills landed mid-transition");
    assert!(!acked.is_empty(), "some requests were acknowledged");
    let committed = engine.show("C").expect("C").metadata.len();
    // The lock is free again and the engine carries on.
    let r = engine
        .transition(&Request::new(
            "C",
            Action::Complete { reason: None },
            Actor::agent(),
        ))
        .expect("complete after the kills");
    assert_eq!(r.record().status, Status::Completed);
    for k in &acked {
        assert!(r.record().metadata.contains_key(k));
    }
    engine.refresh_mirror("C").expect("mirror");
    mirror_matches(&engine);
    eprintln!(
        "{killed} of 25 CLI processes killed mid-transition; {} acknowledged, {committed} committed",
        acked.len()
    );
}
