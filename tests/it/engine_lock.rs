//! The lock discipline of the engine (docs/state-transitions.md "Locking"): by the code's shape,
//! and observed on real processes.

use crate::engine_support as support;

use support::*;

/// Guards the shape: the decision code imports nothing that can spawn, sleep,
/// open a socket, read a clock or touch a file, and the critical section hands
/// the decision only a `fn` pointer's worth of inputs.
#[test]
fn decision_code_cannot_reach_effects() {
    let root = env!("CARGO_MANIFEST_DIR");
    let table =
        std::fs::read_to_string(format!("{root}/crates/engine/src/engine/table.rs")).expect("read");
    let code: String = table
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for banned in [
        "std::process",
        "Command",
        "std::net",
        "Socket",
        "std::thread",
        "sleep",
        "tokio",
        "std::fs",
        "File",
        "Utc::now",
        "SystemTime",
        "Instant",
        "crate::store",
        "crate::paths",
        "env::",
    ] {
        assert!(!code.contains(banned), "table.rs mentions {banned}");
    }
    let engine =
        std::fs::read_to_string(format!("{root}/crates/engine/src/engine/mod.rs")).expect("read");
    let start = engine
        .find("fn critical(")
        .expect("critical section exists");
    let body = &engine[start..];
    let end = body.find("\n    }\n").expect("end of critical");
    let body = &body[..end];
    assert!(body.contains("decider: Decider"), "takes a fn pointer");
    // No sync either: the one durable write (the audit log's) comes after
    // the lock is let go.
    for banned in [
        "Command",
        "sleep",
        "Socket",
        "mirror",
        "spawn",
        "sync_",
        "DirSync",
        "write_json_atomic",
        "write_json_renamed",
    ] {
        assert!(!body.contains(banned), "critical section mentions {banned}");
    }
}

/// The instrumented half: strace a real `drover job` process and check that
/// between taking `registry.lock` and closing it there is no clone/fork/exec,
/// socket, connect, sleep, sync or mirror; an accepted transition's audit
/// entry is appended under it and the log synced after, an ACK's or a
/// refusal's appended after.
#[test]
#[ignore = "needs strace (and ptrace permission)"]
fn lock_is_held_only_for_read_decide_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = dir.path();
    let go = |args: &[&str]| {
        let mut c = drover(st);
        c.args(args);
        run(c)
    };
    assert_eq!(code(&go(&["job", "create", "J"])), 0);
    let traced = [
        vec!["job", "claim", "J", "--session", "s", "--as", "agent"],
        vec!["job", "claim", "J", "--session", "s", "--as", "agent"], // refused
        vec!["job", "progress", "J", "--set", "a=1"],
        vec!["job", "complete", "J"],
        vec!["job", "complete", "J"], // ack
    ];
    for (i, args) in traced.iter().enumerate() {
        let out = st.join(format!("strace-{i}.txt"));
        let mut c = std::process::Command::new("strace");
        c.args(["-f", "-qq", "-e"])
            .arg("trace=openat,flock,close,clone,clone3,fork,vfork,execve,socket,connect,nanosleep,clock_nanosleep,rename,renameat,renameat2,fsync,fdatasync")
            .arg("-o")
            .arg(&out)
            .arg(drover_bin())
            .arg("--state-dir")
            .arg(st)
            .args(args);
        for k in ["DROVER_LANE_ID", "DROVER_SESSION_ID", "DROVER_STATE_DIR"] {
            c.env_remove(k);
        }
        let o = run(c);
        assert!(matches!(code(&o), 0 | 3), "{args:?}: {}", stderr(&o));
        let trace = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(
            trace.contains("registry.lock"),
            "strace saw no registry.lock (can it trace here?): {}",
            stderr(&o).trim()
        );
        let lines: Vec<&str> = trace.lines().collect();
        let open = lines
            .iter()
            .position(|l| l.contains("openat(") && l.contains("registry.lock\""))
            .expect("registry.lock opened");
        let fd = lines[open]
            .rsplit("= ")
            .next()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .expect("fd");
        let locked = (open..lines.len())
            .find(|&j| lines[j].contains(&format!("flock({fd}, LOCK_EX")))
            .expect("flock LOCK_EX");
        let released = (locked..lines.len())
            .find(|&j| {
                lines[j].contains(&format!("close({fd})"))
                    || lines[j].contains(&format!("flock({fd}, LOCK_UN"))
            })
            .expect("lock released");
        let held = &lines[locked + 1..released];
        assert!(
            held.iter().any(|l| l.contains(".job.json")),
            "the trace sees inside the critical section: {held:?}"
        );
        for l in held {
            for bad in [
                "clone(",
                "clone3(",
                "fork(",
                "execve(",
                "socket(",
                "connect(",
                "nanosleep(",
            ] {
                assert!(
                    !l.contains(bad),
                    "{args:?}: {bad} while holding the lock: {l}"
                );
            }
            assert!(!l.contains("status.json"), "mirror inside the lock: {l}");
            assert!(
                !l.contains("fsync(") && !l.contains("fdatasync("),
                "{args:?}: a sync under the lock: {l}"
            );
        }
        // An accepted transition appends its audit entry under the lock and
        // syncs the log after it is let go (its one durable write); an ACK
        // or a refusal is audited after the lock.
        let after = &lines[released..];
        let accepted = matches!(i, 0 | 2 | 3);
        if accepted {
            assert!(
                held.iter().any(|l| l.contains("audit.jsonl")),
                "{args:?}: accepted, but not audited under the lock: {held:?}"
            );
            assert!(
                after.iter().any(|l| l.contains("fdatasync(")),
                "{args:?}: the audit log synced after release: {after:?}"
            );
        } else {
            assert!(
                !held.iter().any(|l| l.contains("audit.jsonl")),
                "{args:?}: not accepted, yet audited under the lock: {held:?}"
            );
            assert!(
                after.iter().any(|l| l.contains("audit.jsonl")),
                "{args:?}: audit appended after release"
            );
        }
    }
}
