//! Socket server, pane table, detectors and barriers.

use super::hub::Snapshot;

use super::protocol::{ErrorCode, FrameKind, Request, Response, encode_json};
use super::quiet::Wake;
use crate::agent::Classifier;
use crate::pane::{Hosts, PaneBackend, PaneEvents};
use crate::proto::{LostPane, RequestError};
use crate::store::LockGuard;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// A burst of output has ended when nothing arrived for this long.
pub const BURST_QUIET: Duration = Duration::from_millis(2);
/// During a continuous flood, classify at least this often.
pub const MAX_BURST: Duration = Duration::from_millis(50);

/// How the supervisor is started.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    /// `tracing` filter when `RUST_LOG` is unset (e.g. `info`).
    pub log_filter: String,
}

/// Errors that stop the supervisor from starting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(
        "a supervisor is already running for {state_dir}{pid}; stop it with `drover kill-server`"
    )]
    AlreadyRunning { state_dir: String, pid: String },
    #[error("cannot listen on {socket}: {source}")]
    Bind {
        socket: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Rules(#[from] crate::agent::AgentError),
    #[error("runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) struct Entry {
    pub(super) pane: Arc<dyn PaneBackend>,
    pub(super) notify: Arc<Wake>,
    pub(super) obs: Mutex<Snapshot>,
    /// Moves on every output notification: for waits on the screen itself
    /// (not on the classified state), such as a paste showing up.
    pub(super) output: Arc<watch::Sender<u64>>,
    /// What the pane's agent has said through its own signals.
    pub(super) signals: Mutex<crate::agent::signals::Ledger>,
    /// How many signals the pane's agent sent this second (a bound).
    pub(super) signal_rate: Mutex<super::signal::Rate>,
    /// What the pane's agent used across its sessions (usage signals).
    pub(super) usage: Mutex<crate::proto::usage::Tally>,
    /// The screen fused with those signals (super::fusion).
    pub(super) fusion: Mutex<super::fusion::Fusion>,
    /// The Codex thread the pane's `notify` named: its rollout file.
    pub(super) rollout_thread: Mutex<Option<String>>,
    /// When the agent's status line last reported (ms since the epoch; 0:
    /// never), a repeat of its figures included: `pane.explain`'s
    /// `settle_ms` waits on it.
    pub(super) status_at: watch::Sender<u64>,
}

pub(super) struct Sup {
    state_dir: PathBuf,
    pub(super) classifier: Classifier,
    pub(super) panes: Mutex<HashMap<String, Arc<Entry>>>,
    /// Names reserved by a `pane.new` in flight (spawning happens unlocked).
    pub(super) creating: Mutex<std::collections::HashSet<String>>,
    /// Signals from callers in no pane yet while a pane was being created
    /// (super::signal::take_early).
    pub(super) early_signals: Mutex<std::collections::VecDeque<super::signal::Early>>,
    pub(super) epoch: watch::Sender<u64>,
    /// `--fresh` barriers in flight: while any waits, every classification
    /// (not only a change) moves the epoch.
    pub(super) fresh_waiters: std::sync::atomic::AtomicUsize,
    pub(super) shutdown: watch::Sender<bool>,
    /// Panes a previous supervisor left behind (`pane ls` shows them as lost).
    pub(super) lost: Mutex<HashMap<String, LostPane>>,
    /// Every event, numbered, for `events --follow` and `top`.
    pub(super) feed: Arc<super::feed::Feed>,
    /// The backends' hosts (tmux server, …), started on first use.
    pub(super) hosts: Hosts,
    /// This host's fleet membership, when it joined one (docs/fleet.md).
    pub(super) fleet: Mutex<Option<crate::fleet::Member>>,
}

pub(super) struct Events {
    notify: Arc<Wake>,
    output: Arc<watch::Sender<u64>>,
    /// Moved when the pane's transport changes, so barriers look again.
    epoch: watch::Sender<u64>,
}

impl PaneEvents for Events {
    fn output(&self) {
        self.notify.output();
        self.output.send_modify(|x| *x = x.wrapping_add(1));
    }
    fn exited(&self) {
        self.notify.notify_one();
    }
    fn transport_changed(&self) {
        self.notify.notify_one();
        self.output.send_modify(|x| *x = x.wrapping_add(1));
        self.epoch.send_modify(|x| *x += 1);
    }
}

impl Sup {
    /// Callbacks for a new pane, and the handles the supervisor keeps.
    pub(super) fn events(&self) -> (Arc<Events>, Arc<Wake>, Arc<watch::Sender<u64>>) {
        let notify = Arc::new(Wake::default());
        let output = Arc::new(watch::channel(0u64).0);
        let events = Arc::new(Events {
            notify: notify.clone(),
            output: output.clone(),
            epoch: self.epoch.clone(),
        });
        (events, notify, output)
    }
}

/// Run the supervisor in the foreground until SIGTERM/SIGINT or `kill-server`.
pub fn serve(opts: ServeOptions) -> Result<(), ServeError> {
    let lock_path = crate::statedir::StateDir::new(&opts.state_dir).supervisor_lock();
    let Some(guard) = take_lock(&lock_path, &opts.socket)? else {
        let pid = std::fs::read_to_string(&lock_path)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .map(|p| format!(" (pid {p})"))
            .unwrap_or_default();
        return Err(ServeError::AlreadyRunning {
            state_dir: opts.state_dir.display().to_string(),
            pid,
        });
    };
    {
        use std::io::{Seek, Write};
        let mut f = guard.file();
        let _ = f.set_len(0);
        let _ = f.seek(std::io::SeekFrom::Start(0));
        let _ = writeln!(f, "{}", std::process::id());
    }
    init_logging(&opts);
    // A bad rules override is an error naming the file, never silently ignored.
    let classifier = Classifier::load(crate::statedir::StateDir::new(&opts.state_dir))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let result = rt.block_on(run(opts.clone(), classifier));
    rt.shutdown_timeout(Duration::from_secs(1));
    let _ = std::fs::remove_file(&opts.socket);
    tracing::info!("supervisor stopped");
    drop(guard);
    result
}

/// How long a supervisor killed a moment ago may take to release the lock
/// (the kernel closes its files as its threads exit).
const LOCK_HANDOVER: Duration = Duration::from_secs(5);
/// How long a ping may take while the lock is held by another.
const HOLDER_PING: Duration = Duration::from_millis(500);

/// The state dir's supervisor lock; `None` when a live supervisor holds it:
/// one that answers on `socket`, or a holder that keeps it past
/// [`LOCK_HANDOVER`]. A holder that does not answer may be dying (`kill
/// -9` a moment ago): its lock is waited for instead of refused at once.
fn take_lock(
    lock_path: &std::path::Path,
    socket: &std::path::Path,
) -> Result<Option<LockGuard>, ServeError> {
    let deadline = std::time::Instant::now() + LOCK_HANDOVER;
    loop {
        if let Some(g) = LockGuard::try_exclusive(lock_path)? {
            return Ok(Some(g));
        }
        let answers = matches!(
            super::client::liveness(socket, HOLDER_PING),
            super::client::Liveness::Answers { .. }
        );
        if answers || std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn init_logging(opts: &ServeOptions) {
    let dir = crate::statedir::StateDir::new(&opts.state_dir).logs_dir();
    let _ = crate::store::create_private_dir(&dir);
    let Ok(file) = crate::store::open_private(
        &dir.join("supervisor.log"),
        std::fs::OpenOptions::new().create(true).append(true),
    ) else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&opts.log_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init();
}

async fn run(opts: ServeOptions, classifier: Classifier) -> Result<(), ServeError> {
    use std::os::unix::fs::PermissionsExt;
    // We hold the state dir's lock: any socket file left here is stale.
    let _ = std::fs::remove_file(&opts.socket);
    let listener = UnixListener::bind(&opts.socket).map_err(|source| ServeError::Bind {
        socket: opts.socket.display().to_string(),
        source,
    })?;
    let _ = std::fs::set_permissions(&opts.socket, std::fs::Permissions::from_mode(0o600));
    let (epoch, _) = watch::channel(0u64);
    let (shutdown, mut shutdown_rx) = watch::channel(false);
    let sup = Arc::new(Sup {
        state_dir: opts.state_dir.clone(),
        classifier,
        panes: Mutex::new(HashMap::new()),
        creating: Mutex::new(std::collections::HashSet::new()),
        early_signals: Mutex::new(std::collections::VecDeque::new()),
        epoch,
        fresh_waiters: std::sync::atomic::AtomicUsize::new(0),
        shutdown,
        lost: Mutex::new(HashMap::new()),
        feed: Arc::new(super::feed::Feed::default()),
        hosts: Hosts::new(crate::statedir::StateDir::new(&opts.state_dir)),
        fleet: Mutex::new(None),
    });
    super::feed_files::start(
        crate::statedir::StateDir::new(&opts.state_dir),
        sup.feed.clone(),
    );
    tracing::info!(pid = std::process::id(), state_dir = %opts.state_dir.display(), "supervisor listening");
    let dir = opts.state_dir.clone();
    let _ = tokio::task::spawn_blocking(move || {
        crate::store::sweep_temp_files(&dir, 3);
        super::evidence_watch::mark_restart(&dir);
    })
    .await;
    // Re-adopt the panes that outlived the last supervisor (tmux) first;
    // every other record found is a lost pane.
    super::adopt::adopt(&sup).await;
    super::lost::recover(&sup).await;
    // Before any request: the signals folders of panes this supervisor does
    // not hold (ended without `pane kill`: a supervisor stopped by kill -9,
    // a lost pane) go; whatever starts a wired agent writes its file again.
    {
        let live: std::collections::HashSet<String> = lock(&sup.panes).keys().cloned().collect();
        match crate::agent::signal_wire::sweep(sup.state_dir(), |n| live.contains(n)) {
            Ok(gone) if !gone.is_empty() => {
                tracing::info!(panes = ?gone, "swept the signals folders of panes no longer here")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "some signals folders of ended panes stay"),
        }
    }
    tokio::spawn(super::lost::refresher(sup.clone()));
    super::fleet_hook::start_if_joined(&sup).await;
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(ServeError::Runtime)?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(ServeError::Runtime)?;
    let my_uid = nix::unistd::getuid().as_raw();
    // Orphans of panes' trees are re-parented here, not to init.
    if let Err(e) = crate::pane::reap::become_subreaper() {
        tracing::warn!(error = %e, "cannot become a child subreaper; escaped pane processes go to init");
    }
    let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
        .map_err(ServeError::Runtime)?;
    let mut gate = super::conn_limit::Gate::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // EMFILE/ENFILE: the connection stays queued; retrying
                        // at once would spin.
                        gate.accept_failed(&e);
                        tokio::time::sleep(super::conn_limit::ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                match stream.peer_cred() {
                    Ok(cred) if cred.uid() == my_uid => {}
                    _ => {
                        tracing::warn!("refused a connection from another user");
                        continue;
                    }
                }
                let Some(slot) = gate.admit() else {
                    tokio::spawn(super::conn_limit::refuse(stream, gate.cap()));
                    continue;
                };
                let sup = sup.clone();
                tokio::spawn(async move {
                    connection(sup, stream).await;
                    drop(slot);
                });
            }
            _ = sigchld.recv() => {
                let _ = tokio::task::spawn_blocking(crate::pane::reap::reap_orphans).await;
            }
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = shutdown_rx.changed() => break,
        }
    }
    tracing::info!("shutting down: stopping panes");
    super::fleet_hook::shutdown(&sup).await;
    drop(listener);
    let _ = std::fs::remove_file(&opts.socket);
    let entries: Vec<Arc<Entry>> = lock(&sup.panes).drain().map(|(_, e)| e).collect();
    let kills: Vec<_> = entries
        .into_iter()
        .map(|e| {
            let sup = sup.clone();
            tokio::task::spawn_blocking(move || {
                e.pane.kill();
                super::lost::forget(&sup, e.pane.name());
                e.notify.notify_one();
            })
        })
        .collect();
    for k in kills {
        let _ = k.await;
    }
    // The backends' hosts stop first (drover's tmux server, a child of
    // ours as a subreaper), then what the panes' kills did not claim
    // (re-parented to us) ends too.
    let sup2 = sup.clone();
    let _ = tokio::task::spawn_blocking(move || sup2.hosts.shutdown()).await;
    let _ = tokio::task::spawn_blocking(|| crate::pane::reap::end_orphans(Duration::from_secs(3)))
        .await;
    Ok(())
}

async fn connection(sup: Arc<Sup>, stream: UnixStream) {
    // Who is at the other end, as the kernel says (for `report`).
    let peer = stream.peer_cred().ok();
    let (rd, mut wr) = stream.into_split();
    // Buffered so a hang-up can be noticed without consuming a frame.
    let mut rd = tokio::io::BufReader::new(rd);
    loop {
        let frame = match super::frame_limit::read_frame(&mut rd, &super::frame_limit::BUDGET).await
        {
            Ok(Some(f)) => f,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "bad frame; closing connection");
                let code = match e {
                    super::protocol::FrameError::OverBudget { .. } => ErrorCode::Unavailable,
                    _ => ErrorCode::Usage,
                };
                let resp = Response::err(0, code, format!("protocol error: {e}"));
                let _ = wr.write_all(&encode_json(&resp)).await;
                return;
            }
        };
        if frame.kind != FrameKind::Json {
            let resp = Response::err(0, ErrorCode::Usage, "expected a JSON request frame");
            let _ = wr.write_all(&encode_json(&resp)).await;
            return;
        }
        let (id, req) = match crate::proto::parse_frame(&frame.payload) {
            Ok((env, req)) => (env.id, req),
            Err(e) => {
                let resp = Response::err(0, ErrorCode::Usage, format!("malformed request: {e}"));
                let _ = wr.write_all(&encode_json(&resp)).await;
                return;
            }
        };
        let req = match req {
            Ok(r) => r,
            Err(RequestError::Version(v)) => {
                let _ = wr
                    .write_all(&encode_json(&Response::version_mismatch(id, v)))
                    .await;
                return;
            }
            // A report that does not parse is still the caller's lane's to refuse.
            Err(RequestError::Bad(bad)) if bad.op() == Some(crate::report::request::OP) => {
                let resp = report(&sup, id, Err(bad), peer).await;
                if wr.write_all(&encode_json(&resp)).await.is_err() {
                    return;
                }
                continue;
            }
            Err(e) => {
                let resp = Response::err(id, ErrorCode::Usage, e.to_string());
                if wr.write_all(&encode_json(&resp)).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let resp = match req {
            Request::Attach(a) => {
                super::server_attach::attach(sup, id, a, rd, wr).await;
                return;
            }
            Request::EventsFollow(a) => {
                super::feed_conn::follow(sup, id, a, rd.into_inner(), wr).await;
                return;
            }
            Request::Report(a) => report(&sup, id, Ok(a), peer).await,
            Request::Signal(a) => super::signal::take(&sup, id, a, peer).await,
            // Long requests end at once when the client hangs up: a dead
            // client must not hold its socket (and a barrier) until timeout.
            req @ (Request::Wait(_) | Request::Deliver(_)) => tokio::select! {
                resp = super::server_ops::handle(&sup, id, req) => resp,
                () = super::conn_limit::hung_up(&mut rd) => {
                    tracing::debug!("client hung up; request dropped");
                    return;
                }
            },
            req => super::server_ops::handle(&sup, id, req).await,
        };
        if wr.write_all(&encode_json(&resp)).await.is_err() {
            return;
        }
    }
}

/// The `report` op, answered with the peer's credentials.
async fn report(
    sup: &Arc<Sup>,
    id: u64,
    args: Result<crate::proto::args::Report, crate::proto::BadRequest>,
    peer: Option<tokio::net::unix::UCred>,
) -> Response {
    let mut r = match super::report::report(sup, args, peer).await {
        Ok(v) => Response::reply(id, &v),
        Err(r) => r,
    };
    r.id = id;
    r
}

impl Sup {
    /// The state dir this supervisor serves.
    pub(super) fn state_dir(&self) -> &crate::statedir::StateDir {
        crate::statedir::StateDir::new(&self.state_dir)
    }

    /// The latest observation of a pane.
    pub(super) fn snapshot(&self, entry: &Entry) -> Snapshot {
        lock(&entry.obs).clone()
    }

    /// Wait until `pred` holds for the pane's observation; `Ok(None)` on
    /// timeout, `Err` when the pane is gone. Woken by observation changes.
    pub(super) async fn wait_for(
        &self,
        entry: &Arc<Entry>,
        timeout: Duration,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> Result<Option<Snapshot>, Response> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.epoch.subscribe();
        loop {
            rx.borrow_and_update();
            let alive = lock(&self.panes)
                .get(entry.pane.name())
                .is_some_and(|e| Arc::ptr_eq(e, entry));
            if !alive {
                return Err(Response::err(
                    0,
                    ErrorCode::NotFound,
                    format!("pane {} is gone", entry.pane.name()),
                ));
            }
            let snap = self.snapshot(entry);
            if pred(&snap) {
                return Ok(Some(snap));
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() {
                    return Err(Response::err(0, ErrorCode::Internal, "supervisor is stopping"));
                },
                _ = tokio::time::sleep_until(deadline) => return Ok(None),
            }
        }
    }

    pub(super) fn entry(&self, name: &str) -> Result<Arc<Entry>, Response> {
        lock(&self.panes).get(name).cloned().ok_or_else(|| {
            Response::err(
                0,
                ErrorCode::NotFound,
                format!("no pane named {name}; see `drover pane ls`"),
            )
        })
    }
}

pub(super) fn pane_err(e: crate::pane::PaneError) -> Response {
    let code = if e.is_usage() {
        ErrorCode::Usage
    } else if matches!(e, crate::pane::PaneError::Unsupported { .. }) {
        ErrorCode::Refused
    } else if matches!(e, crate::pane::PaneError::Exited(_)) {
        ErrorCode::NotFound
    } else if matches!(
        e,
        crate::pane::PaneError::NotReading(_) | crate::pane::PaneError::Transport { .. }
    ) {
        ErrorCode::Unavailable
    } else {
        ErrorCode::Internal
    };
    Response::err(0, code, e.to_string())
}

/// Put an adopted pane into the table and start its detector.
pub(super) fn insert_adopted(sup: &Arc<Sup>, pane: Arc<dyn PaneBackend>, events: AdoptedEvents) {
    let name = pane.name().to_string();
    let generation = pane.generation();
    let entry = Arc::new(Entry {
        obs: Mutex::new(super::detect::starting_snapshot(&name, generation)),
        pane,
        notify: events.notify,
        output: events.output,
        signals: Default::default(),
        signal_rate: Default::default(),
        usage: Default::default(),
        fusion: Default::default(),
        rollout_thread: Default::default(),
        status_at: Default::default(),
    });
    lock(&sup.panes).insert(name, entry.clone());
    super::rollout::start(sup, &entry, None);
    tokio::spawn(super::detect::detector(sup.clone(), entry));
}

/// The supervisor's handles on an adopted pane's callbacks.
pub(super) struct AdoptedEvents {
    notify: Arc<Wake>,
    output: Arc<watch::Sender<u64>>,
}

impl Sup {
    /// Callbacks for a pane being adopted, and the handles to keep.
    pub(super) fn adopted_events(&self) -> (Arc<dyn PaneEvents>, AdoptedEvents) {
        let (events, notify, output) = self.events();
        (events, AdoptedEvents { notify, output })
    }
}
