//! Notifications (`LOOP.md`, "Notifications"): on escalations, parks,
//! resumes, landings and the close-out, `--notify-cmd CMD` runs with the
//! event as JSON on stdin and `--notify-url URL` gets an HTTP POST
//! (ntfy-compatible: the body is the message, the title a header) from one
//! HTTP client (ureq over rustls): TLS verified against the platform's trust
//! store (`SSL_CERT_FILE` honoured) or only the `--notify-ca` bundle,
//! proxies from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
//! `NO_PROXY`), redirects refused, each delivery bounded in time.
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
use std::io::Write;
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
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
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
    /// A PEM bundle that alone is trusted for `https://` (`--notify-ca`);
    /// without it, the platform's trust store.
    pub ca_file: Option<PathBuf>,
    /// The longest one HTTP delivery may take (default [`HTTP_TIMEOUT`]).
    pub http_timeout: Option<Duration>,
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
    // One client for the thread's life (its connections are reused); one
    // that cannot be built (an unreadable CA bundle) fails each delivery.
    let agent = t.url.as_ref().map(|_| http_agent(t));
    for note in rx {
        let mut wait = t.first_retry.unwrap_or(FIRST_RETRY);
        for attempt in 1..=ATTEMPTS {
            if cancel.load(Ordering::SeqCst) {
                return delivered;
            }
            let ok = t.cmd.as_deref().is_none_or(|c| run_cmd(c, &note, cancel))
                && t.url.as_deref().is_none_or(|u| {
                    agent
                        .as_ref()
                        .is_some_and(|a| a.as_ref().is_ok_and(|a| post(a, u, &note).is_ok()))
                });
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

/// The HTTP client of `t`: TLS roots, proxy, timeout, no redirects.
pub fn http_agent(t: &Targets) -> Result<ureq::Agent, String> {
    use ureq::tls::{PemItem, RootCerts, TlsConfig};
    let roots = match &t.ca_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let certs: Vec<_> = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(format!("{}: no PEM certificate in it", path.display()));
            }
            RootCerts::new_with_certs(&certs)
        }
        None => RootCerts::PlatformVerifier,
    };
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(t.http_timeout.unwrap_or(HTTP_TIMEOUT)))
        .max_redirects(0)
        .http_status_as_error(false)
        .proxy(ureq::Proxy::try_from_env())
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .user_agent(concat!("drover/", env!("CARGO_PKG_VERSION")))
        .build();
    Ok(config.into())
}

/// The note's `Title` header: `drover loop1 landed`; a note of no run
/// (`loop notify-test`) is `drover test notification`.
pub fn title(note: &Note) -> String {
    if note.run.is_empty() {
        format!("drover {}", note.event)
    } else {
        format!("drover {} {}", note.run, note.event)
    }
}

/// POST the note; only a 2xx answer is a delivery (a redirect is refused,
/// not followed: the note goes nowhere it was not sent).
pub fn post(agent: &ureq::Agent, url: &str, note: &Note) -> Result<(), String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err("not an http(s) URL".into());
    }
    let body = format!("{} (intent {})", note.text, note.intent_id);
    let title = title(note);
    let answer = agent
        .post(url)
        .header("Title", &title)
        .header("X-Drover-Intent", &note.intent_id)
        .content_type("text/plain; charset=utf-8")
        .send(body.as_bytes())
        .map_err(|e| e.to_string())?;
    let code = answer.status();
    if code.is_success() {
        Ok(())
    } else {
        Err(format!("HTTP {}", code.as_u16()))
    }
}
