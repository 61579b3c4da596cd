//! What a red-team pass broke in the state dir, through the real binary: the
//! JSONL torn-tail rule, records named for another job, a full disk during a
//! claim, state-dir privacy and bounded lock waits.

use crate::engine_support as support;

use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};
use support::*;

fn drover_ok(st: &Path, args: &[&str]) -> String {
    let o = run({
        let mut c = drover(st);
        c.args(args);
        c
    });
    assert_eq!(code(&o), 0, "drover {args:?}: {}", stderr(&o));
    stdout(&o)
}

fn drover_out(st: &Path, args: &[&str]) -> std::process::Output {
    run({
        let mut c = drover(st);
        c.args(args);
        c
    })
}

fn strip_final_newline(p: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(p).expect("read log");
    assert_eq!(bytes.pop(), Some(b'\n'), "log ends with a newline");
    std::fs::write(p, &bytes).expect("write log");
    bytes
}

fn audit_entries(st: &Path, job: &str) -> Vec<Value> {
    let out = drover_ok(st, &["job", "audit", job, "--json"]);
    serde_json::from_str::<Value>(&out)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_else(|| panic!("audit --json is one JSON array: {out}"))
}

/// Guards the complete last audit record without its newline: readers skipped
/// it and the next writer cut it.
#[test]
fn audit_record_without_its_newline_is_kept_by_readers_and_writers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    drover_ok(st, &["job", "create", "J1"]);
    drover_ok(st, &["job", "create", "J2"]);
    let log = st.join("jobs").join("audit.jsonl");
    let before = strip_final_newline(&log);
    assert_eq!(
        audit_entries(st, "J2").len(),
        1,
        "the unterminated record is read"
    );
    drover_ok(st, &["job", "create", "J3"]);
    let after = std::fs::read(&log).expect("read");
    assert!(after.starts_with(&before), "nothing was cut");
    assert_eq!(after[before.len()], b'\n', "the newline was added");
    for j in ["J1", "J2", "J3"] {
        assert_eq!(audit_entries(st, j).len(), 1, "{j}");
    }
}

/// Guards the seq of a complete last event without its newline: it was cut and
/// the next event reused its seq.
#[test]
fn event_without_its_newline_keeps_its_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    drover_ok(st, &["registry", "init", "--topology", "four-role"]);
    let beat = ["session-heartbeat", "--session-id", "reviewer", "--status"];
    drover_ok(st, &[&beat[..], &["working"]].concat());
    let seqs = |st: &Path| -> Vec<u64> {
        drover_ok(st, &["events", "--jsonl"])
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).expect("event line")["seq"]
                    .as_u64()
                    .expect("seq")
            })
            .collect()
    };
    let before = seqs(st);
    assert!(!before.is_empty());
    let log = st.join("registry").join("events.jsonl");
    strip_final_newline(&log);
    assert_eq!(seqs(st), before, "the unterminated last event is read");
    drover_ok(st, &[&beat[..], &["passed"]].concat());
    let all = seqs(st);
    assert_eq!(&all[..before.len()], &before[..], "no event lost");
    assert!(all.len() > before.len(), "the new event is there");
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "no seq reused: {all:?}"
    );
}

/// Guards a log of 300 random bytes: the next writer truncated it to nothing.
#[test]
fn log_of_random_bytes_is_corrupt_and_never_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    drover_ok(st, &["job", "create", "J1"]);
    let log = st.join("jobs").join("audit.jsonl");
    let mut rng = Rng::new(10);
    let junk: Vec<u8> = (0..300)
        .map(|_| (rng.next_u64() >> 7) as u8 | 0x80)
        .collect();
    std::fs::write(&log, &junk).expect("write");
    let o = drover_out(st, &["job", "claim", "J1", "--session", "s1"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("audit.jsonl") && err.contains("line 1"),
        "{err}"
    );
    assert_eq!(std::fs::read(&log).expect("read"), junk, "nothing cut");
    let show: Value =
        serde_json::from_str(&drover_ok(st, &["job", "show", "J1", "--json"])).expect("json");
    assert_eq!(show["status"], "pending", "refused before committing");
    let o = drover_out(st, &["job", "audit", "J1"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("audit.jsonl"), "{}", stderr(&o));
}

/// Guards a record file copied under another job's name: `show` printed the
/// other job and a claim wrote its record into the wrong file.
#[test]
fn record_named_for_another_job_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    drover_ok(st, &["job", "create", "J2"]);
    let jobs = st.join("jobs");
    std::fs::copy(jobs.join("J2.job.json"), jobs.join("J3.job.json")).expect("cp");
    let copied = std::fs::read(jobs.join("J3.job.json")).expect("read");
    for args in [
        vec!["job", "show", "J3"],
        vec!["job", "claim", "J3", "--session", "s1"],
        vec!["job", "ls"],
    ] {
        let o = drover_out(st, &args);
        assert_eq!(code(&o), 1, "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("J3.job.json"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(
        std::fs::read(jobs.join("J3.job.json")).expect("read"),
        copied
    );
}

/// Dirs 0700 and files 0600 under `root`, or the first path that is not.
fn first_public(root: &Path) -> Option<String> {
    for ent in std::fs::read_dir(root).expect("read dir") {
        let ent = ent.expect("entry");
        let md = std::fs::symlink_metadata(ent.path()).expect("stat");
        let want = if md.is_dir() { 0o700 } else { 0o600 };
        if md.mode() & 0o777 != want {
            return Some(format!("{} {:o}", ent.path().display(), md.mode() & 0o777));
        }
        if md.is_dir()
            && let Some(p) = first_public(&ent.path())
        {
            return Some(p);
        }
    }
    None
}

/// Guards the state dir's privacy: under umask 000 (or 022) every dir was
/// 0755/0777 and every file 0644/0666, readable by other users.
#[test]
fn state_dir_is_private_whatever_the_umask() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path().join("state");
    let sh = |args: &str| {
        let o = run({
            let mut c = std::process::Command::new("sh");
            c.arg("-c")
                .arg(format!("umask 000; exec \"$0\" --state-dir \"$1\" {args}"))
                .arg(drover_bin())
                .arg(&st);
            c
        });
        assert_eq!(code(&o), 0, "{args}: {}", stderr(&o));
        stderr(&o)
    };
    sh("job create J1");
    sh("job claim J1 --session s1");
    sh("registry init --topology four-role");
    sh("session-heartbeat --session-id reviewer --status working");
    assert_eq!(
        std::fs::metadata(&st).expect("stat").mode() & 0o777,
        0o700,
        "the state dir itself"
    );
    assert_eq!(first_public(&st), None);

    // An existing world-readable state dir is tightened, and the user told once.
    std::fs::set_permissions(&st, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let first = sh("job ls");
    assert!(
        first.contains("private") && first.contains("755"),
        "{first}"
    );
    assert_eq!(std::fs::metadata(&st).expect("stat").mode() & 0o777, 0o700);
    let second = sh("job ls");
    assert!(!second.contains("private"), "said once: {second}");
}

/// Guards against a foreign `flock` on `jobs/registry.lock` blocking every
/// transition forever: the wait is bounded and names the file and the holder.
#[test]
fn held_jobs_lock_fails_within_the_bound_naming_the_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    drover_ok(st, &["job", "create", "J1"]);
    let lock = st.join("jobs").join("registry.lock");
    let ready = st.join("held");
    // One process (the shell, then the sleep it becomes) holds the lock, so
    // its pid is the holder's and killing it releases the lock.
    let mut holder = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 9>>\"$0\"; flock 9 && touch \"$1\" && exec sleep 600")
        .arg(&lock)
        .arg(&ready)
        .spawn()
        .expect("sh and flock(1) are installed");
    let held = wait_until(
        "the holder to take the lock",
        Duration::from_secs(30),
        || ready.exists(),
    );
    let start = Instant::now();
    let o = run({
        let mut c = drover(st);
        c.env("DROVER_LOCK_WAIT_MS", "300")
            .args(["job", "claim", "J1", "--session", "s1"]);
        c
    });
    let took = start.elapsed();
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(held, "flock did not start");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("registry.lock"), "{err}");
    assert!(err.contains(&format!("pid {}", holder.id())), "{err}");
    assert!(took < Duration::from_secs(60), "bounded: took {took:?}");
    // Nothing was committed, and the lock works again once released.
    drover_ok(st, &["job", "claim", "J1", "--session", "s1"]);
}

/// A small tmpfs, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).expect("mount point");
        let o = run({
            let mut c = std::process::Command::new("mount");
            c.args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at);
            c
        });
        assert_eq!(
            code(&o),
            0,
            "this test needs root to mount a small tmpfs (a real full disk): {}",
            stderr(&o)
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fill the file system holding `dir` until a write fails, then free `keep` bytes.
fn fill_leaving(dir: &Path, keep: u64) -> std::path::PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).expect("filler");
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    let len = f.metadata().expect("stat").len();
    f.set_len((len / 4096) * 4096 - keep).expect("truncate");
    filler
}

/// Guards a claim on a full disk: it committed but exited 1 without the
/// attempt id, and `status.json` lagged the records from then on. The error
/// must say what was committed and the next write must repair the mirror.
#[test]
#[ignore = "needs root (mounts a small tmpfs for a real full disk); .ci/run runs it"]
fn claim_on_a_full_disk_says_what_it_committed_and_the_mirror_catches_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnt = dir.path().join("mnt");
    let _fs = Tmpfs::mount(&mnt, "512k");
    let st = mnt.join("state");
    // Enough jobs that the mirror needs more pages than the records do.
    let mut n = 0;
    while std::fs::metadata(st.join("jobs").join("status.json")).map_or(0, |m| m.len()) < 9000 {
        n += 1;
        drover_ok(&st, &["job", "create", &format!("J{n:03}")]);
        drover_ok(
            &st,
            &["job", "claim", &format!("J{n:03}"), "--session", "s"],
        );
    }
    drover_ok(&st, &["job", "create", "K1"]);
    let filler = fill_leaving(&mnt, 2 * 4096);
    let o = drover_out(&st, &["job", "claim", "K1", "--session", "s1"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "the mirror write must fail here: {err}");
    std::fs::remove_file(&filler).expect("free the disk");
    let rec: Value =
        serde_json::from_str(&drover_ok(&st, &["job", "show", "K1", "--json"])).expect("json");
    assert_eq!(rec["status"], "running", "the claim committed");
    let attempt = rec["attempt_id"].as_str().expect("attempt");
    let seq = rec["transition_seq"].as_u64().expect("seq");
    assert!(err.contains(attempt), "the error names the attempt: {err}");
    assert!(err.contains(&format!("seq {seq}")), "and the seq: {err}");
    let mirror = |st: &Path| -> Value {
        serde_json::from_slice(&std::fs::read(st.join("jobs").join("status.json")).expect("read"))
            .expect("mirror parses")
    };
    assert_eq!(mirror(&st)["jobs"]["K1"]["status"], "pending", "lagging");
    drover_ok(&st, &["job", "create", "K2"]);
    let m = mirror(&st);
    assert_eq!(m["jobs"]["K1"]["status"], "running", "repaired: {m}");
    assert_eq!(m["jobs"]["K1"]["attempt_id"], attempt);
}
