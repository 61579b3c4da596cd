//! The start gate of a tmux pane: its first process waits on a FIFO until
//! drover has the window's ids (and has pinned its size), then execs the
//! command, so the command's first output and exit always belong to a pane
//! drover knows.

use crate::statedir::StateDir;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The shell that runs the gate.
pub const SHELL: &str = "/bin/sh";
/// Wait for one line on the FIFO (`$0`), then become the command (`$@`).
pub const SCRIPT: &str = r#"read -r _ < "$0"; exec "$@""#;
/// How long to wait for the pane's process to reach the gate.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// One FIFO, removed when dropped.
#[derive(Debug)]
pub struct Gate {
    path: PathBuf,
}

impl Gate {
    /// A new FIFO under the state dir (private to the user).
    pub fn new(state_dir: &StateDir, name: &str) -> Result<Gate, String> {
        use std::os::unix::fs::PermissionsExt;
        let dir = state_dir.tmux_gates_dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        let path = dir.join(format!("{name}.{}", uuid::Uuid::new_v4().simple()));
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(|e| format!("cannot make the start gate {}: {e}", path.display()))?;
        Ok(Gate { path })
    }

    /// The FIFO's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Let process `pid` through: open the FIFO once it waits on it, write
    /// one line. Fails when the process ends first or never gets there.
    pub fn open(&self, pid: u32) -> Result<(), String> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let deadline = Instant::now() + OPEN_TIMEOUT;
        let mut delay =
            crate::backoff::Backoff::new(Duration::from_micros(200), Duration::from_millis(10));
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .open(&self.path)
            {
                Ok(mut f) => {
                    return f
                        .write_all(b"go\n")
                        .map_err(|e| format!("cannot open the start gate: {e}"));
                }
                // ENXIO: no reader yet.
                Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {}
                Err(e) => return Err(format!("cannot open the start gate: {e}")),
            }
            if !crate::pane::procfs::exists(pid) {
                return Err("the pane's process ended before it started its command".into());
            }
            if Instant::now() >= deadline {
                return Err("the pane's process never reached its start gate".into());
            }
            std::thread::sleep(delay.next_delay());
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether a cmdline is still the gate.
pub fn is_gate(cmdline: &[u8]) -> bool {
    let mut args = cmdline.split(|b| *b == 0);
    args.next() == Some(SHELL.as_bytes())
        && args.next() == Some(b"-c")
        && args.next() == Some(SCRIPT.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_lets_a_reader_through_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate::new(crate::statedir::StateDir::new(dir.path()), "p").unwrap();
        let mut child = std::process::Command::new(SHELL)
            .args(["-c", SCRIPT])
            .arg(gate.path())
            .args(["sh", "-c", "exit 3"])
            .spawn()
            .unwrap();
        gate.open(child.id()).unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(3));
        let path = gate.path().to_path_buf();
        drop(gate);
        assert!(!path.exists());
        assert!(is_gate(format!("{SHELL}\0-c\0{SCRIPT}\0x\0").as_bytes()));
        assert!(!is_gate(b"/bin/sh\0-c\0other\0"));
    }
}
