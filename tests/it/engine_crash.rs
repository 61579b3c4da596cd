//! The engine killed at every step of a transition, the way SQLite's crash
//! tests do: a real `drover job …` process runs with
//! `DROVER_ENGINE_CRASH_AT=N` and kills itself (SIGKILL) at its N-th crash
//! point (src/engine/crash.rs), for N = 1, 2, … until it outlives them all.
//! After every kill the state dir is checked:
//!
//! - every file parses (nothing corrupt is left unreported);
//! - replaying the audit log reproduces every record exactly, with at most
//!   the one transition in flight when the writer died added (committed but
//!   not yet audited: the record is the truth, docs/state-transitions.md);
//! - no seq is used twice: the next transition's seq is above every seq any
//!   record or audit entry holds, also when the seq hint is lost as in a power
//!   cut (removed, torn, or from another boot);
//! - the mirror is never ahead of a record, and the lock is free again.
//!
//! The long version (≥ 1,000 `kill -9` at random points among concurrent
//! writers) is `cargo bench --bench engine -- --crash 1000`.

use crate::engine_support as support;

use drover::engine::record::format_time;
use drover::engine::{
    Action, Actor, AuditEntry, Engine, JobRecord, Outcome, Request, Status, replay,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use support::*;

const CRASH_ENV: &str = "DROVER_ENGINE_CRASH_AT";
/// More crash points than any transition passes: a run that never outlives
/// them is a hang in disguise.
const MAX_POINTS: u64 = 40;

/// The requests under test, each from the state before it.
const KINDS: [&str; 4] = ["create", "claim", "progress", "complete"];

fn request(kind: &str, job: &str) -> Request {
    let action = match kind {
        "create" => Action::Create { deadline: None },
        "claim" => Action::Claim {
            session: "s".into(),
        },
        "progress" => {
            let mut set = Map::new();
            set.insert("k".into(), Value::String("1".into()));
            Action::Progress { set }
        }
        _ => Action::Complete { reason: None },
    };
    Request::new(job, action, Actor::operator())
}

fn cli_args(kind: &str, job: &str) -> Vec<String> {
    let mut a = vec!["job".to_string(), kind.to_string(), job.to_string()];
    match kind {
        "claim" => a.extend(["--session".into(), "s".into()]),
        "progress" => a.extend(["--set".into(), "k=1".into()]),
        _ => {}
    }
    a
}

/// `drover --state-dir st <args>`, run to its end.
fn cli<S: AsRef<std::ffi::OsStr>>(
    st: &std::path::Path,
    args: impl IntoIterator<Item = S>,
) -> std::process::Output {
    let mut c = drover(st);
    c.args(args);
    run(c)
}

/// Bring `job` to the state `kind` starts from (in this process, no crash
/// points: the variable is only set on the child). Returns its record.
fn prepare(engine: &Engine, kind: &str, job: &str) -> Option<JobRecord> {
    let steps: &[&str] = match kind {
        "create" => &[],
        "claim" => &["create"],
        _ => &["create", "claim"],
    };
    let mut rec = None;
    for s in steps {
        let applied = engine
            .transition(&request(s, job))
            .unwrap_or_else(|e| panic!("prepare {s} {job}: {e}"));
        rec = Some(applied.record().clone());
    }
    rec
}

/// Every file in jobs/ parses (the seq hint is not JSON and is checked by
/// the engine itself); returns the records.
fn all_files_parse(engine: &Engine) -> BTreeMap<String, JobRecord> {
    for ent in std::fs::read_dir(engine.dir()).expect("read dir") {
        let p = ent.expect("entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // A file kept beside because it did not parse is not read again.
        if name.starts_with('.')
            || name.ends_with(".lock")
            || name == "seq.hint"
            || name.contains(".corrupt-")
        {
            continue;
        }
        if name.ends_with(".jsonl") {
            drover::store::read_jsonl::<Value>(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else {
            drover::store::read_json::<Value>(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    engine
        .list()
        .expect("list")
        .into_iter()
        .map(|r| (r.job_id.clone(), r))
        .collect()
}

/// The hint lost as a power cut can lose it: gone, torn, or from another boot.
fn lose_hint(engine: &Engine, how: u64) {
    let p = engine.dir().join("seq.hint");
    match how % 3 {
        0 => {
            let _ = std::fs::remove_file(&p);
        }
        1 => {
            let mut bytes = std::fs::read(&p).unwrap_or_default();
            bytes.truncate(bytes.len() / 2);
            std::fs::write(&p, bytes).expect("tear the hint");
        }
        _ => {
            let line = "00000000000000000001 another-boot 0000000000000000\n";
            std::fs::write(&p, line).expect("hint of another boot");
        }
    }
}

#[test]
fn a_writer_killed_at_every_step_loses_nothing_and_reuses_no_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    // A running job that every check moves forward once (its seq must be new).
    prepare(&engine, "progress", "side");
    // Committed transitions that died before their audit entry: what the log
    // lacks, and the records must still be explained by.
    let mut in_flight: Vec<AuditEntry> = Vec::new();
    let mut kills = 0u64;
    for kind in KINDS {
        let mut points = None;
        for n in 1..=MAX_POINTS {
            let job = format!("{kind}-{n}");
            let before = prepare(&engine, kind, &job);
            let out = run({
                let mut c = drover(st);
                c.args(cli_args(kind, &job)).env(CRASH_ENV, n.to_string());
                c
            });
            let crashed = out.status.signal() == Some(9);
            if !crashed {
                assert_eq!(code(&out), 0, "{kind} {n}: {}", stderr(&out));
            }
            let point = stderr(&out)
                .lines()
                .find(|l| l.starts_with("crash point"))
                .unwrap_or("(outlived every point)")
                .to_string();
            let records = all_files_parse(&engine);
            let audit = engine.audit(None).expect("audit parses");
            // Did the request commit, and is it audited?
            let before_seq = before.as_ref().map_or(0, |r| r.transition_seq);
            let committed = records.get(&job).filter(|r| r.transition_seq > before_seq);
            if let Some(rec) = committed {
                let audited = audit
                    .iter()
                    .any(|e| e.outcome == Outcome::Accepted && e.seq == Some(rec.transition_seq));
                assert!(
                    audited || crashed,
                    "{kind} {n}: acknowledged but not audited"
                );
                if !audited {
                    in_flight.push(AuditEntry {
                        seq: Some(rec.transition_seq),
                        at: format_time(rec.updated_at),
                        job_id: job.clone(),
                        outcome: Outcome::Accepted,
                        from: before.as_ref().map(|r| r.status),
                        to: Some(rec.status),
                        rule: None,
                        reason: None,
                        new_attempt_id: (kind == "claim").then(|| rec.attempt_id.clone()).flatten(),
                        request: request(kind, &job),
                        pid: 0,
                    });
                }
            } else {
                assert!(crashed, "{kind} {n}: exit 0 but nothing committed");
            }
            // The log, plus what died in flight, explains every record.
            let mut entries = audit.clone();
            entries.extend(in_flight.iter().cloned());
            let replayed = replay(&entries)
                .unwrap_or_else(|m| panic!("{kind}, killed at {point}: replay diverged: {m:?}"));
            assert_eq!(
                replayed, records,
                "{kind}, killed at {point}: replay differs from the records"
            );
            if let Some(m) = engine.mirror().expect("mirror parses") {
                for (id, e) in &m.jobs {
                    assert!(
                        e.transition_seq <= records[id].transition_seq,
                        "{kind}, killed at {point}: mirror ahead of {id}"
                    );
                }
            }
            // No seq used twice, also after the hint is lost (every third kill).
            let highest = records
                .values()
                .map(|r| r.transition_seq)
                .chain(audit.iter().filter_map(|e| e.seq))
                .max()
                .unwrap_or(0);
            if n % 3 == 0 {
                lose_hint(&engine, n / 3);
            }
            let mut set = Map::new();
            set.insert(format!("after-{kind}-{n}"), Value::String("1".into()));
            let next = engine
                .transition(&Request::new(
                    "side",
                    Action::Progress { set },
                    Actor::agent(),
                ))
                .unwrap_or_else(|e| panic!("{kind}, killed at {point}: the next transition: {e}"));
            assert!(
                next.record().transition_seq > highest,
                "{kind}, killed at {point}: seq {} reused (highest so far {highest})",
                next.record().transition_seq
            );
            if crashed {
                kills += 1;
            } else {
                points = Some(n - 1);
                break;
            }
        }
        let points = points.unwrap_or_else(|| panic!("{kind}: never outlived the crash points"));
        // locked, seq written, the record's written and renamed, audited,
        // unlocked, synced (the audit log), the mirror's 2 (written, renamed:
        // it is not fsynced).
        assert!(
            points >= 9,
            "{kind}: only {points} crash points (is the hook wired?)"
        );
    }
    // Finally the mirror catches up and the whole log, with what died in
    // flight, still replays to the records.
    for r in engine.list().expect("list") {
        engine.refresh_mirror(&r.job_id).expect("refresh");
    }
    let mut entries = engine.audit(None).expect("audit");
    entries.extend(in_flight.iter().cloned());
    let records = all_files_parse(&engine);
    assert_eq!(replay(&entries).expect("replay"), records);
    assert_eq!(
        engine.show("side").expect("side").status,
        Status::Running,
        "the side job only moved forward"
    );
    eprintln!(
        "{kills} writers killed at every crash point of {} requests; {} died committed but unaudited",
        KINDS.len(),
        in_flight.len()
    );
}

/// A state dir written before the seq hint keeps its counter in `seq.json`
/// (ahead of the records where a writer died between the two). It opens and
/// carries on above that counter, and `seq.json` is folded into the hint and
/// removed, so a stale one can never be read again.
#[test]
fn a_seq_json_state_dir_continues_without_reusing_a_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    prepare(&engine, "progress", "old");
    // As the old layout leaves it: seq.json ahead of every record, no hint.
    let _ = std::fs::remove_file(engine.dir().join("seq.hint"));
    std::fs::write(engine.dir().join("seq.json"), "{\n  \"last_seq\": 41\n}\n").expect("seq.json");
    assert_eq!(engine.show("old").expect("old").transition_seq, 2);
    let out = run({
        let mut c = drover(st);
        c.args(["job", "progress", "old", "--set", "k=1"]);
        c
    });
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(engine.show("old").expect("old").transition_seq, 42);
    assert!(
        !engine.dir().join("seq.json").exists(),
        "seq.json folded into the hint and removed"
    );
    assert_eq!(engine.last_seq().expect("last seq"), 42);
    let r = engine
        .transition(&Request::new(
            "old",
            Action::Complete { reason: None },
            Actor::agent(),
        ))
        .expect("complete");
    assert_eq!(r.record().transition_seq, 43);
}

/// A power cut loses what was not synced: the records written since the
/// kernel last wrote them back, and the seq hint (the boot changes); the
/// audit log keeps every acknowledged entry (its one durable write, synced
/// before the acknowledgment). A power cut cannot be made on demand, so its
/// leftovers are made by hand after acknowledged transitions: one record
/// gone, one empty (a rename written back before its data), one an older
/// version, one ahead of the log (its entry lost, never acknowledged), the
/// hint from another boot. The first reader of the new boot (`drover job
/// show`) restores the first three from the log, keeps the empty one beside,
/// keeps the one ahead, and no seq either holds is given out again.
#[test]
fn after_a_power_cut_the_records_are_restored_from_the_audit_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    for job in ["gone", "empty", "old", "fine", "ahead"] {
        prepare(&engine, "progress", job);
    }
    let old_bytes = std::fs::read(engine.record_path("old")).expect("old record");
    let progress = |job: &str| {
        engine
            .transition(&request("progress", job))
            .unwrap_or_else(|e| panic!("progress {job}: {e}"))
    };
    for job in ["gone", "empty", "old", "fine"] {
        progress(job);
    }
    let before: BTreeMap<String, JobRecord> = all_files_parse(&engine);
    // The last transition's entry is the log's last line: lost in the cut,
    // while its record was written back.
    let ahead = progress("ahead");
    let log = std::fs::read_to_string(engine.audit_path()).expect("log");
    let last_line = log.trim_end().rsplit('\n').next().expect("a line").len() + 1;
    std::fs::write(engine.audit_path(), &log[..log.len() - last_line]).expect("cut the log");
    let highest = ahead.record().transition_seq;

    std::fs::remove_file(engine.record_path("gone")).expect("lose a record");
    std::fs::write(engine.record_path("empty"), "").expect("empty a record");
    std::fs::write(engine.record_path("old"), &old_bytes).expect("an older record");
    lose_hint(&engine, 2); // a hint of another boot

    let out = cli(st, ["job", "show", "gone"]);
    assert_eq!(code(&out), 0, "the first reader: {}", stderr(&out));
    let records = all_files_parse(&engine);
    for job in ["gone", "empty", "old", "fine"] {
        assert_eq!(records[job], before[job], "{job} as acknowledged");
    }
    assert_eq!(
        &records["ahead"],
        ahead.record(),
        "a record ahead of the log is kept"
    );
    let kept: Vec<_> = std::fs::read_dir(engine.dir())
        .expect("read dir")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("empty.job.json.corrupt-")
        })
        .collect();
    assert_eq!(kept.len(), 1, "the empty record kept beside");
    // Every accepted entry still replays to the records it restored.
    let audit = engine.audit(None).expect("audit");
    let replayed = replay(&audit).expect("replay");
    for job in ["gone", "empty", "old", "fine"] {
        assert_eq!(replayed[job], records[job], "{job} replays");
    }
    assert!(engine.last_seq().expect("last seq") >= highest);
    let next = progress("fine");
    assert!(
        next.record().transition_seq > highest,
        "seq {} given out again (the record ahead holds {highest})",
        next.record().transition_seq
    );
}

/// After a reboot with an audit log that does not parse, the records cannot
/// be brought up to it: a read still shows a record as it is, and a
/// transition is refused with the error naming the log (nothing reset).
#[test]
fn after_a_reboot_a_corrupt_log_stops_transitions_not_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let engine = Engine::open(drover::statedir::StateDir::new(st)).expect("engine");
    prepare(&engine, "progress", "J");
    let mut log = std::fs::read(engine.audit_path()).expect("log");
    log.splice(0..0, b"not json\n".iter().copied());
    std::fs::write(engine.audit_path(), &log).expect("corrupt the log");
    lose_hint(&engine, 2); // a hint of another boot
    let show = cli(st, ["job", "show", "J"]);
    assert_eq!(code(&show), 0, "a read: {}", stderr(&show));
    assert!(stdout(&show).contains("running"), "{}", stdout(&show));
    let progress = cli(st, cli_args("progress", "J"));
    assert_ne!(code(&progress), 0, "a transition on a corrupt log");
    assert!(
        stderr(&progress).contains("audit.jsonl"),
        "{}",
        stderr(&progress)
    );
    assert_eq!(
        std::fs::read(engine.audit_path()).expect("log"),
        log,
        "the log left as it was"
    );
}
