//! The herdr servers the herdr tests run against — the real herdr when one
//! is installed (`$DROVER_HERDR`, `herdr` on PATH, or the cache
//! `scripts/install-herdr.sh` fills), else the fake in
//! `tests/support/fake-herdr` (which follows docs/herdr.md and the real
//! facts), kept on its own for the faults a real server cannot be made to
//! produce — and helpers shared by the herdr suites.
#![allow(dead_code)]

use super::common::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub const LONG: Duration = Duration::from_secs(60);

/// Why a real-herdr test is ignored by plain `cargo test`.
pub const NEEDS_HERDR: &str =
    "needs the real herdr 0.8.2: scripts/install-herdr.sh, or DROVER_HERDR / herdr on PATH";

/// A herdr server a test's supervisor talks to.
pub trait Server {
    /// The env a supervisor (and the herdr CLI) needs to reach it.
    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)>;
    /// Every CLI call and request it saw (the fake only).
    fn log(&self) -> Option<Vec<Value>>;
    /// Whether it is the real herdr.
    fn is_real(&self) -> bool;
    /// The herdr CLI (real or fake) bound to this server.
    fn cli(&self, args: &[&str]) -> Output {
        let bin = self
            .env()
            .into_iter()
            .find(|(k, _)| *k == "DROVER_HERDR")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or_else(fake_bin);
        Command::new(bin)
            .args(args)
            .envs(self.env())
            .output()
            .unwrap()
    }
}

impl<T: Server + ?Sized> Server for Box<T> {
    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        (**self).env()
    }
    fn log(&self) -> Option<Vec<Value>> {
        (**self).log()
    }
    fn is_real(&self) -> bool {
        (**self).is_real()
    }
}

/// The real herdr binary, when one is installed: `$DROVER_HERDR`, else
/// `herdr` on PATH, else `<cache>/drover/herdr/0.8.2/herdr` (where
/// `scripts/install-herdr.sh` puts it).
pub fn real_bin() -> Option<PathBuf> {
    let runs = |p: &std::path::Path| {
        p != fake_bin()
            && Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"herdr "))
    };
    if let Some(p) = std::env::var_os("DROVER_HERDR").map(PathBuf::from) {
        return runs(&p).then_some(p);
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("herdr"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let cache = std::env::var_os("DROVER_HERDR_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("drover/herdr"))
        })
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/drover/herdr")));
    let cached = cache.map(|c| c.join("0.8.2/herdr"));
    on_path
        .into_iter()
        .chain(cached)
        .find(|p| p.is_file() && runs(p))
}

/// The real herdr when installed, else the fake: for the suites that hold
/// on both.
pub fn herdr() -> Box<dyn Server> {
    match real_bin() {
        Some(bin) => Box::new(Real::start(&bin)),
        None => Box::new(Fake::start()),
    }
}

/// A real herdr server for a suite whose panes go on `backend`
/// (`$DROVER_TEST_BACKEND`): one on `herdr` (failing, naming what to
/// install, when there is none), none on any other backend.
pub fn server_for(backend: &str) -> Option<Real> {
    (backend == "herdr").then(Real::require)
}

/// A real herdr server (`herdr server`, headless) on a private socket with
/// its own config and state dirs; stopped when dropped.
pub struct Real {
    dir: tempfile::TempDir,
    bin: PathBuf,
    server: Option<Child>,
}

impl Real {
    /// Start the installed real herdr; a test that needs one fails here,
    /// naming what to install, when there is none.
    pub fn require() -> Real {
        let bin = real_bin().unwrap_or_else(|| panic!("{NEEDS_HERDR}"));
        Real::start(&bin)
    }

    pub fn start(bin: &std::path::Path) -> Real {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("herdr-home");
        std::fs::create_dir_all(home.join("config/herdr")).unwrap();
        std::fs::create_dir_all(home.join("state")).unwrap();
        std::fs::write(
            home.join("config/herdr/config.toml"),
            "[update]\nversion_check = false\nmanifest_check = false\n",
        )
        .unwrap();
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(home.join("server.log")).unwrap();
        let mut r = Real {
            server: None,
            bin: bin.to_path_buf(),
            dir,
        };
        let child = Command::new(bin)
            .arg("server")
            .envs(r.env())
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("state"))
            // bash's startup files can be slow; the panes' shell is sh.
            .env("SHELL", "/bin/sh")
            .env_remove("HERDR_SESSION")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        r.server = Some(child);
        let up = wait_until(LONG, || r.cli(&["pane", "list"]).status.success());
        assert!(
            up,
            "the real herdr did not answer on {}",
            r.socket().display()
        );
        r
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("herdr.sock")
    }

    /// The server killed (SIGKILL), as a crash: its panes' terminals close.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `herdr server stop`: herdr ends its panes with SIGHUP.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = self.cli(&["server", "stop"]);
            if !wait_until(Duration::from_secs(10), || {
                c.try_wait().ok().flatten().is_some()
            }) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl Server for Real {
    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("HERDR_SOCKET_PATH", self.socket().into()),
            ("DROVER_HERDR", self.bin.clone().into()),
        ]
    }
    fn log(&self) -> Option<Vec<Value>> {
        None
    }
    fn is_real(&self) -> bool {
        true
    }
}

impl Drop for Real {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One fake herdr server on a private socket; killed when dropped.
pub struct Fake {
    dir: tempfile::TempDir,
    server: Child,
}

pub fn fake_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake-herdr")
}

impl Fake {
    pub fn start() -> Fake {
        let have_python = Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(have_python, "the fake herdr needs python3 on PATH");
        let dir = tempfile::tempdir().unwrap();
        let fake = Fake {
            server: Command::new("python3")
                .arg(fake_bin())
                .arg("server")
                .envs(Self::env_of(dir.path()))
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
            dir,
        };
        let sock = fake.socket();
        assert!(
            wait_until(LONG, || sock.exists()),
            "fake herdr did not start"
        );
        fake
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("herdr.sock")
    }

    pub fn env_of(dir: &std::path::Path) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("HERDR_SOCKET_PATH", dir.join("herdr.sock").into()),
            ("FAKE_HERDR_LOG", dir.join("log.jsonl").into()),
            ("FAKE_HERDR_FAULTS", dir.join("faults").into()),
            ("DROVER_HERDR", fake_bin().into()),
        ]
    }

    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        Self::env_of(self.dir.path())
    }

    /// Replace the fault list (`TARGET FAULT` lines; empty clears it).
    pub fn faults(&self, lines: &str) {
        let tmp = self.dir.path().join("faults.tmp");
        std::fs::write(&tmp, lines).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("faults")).unwrap();
    }

    /// Every CLI call and request the fake saw.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log.jsonl")).unwrap_or_default()
    }

    pub fn stop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }

    /// `herdr server stop`, answered as herdr 0.8.2 answers it (see
    /// fake-herdr); back once the server has exited.
    pub fn server_stop(&mut self) {
        let out = Command::new(fake_bin())
            .args(["server", "stop"])
            .envs(self.env())
            .output()
            .unwrap();
        assert!(out.status.success(), "server stop: {}", stderr(&out));
        let server = &mut self.server;
        assert!(
            wait_until(LONG, || server.try_wait().ok().flatten().is_some()),
            "the fake herdr did not exit"
        );
    }
}

impl Server for Fake {
    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        Fake::env(self)
    }
    fn log(&self) -> Option<Vec<Value>> {
        Some(Fake::log(self))
    }
    fn is_real(&self) -> bool {
        false
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A supervisor whose herdr is `fx`: started with its env.
pub fn drover(fx: &(impl Server + ?Sized)) -> Drover {
    let d = Drover::new();
    serve(&d, fx);
    d
}

/// Start `d`'s supervisor (again) with `fx`'s env.
pub fn serve(d: &Drover, fx: &(impl Server + ?Sized)) {
    serve_with(d, fx, &[]);
}

/// [`serve`] with `extra` set in the supervisor's env too.
pub fn serve_with(d: &Drover, fx: &(impl Server + ?Sized), extra: &[(&str, &str)]) {
    let out = d
        .cmd()
        .envs(fx.env())
        .envs(extra.iter().copied())
        .args(["serve", "--daemon"])
        .output()
        .unwrap();
    assert!(out.status.success(), "serve: {}", stderr(&out));
}

pub fn herdr_pane(d: &Drover, name: &str, flags: &[&str], cmd: &[&str]) -> Value {
    let mut f = vec!["--backend", "herdr"];
    f.extend_from_slice(flags);
    d.new_pane(name, &f, cmd)
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

pub fn environ(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|kv| String::from_utf8_lossy(kv).into_owned())
        .collect()
}

/// Pids whose argv holds `needle` anywhere.
pub fn argv_holding(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// `herdr server stop` (`stop`) of a pane quiet for a while, as an idle
/// agent's is: drover reads it seldom then, so no read of its own sees
/// herdr shutting down ("server is shutting down" to all but `ping`), and
/// herdr hangs the pane up while it still answers. The pane's exit is the
/// hangup, and herdr's server gone its transport error.
pub fn quiet_pane_stopped_is_herdr_going_away(d: &Drover, stop: impl FnOnce()) {
    herdr_pane(d, "st", &[], &["sh", "-c", "echo up; exec sleep 600"]);
    d.wait_text("st", "up", LONG);
    // The scenario, not a settle: a pane quiet for 2 s is read seldom (the
    // quiet reads start at 250 ms and double).
    std::thread::sleep(Duration::from_secs(2));
    stop();
    let exit = exit_of(d, "st");
    assert_eq!(exit["signal"], "Hangup", "{exit}");
    let mut p = Value::Null;
    let gone = wait_until(LONG, || {
        p = d.pane("st").unwrap();
        p["transport_error"]
            .as_str()
            .is_some_and(|t| t.contains("herdr's server went away"))
    });
    assert!(gone, "{p}");
}

pub fn exit_of(d: &Drover, name: &str) -> Value {
    let mut exit = Value::Null;
    let seen = wait_until(LONG, || {
        exit = d.pane(name).map(|p| p["exit"].clone()).unwrap_or_default();
        !exit.is_null()
    });
    if !seen {
        // What the supervisor saw, for a failure that does not reproduce.
        let log = std::fs::read_to_string(d.state.join("logs/supervisor.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        panic!(
            "pane {name} never exited; pane: {}\nsupervisor log (last 60 lines):\n{}",
            d.pane(name).unwrap_or_default(),
            lines[lines.len().saturating_sub(60)..].join("\n")
        );
    }
    exit
}
