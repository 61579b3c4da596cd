//! A blocking client of the supervisor, used by the CLI and by tests: each
//! operation is sent as its typed arguments and answered with its typed
//! reply (`client.call(args::PaneLs {})` is a `Vec<PaneEntry>`); a reply
//! that does not fit its type is a protocol error, never a silent default.

mod feed_client;
pub use feed_client::{EventStream, FollowSpec};

use crate::proto::{
    ErrorBody, ErrorCode, FrameKind, Framed, Op, PROTOCOL_VERSION, Request, Response, args,
    read_frame, reply, write_frame,
};
use crate::statedir::StateDir;
use serde_json::Value;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long an auto-started supervisor has to start answering.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a ping may take to tell a live supervisor from a dead one's
/// socket.
pub const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// After the supervisor we started exited, how long another one (started by a
/// concurrent command) has to answer before the start counts as failed.
const RACE_GRACE: Duration = Duration::from_secs(2);

/// Errors talking to the supervisor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("supervisor unreachable at {}: {source}; start it with `drover serve --daemon`", socket.display())]
    Unreachable {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not start the supervisor: {0}")]
    StartFailed(String),
    #[error("no supervisor running for {}; commands that create something (`pane new`, `dispatch`, `rehearse`, `demo`) start one, or run `drover serve --daemon`", state_dir.display())]
    NotRunning { state_dir: PathBuf },
    #[error("{message}")]
    Remote { code: ErrorCode, message: String },
    #[error("supervisor connection: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The CLI exit code (docs/cli.md).
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Remote { code, .. } => code.exit_code(),
            ClientError::StartFailed(_) => crate::exit::ERROR,
            ClientError::Unreachable { .. }
            | ClientError::NotRunning { .. }
            | ClientError::Protocol(_) => crate::exit::TRANSPORT,
        }
    }
}

/// Whether a supervisor answers on a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// It answered a ping (with its pid; none when it answered with an
    /// error, e.g. at its connection cap).
    Answers { pid: Option<u64> },
    /// It took the connection and the ping but did not answer in time
    /// (busy, e.g. re-adopting panes before it serves, or hung): alive.
    Busy,
    /// No socket, a refused connection, or one closed unanswered: no
    /// supervisor serves there (one killed a moment ago may still take
    /// connections while the kernel tears it down, then closes them; its
    /// socket file stays behind).
    Silent,
}

/// Whether a supervisor answers a ping on `socket` within `timeout`:
/// liveness is an answer, never a socket file or an accepted connection.
pub fn liveness(socket: &Path, timeout: Duration) -> Liveness {
    use crate::proto::FrameError;
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return Liveness::Silent;
    };
    if stream.set_read_timeout(Some(timeout)).is_err()
        || stream.set_write_timeout(Some(timeout)).is_err()
    {
        return Liveness::Silent;
    }
    let req = Request::Ping(args::Ping {});
    let Ok(payload) = serde_json::to_vec(&Framed::new(1, &req)) else {
        return Liveness::Silent;
    };
    let timed_out = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    };
    if let Err(e) = write_frame(&mut stream, FrameKind::Json, &payload) {
        return if timed_out(&e) {
            Liveness::Busy
        } else {
            Liveness::Silent
        };
    }
    match read_frame(&mut stream) {
        Ok(Some(f)) => {
            let resp: Option<Response> = serde_json::from_slice(&f.payload).ok();
            let pid = resp
                .filter(|r| r.ok)
                .and_then(|r| r.result)
                .and_then(|v| serde_json::from_value::<reply::Pong>(v).ok())
                .map(|p| u64::from(p.pid));
            Liveness::Answers { pid }
        }
        Err(FrameError::Io(e)) if timed_out(&e) => Liveness::Busy,
        Ok(None) | Err(_) => Liveness::Silent,
    }
}

/// A connection to the supervisor.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    next_id: u64,
}

fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}

impl Client {
    /// Connect to a running supervisor.
    pub fn connect(socket: &Path) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|source| ClientError::Unreachable {
            socket: socket.to_path_buf(),
            source,
        })?;
        Ok(Client { stream, next_id: 1 })
    }

    /// Connect to the supervisor of `state_dir`; when none runs, say so
    /// ([`ClientError::NotRunning`]) and start nothing.
    pub fn connect_running(state_dir: &StateDir, socket: &Path) -> Result<Self, ClientError> {
        match UnixStream::connect(socket) {
            Ok(stream) => Ok(Client { stream, next_id: 1 }),
            Err(e) if is_absent(&e) => Err(ClientError::NotRunning {
                state_dir: state_dir.to_path_buf(),
            }),
            Err(source) => Err(ClientError::Unreachable {
                socket: socket.to_path_buf(),
                source,
            }),
        }
    }

    /// Connect, starting the supervisor (`exe serve`) when none is running,
    /// as tmux does. `exe = None` disables auto-start.
    pub fn connect_or_start(
        state_dir: &StateDir,
        socket: &Path,
        exe: Option<&Path>,
    ) -> Result<Self, ClientError> {
        Self::connect_or_start_verbose(state_dir, socket, exe, 0)
    }

    /// [`Client::connect_or_start`], passing `-v` × `verbose` to a supervisor it starts.
    pub fn connect_or_start_verbose(
        state_dir: &StateDir,
        socket: &Path,
        exe: Option<&Path>,
        verbose: u8,
    ) -> Result<Self, ClientError> {
        let Some(exe) = exe else {
            return match UnixStream::connect(socket) {
                Ok(stream) => Ok(Client { stream, next_id: 1 }),
                Err(e) if is_absent(&e) => Err(ClientError::NotRunning {
                    state_dir: state_dir.to_path_buf(),
                }),
                Err(source) => Err(ClientError::Unreachable {
                    socket: socket.to_path_buf(),
                    source,
                }),
            };
        };
        // Only a supervisor that answers is one: the socket of one killed a
        // moment ago may still take a connection (then resets it), and its
        // lock is held until the process is gone. Until the deadline: an
        // answer is taken, a free lock is a supervisor to start (once more
        // if ours lost the lock to the dying one), a held one is waited out.
        let deadline = Instant::now() + START_TIMEOUT;
        let mut last = None;
        loop {
            match UnixStream::connect(socket) {
                Ok(stream) => {
                    if let Some(c) = answer_ping(stream) {
                        return Ok(c);
                    }
                }
                Err(e) if is_absent(&e) => {}
                Err(source) => {
                    return Err(ClientError::Unreachable {
                        socket: socket.to_path_buf(),
                        source,
                    });
                }
            }
            let free = wait_stopped(state_dir, Duration::ZERO).unwrap_or(true);
            if free {
                let child = start_daemon_verbose(exe, state_dir, verbose)?;
                let left = deadline.saturating_duration_since(Instant::now());
                match wait_started(child, state_dir, socket, left.max(RACE_GRACE)) {
                    Ok(c) => return Ok(c),
                    Err(e) => last = Some(e),
                }
            }
            if Instant::now() >= deadline {
                return Err(last.unwrap_or_else(|| {
                    ClientError::StartFailed(format!(
                        "the supervisor of {} holds its lock but does not answer",
                        state_dir.display()
                    ))
                }));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Bound each later read and write on the connection by `timeout` (for
    /// a caller with a time budget of its own, a hook); one that runs out
    /// is a [`ClientError::Protocol`].
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), ClientError> {
        self.stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| self.stream.set_write_timeout(Some(timeout)))
            .map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// Send an operation and wait for its typed reply.
    pub fn call<O: Op>(&mut self, op: O) -> Result<O::Reply, ClientError> {
        let v = self.request(&op.into_request())?;
        serde_json::from_value(v).map_err(|e| {
            ClientError::Protocol(format!("a {} reply that does not parse: {e}", O::NAME))
        })
    }

    /// Send a request and wait for its result, before it is read as the
    /// op's reply.
    fn request(&mut self, req: &Request) -> Result<Value, ClientError> {
        let id = self.next_id();
        let payload = serde_json::to_vec(&Framed::new(id, req))
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.exchange(&payload)
    }

    /// Send `op` with `args` exactly as given, not checked against the
    /// typed protocol: for tests of what the supervisor does with raw JSON.
    pub fn call_raw(&mut self, op: &str, args: Value) -> Result<Value, ClientError> {
        let id = self.next_id();
        let req = serde_json::json!({"v": PROTOCOL_VERSION, "id": id, "op": op, "args": args});
        let payload = serde_json::to_vec(&req).map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.exchange(&payload)
    }

    fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn exchange(&mut self, payload: &[u8]) -> Result<Value, ClientError> {
        let written = write_frame(&mut self.stream, FrameKind::Json, payload);
        // A supervisor that refused the connection (at its cap) answered
        // and closed before reading: its answer says why.
        let resp = match (written, self.read_response()) {
            (_, Ok(resp)) => resp,
            (Err(e), Err(_)) => return Err(ClientError::Protocol(e.to_string())),
            (Ok(()), Err(e)) => return Err(e),
        };
        if resp.ok {
            Ok(resp.result.unwrap_or(Value::Null))
        } else {
            let err = resp.error.unwrap_or(ErrorBody {
                code: ErrorCode::Internal,
                message: "error without a message".into(),
            });
            Err(ClientError::Remote {
                code: err.code,
                message: err.message,
            })
        }
    }

    fn read_response(&mut self) -> Result<Response, ClientError> {
        match read_frame(&mut self.stream) {
            Ok(Some(f)) if f.kind == FrameKind::Json => serde_json::from_slice(&f.payload)
                .map_err(|e| ClientError::Protocol(format!("bad response: {e}"))),
            Ok(Some(_)) => Err(ClientError::Protocol("unexpected frame kind".into())),
            Ok(None) => Err(ClientError::Protocol(
                "the supervisor closed the connection (it may have stopped)".into(),
            )),
            Err(e) => Err(ClientError::Protocol(e.to_string())),
        }
    }

    /// The underlying stream (for attach, after the `attach` answer).
    pub fn into_stream(self) -> UnixStream {
        self.stream
    }
}

/// Start `exe serve` detached (own session, stdio on /dev/null).
pub fn start_daemon(exe: &Path, state_dir: &StateDir) -> Result<(), ClientError> {
    start_daemon_verbose(exe, state_dir, 0).map(drop)
}

/// What a supervisor needs before it can start: its lock file, writable.
/// Checked here so the caller hears the real cause (e.g. a read-only file
/// system), not only that no supervisor answered.
fn preflight(state_dir: &StateDir) -> Result<(), ClientError> {
    let lock = state_dir.supervisor_lock();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&lock)
        .map(drop)
        .map_err(|e| ClientError::StartFailed(format!("{}: {}", lock.display(), io_cause(&e))))
}

/// An I/O error's cause without the `(os error N)` suffix.
fn io_cause(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Start `exe serve` detached, with `-v` × `verbose`; returns the child so
/// its early death can be noticed.
pub fn start_daemon_verbose(
    exe: &Path,
    state_dir: &StateDir,
    verbose: u8,
) -> Result<std::process::Child, ClientError> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    preflight(state_dir)?;
    let mut cmd = Command::new(exe);
    cmd.arg("serve").arg("--state-dir").arg(state_dir.path());
    if verbose > 0 {
        cmd.arg(format!("-{}", "v".repeat(usize::from(verbose))));
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| ClientError::StartFailed(format!("{}: {e}", exe.display())))
}

/// Wait until a supervisor started as `child` answers; if it exits first,
/// say so and where its log is.
pub fn wait_started(
    mut child: std::process::Child,
    state_dir: &StateDir,
    socket: &Path,
    timeout: Duration,
) -> Result<Client, ClientError> {
    let mut deadline = Instant::now() + timeout;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(2), Duration::from_millis(50));
    let mut exited = None;
    loop {
        let connected = UnixStream::connect(socket).and_then(|stream| {
            // The socket of a supervisor killed a moment ago may still take
            // connections: only one that answers is the new supervisor.
            match answer_ping(stream) {
                Some(c) => Ok(c),
                None => Err(std::io::ErrorKind::ConnectionRefused.into()),
            }
        });
        match connected {
            Ok(c) => {
                // Reaped by whoever outlives us; nothing to wait for here.
                drop(child);
                return Ok(c);
            }
            Err(e) if is_absent(&e) && Instant::now() < deadline => {
                if exited.is_none()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    // Another command may be starting the supervisor at the
                    // same time (ours then lost the lock): give it a moment.
                    exited = Some(status);
                    deadline = deadline.min(Instant::now() + RACE_GRACE);
                }
                std::thread::sleep(delay.next_delay());
            }
            Err(source) => {
                if let Some(status) = exited {
                    return Err(ClientError::StartFailed(format!(
                        "it exited at start ({status}); see {}",
                        state_dir.supervisor_log().display()
                    )));
                }
                return Err(ClientError::Unreachable {
                    socket: socket.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// A client on `stream` once it has answered a ping; `None` when the
/// connection closed unanswered (the socket of a supervisor that is dying).
/// A supervisor that is still starting (re-adopting panes) answers late:
/// waited for.
fn answer_ping(stream: UnixStream) -> Option<Client> {
    let mut c = Client { stream, next_id: 1 };
    match c.call(args::Ping {}) {
        Ok(_) | Err(ClientError::Remote { .. }) => Some(c),
        Err(_) => None,
    }
}

/// Wait until the socket accepts a connection.
pub fn wait_for_socket(socket: &Path, timeout: Duration) -> Result<Client, ClientError> {
    let deadline = Instant::now() + timeout;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(2), Duration::from_millis(50));
    loop {
        match UnixStream::connect(socket) {
            Ok(stream) => return Ok(Client { stream, next_id: 1 }),
            Err(e) if is_absent(&e) && Instant::now() < deadline => {
                std::thread::sleep(delay.next_delay());
            }
            Err(source) => {
                return Err(ClientError::Unreachable {
                    socket: socket.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// Wait until the supervisor of `state_dir` has stopped: the lock it holds
/// for its whole life is free again. `Ok(false)` when `timeout` passed first.
pub fn wait_stopped(
    state_dir: &StateDir,
    timeout: Duration,
) -> Result<bool, crate::store::StoreError> {
    let lock = state_dir.supervisor_lock();
    let deadline = Instant::now() + timeout;
    loop {
        if crate::store::LockGuard::try_exclusive(&lock)?.is_some() {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
