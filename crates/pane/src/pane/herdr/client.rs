//! Talking to herdr (see `docs/herdr.md`): its CLI for commands that carry
//! nothing secret, and its socket protocol — one JSON request line per
//! connection, the protocol the CLI itself speaks — for every request that
//! carries env values or text, so those never reach any process's argv.
//! Every call is bounded by a timeout; nothing here can hang its caller.

pub use super::stream::Subscription;
use super::stream::{HEDGE_AFTER, HEDGED, answered_within, first_answered, io_fault, read_answer};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// After a timed-out CLI is killed, how long to wait for it to be reaped.
const REAP_AFTER_KILL: Duration = Duration::from_secs(2);

static REQUEST_IDS: AtomicU64 = AtomicU64::new(1);

/// What went wrong with one call to herdr.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Fault {
    /// herdr answered with its error JSON (`{"error":{"code","message"}}`).
    #[error("herdr answered {code}: {message}")]
    Herdr { code: String, message: String },
    /// No usable answer: herdr missing, hung, killed, or it printed nothing.
    #[error("{0}")]
    Transport(String),
    /// herdr rejected the command line (exit 2).
    #[error("herdr rejected the command line: {0}")]
    Usage(String),
}

impl Fault {
    /// herdr's error code, when it answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Fault::Herdr { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether herdr itself cannot be reached (as opposed to answering no).
    pub fn is_transport(&self) -> bool {
        match self {
            Fault::Transport(_) => true,
            Fault::Herdr { code, .. } => {
                code == "server_not_running" || code == "server_unavailable"
            }
            Fault::Usage(_) => false,
        }
    }

    /// The same fault without herdr's message (which might echo a request
    /// that carried env values or text).
    fn redacted(self) -> Fault {
        match self {
            Fault::Herdr { code, .. } => Fault::Herdr {
                message: "(message withheld: the request carried private values)".into(),
                code,
            },
            other => other,
        }
    }
}

/// Where drover's herdr lives: the binary, the session, the socket.
#[derive(Debug, Clone)]
pub struct Client {
    binary: PathBuf,
    session: Option<String>,
    socket: PathBuf,
    /// The process groups of CLI calls running now; `None` once stopped
    /// (the supervisor is stopping: no new call starts).
    running: Arc<Mutex<Option<HashSet<u32>>>>,
}

/// Where herdr's socket is looked up, in herdr's own order.
#[derive(Debug, Clone, Default)]
pub struct SocketLookup {
    /// `--session NAME` (drover's `$DROVER_HERDR_SESSION`).
    pub session: Option<String>,
    /// `$HERDR_SOCKET_PATH`.
    pub socket_env: Option<PathBuf>,
    /// `$HERDR_SESSION`.
    pub session_env: Option<String>,
    /// `$XDG_CONFIG_HOME`.
    pub xdg_config: Option<PathBuf>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
}

/// herdr's socket, found as herdr finds it: `--session NAME`'s, else
/// `$HERDR_SOCKET_PATH`, else `$HERDR_SESSION`'s, else
/// `<config>/herdr/herdr.sock` (`$XDG_CONFIG_HOME`, else `~/.config`).
/// Also the session name that chose it, if one did.
pub fn socket_path(l: SocketLookup) -> (PathBuf, Option<String>) {
    let config = l
        .xdg_config
        .filter(|p| p.is_absolute())
        .or_else(|| l.home.map(|h| h.join(".config")))
        .unwrap_or_else(|| PathBuf::from(".config"))
        .join("herdr");
    let of = |s: &str| config.join("sessions").join(s).join("herdr.sock");
    match (l.session, l.socket_env, l.session_env) {
        (Some(s), _, _) => (of(&s), Some(s)),
        (None, Some(p), _) => (p, None),
        (None, None, Some(s)) => (of(&s), Some(s)),
        (None, None, None) => (config.join("herdr.sock"), None),
    }
}

impl Client {
    /// The client the environment asks for: `$DROVER_HERDR` (else `herdr`
    /// on PATH) and `$DROVER_HERDR_SESSION` (else herdr's default).
    pub fn from_env() -> Self {
        let binary = std::env::var_os(crate::statedir::env::HERDR)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("herdr"));
        let named = |var: &str| std::env::var(var).ok().filter(|s| !s.is_empty());
        let (socket, session) = socket_path(SocketLookup {
            session: named(crate::statedir::env::HERDR_SESSION),
            socket_env: std::env::var_os("HERDR_SOCKET_PATH")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
            session_env: named("HERDR_SESSION"),
            xdg_config: std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
            home: std::env::var_os("HOME").map(PathBuf::from),
        });
        Client {
            binary,
            session,
            socket,
            running: Arc::new(Mutex::new(Some(HashSet::new()))),
        }
    }

    /// End every CLI call still running (the supervisor is stopping).
    pub fn stop_running(&self) {
        let groups = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default();
        for pid in groups {
            crate::pane::native::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// The binary drover runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The socket drover connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `--session NAME` when one was chosen (for commands operators run).
    pub fn session_args(&self) -> Vec<String> {
        match &self.session {
            Some(s) => vec!["--session".into(), s.clone()],
            None => Vec::new(),
        }
    }

    /// `herdr --version`'s first line, or why herdr cannot be run.
    pub fn version(&self, timeout: Duration) -> Result<String, String> {
        let out = run(
            &self.binary,
            &["--version".to_string()],
            None,
            timeout,
            &self.running,
        )
        .map_err(|e| {
            format!(
                "cannot run {} ({e}): install herdr or set DROVER_HERDR to its path",
                self.binary.display()
            )
        })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().unwrap_or("").trim().to_string();
        if out.code != Some(0) || !line.to_ascii_lowercase().contains("herdr") {
            return Err(format!(
                "{} --version printed {line:?} (exit {:?}), not a herdr version: install herdr or set DROVER_HERDR",
                self.binary.display(),
                out.code
            ));
        }
        match parse_version(&line) {
            Some(v) if v < MIN_VERSION => Err(format!(
                "{line} is too old: drover needs herdr ≥ {}.{} (the surface in docs/herdr.md)",
                MIN_VERSION.0, MIN_VERSION.1
            )),
            _ => Ok(line),
        }
    }

    /// Run `herdr [--session S] ARGS…`, bounded by `timeout`. Exit 0: the
    /// JSON on stdout (`Null` when it printed nothing). Exit 1: the error
    /// JSON on stderr; an exit 1 without one is a transport fault. Exit 2:
    /// a usage error (plain text on stderr).
    pub fn cli(&self, args: &[&str], timeout: Duration) -> Result<Value, Fault> {
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let what = args.iter().take(2).cloned().collect::<Vec<_>>().join(" ");
        let out = run(
            &self.binary,
            &argv,
            Some(&self.socket),
            timeout,
            &self.running,
        )
        .map_err(|e| Fault::Transport(format!("herdr {what}: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.code {
            Some(0) if stdout.trim().is_empty() => Ok(Value::Null),
            Some(0) => serde_json::from_str(stdout.trim()).map_err(|_| {
                Fault::Transport(format!("herdr {what} printed something that is not JSON"))
            }),
            Some(1) => Err(error_json(stderr.trim()).unwrap_or_else(|| {
                Fault::Transport(format!(
                    "herdr {what} exited 1 with no error JSON on stderr"
                ))
            })),
            Some(2) => Err(Fault::Usage(
                stderr.lines().next().unwrap_or("").trim().to_string(),
            )),
            Some(c) => Err(Fault::Transport(format!("herdr {what} exited {c}"))),
            None => Err(Fault::Transport(format!(
                "herdr {what} was killed by a signal"
            ))),
        }
    }

    /// One request over herdr's socket: `{"id","method","params"}` →
    /// `result`, bounded by `timeout` per read and write. With `private`,
    /// herdr's error messages are withheld (the request carried env values
    /// or text).
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        private: bool,
    ) -> Result<Value, Fault> {
        let r = self.request_inner(method, params, timeout);
        if private {
            r.map_err(Fault::redacted)
        } else {
            r
        }
    }

    fn request_inner(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Fault> {
        let again = HEDGED.contains(&method).then(|| params.clone());
        let mut reader = self.send(method, params, timeout)?;
        // herdr sleeps 100 ms on a connection whose request it read before
        // it arrived (a preempted writer): a read-only request not answered
        // soon is sent once more, and the first answer is taken.
        if let Some(params) = again
            && !answered_within(reader.get_ref(), HEDGE_AFTER)
            && let Ok(second) = self.send(method, params, timeout)
        {
            reader = first_answered(reader, second, timeout);
        }
        result(&mut reader, method)
    }

    /// One request and the pid of the server that answered it as the kernel gives the
    /// socket's peer (`None` when it gives none, as across pid namespaces).
    pub fn request_peer(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<(Value, Option<u32>), Fault> {
        let mut reader = self.send(method, params, timeout)?;
        let pid = nix::sys::socket::getsockopt(
            reader.get_ref(),
            nix::sys::socket::sockopt::PeerCredentials,
        )
        .ok()
        .and_then(|c| u32::try_from(c.pid()).ok())
        .filter(|p| *p > 0);
        Ok((result(&mut reader, method)?, pid))
    }

    /// Connect and write one request; the connection, to read answers from.
    fn send(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<BufReader<UnixStream>, Fault> {
        // The line is ready before connecting and written at once: herdr
        // reads a new connection without blocking and sleeps 100 ms when the
        // request has not arrived yet.
        let id = format!("drover:{}", REQUEST_IDS.fetch_add(1, Ordering::Relaxed));
        let mut line = json!({"id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        let mut stream = UnixStream::connect(&self.socket).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => Fault::Herdr {
                code: "server_not_running".into(),
                message: format!("no herdr server is running at {}", self.socket.display()),
            },
            _ => Fault::Transport(format!(
                "cannot connect to herdr at {}: {e}",
                self.socket.display()
            )),
        })?;
        let io = io_fault(method, timeout);
        stream.set_write_timeout(Some(timeout)).map_err(&io)?;
        stream.write_all(line.as_bytes()).map_err(&io)?;
        stream.set_read_timeout(Some(timeout)).map_err(&io)?;
        Ok(BufReader::new(stream))
    }

    /// `events.subscribe` with `subscriptions`: once herdr confirmed it, the
    /// events as they come (herdr keeps the connection open).
    pub fn subscribe(&self, subscriptions: Value) -> Result<Subscription, Fault> {
        let method = "events.subscribe";
        let mut reader = self.send(
            method,
            json!({ "subscriptions": subscriptions }),
            super::REQUEST_TIMEOUT,
        )?;
        let v = read_answer(&mut reader, method)?;
        if let Some(f) = error_value(&v) {
            return Err(f);
        }
        Ok(Subscription::new(reader))
    }
}

/// The oldest herdr whose surface drover knows (docs/herdr.md).
pub const MIN_VERSION: (u32, u32) = (0, 8);

/// `(major, minor)` of a `herdr X.Y.Z…` version line.
pub fn parse_version(line: &str) -> Option<(u32, u32)> {
    let word = line
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut parts = word.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((major, minor))
}

/// herdr's error JSON on one line: `{"id","error":{"code","message"}}`.
fn error_json(text: &str) -> Option<Fault> {
    let v: Value = serde_json::from_str(text.lines().next()?).ok()?;
    error_value(&v)
}

/// Read one answer to `method` from `reader`: its `result`, or its error.
fn result(reader: &mut BufReader<UnixStream>, method: &str) -> Result<Value, Fault> {
    let mut v = read_answer(reader, method)?;
    if let Some(f) = error_value(&v) {
        return Err(f);
    }
    match v.get_mut("result") {
        Some(r) => Ok(r.take()),
        None => Err(Fault::Transport(format!(
            "herdr answered {method} with neither result nor error"
        ))),
    }
}

fn error_value(v: &Value) -> Option<Fault> {
    let e = v.get("error")?;
    Some(Fault::Herdr {
        code: e.get("code")?.as_str()?.to_string(),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    })
}

struct Output {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Run a command with no stdin, collecting its output; past `timeout` its
/// process group (its own) is killed and the call fails. With `socket`, the
/// CLI is pointed at it by `$HERDR_SOCKET_PATH` (and `$HERDR_SESSION` is
/// dropped), so CLI calls and socket requests reach the same server.
fn run(
    binary: &Path,
    args: &[String],
    socket: Option<&Path>,
    timeout: Duration,
    running: &Mutex<Option<HashSet<u32>>>,
) -> Result<Output, String> {
    let lock = || running.lock().unwrap_or_else(PoisonError::into_inner);
    // Spawned under the lock: a stop cannot slip between check and insert.
    let mut held = lock();
    let Some(pids) = held.as_mut() else {
        return Err("the supervisor is stopping".into());
    };
    let mut cmd = Command::new(binary);
    if let Some(s) = socket {
        cmd.env("HERDR_SOCKET_PATH", s).env_remove("HERDR_SESSION");
    }
    let child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = child.id();
    pids.insert(pid);
    drop(held);
    let out = collect(child, pid, timeout);
    if let Some(pids) = lock().as_mut() {
        pids.remove(&pid);
    }
    out
}

fn collect(child: std::process::Child, pid: u32, timeout: Duration) -> Result<Output, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("herdr-cli".into())
        .spawn(move || {
            let _ = tx.send(child.wait_with_output());
        })
        .map_err(|e| e.to_string())?;
    let done = match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(_) => {
            // Not reaped yet (the waiter holds it): the group is still ours.
            crate::pane::native::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = rx.recv_timeout(REAP_AFTER_KILL);
            return Err(format!(
                "no answer within {} ms (killed)",
                timeout.as_millis()
            ));
        }
    };
    let out = done.map_err(|e| e.to_string())?;
    Ok(Output {
        code: out.status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_follows_herdrs_order() {
        let base = SocketLookup {
            home: Some(PathBuf::from("/h")),
            ..SocketLookup::default()
        };
        let path = |l: SocketLookup| socket_path(l).0;
        assert_eq!(
            path(base.clone()),
            PathBuf::from("/h/.config/herdr/herdr.sock")
        );
        let env_session = SocketLookup {
            session_env: Some("env".into()),
            xdg_config: Some("/x".into()),
            ..base.clone()
        };
        assert_eq!(
            socket_path(env_session.clone()),
            (
                PathBuf::from("/x/herdr/sessions/env/herdr.sock"),
                Some("env".into())
            ),
            "HERDR_SESSION is honoured, as herdr does"
        );
        let socket_env = SocketLookup {
            socket_env: Some("/s.sock".into()),
            ..env_session
        };
        assert_eq!(
            path(socket_env.clone()),
            PathBuf::from("/s.sock"),
            "HERDR_SOCKET_PATH beats HERDR_SESSION"
        );
        assert_eq!(
            path(SocketLookup {
                session: Some("work".into()),
                ..socket_env
            }),
            PathBuf::from("/x/herdr/sessions/work/herdr.sock")
        );
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("herdr 0.8.2"), Some((0, 8)));
        assert_eq!(parse_version("herdr 0.10.0-preview.3"), Some((0, 10)));
        assert_eq!(parse_version("herdr dev"), None);
        assert!(parse_version("herdr 0.7.5").is_some_and(|v| v < MIN_VERSION));
    }

    #[test]
    fn error_json_reads_code_and_message() {
        let f = error_json(r#"{"id":"x","error":{"code":"timeout","message":"m"}}"#);
        assert_eq!(f.as_ref().and_then(|f| f.code()), Some("timeout"));
        assert!(error_json("").is_none());
        assert!(error_json("not json").is_none());
        let down = Fault::Herdr {
            code: "server_not_running".into(),
            message: String::new(),
        };
        assert!(down.is_transport());
    }

    #[test]
    fn private_requests_withhold_herdrs_message() {
        let f = Fault::Herdr {
            code: "invalid_params".into(),
            message: "bad env SECRET=hunter2".into(),
        }
        .redacted();
        assert!(!f.to_string().contains("hunter2"));
        assert_eq!(f.code(), Some("invalid_params"));
    }
}
