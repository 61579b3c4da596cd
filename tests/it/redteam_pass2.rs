//! What the second red-team pass broke in the tmux backend and the
//! supervisor's socket (issue 24 items 7, 17, 18), one regression test each.

use crate::common;
use crate::lanes_common;
use crate::tmux_common;

use common::{Drover, T, TmuxGuard, cmdline, pid_of, stat, wait_until};
use std::time::Duration;

/// A tag base unique to test `k` of this run (leftovers of an earlier run
/// never match; tests run in parallel, each with its own base).
fn tag_base(k: u32) -> u32 {
    400_000 + (std::process::id() % 20_000) * 20 + k * 5
}

/// A pane's first process that escapes twice, then stays: `(setsid sleep
/// B+1 &)` (its subshell exits, so the sleep is re-parented away from the
/// pane) and a double-forked daemon that execs `sleep B+2`.
fn escape_script(base: u32) -> String {
    format!(
        r#"(setsid sleep {} &)
python3 -c 'import os
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.execvp("sleep", ["sleep", "{}"])'
echo started
exec sleep 100000"#,
        base + 1,
        base + 2
    )
}

/// The live (not zombie) process running `sleep TAG`.
fn sleeper(tag: u32) -> Option<i32> {
    let tag = tag.to_string();
    procs().into_iter().find(|pid| {
        stat(*pid).is_some_and(|s| s.state != 'Z')
            && cmdline(*pid).is_some_and(|c| c.len() == 2 && c[0] == "sleep" && c[1] == tag)
    })
}

fn procs() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `DROVER_PANE` in `pid`'s environment.
fn marker_of(pid: i32) -> Option<String> {
    lanes_common::environ(pid)
        .into_iter()
        .find(|(k, _)| k == drover::pane::PANE_MARKER_ENV)
        .map(|(_, v)| v)
}

/// Live processes whose environment holds exactly `DROVER_PANE=marker`.
fn marked(marker: &str) -> Vec<i32> {
    let entry = format!("{}={marker}", drover::pane::PANE_MARKER_ENV);
    procs()
        .into_iter()
        .filter(|pid| {
            stat(*pid).is_some_and(|s| s.state != 'Z')
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|e| e.split(|b| *b == 0).any(|kv| kv == entry.as_bytes()))
        })
        .collect()
}

/// Start the escape pane on tmux; its marker and the two escapees' pids.
fn start_escapes(d: &Drover, name: &str, base: u32) -> (String, Vec<i32>) {
    let info = tmux_common::tmux_pane(d, name, &[], &["bash", "-c", &escape_script(base)]);
    d.wait_text(name, "started", T);
    let mut pids = Vec::new();
    for tag in [base + 1, base + 2] {
        let mut pid = None;
        assert!(
            wait_until(T, || {
                pid = sleeper(tag);
                pid.is_some()
            }),
            "escapee sleep {tag} never started"
        );
        pids.push(pid.unwrap_or_default());
    }
    let marker = marker_of(pid_of(&info));
    let marker = marker.expect("a tmux pane's process carries drover's pane marker");
    for p in &pids {
        assert_eq!(marker_of(*p).as_deref(), Some(marker.as_str()), "pid {p}");
        assert_ne!(
            stat(*p).map(|s| s.ppid),
            Some(pid_of(&info)),
            "escapee {p} was meant to leave the pane's tree"
        );
    }
    (marker, pids)
}

fn assert_none_left(marker: &str, escapees: &[i32], after: &str) {
    let ended = |p: i32| stat(p).is_none_or(|s| s.state == 'Z');
    assert!(
        wait_until(T, || escapees.iter().all(|p| ended(*p))
            && marked(marker).is_empty()),
        "after {after}, still running: escapees {:?}, marked {:?}",
        escapees.iter().filter(|p| !ended(**p)).collect::<Vec<_>>(),
        marked(marker)
    );
}

/// Guards: `(setsid sleep &)` and a double-forked daemon in a tmux pane
/// survived `pane kill` (they were re-parented away from the pane's
/// session, and tmux panes carried no marker to find them by).
#[test]
fn tmux_pane_kill_ends_setsid_and_double_forked_escapees() {
    tmux_common::need_tmux();
    let d = Drover::new();
    let _g = TmuxGuard(tmux_common::socket(&d));
    let (marker, pids) = start_escapes(&d, "esc", tag_base(0));
    d.ok(&["pane", "kill", "esc"]);
    assert_none_left(&marker, &pids, "pane kill");
}

/// Guards: the same escapees survived `kill -9` of the supervisor, the
/// next supervisor's re-adoption of the pane and `kill-server`.
#[test]
fn tmux_escapees_end_with_kill_server_after_a_supervisor_kill_and_readoption() {
    tmux_common::need_tmux();
    let d = Drover::new();
    let _g = TmuxGuard(tmux_common::socket(&d));
    let (marker, pids) = start_escapes(&d, "esc", tag_base(1));
    tmux_common::kill_supervisor_and_readopt(&d, "esc");
    d.ok(&["kill-server"]);
    assert_none_left(&marker, &pids, "kill -9, re-adoption and kill-server");
}

/// Guards: `lane down` of a tmux lane left a process that had escaped its
/// pane (double-forked, re-parented away, cwd in the worktree) running and
/// so kept the worktree ("live process(es) working there").
#[test]
fn tmux_lane_down_ends_an_escaped_process_and_removes_the_worktree() {
    tmux_common::need_tmux();
    let d = Drover::new();
    let _g = TmuxGuard(tmux_common::socket(&d));
    let r = lanes_common::repo(&d);
    lanes_common::up(
        &d,
        &r,
        "reviewer",
        &["--agents", "claude", "--backend", "tmux"],
    );
    let rec = lanes_common::records(&d)
        .into_iter()
        .next()
        .expect("one lane");
    let pane = d
        .pane(rec["pane"].as_str().unwrap_or_default())
        .expect("the lane's pane is listed");
    let marker = marker_of(pid_of(&pane)).expect("a tmux lane's agent carries the pane marker");
    let worktree = std::path::PathBuf::from(rec["worktree"].as_str().unwrap_or_default());
    // What a daemon the agent started looks like: its marker inherited, its
    // cwd in the worktree, its parent gone (the sim agent runs no shell).
    let tag = tag_base(2) + 1;
    let started = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("(setsid sleep {tag} </dev/null >/dev/null 2>&1 &)"),
        ])
        .env(drover::pane::PANE_MARKER_ENV, &marker)
        .current_dir(&worktree)
        .status()
        .expect("sh runs");
    assert!(started.success());
    let mut escapee = None;
    assert!(wait_until(T, || {
        escapee = sleeper(tag);
        escapee.is_some()
    }));
    let out = d.ok(&["lane", "down", "--all", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("lane down --json");
    let removed = v
        .as_array()
        .and_then(|a| a.first())
        .map(|l| l["removed"].clone());
    assert_eq!(removed, Some(serde_json::json!(true)), "{v}");
    assert!(!worktree.exists(), "worktree kept: {v}");
    assert_none_left(
        &marker,
        &escapee.into_iter().collect::<Vec<_>>(),
        "lane down",
    );
}

/// A kibibyte figure of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
fn status_bytes(pid: i32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A raw client of the supervisor's socket.
fn raw_client(d: &Drover) -> std::os::unix::net::UnixStream {
    let s = std::os::unix::net::UnixStream::connect(d.socket()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// What the supervisor sends before it closes: everything until EOF or
/// an error (a reset), and how long that took.
fn until_closed(s: &mut std::os::unix::net::UnixStream) -> (Vec<u8>, Duration, bool) {
    use std::io::Read;
    let t0 = std::time::Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, t0.elapsed(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (got, t0.elapsed(), false);
            }
            Err(_) => return (got, t0.elapsed(), true),
        }
    }
}

/// Guards: a client that sent part of a frame and stalled was held with no
/// read timeout; it is disconnected within the frame bound, told why, and
/// the supervisor serves other clients meanwhile.
#[test]
fn a_stalled_partial_frame_is_disconnected_within_the_bound() {
    use std::io::Write;
    let d = Drover::new();
    d.serve();
    let mut s = raw_client(&d);
    let whole = drover::daemon::protocol::encode(
        drover::daemon::protocol::FrameKind::Json,
        &[b' '; 10_000],
    );
    s.write_all(&whole[..5_000]).unwrap();
    // Served meanwhile.
    d.ok(&["pane", "ls"]);
    let (got, took, closed) = until_closed(&mut s);
    let text = String::from_utf8_lossy(&got);
    assert!(closed, "still connected after {took:?}");
    let bound = drover::daemon::frame_limit::FRAME_TIMEOUT;
    assert!(took < bound + Duration::from_secs(5), "took {took:?}");
    assert!(text.contains("did not arrive whole"), "{text}");
    d.ok(&["pane", "ls"]);
}

/// Guards: twenty clients each sending all but the last byte of a 16 MiB
/// frame made the supervisor hold 345 MB; its memory now stays within the
/// partial-frame budget (its peak RSS, `VmHWM`, is measured), those past it
/// are refused at once, and it keeps serving.
#[test]
fn stalled_big_partial_frames_do_not_grow_memory_past_the_budget() {
    use drover::daemon::frame_limit::FRAME_BUDGET;
    use drover::daemon::protocol::MAX_FRAME;
    let d = Drover::new();
    d.serve();
    let sup = d.server_pid().expect("a supervisor runs");
    let before = status_bytes(sup, "VmHWM");
    assert!(before > 0, "no VmHWM for {sup}");
    let clients: Vec<_> = (0..20)
        .map(|_| {
            let mut s = raw_client(&d);
            std::thread::spawn(move || {
                use std::io::Write;
                let mut frame = (MAX_FRAME as u32).to_be_bytes().to_vec();
                frame.push(drover::daemon::protocol::FrameKind::Json as u8);
                let chunk = vec![b' '; 1 << 20];
                // All but the last byte of the frame, then stall.
                let mut left = MAX_FRAME - 2;
                let mut ok = s.write_all(&frame).is_ok();
                while ok && left > 0 {
                    let n = left.min(chunk.len());
                    ok = s.write_all(&chunk[..n]).is_ok();
                    left -= n;
                }
                let (got, _, closed) = until_closed(&mut s);
                (String::from_utf8_lossy(&got).into_owned(), closed)
            })
        })
        .collect();
    let outcomes: Vec<(String, bool)> = clients
        .into_iter()
        .map(|c| c.join().expect("client thread"))
        .collect();
    let grew = status_bytes(sup, "VmHWM").saturating_sub(before);
    let allowed = (FRAME_BUDGET + 2 * MAX_FRAME) as u64;
    assert!(
        grew <= allowed,
        "the supervisor's peak RSS grew by {} MiB (allowed {} MiB)",
        grew >> 20,
        allowed >> 20
    );
    assert!(outcomes.iter().all(|(_, closed)| *closed), "{outcomes:?}");
    let refused = outcomes
        .iter()
        .filter(|(t, _)| t.contains("partial requests"))
        .count();
    assert!(refused > 0, "none refused past the budget: {outcomes:?}");
    d.ok(&["pane", "ls"]);
}

/// Guards: `serve --daemon` right after `kill -9` of the supervisor said
/// "already running… stop it with kill-server" (3 tries in 10), and
/// `kill-server` then found none: the dead supervisor's socket still took a
/// connection, and that was taken for a live one. Liveness is an answer to
/// a ping now, and a lock a dying supervisor still holds is waited for.
#[test]
fn serve_daemon_right_after_kill_9_of_the_supervisor_starts_a_new_one() {
    let d = Drover::new();
    d.serve();
    for round in 0..10 {
        let old = d.server_pid().expect("a supervisor runs");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(old),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill -9");
        let out = d.run(&["serve", "--daemon"]);
        assert!(
            out.status.success(),
            "round {round}: serve --daemon after kill -9 of {old}: {}",
            common::stderr(&out)
        );
        let new = d.server_pid().expect("the new supervisor's pid");
        assert_ne!(new, old, "round {round}");
        d.ok(&["pane", "ls"]);
    }
}
