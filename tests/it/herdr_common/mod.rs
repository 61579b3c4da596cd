//! The fake herdr server the herdr tests run against (`tests/support/fake-herdr`,
//! which follows docs/herdr.md), and helpers shared by the herdr suites.
#![allow(dead_code)]

use super::common::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub const LONG: Duration = Duration::from_secs(60);

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
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A supervisor whose herdr is `fx`: started with the fake's env.
pub fn drover(fx: &Fake) -> Drover {
    let d = Drover::new();
    serve(&d, fx);
    d
}

/// Start `d`'s supervisor (again) with the fake's env.
pub fn serve(d: &Drover, fx: &Fake) {
    let out = d
        .cmd()
        .envs(fx.env())
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

pub fn exit_of(d: &Drover, name: &str) -> Value {
    let mut exit = Value::Null;
    let seen = wait_until(LONG, || {
        exit = d.pane(name).map(|p| p["exit"].clone()).unwrap_or_default();
        !exit.is_null()
    });
    assert!(seen, "pane {name} never exited");
    exit
}
