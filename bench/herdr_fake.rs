//! The herdr server for the benchmarks that put panes on the herdr backend:
//! the real herdr when `$DROVER_HERDR` names one (started headless on a
//! private socket unless `$HERDR_SOCKET_PATH` already points at a server),
//! else the fake the contract tests use, `tests/support/fake-herdr`.

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

    /// Start a server when `backends` has herdr: the real herdr
    /// `$DROVER_HERDR` names (unless `$HERDR_SOCKET_PATH` is set: that
    /// server is used), else the fake.
    pub fn start_if_needed(backends: &[String]) -> Result<Option<Self>, String> {
        if !backends.iter().any(|b| b == "herdr") {
            return Ok(None);
        }
        match std::env::var_os("DROVER_HERDR") {
            None => Self::start().map(Some),
            Some(_) if std::env::var_os("HERDR_SOCKET_PATH").is_some() => Ok(None),
            Some(bin) => Self::start_real(&PathBuf::from(bin)).map(Some),
        }
    }

    /// Start the real herdr `bin` headless on a private socket, with its
    /// own config (no update checks) and state dirs, and point this
    /// process's environment at it. Call before any thread runs.
    pub fn start_real(bin: &std::path::Path) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let socket = dir.path().join("herdr.sock");
        let config = dir.path().join("config");
        std::fs::create_dir_all(config.join("herdr")).map_err(|e| e.to_string())?;
        std::fs::write(
            config.join("herdr/config.toml"),
            "[update]\nversion_check = false\nmanifest_check = false\n",
        )
        .map_err(|e| e.to_string())?;
        use std::os::unix::process::CommandExt;
        let child = Command::new(bin)
            .arg("server")
            .env("HERDR_SOCKET_PATH", &socket)
            .env("XDG_CONFIG_HOME", &config)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("SHELL", "/bin/sh")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let pid = child.id();
        let mut real = FakeHerdr {
            child,
            pid,
            _dir: dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let up = Command::new(bin)
                .args(["pane", "list"])
                .env("HERDR_SOCKET_PATH", &socket)
                .output()
                .is_ok_and(|o| o.status.success());
            if up {
                break;
            }
            if Instant::now() >= deadline || matches!(real.child.try_wait(), Ok(Some(_))) {
                return Err("the real herdr server did not start".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: called from main before the bench starts any thread.
        unsafe {
            std::env::set_var("HERDR_SOCKET_PATH", &socket);
            std::env::remove_var("DROVER_HERDR_SESSION");
            std::env::remove_var("HERDR_SESSION");
        }
        Ok(real)
    }
}

impl Drop for FakeHerdr {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
