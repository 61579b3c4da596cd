//! What a red-team pass broke in process hygiene: processes of a pane that
//! call `setsid` or `setpgid`, or ignore SIGHUP or SIGTERM, survived `pane
//! kill` and `kill-server`; after `kill -9` of the supervisor they lived on
//! and the next supervisor said "no panes".

use crate::common;
use common::*;
use serde_json::Value;

/// The escape kinds; escapee `i` of a test with tag base `b` sleeps `b + i + 1`
/// seconds (tests run in parallel: each has its own base).
const ESCAPES: [&str; 5] = [
    "setsid",
    "setpgid",
    "ignores SIGHUP",
    "ignores SIGTERM",
    "setsid, ignores SIGHUP and SIGTERM",
];

/// A tag base unique to test `k` of this run (leftovers of an earlier run
/// never match).
fn tag_base(k: u32) -> u32 {
    200_000 + (std::process::id() % 20_000) * 40 + k * 10
}

/// A shell that starts one process of each escape kind, then waits.
fn escape_script(base: u32) -> String {
    let t = |i: u32| base + i;
    format!(
        r#"setsid sleep {} &
python3 -c 'import os,time; os.setpgid(0,0); time.sleep({})' &
(trap '' HUP; exec sleep {}) &
(trap '' TERM; exec sleep {}) &
setsid bash -c "trap '' HUP TERM; exec sleep {}" &
echo started
wait"#,
        t(1),
        t(2),
        t(3),
        t(4),
        t(5)
    )
}

/// The pid running `sleep TAG` (or python sleeping TAG) that is not a zombie.
fn escapee(tag: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            stat(*pid).is_some_and(|s| s.state != 'Z')
                && cmdline(*pid).is_some_and(|c| {
                    c.iter()
                        .any(|a| a == tag || a.contains(&format!("sleep({tag})")))
                })
        })
}

/// Start the escape pane and wait until all five escapees run; their pids.
fn start_escapes(d: &Drover, name: &str, base: u32) -> Vec<(&'static str, i32)> {
    d.new_pane(name, &[], &["bash", "-c", &escape_script(base)]);
    d.wait_text(name, "started", T);
    let mut pids = Vec::new();
    for (i, kind) in ESCAPES.into_iter().enumerate() {
        let tag = (base + i as u32 + 1).to_string();
        let pid = started(&tag).unwrap_or_else(|| panic!("{kind} escapee never started"));
        pids.push((kind, pid));
    }
    pids
}

/// The escapee of `tag` once it runs; `None` if it does not within `T`.
fn started(tag: &str) -> Option<i32> {
    let mut pid = None;
    wait_until(T, || {
        pid = escapee(tag);
        pid.is_some()
    });
    pid
}

/// `kill -9` of `d`'s supervisor; returns once none of its threads runs.
fn kill_9_supervisor(d: &Drover) {
    let server = d.server_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_until(T, || all_threads_gone(server)));
}

/// Gone or a zombie (a zombie no longer runs; its parent reaps it).
fn ended(pid: i32) -> bool {
    stat(pid).is_none_or(|s| s.state == 'Z')
}

/// Gone, or a zombie none of whose threads still runs: its leader thread is
/// a zombie before the others have exited (and closed the socket and lock).
fn all_threads_gone(pid: i32) -> bool {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    !pid_alive(pid) || (ended(pid) && threads <= 1)
}

fn assert_all_ended(pids: &[(&str, i32)], after: &str) {
    let done = wait_until(T, || pids.iter().all(|(_, p)| ended(*p)));
    let left: Vec<_> = pids.iter().filter(|(_, p)| !ended(*p)).collect();
    assert!(done, "after {after}, still running: {left:?}");
}

/// Guards: `pane kill` ends every process of the pane, whichever way it
/// escaped, and leaves no zombie behind.
#[test]
fn pane_kill_ends_processes_that_setsid_setpgid_or_ignore_hup_and_term() {
    let d = Drover::new();
    let pids = start_escapes(&d, "esc", tag_base(0));
    d.ok(&["pane", "kill", "esc"]);
    assert_all_ended(&pids, "pane kill");
    // Reaped, not left as zombies of the supervisor.
    let reaped = wait_until(T, || pids.iter().all(|(_, p)| stat(*p).is_none()));
    assert!(reaped, "zombies left: {pids:?}");
    assert!(
        !d.state.join("panes").join("esc.json").exists(),
        "record left"
    );
}

/// Guards: `kill-server` ends every process of every pane the same way.
#[test]
fn kill_server_ends_processes_that_setsid_setpgid_or_ignore_hup_and_term() {
    let d = Drover::new();
    let pids = start_escapes(&d, "esc", tag_base(1));
    let server = d.server_pid().unwrap();
    d.ok(&["kill-server"]);
    assert!(
        wait_until(T, || !pid_alive(server)),
        "supervisor still runs"
    );
    assert_all_ended(&pids, "kill-server");
}

/// Guards: after `kill -9` of the supervisor, its pane's record lets the
/// next supervisor report the pane as lost (with a note) and end what
/// still runs, matching pid and start time.
#[test]
fn after_kill_9_the_next_supervisor_reports_lost_panes_and_ends_them() {
    let d = Drover::new();
    let pids = start_escapes(&d, "esc", tag_base(2));
    let rec_path = d.state.join("panes").join("esc.json");
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&rec_path).unwrap()).unwrap();
    assert_eq!(rec["schema_version"], 1);
    assert_eq!(rec["name"], "esc");
    assert_eq!(rec["backend"], "native");
    assert!(rec["backend_pane_id"].is_null());
    assert_eq!(rec["generation"], 1);
    assert!(rec["pid_start_time"].as_u64().unwrap() > 0);
    assert_eq!(rec["pid"], rec["pgid"]);
    assert!(rec["descendants"].is_array());
    assert!(rec["boot_id"].as_str().is_some_and(|b| !b.is_empty()));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&rec_path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "record is not private");
    }
    kill_9_supervisor(&d);
    // Those that ignore SIGHUP or left the session outlive the terminal.
    let survivors: Vec<_> = pids.iter().filter(|(_, p)| !ended(*p)).collect();
    assert!(
        survivors.len() >= 3,
        "expected escapees to outlive the supervisor: {pids:?}"
    );
    // The next supervisor lists the pane as lost, with a note.
    d.serve();
    let p = d
        .pane("esc")
        .expect("the next supervisor does not list the lost pane");
    assert_eq!(p["observation"]["state"], "lost", "{p}");
    assert!(
        p["note"]
            .as_str()
            .is_some_and(|n| n.contains("stopped without ending it")),
        "{p}"
    );
    let table = d.ok(&["pane", "ls"]);
    assert!(table.contains("lost"), "{table}");
    assert_all_ended(&pids, "the next supervisor started");
    assert!(
        wait_until(T, || !rec_path.exists()),
        "record not removed once ended"
    );
    let note = d.pane("esc").unwrap()["note"].as_str().unwrap().to_string();
    assert!(note.contains("were ended"), "{note}");
    // Dismissed by `pane kill`; the name is free.
    d.ok(&["pane", "kill", "esc"]);
    assert!(d.pane("esc").is_none());
}

/// Guards: an agent's `--version` that never answers (asked for a codex
/// pane's evidence) ends with the supervisor that asked, even a `kill -9`
/// of it, and does not live on as an orphan for as long as it waits.
#[test]
fn a_version_probe_that_never_answers_ends_with_its_supervisor() {
    use std::os::unix::fs::PermissionsExt;
    let d = Drover::new();
    let tag = (tag_base(3) + 1).to_string();
    let dir = d.scratch().join("stand-in");
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join("codex");
    std::fs::write(
        &prog,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then exec sleep {tag}; fi\nexec sleep 1000\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    d.new_pane("probed", &["--agent", "codex"], &[prog.to_str().unwrap()]);
    let probe =
        started(&tag).expect("the supervisor never asked the pane's program for its version");
    kill_9_supervisor(&d);
    assert!(
        wait_until(T, || ended(probe)),
        "the version probe {probe} outlived its supervisor"
    );
}
