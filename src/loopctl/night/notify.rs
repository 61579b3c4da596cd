//! Notifications (`LOOP.md`, "Notifications"): on escalations, parks,
//! resumes, landings and the close-out, `--notify-cmd CMD` runs with the
//! event as JSON on stdin and `--notify-url URL` gets an HTTP POST
//! (ntfy-compatible: the body is the message, the title a header).
//!
//! Delivery runs on its own thread, off the loop's path: a send never
//! blocks the loop. A failed delivery is retried with backoff. Each event
//! carries an intent id (a hash of what it is about, not of when), so one
//! intent is delivered once however often the loop says it — across a
//! resume too: the intents delivered are recorded in the run dir
//! (`notified.json`) and never sent again. The text is the loop's own
//! summary, redacted: never a prompt body, env value or secret.

use serde::Serialize;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

/// Attempts per delivery, the first included.
pub const ATTEMPTS: u32 = 6;
/// The wait before the first retry; doubles each time.
pub const FIRST_RETRY: Duration = Duration::from_secs(2);
/// The longest one HTTP delivery may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest one run of `--notify-cmd` may take; it is then ended with
/// its whole process group (and the attempt counts as failed).
pub const CMD_TIMEOUT: Duration = Duration::from_secs(10);

/// Where notifications go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    pub cmd: Option<String>,
    pub url: Option<String>,
    /// The wait before the first retry (tests shorten it).
    pub first_retry: Option<Duration>,
}

/// One notification, as the command reads it on stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub intent_id: String,
    pub event: String,
    pub run: String,
    pub task: Option<String>,
    pub text: String,
    pub at: String,
}

/// The intent id of an event about `key` (what it is about, not when).
pub fn intent_id(run: &str, event: &str, key: &str) -> String {
    let h = crate::loopctl::sha256::hex(format!("{run}\n{event}\n{key}").as_bytes());
    h.chars().take(16).collect()
}

/// The notifier: `send` queues, a thread delivers.
#[derive(Debug)]
pub struct Notifier {
    tx: Option<Sender<Note>>,
    seen: BTreeSet<String>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
    /// Set when [`Notifier::finish`] gives up: the command running is
    /// ended with its group and nothing more is tried.
    cancel: Arc<AtomicBool>,
}

impl Notifier {
    /// A notifier for `t` (one that drops everything when `t` names nothing).
    pub fn start(t: Targets) -> Notifier {
        Notifier::spawn(t, None, Vec::new())
    }

    /// A notifier for `t` that records each intent it delivered in `record`
    /// (atomically) and never sends one recorded there before. A record that
    /// cannot be read is reported (the second value) and left as it is:
    /// nothing is recorded in this process then.
    pub fn start_recorded(t: Targets, record: &Path) -> (Notifier, Option<String>) {
        match crate::store::read_json::<Vec<String>>(record) {
            Ok(done) => (
                Notifier::spawn(t, Some(record.to_path_buf()), done.unwrap_or_default()),
                None,
            ),
            Err(e) => (
                Notifier::spawn(t, None, Vec::new()),
                Some(format!(
                    "{e}; notifications delivered before are not known (fix or remove the file)"
                )),
            ),
        }
    }

    fn spawn(t: Targets, record: Option<PathBuf>, done: Vec<String>) -> Notifier {
        let seen: BTreeSet<String> = done.iter().cloned().collect();
        let cancel = Arc::new(AtomicBool::new(false));
        if t.cmd.is_none() && t.url.is_none() {
            return Notifier {
                tx: None,
                seen,
                thread: None,
                cancel,
            };
        }
        let (tx, rx) = mpsc::channel();
        let c = cancel.clone();
        let thread = std::thread::Builder::new()
            .name("loop-notify".into())
            .spawn(move || deliver_all(&t, rx, record.as_deref(), done, &c))
            .ok();
        Notifier {
            tx: Some(tx),
            seen,
            thread,
            cancel,
        }
    }

    /// Queue a note (once per intent id); never blocks.
    pub fn send(&mut self, note: Note) {
        if !self.seen.insert(note.intent_id.clone()) {
            return;
        }
        let (text, _) = crate::registry::redact::redact_secrets(&note.text);
        if let Some(tx) = &self.tx {
            let _ = tx.send(Note { text, ..note });
        }
    }

    /// Stop taking notes and wait up to `timeout` for the queue to drain;
    /// returns the intent ids delivered (what is left keeps trying in the
    /// background until the process ends).
    pub fn finish(&mut self, timeout: Duration) -> Vec<String> {
        self.tx = None;
        let Some(h) = self.thread.take() else {
            return Vec::new();
        };
        let deadline = std::time::Instant::now() + timeout;
        while !h.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !h.is_finished() {
            // Nothing is left running after the loop: the command under way
            // is ended with its group (within a poll), no retry follows.
            self.cancel.store(true, Ordering::SeqCst);
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            while !h.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if h.is_finished() {
            h.join().unwrap_or_default()
        } else {
            Vec::new()
        }
    }
}

fn deliver_all(
    t: &Targets,
    rx: Receiver<Note>,
    record: Option<&Path>,
    mut done: Vec<String>,
    cancel: &AtomicBool,
) -> Vec<String> {
    let mut delivered = Vec::new();
    for note in rx {
        let mut wait = t.first_retry.unwrap_or(FIRST_RETRY);
        for attempt in 1..=ATTEMPTS {
            if cancel.load(Ordering::SeqCst) {
                return delivered;
            }
            let ok = t.cmd.as_deref().is_none_or(|c| run_cmd(c, &note, cancel))
                && t.url.as_deref().is_none_or(|u| post(u, &note).is_ok());
            if ok {
                delivered.push(note.intent_id.clone());
                if let Some(path) = record {
                    done.push(note.intent_id.clone());
                    // Not recorded: at worst sent once more after a resume.
                    let _ = crate::store::write_json_atomic(path, &done);
                }
                break;
            }
            if attempt < ATTEMPTS {
                let until = std::time::Instant::now() + wait;
                while std::time::Instant::now() < until && !cancel.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20).min(wait));
                }
                wait *= 2;
            }
        }
    }
    delivered
}

/// One run of the command, bounded by [`CMD_TIMEOUT`] (and `cancel`), in
/// its own process group, ended with it.
fn run_cmd(cmd: &str, note: &Note, cancel: &AtomicBool) -> bool {
    let Ok(body) = serde_json::to_vec(note) else {
        return false;
    };
    let mut c = std::process::Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let Ok(mut child) = crate::loopctl::child::spawn(&mut c) else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        // The note is far below a pipe's buffer: this never blocks.
        let _ = stdin.write_all(&body);
    }
    let bounds = crate::loopctl::child::Bounds {
        timeout: CMD_TIMEOUT,
        stop: Box::new(|| {
            cancel
                .load(Ordering::SeqCst)
                .then(|| "the loop stopped waiting".to_string())
        }),
        mark: None,
    };
    crate::loopctl::child::wait(&mut child, &bounds)
        .is_ok_and(|e| matches!(e, crate::loopctl::child::Ended::Exited(s) if s.success()))
}

/// POST the note: `http://` directly; `https://` through `curl` (the URL on
/// its argv, the body on its stdin).
fn post(url: &str, note: &Note) -> Result<(), String> {
    let body = format!("{} (intent {})", note.text, note.intent_id);
    let title = format!("drover {} {}", note.run, note.event);
    if url.starts_with("https://") {
        let mut child = std::process::Command::new("curl")
            .args(["-fsS", "-m", "10", "-H"])
            .arg(format!("Title: {title}"))
            .args(["-H"])
            .arg(format!("X-Drover-Intent: {}", note.intent_id))
            .args(["--data-binary", "@-", url])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(body.as_bytes());
        }
        let s = child.wait().map_err(|e| e.to_string())?;
        return if s.success() {
            Ok(())
        } else {
            Err(format!("curl {s}"))
        };
    }
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: not an http(s) URL"))?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let addr = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let sock = std::net::ToSocketAddrs::to_socket_addrs(&addr)
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let mut s =
        std::net::TcpStream::connect_timeout(&sock, HTTP_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(HTTP_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(HTTP_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nTitle: {title}\r\nX-Drover-Intent: {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        note.intent_id,
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).map_err(|e| e.to_string())?;
    let code = std::str::from_utf8(&head[9..12]).unwrap_or("");
    if code.starts_with('2') {
        Ok(())
    } else {
        Err(format!("HTTP {code}"))
    }
}
