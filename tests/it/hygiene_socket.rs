//! What a red-team pass broke at the supervisor's socket: idle connections
//! past `ulimit -n` made the accept loop spin and every CLI call hang, and
//! clients that hung up during `wait` kept their sockets until the timeout.

use crate::common;
use common::*;
use drover::daemon::protocol::{FrameKind, PROTOCOL_VERSION, write_frame};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// CPU time (user + system) of a process, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split(' ').collect();
    // After ')': state(0) … utime(11) stime(12).
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn clock_ticks_per_sec() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as u64
}

fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Start `drover serve` for `d` with `RLIMIT_NOFILE` lowered to `nofile`.
fn serve_with_nofile(d: &Drover, nofile: u64) -> Child {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve"])
        .env("DROVER_STATE_DIR", &d.state)
        .current_dir(d.scratch())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe and touches only this process.
    unsafe {
        cmd.pre_exec(move || {
            let lim = nix::libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            if nix::libc::setrlimit(nix::libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let up = wait_until(T, || {
        d.cmd()
            .args(["--no-autostart", "pane", "ls"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(up, "supervisor did not start");
    child
}

/// Guards: with more idle connections than `ulimit -n`, the supervisor
/// backs off instead of spinning on `accept`, and a new CLI call gets a
/// clear refusal (or is served) instead of hanging.
#[test]
fn idle_connections_past_the_fd_limit_neither_spin_nor_hang_the_supervisor() {
    let d = Drover::new();
    let mut server = serve_with_nofile(&d, 128);
    let pid = d.server_pid().unwrap();
    let idle: Vec<UnixStream> = (0..300)
        .filter_map(|_| UnixStream::connect(d.socket()).ok())
        .collect();
    assert!(idle.len() > 128, "only {} connections", idle.len());
    let window = Duration::from_secs(3);
    let t0 = cpu_ticks(pid);
    let start = Instant::now();
    std::thread::sleep(window); // a measurement window, not a settle wait
    let used = (cpu_ticks(pid) - t0) as f64 / clock_ticks_per_sec() as f64;
    let share = used / start.elapsed().as_secs_f64();
    eprintln!(
        "supervisor CPU with {} idle connections at ulimit -n 128: {:.1}% over {:?}",
        idle.len(),
        share * 100.0,
        start.elapsed()
    );
    assert!(share < 0.2, "supervisor spins: {:.0}% CPU", share * 100.0);
    let out = d
        .run_within(&["--no-autostart", "pane", "ls"], Duration::from_secs(15))
        .expect("a CLI call hung while the supervisor was out of descriptors");
    match out.status.code() {
        Some(0) => {}
        Some(5) => assert!(
            stderr(&out).contains("limit of") && stderr(&out).contains("connections"),
            "{}",
            stderr(&out)
        ),
        c => panic!("exit {c:?}: {}", stderr(&out)),
    }
    drop(idle);
    let served = wait_until(T, || {
        d.run_within(&["--no-autostart", "pane", "ls"], Duration::from_secs(5))
            .is_some_and(|o| o.status.success())
    });
    assert!(served, "not served after the idle clients left");
    d.ok(&["kill-server"]);
    assert!(wait_until(T, || server.try_wait().unwrap().is_some()));
}

/// Send a `wait` request and leave without reading the answer.
fn start_wait(d: &Drover, pane: &str) -> UnixStream {
    let mut s = UnixStream::connect(d.socket()).unwrap();
    let req = serde_json::json!({"v": PROTOCOL_VERSION, "id": 1, "op": "wait",
        "args": {"panes": [pane], "until": ["exited"], "timeout_ms": 1_000_000_000u64}});
    write_frame(&mut s, FrameKind::Json, &serde_json::to_vec(&req).unwrap()).unwrap();
    s
}

/// Guards: a client that hangs up during `wait` releases its request (and
/// socket) at once; with 200 abandoned waits, the supervisor's descriptors
/// return to their baseline and `kill-server` is prompt.
#[test]
fn waits_whose_clients_hang_up_release_their_sockets_at_once() {
    let d = Drover::new();
    d.new_pane("idle", &[], &["sleep", "100000"]);
    let pid = d.server_pid().unwrap();
    let baseline = fd_count(pid);
    // Most as raw clients; some as real CLI processes killed with SIGKILL.
    let raw: Vec<UnixStream> = (0..190).map(|_| start_wait(&d, "idle")).collect();
    let mut cli: Vec<Child> = (0..10)
        .map(|_| {
            d.cmd()
                .args([
                    "wait",
                    "idle",
                    "--until",
                    "exited",
                    "--timeout-ms",
                    "1000000000",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let all_in = wait_until(T, || fd_count(pid) >= baseline + 190);
    let peak = fd_count(pid);
    assert!(
        all_in,
        "waits not all connected: {peak} fds (baseline {baseline})"
    );
    drop(raw);
    for c in &mut cli {
        let _ = c.kill();
        let _ = c.wait();
    }
    let released = wait_until(T, || fd_count(pid) <= baseline + 2);
    eprintln!(
        "supervisor fds: baseline {baseline}, 200 waits {peak}, after the clients left {}",
        fd_count(pid)
    );
    assert!(released, "sockets held: {} fds", fd_count(pid));
    let start = Instant::now();
    let out = d
        .run_within(&["kill-server"], Duration::from_secs(20))
        .expect("kill-server hung");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        wait_until(T, || !pid_alive(pid)),
        "supervisor still running"
    );
    eprintln!("kill-server took {:?}", start.elapsed());
}
