//! Shared helpers of the engine tests (the suites use it as `support`; it
//! has no tests of its own).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The drover binary built for these tests.
pub fn drover_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_drover"))
}

/// `drover --state-dir <dir> args…` with no lane in the env, whatever ran us.
pub fn drover(state: &Path) -> Command {
    // A tempdir is made under the umask (0755); drover would tighten it and say
    // so on stderr, which tests that count stderr lines must not see.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700));
    }
    let mut c = Command::new(drover_bin());
    c.arg("--state-dir").arg(state);
    for k in [
        "DROVER_LANE_ID",
        "DROVER_SESSION_ID",
        "DROVER_STATE_DIR",
        "DROVER_ROLE",
    ] {
        c.env_remove(k);
    }
    c
}

/// Run and capture, failing the test (not panicking on I/O) with a clear message.
pub fn run(mut c: Command) -> Output {
    match c.output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run {c:?}: {e}"),
    }
}

/// Exit code (or -1 when killed by a signal).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Poll `cond` until it is true or `timeout` passes; returns whether it held.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > timeout {
            eprintln!("timed out waiting for {what}");
            return false;
        }
        std::thread::yield_now();
    }
}

/// A small deterministic PRNG (xorshift64*), so failures replay from the seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
