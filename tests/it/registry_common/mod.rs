//! Helpers shared by the registry tests: run the real binary against a
//! temporary state dir, make real git repositories, wait on conditions.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_drover");

/// A temporary state dir and the scratch space around it.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).expect("state dir");
        let state = std::fs::canonicalize(&state).expect("canonical state dir");
        Env { dir, state }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--state-dir").arg(&self.state).args(args);
        c.env_remove("DROVER_STATE_DIR");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run drover")
    }

    /// Run, assert the exit code, return stdout.
    pub fn expect(&self, code: i32, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(code),
            "drover {args:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Run, expect exit 0, parse stdout as JSON.
    pub fn json(&self, args: &[&str]) -> Value {
        let s = self.expect(0, args);
        serde_json::from_str(&s).unwrap_or_else(|e| panic!("{args:?}: {e}: {s}"))
    }

    pub fn stderr(&self, code: i32, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(code),
            "drover {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    pub fn reg_file(&self, name: &str) -> PathBuf {
        self.state.join("registry").join(name)
    }

    pub fn read_doc(&self, name: &str) -> Value {
        let bytes = std::fs::read(self.reg_file(name)).expect("read doc");
        serde_json::from_slice(&bytes).expect("doc parses")
    }

    pub fn write_doc(&self, name: &str, v: &Value) {
        let p = self.reg_file(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, serde_json::to_vec_pretty(v).expect("json")).expect("write doc");
    }

    pub fn init(&self, topology: &str) {
        self.expect(0, &["registry", "init", "--topology", topology]);
    }
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn ago_rfc3339(secs: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::seconds(secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Run git, panicking with its stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("run git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository with one commit on `main`.
pub fn git_repo(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir repo");
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), "x\n").expect("write");
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-q", "-m", "init"]);
}

/// A worktree of `repo` at `path` on a new branch.
pub fn git_worktree(repo: &Path, path: &Path, branch: &str) {
    git(
        repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            branch,
            &path.to_string_lossy(),
        ],
    );
}

/// Poll `f` until it returns `Some`, or panic after `timeout` naming `what`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
