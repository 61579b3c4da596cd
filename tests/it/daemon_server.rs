//! The supervisor: one per state dir, private socket, clean stop on SIGTERM,
//! and a protocol server that survives hostile or careless clients.

use crate::common;
use common::*;
use drover::daemon::protocol::{FrameKind, encode, read_frame};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A foreground `drover serve`, waited for until it answers.
fn serve_fg(d: &Drover) -> Child {
    let child = d
        .cmd()
        .arg("serve")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sock = d.socket();
    assert!(
        wait_until(T, || ping(&sock).is_some()),
        "serve never answered"
    );
    child
}

/// Ping on a fresh connection; `None` when nothing answers properly.
fn ping(sock: &std::path::Path) -> Option<Value> {
    let mut s = UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(&encode(
        FrameKind::Json,
        json!({"v": 1, "id": 7, "op": "ping"})
            .to_string()
            .as_bytes(),
    ))
    .ok()?;
    let f = read_frame(&mut s).ok()??;
    let v: Value = serde_json::from_slice(&f.payload).ok()?;
    (v["ok"] == true && v["id"] == 7).then_some(v)
}

fn connect(d: &Drover) -> UnixStream {
    let s = UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Write raw bytes, then read what comes back until the server closes:
/// JSON answers, in order.
fn exchange(d: &Drover, bytes: &[u8]) -> Vec<Value> {
    let mut s = connect(d);
    s.write_all(bytes).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    while let Ok(Some(f)) = read_frame(&mut s) {
        out.push(serde_json::from_slice(&f.payload).unwrap());
    }
    out
}

fn sigterm(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

fn wait_child(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let mut status = None;
    wait_until(timeout, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status
}

/// A second `serve` on the same state dir refuses at once with a clear
/// message, foreground or `--daemon`; the first keeps running.
#[test]
fn second_serve_on_one_state_dir_refuses() {
    let d = Drover::new();
    let mut first = serve_fg(&d);
    for args in [vec!["serve"], vec!["serve", "--daemon"]] {
        let start = Instant::now();
        let out = d.run(&args);
        assert!(start.elapsed() < Duration::from_secs(5), "{args:?} hung");
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(
            stderr(&out).contains("already running"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("kill-server"), "{}", stderr(&out));
    }
    assert!(first.try_wait().unwrap().is_none(), "the first serve died");
    assert!(ping(&d.socket()).is_some());
    sigterm(&first);
    let st = wait_child(&mut first, T).expect("serve did not stop on SIGTERM");
    assert_eq!(st.code(), Some(0));
}

/// SIGTERM (and SIGINT) stop the supervisor with exit 0: pane groups are
/// killed, the socket is removed, the state dir is free for a new one.
#[test]
fn sigterm_and_sigint_stop_supervisor_and_kill_pane_groups() {
    for sig in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let d = Drover::new();
        let mut serve = serve_fg(&d);
        let info = d.new_pane("g", &[], &["sh", "-c", "sleep 1000 & sleep 1000 & wait"]);
        let leader = pid_of(&info);
        let mut members = Vec::new();
        assert!(wait_until(T, || {
            members = group_members(leader).into_iter().map(|s| s.pid).collect();
            members.len() >= 3
        }));
        // A pane that ignores TERM and HUP needs the SIGKILL after the grace.
        let hard = d.new_pane(
            "hard",
            &[],
            &[
                "sh",
                "-c",
                "trap '' TERM HUP; echo armed; while :; do sleep 1; done",
            ],
        );
        d.wait_text("hard", "armed", T);
        let start = Instant::now();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(serve.id() as i32), sig).unwrap();
        let st = wait_child(&mut serve, Duration::from_secs(15)).expect("serve did not stop");
        assert_eq!(st.code(), Some(0), "{sig:?}");
        assert!(start.elapsed() >= drover::pane::KILL_GRACE / 2, "no grace");
        let alive: Vec<_> = members
            .iter()
            .chain([&pid_of(&hard)])
            .filter_map(|p| stat(*p))
            .filter(|s| s.state != 'Z')
            .collect();
        assert!(alive.is_empty(), "{sig:?}: still running: {alive:?}");
        assert!(!d.socket().exists(), "socket left behind");
        let out = d.run(&["--no-autostart", "pane", "ls"]);
        assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    }
}

/// The socket lives in a 0700 directory and is itself 0600.
#[test]
fn socket_and_its_dir_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = Drover::new();
    d.serve();
    let sock = d.socket();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let dir = sock.parent().unwrap();
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "socket dir mode {mode:o}");
    let pong = ping(&sock).unwrap();
    assert_eq!(pong["result"]["state_dir"], d.state.to_str().unwrap());
}

/// Only commands that create something start the supervisor; read commands
/// say none runs (exit 5) and start nothing; `kill-server` stops it (and is
/// idempotent).
#[test]
fn autostart_and_kill_server() {
    let d = Drover::new();
    // Guards: `pane ls`, `status`, `wait` and `attach` autostarted a daemon.
    for args in [
        &["pane", "ls"][..],
        &["status"],
        &["wait", "x", "--until", "idle", "--timeout-ms", "10"],
        &["pane", "read", "x"],
    ] {
        let out = d.run(args);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("no supervisor running for"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(
        d.server_pid().is_none(),
        "a read command started a supervisor"
    );
    let out = d.run(&["--no-autostart", "pane", "new", "n", "--", "true"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    d.new_pane("k", &[], &["sleep", "1000"]);
    let pid = d.server_pid().expect("no pid in the lock file");
    assert!(pid_alive(pid));
    let pane_pid = pid_of(&d.pane("k").unwrap());
    assert!(d.ok(&["kill-server"]).contains("stopped the supervisor"));
    assert!(wait_until(T, || stat(pid).is_none_or(|s| s.state == 'Z')));
    assert!(wait_until(T, || stat(pane_pid).is_none_or(|s| s.state == 'Z')));
    let again = d.run(&["kill-server"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        stderr(&again).contains("no supervisor"),
        "{}",
        stderr(&again)
    );
}

/// Guards: a mistyped state dir was created by read commands and `kill-server`.
#[test]
fn read_commands_never_create_a_state_dir() {
    let d = Drover::new();
    let missing = d.scratch().join("nonexistent").join("x").join("y");
    let m = missing.to_str().unwrap();
    for (args, code) in [
        (&["job", "ls"][..], 1),
        (&["lease", "ls"], 1),
        (&["events"], 1),
        (&["pane", "ls"], 5),
        (&["status"], 5),
        (&["kill-server"], 0),
    ] {
        let out = d
            .cmd()
            .arg("--state-dir")
            .arg(m)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(
            !d.scratch().join("nonexistent").exists(),
            "{args:?} created it"
        );
    }
}

/// Guards: with a read-only state dir every command said "supervisor
/// unreachable"; the cause is the lock file that cannot be written.
#[test]
fn a_supervisor_that_cannot_start_says_why() {
    let d = Drover::new();
    // A directory where the lock file must go: opening it for writing fails.
    std::fs::create_dir_all(d.state.join("supervisor.lock")).unwrap();
    let out = d.run(&["pane", "new", "w", "--", "sleep", "100"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("could not start the supervisor") && err.contains("supervisor.lock"),
        "{err}"
    );
    assert!(!err.contains("unreachable"), "{err}");
}

/// The same on a read-only file system (a tmpfs mounted read-only in a user
/// and mount namespace).
#[test]
#[ignore = "needs unshare -rm (user namespaces) to mount a read-only tmpfs"]
fn a_read_only_state_dir_names_the_file_system() {
    let d = Drover::new();
    let ro = d.scratch().join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let script = format!(
        "mount -t tmpfs -o ro tmpfs {0} && {1} --state-dir {0} pane new w -- true",
        ro.display(),
        common::BIN
    );
    let out = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .output()
        .expect("unshare");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("supervisor.lock: Read-only file system"),
        "{}",
        stderr(&out)
    );
}

/// Garbage, malformed and oversized frames get an error answer and a closed
/// connection; the supervisor keeps answering everyone else.
#[test]
fn garbage_on_the_socket_is_contained() {
    let d = Drover::new();
    d.new_pane("keep", &[], &["sleep", "1000"]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "text garbage",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            "exceeds",
        ),
        ("max length", vec![0xff, 0xff, 0xff, 0xff, 1], "exceeds"),
        ("empty frame", vec![0, 0, 0, 0], "empty"),
        ("unknown kind", encode_kind(9, b"{}"), "unknown frame kind"),
        (
            "output kind",
            encode(FrameKind::Output, b"hi"),
            "expected a JSON",
        ),
        (
            "not json",
            encode(FrameKind::Json, b"{not json"),
            "malformed",
        ),
        (
            "json not a request",
            encode(FrameKind::Json, b"[1,2,3]"),
            "malformed",
        ),
        (
            "binary",
            encode(FrameKind::Json, &[0xff, 0xfe, 0x00, 0x80, 0x1b]),
            "malformed",
        ),
        (
            "wrong version",
            encode(FrameKind::Json, br#"{"v":99,"id":3,"op":"ping"}"#),
            "protocol version",
        ),
    ];
    for (what, bytes, needle) in &cases {
        let answers = exchange(&d, bytes);
        assert_eq!(answers.len(), 1, "{what}: {answers:?}");
        assert_eq!(answers[0]["ok"], false, "{what}");
        let msg = answers[0]["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(needle), "{what}: {msg}");
        assert!(ping(&d.socket()).is_some(), "no ping after {what}");
    }
    // A frame at the size limit, full of garbage: refused, not a crash.
    let mut big = vec![b'a'; drover::daemon::protocol::MAX_FRAME - 1];
    big[0] = b'[';
    let answers = exchange(&d, &encode(FrameKind::Json, &big));
    assert_eq!(answers[0]["ok"], false);
    // Bad arguments to real ops answer with a usage error and keep the
    // connection open for the next request.
    let mut s = connect(&d);
    for (i, req) in [
        json!({"op": "pane.new", "args": {"spec": 42}}),
        json!({"op": "pane.read", "args": {}}),
        json!({"op": "pane.resize", "args": {"pane": "keep", "cols": 0, "rows": 5}}),
        json!({"op": "pane.keys", "args": {"pane": "keep", "keys": "Enter"}}),
        json!({"op": "wait", "args": {"panes": ["keep"]}}),
        json!({"op": "no.such.op"}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut req = req;
        req["v"] = json!(1);
        req["id"] = json!(100 + i);
        s.write_all(&encode(FrameKind::Json, req.to_string().as_bytes()))
            .unwrap();
        let f = read_frame(&mut s).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&f.payload).unwrap();
        assert_eq!(v["ok"], false, "{req}: {v}");
        assert_eq!(v["id"], 100 + i, "{v}");
        assert_eq!(v["error"]["code"], "usage", "{req}: {v}");
    }
    s.write_all(&encode(FrameKind::Json, br#"{"v":1,"id":9,"op":"ping"}"#))
        .unwrap();
    let f = read_frame(&mut s).unwrap().unwrap();
    let v: Value = serde_json::from_slice(&f.payload).unwrap();
    assert_eq!(v["ok"], true);
    // The pane is untouched.
    let p = d.pane("keep").unwrap();
    assert!(p["exit"].is_null() && p["cols"] == 120);
}

/// Guards the typed protocol's answers to what the wire cannot say: a client
/// of another protocol version hears both versions (exit 5, `version`), and
/// a request missing an argument hears which op and which field, with its
/// own id, on a connection that stays open.
#[test]
fn other_versions_and_missing_arguments_are_named() {
    let d = Drover::new();
    d.new_pane("keep", &[], &["sleep", "1000"]);
    let answers = exchange(
        &d,
        &encode(FrameKind::Json, br#"{"v":2,"id":4,"op":"pane.ls"}"#),
    );
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], 4);
    assert_eq!(answers[0]["error"]["code"], "version");
    let msg = answers[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("protocol v2, this supervisor speaks v1"),
        "{msg}"
    );
    let mut s = connect(&d);
    for (i, (req, needle)) in [
        (
            json!({"op": "pane.send", "args": {"pane": "keep"}}),
            "pane.send: missing field `text`",
        ),
        (
            json!({"op": "deliver", "args": {"text": "hi"}}),
            "deliver: missing field `pane`",
        ),
        (
            json!({"op": "pane.kill"}),
            "pane.kill: missing field `pane`",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut req = req;
        req["v"] = json!(1);
        req["id"] = json!(200 + i);
        s.write_all(&encode(FrameKind::Json, req.to_string().as_bytes()))
            .unwrap();
        let f = read_frame(&mut s).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&f.payload).unwrap();
        assert_eq!(v["id"], 200 + i, "{v}");
        assert_eq!(v["error"]["code"], "usage", "{req}: {v}");
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains(needle), "{req}: {m}");
    }
    assert!(d.pane("keep").is_some_and(|p| p["exit"].is_null()));
}

fn encode_kind(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = ((payload.len() + 1) as u32).to_be_bytes().to_vec();
    v.push(kind);
    v.extend_from_slice(payload);
    v
}

/// Clients that go away mid-request — half a frame, a pending barrier, an
/// attach stream — do not disturb the supervisor; a stalled half frame does
/// not block other clients.
#[test]
fn client_disconnecting_mid_request_is_contained() {
    let d = Drover::new();
    d.new_pane(
        "p",
        &[],
        &["sh", "-c", "while :; do echo tick; sleep 0.2; done"],
    );
    // Half a frame, then gone.
    {
        let mut s = connect(&d);
        s.write_all(&[0, 0, 0, 100, 1, b'{', b'"']).unwrap();
    }
    // Half a frame, held open while others are served.
    let mut stalled = connect(&d);
    stalled.write_all(&[0, 0, 0, 100, 1]).unwrap();
    assert!(ping(&d.socket()).is_some());
    // A barrier whose client hangs up before the answer.
    {
        let mut s = connect(&d);
        let req = json!({"v":1,"id":1,"op":"wait","args":{"panes":["p"],"until":["exited"],"timeout_ms":600000}});
        s.write_all(&encode(FrameKind::Json, req.to_string().as_bytes()))
            .unwrap();
    }
    // An attach that vanishes while output streams to it.
    {
        let mut s = connect(&d);
        let req = json!({"v":1,"id":1,"op":"attach","args":{"pane":"p","cols":100,"rows":30}});
        s.write_all(&encode(FrameKind::Json, req.to_string().as_bytes()))
            .unwrap();
        let f = read_frame(&mut s).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&f.payload).unwrap();
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(d.pane("p").unwrap()["attached"], true);
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf).unwrap();
    }
    assert!(
        wait_until(T, || d.pane("p").unwrap()["attached"] == false),
        "attach slot not released"
    );
    assert!(
        wait_until(T, || {
            let p = d.pane("p").unwrap();
            (p["cols"].as_u64(), p["rows"].as_u64()) == (Some(120), Some(40))
        }),
        "size not given back: {}",
        d.pane("p").unwrap()
    );
    // Still fully working.
    d.ok(&["pane", "send", "p", "x"]);
    assert!(ping(&d.socket()).is_some());
    drop(stalled);
    assert!(ping(&d.socket()).is_some());
}

/// Many clients at once get their own answers.
#[test]
fn concurrent_clients_each_get_their_answer() {
    let d = Drover::new();
    d.serve();
    let sock = d.socket();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let sock = sock.clone();
            std::thread::spawn(move || (0..20).all(|_| ping(&sock).is_some()))
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap());
    }
}

/// Many commands auto-starting at once on a fresh state dir: all succeed,
/// and exactly one supervisor runs.
#[test]
fn concurrent_autostart_starts_one_supervisor() {
    let d = Drover::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            d.cmd()
                .args(["pane", "new", &format!("p{i}"), "--", "sleep", "1000"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(d.ls().len(), 8);
    let state = d.state.to_str().unwrap().to_string();
    let serving: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            stat(*pid).is_some_and(|s| s.state != 'Z')
                && cmdline(*pid)
                    .is_some_and(|c| c.iter().any(|a| a == "serve") && c.contains(&state))
        })
        .collect();
    assert_eq!(serving.len(), 1, "supervisors: {serving:?}");
}
