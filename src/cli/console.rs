//! The loop's console: each progress line goes to stderr and to
//! `<state dir>/logs/loop.log`. A closed stderr (`loop run … 2>&1 | head -4`)
//! is never a reason to stop a run: the lines go on into the log, and the
//! run goes on to its close-out.

use drover::statedir::StateDir;
use std::fs::{File, OpenOptions};
use std::io::Write;

/// Where `loop run` says what it is doing.
pub struct Console {
    log: Option<File>,
    /// Whether stderr gets the lines: not under `--json`, and no longer once
    /// a write to it failed.
    to_stderr: bool,
}

impl Console {
    /// A console that appends to `<state dir>/logs/loop.log` (when it can be
    /// opened) and, unless `json`, prints on stderr.
    pub fn open(sd: &StateDir, json: bool) -> Self {
        let dir = sd.logs_dir();
        let log = drover::store::create_private_dir(&dir)
            .and_then(|()| {
                drover::store::open_private(
                    &sd.loop_log(),
                    OpenOptions::new().create(true).append(true),
                )
            })
            .ok();
        Console {
            log,
            to_stderr: !json,
        }
    }

    /// One progress line, `loop: {m}`.
    pub fn say(&mut self, m: &str) {
        let line = format!("loop: {m}\n");
        if self.to_stderr && std::io::stderr().write_all(line.as_bytes()).is_err() {
            // Closed under us: the log keeps the rest, the run goes on.
            self.to_stderr = false;
        }
        if let Some(f) = &mut self.log {
            let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let _ = f.write_all(format!("{at} [{}] {line}", std::process::id()).as_bytes());
        }
    }
}

/// Write `text` to stdout; a closed stdout is not an error (the run it
/// reports on is already recorded).
pub fn print_quietly(text: &str) {
    let _ = std::io::stdout().write_all(text.as_bytes());
}
