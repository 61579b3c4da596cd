//! `drover events --follow --jsonl …` as a test reads it: the command's
//! stdout, line by line, through a channel; the process is ended on drop.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// A running `events --follow` and the lines it printed.
pub struct EventFollow {
    child: Child,
    rx: Receiver<String>,
}

impl EventFollow {
    /// Start `cmd` (an `events --follow --jsonl …` command) and read its lines.
    pub fn start(mut cmd: Command) -> EventFollow {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .expect("drover events --follow");
        let stdout = child.stdout.take().expect("its stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        EventFollow { child, rx }
    }

    /// `d`'s `events --follow --jsonl ARGS…`.
    pub fn of(d: &super::Drover, args: &[&str]) -> EventFollow {
        let mut cmd = d.cmd();
        cmd.args(["events", "--follow", "--jsonl"]).args(args);
        EventFollow::start(cmd)
    }

    /// The next line within `within`; `None` when the stream ended or stalled.
    pub fn next_line(&self, within: Duration) -> Option<String> {
        self.rx.recv_timeout(within).ok()
    }

    /// The lines already read, without waiting.
    pub fn ready_lines(&self) -> Vec<String> {
        self.rx.try_iter().collect()
    }
}

impl Drop for EventFollow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
