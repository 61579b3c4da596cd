//! Shared harness for the integration tests: a supervisor per test, keyed by
//! its own temporary state dir, stopped when the harness is dropped.
#![allow(dead_code)]

mod follow;
pub use follow::EventFollow;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The drover binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_drover");

/// The backend this run of the suite puts its panes on:
/// `$DROVER_TEST_BACKEND` (`native` when unset). One suite, every backend.
pub fn backend() -> String {
    std::env::var("DROVER_TEST_BACKEND").unwrap_or_else(|_| "native".into())
}

/// Whether the suite runs on the native backend (for the few assertions
/// about drover's own PTY and process tree).
pub fn on_native() -> bool {
    backend() == "native"
}

/// Poll `cond` until it holds or `timeout` passes; true when it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(5);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

/// One supervisor on a private state dir. Dropping it runs `kill-server`.
pub struct Drover {
    pub tmp: tempfile::TempDir,
    pub state: PathBuf,
    /// A backend this test insists on, whatever the suite runs on.
    pinned: Option<&'static str>,
}

impl Default for Drover {
    fn default() -> Self {
        Self::new()
    }
}

impl Drover {
    /// A fresh state dir; the supervisor auto-starts on the first command.
    pub fn new() -> Self {
        Self::in_tmp(tempfile::tempdir().unwrap())
    }

    /// A fresh state dir under `parent` (the real agents' suites keep out
    /// of /tmp: Codex warns about helper binaries in temporary dirs).
    pub fn new_in(parent: &std::path::Path) -> Self {
        Self::in_tmp(tempfile::tempdir_in(parent).unwrap())
    }

    fn in_tmp(tmp: tempfile::TempDir) -> Self {
        let state = tmp.path().canonicalize().unwrap().join("state");
        std::fs::create_dir_all(&state).unwrap();
        Drover {
            tmp,
            state,
            pinned: None,
        }
    }

    /// The same harness, creating its panes on the native backend: for the
    /// assertions about drover's own PTY (run in every backend's suite).
    pub fn native(mut self) -> Self {
        self.pinned = Some("native");
        self
    }

    /// A scratch dir beside the state dir.
    pub fn scratch(&self) -> PathBuf {
        self.tmp.path().canonicalize().unwrap()
    }

    /// A `drover` command bound to this state dir. Panes it creates are on
    /// the backend the suite runs on ([`backend`]).
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("DROVER_STATE_DIR", &self.state)
            .env(
                "DROVER_BACKEND",
                self.pinned.map(String::from).unwrap_or_else(backend),
            )
            .current_dir(self.tmp.path())
            .stdin(Stdio::null());
        c
    }

    /// Start drover's sim agent of `profile` (optionally with a script) in pane `name`.
    pub fn sim(&self, name: &str, profile: &str, script: Option<&Path>) -> String {
        let mut args = vec![
            "pane",
            "new",
            name,
            "--agent",
            "sim",
            "--",
            BIN,
            "sim-agent",
            "--profile",
            profile,
        ];
        let script = script.map(|p| p.display().to_string());
        if let Some(sc) = &script {
            args.extend(["--script", sc.as_str()]);
        }
        self.ok(&args)
    }

    /// Start the supervisor (`serve --daemon`): read commands never start one.
    pub fn serve(&self) {
        self.ok(&["serve", "--daemon"]);
    }

    /// Run `drover ARGS…` and collect its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Run `drover ARGS…`, bounded: `None` when it did not finish within
    /// `within` (it is killed then).
    pub fn run_within(&self, args: &[&str], within: Duration) -> Option<Output> {
        let mut c = self
            .cmd()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let done = wait_until(within, || c.try_wait().unwrap().is_some());
        if !done {
            let _ = c.kill();
            let _ = c.wait();
            return None;
        }
        Some(c.wait_with_output().unwrap())
    }

    /// Run and assert exit 0; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "drover {args:?} failed ({:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `pane new NAME -- CMD…` with extra flags before `--`.
    pub fn new_pane(&self, name: &str, flags: &[&str], cmd: &[&str]) -> Value {
        let mut args = vec!["pane", "new", name, "--json"];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend_from_slice(cmd);
        serde_json::from_str(&self.ok(&args)).unwrap()
    }

    /// `pane ls --json`.
    pub fn ls(&self) -> Vec<Value> {
        let v: Value = serde_json::from_str(&self.ok(&["pane", "ls", "--json"])).unwrap();
        v.as_array().unwrap().clone()
    }

    /// One pane from `pane ls`, if it exists.
    pub fn pane(&self, name: &str) -> Option<Value> {
        self.ls().into_iter().find(|p| p["name"] == name)
    }

    /// The rendered screen text of a pane.
    pub fn read(&self, name: &str) -> String {
        self.ok(&["pane", "read", name])
    }

    /// Wait until the pane's screen contains `needle`; returns the screen.
    pub fn wait_text(&self, name: &str, needle: &str, timeout: Duration) -> String {
        let mut last = String::new();
        let found = wait_until(timeout, || {
            last = self.read(name);
            last.contains(needle)
        });
        assert!(
            found,
            "pane {name} never showed {needle:?}; screen:\n{last}"
        );
        last
    }

    /// `drover wait NAME --until STATES` with a timeout; returns the output.
    pub fn wait_state(&self, names: &[&str], until: &str, timeout_ms: u64) -> Output {
        let t = timeout_ms.to_string();
        let mut args = vec!["wait"];
        args.extend_from_slice(names);
        args.extend_from_slice(&["--until", until, "--timeout-ms", &t]);
        self.run(&args)
    }

    /// The supervisor's socket (same derivation as the binary's).
    pub fn socket(&self) -> PathBuf {
        drover::paths::socket_path(drover::statedir::StateDir::new(&self.state)).unwrap()
    }

    /// The supervisor's pid, from its lock file.
    pub fn server_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.state.join("supervisor.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// `kill -9` the supervisor and wait until all its threads are gone
    /// (what its panes see of a crash).
    pub fn kill_supervisor(&self) {
        let sup = self.server_pid().expect("a supervisor runs");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(sup),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(
            wait_until(Duration::from_secs(120), || all_threads_gone(sup)),
            "the supervisor survived SIGKILL"
        );
    }
}

impl Drop for Drover {
    fn drop(&mut self) {
        let pid = self.server_pid();
        // A hung supervisor must not hang the test run: bound kill-server.
        let stopped = self
            .cmd()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()
            .is_some_and(|mut c| {
                let done = wait_until(Duration::from_secs(20), || {
                    c.try_wait().ok().flatten().is_some()
                });
                if !done {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                done
            });
        // Belt and braces: never leak a daemon, even if kill-server failed.
        if let Some(pid) = pid
            && (!stopped || pid_alive(pid))
            && cmdline(pid).is_some_and(|c| c.iter().any(|a| a == "serve"))
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Fields of `/proc/<pid>/stat` after the command name.
#[derive(Debug, Clone)]
pub struct Stat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
}

/// Parse `/proc/<pid>/stat`.
pub fn stat(pid: i32) -> Option<Stat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
    })
}

/// Whether a process with this pid exists in any state (zombies included).
pub fn pid_alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Gone, or a zombie none of whose threads still runs: after `kill -9` a
/// process's leader thread is a zombie before the others have exited (and
/// closed its socket and locks).
pub fn all_threads_gone(pid: i32) -> bool {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    !pid_alive(pid) || (stat(pid).is_some_and(|s| s.state == 'Z') && threads <= 1)
}

/// Every process (zombies included) whose process group is `pgrp`.
pub fn group_members(pgrp: i32) -> Vec<Stat> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(st) = stat(pid)
            && st.pgrp == pgrp
        {
            out.push(st);
        }
    }
    out
}

/// argv of a process.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// A pane's pid from `pane ls`.
pub fn pid_of(p: &Value) -> i32 {
    p["pid"].as_i64().unwrap() as i32
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Generous bound for anything that should happen "promptly".
pub const T: Duration = Duration::from_secs(10);

/// Run git in `dir` (a test identity) and return stdout; panics on failure.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Stops the tmux server on socket `.0` (a state dir's, `pane::tmux::socket_name`)
/// when the test ends, even when it fails while no supervisor runs (tmux panes
/// outlive a supervisor).
pub struct TmuxGuard(pub String);

impl Drop for TmuxGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .output();
    }
}

/// Everything `reader` yields until EOF, collected by a thread of its own
/// (a PTY master's output, read while the test drives the other side).
pub fn collect_output(
    mut reader: Box<dyn std::io::Read + Send>,
) -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    use std::io::Read as _;
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let o2 = out.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            o2.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    out
}
