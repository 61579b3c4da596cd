//! The fake herdr server for the benchmarks that put panes on the herdr
//! backend (herdr itself is not installed here): the one the contract
//! tests use, `tests/support/fake-herdr`, which follows docs/herdr.md.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the fake may take to open its socket.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A fake herdr server on a private socket; killed on drop.
#[allow(dead_code)] // each bench uses part of it
pub struct FakeHerdr {
    child: Child,
    pub pid: u32,
    _dir: tempfile::TempDir,
}

fn fake_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake-herdr")
}

#[allow(dead_code)]
impl FakeHerdr {
    /// Start the fake and point this process's environment (inherited by
    /// the supervisors the bench starts) at it. Call before any thread runs.
    pub fn start() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let socket = dir.path().join("herdr.sock");
        let child = Command::new("python3")
            .arg(fake_bin())
            .arg("server")
            .env("HERDR_SOCKET_PATH", &socket)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("python3 (the fake herdr needs it): {e}"))?;
        let pid = child.id();
        let mut fake = FakeHerdr {
            child,
            pid,
            _dir: dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while !socket.exists() {
            if Instant::now() >= deadline || matches!(fake.child.try_wait(), Ok(Some(_))) {
                return Err("the fake herdr server did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: called from main before the bench starts any thread, so
        // nothing reads the environment concurrently.
        unsafe {
            std::env::set_var("DROVER_HERDR", fake_bin());
            std::env::set_var("HERDR_SOCKET_PATH", &socket);
            std::env::remove_var("DROVER_HERDR_SESSION");
        }
        Ok(fake)
    }

    /// Start the fake when `backends` has herdr and no real herdr was named
    /// (`$DROVER_HERDR`).
    pub fn start_if_needed(backends: &[String]) -> Result<Option<Self>, String> {
        if backends.iter().any(|b| b == "herdr") && std::env::var_os("DROVER_HERDR").is_none() {
            Self::start().map(Some)
        } else {
            Ok(None)
        }
    }
}

impl Drop for FakeHerdr {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
