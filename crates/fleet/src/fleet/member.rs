//! A supervisor's membership: the task that keeps this host's presence key
//! alive while the supervisor runs. It runs on the supervisor's runtime and
//! only when the state dir holds a fleet config (`fleet join` wrote one).

use super::config::FleetConfig;
use super::connection::{self, Handed};
use super::membership::{self, Presence};
use super::{FleetError, Names};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The first retry after a failed connect; doubles up to [`RETRY_MAX`].
pub const RETRY_MIN: Duration = Duration::from_millis(500);
/// The slowest retry of a supervisor that cannot reach the fleet.
pub const RETRY_MAX: Duration = Duration::from_secs(30);
/// How long leaving may take on shutdown before the TTL is left to do it.
pub const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the supervisor tells the fleet about itself each heartbeat.
pub type LanesFn = Arc<dyn Fn() -> usize + Send + Sync>;

/// A running membership.
pub struct Member {
    pub cfg: FleetConfig,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// The connection, once made (for leaving).
    link: watch::Receiver<Option<Link>>,
    /// The bucket's TTL, once known.
    pub ttl: Option<Duration>,
}

#[derive(Clone)]
struct Link {
    kv: async_nats::jetstream::kv::Store,
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
}

/// One connected heartbeat source.
struct Beat {
    link: Link,
    presence: Presence,
    every: Duration,
    ttl: Duration,
    names: Names,
    /// The heartbeat the fleet was joined with (a presence bucket made
    /// again takes its TTL from it).
    heartbeat_ms: u64,
}

/// How often a supervisor whose heartbeat fails looks for its streams
/// gone (a wiped store) and makes them again when it may.
const REMAKE_EVERY: Duration = Duration::from_secs(30);

async fn open(cfg: &FleetConfig, handed: &Handed, lanes: &LanesFn) -> Result<Beat, FleetError> {
    let names = Names::of(cfg)?;
    let client = connection::connect(cfg, handed).await?;
    let js = async_nats::jetstream::new(client.clone());
    let (kv, ttl) = membership::bucket(&js, &names, cfg.heartbeat_ms).await?;
    let now = crate::time::to_millis(chrono::Utc::now());
    let presence = Presence {
        host: cfg.host.clone(),
        slots: cfg.slots,
        lanes: lanes(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        joined_at: now,
        heartbeat_at: now,
        heartbeat_ms: membership::heartbeat_for(cfg.heartbeat_ms, ttl).as_millis() as u64,
        // What is installed here, for `fleet ls` (each `--version` bounded).
        agents: tokio::task::spawn_blocking(crate::agent::version::installed)
            .await
            .unwrap_or_default(),
    };
    super::events::stream(&js, &names).await?;
    membership::put_first(&kv, &presence).await?;
    Ok(Beat {
        link: Link { kv, client, js },
        every: membership::heartbeat_for(cfg.heartbeat_ms, ttl),
        presence,
        ttl,
        names,
        heartbeat_ms: cfg.heartbeat_ms,
    })
}

impl Member {
    /// Join now: connect, write the first heartbeat, then keep it alive.
    /// Errors (refused credentials, TLS, no JetStream) come back at once.
    pub async fn join(
        cfg: FleetConfig,
        handed: Handed,
        lanes: LanesFn,
    ) -> Result<Self, FleetError> {
        let beat = open(&cfg, &handed, &lanes).await?;
        let ttl = Some(beat.ttl);
        let (stop, stop_rx) = watch::channel(false);
        let (link_tx, link) = watch::channel(Some(beat.link.clone()));
        let task = tokio::spawn(heartbeat(beat, lanes, stop_rx, link_tx));
        Ok(Member {
            cfg,
            stop,
            task,
            link,
            ttl,
        })
    }

    /// Rejoin in the background (a supervisor starting with a fleet config):
    /// retried with backoff until it works or the member is stopped; every
    /// failure is logged, never a secret.
    pub fn rejoin(cfg: FleetConfig, handed: Handed, lanes: LanesFn) -> Self {
        let (stop, mut stop_rx) = watch::channel(false);
        let (link_tx, link) = watch::channel(None);
        let c = cfg.clone();
        let task = tokio::spawn(async move {
            let mut delay = crate::backoff::Backoff::new(RETRY_MIN, RETRY_MAX);
            let beat = loop {
                match open(&c, &handed, &lanes).await {
                    Ok(b) => break b,
                    // Retrying cannot help (a password only in a shell's
                    // environment, not this supervisor's): said once, and
                    // `fleet work` or `fleet join` run with it rejoins.
                    Err(e) if e.needs_someone() => {
                        tracing::error!(fleet = %c.fleet, error = %e, "not rejoining the fleet until `drover fleet work` or `drover fleet join` is run where the secret is set");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(fleet = %c.fleet, error = %e, retry_ms = delay.current().as_millis() as u64, "cannot rejoin the fleet");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(delay.next_delay()) => {}
                    _ = stop_rx.changed() => return,
                }
            };
            tracing::info!(fleet = %c.fleet, host = %c.host, "rejoined the fleet");
            let _ = link_tx.send(Some(beat.link.clone()));
            heartbeat(beat, lanes, stop_rx, link_tx).await;
        });
        Member {
            cfg,
            stop,
            task,
            link,
            ttl: None,
        }
    }

    /// Whether this member is connected (joined, or rejoined).
    pub fn is_linked(&self) -> bool {
        self.link.borrow().is_some()
    }

    /// Where this supervisor's feed goes (this host's events subject).
    pub fn events_sink(&self) -> Result<EventsSink, FleetError> {
        Ok(EventsSink {
            link: self.link.clone(),
            stop: self.stop.subscribe(),
            names: Names::of(&self.cfg)?,
            host: self.cfg.host.clone(),
        })
    }

    /// Stop heartbeating; with `leave`, also remove this host's key at once
    /// (else it expires within the TTL). Bounded by [`LEAVE_TIMEOUT`].
    pub async fn stop(self, leave: bool) -> Result<(), FleetError> {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(LEAVE_TIMEOUT, self.task).await;
        let link = self.link.borrow().clone();
        let Some(link) = link else {
            return Ok(());
        };
        let result = if leave {
            match tokio::time::timeout(LEAVE_TIMEOUT, membership::remove(&link.kv, &self.cfg.host))
                .await
            {
                Ok(r) => r,
                Err(_) => Err(FleetError::Bus {
                    op: "remove presence",
                    message: "timed out".into(),
                }),
            }
        } else {
            Ok(())
        };
        let _ = tokio::time::timeout(LEAVE_TIMEOUT, link.client.drain()).await;
        result
    }
}

async fn heartbeat(
    mut beat: Beat,
    lanes: LanesFn,
    mut stop: watch::Receiver<bool>,
    _link: watch::Sender<Option<Link>>,
) {
    let mut failing = false;
    let mut looked: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(beat.every) => {}
            _ = stop.changed() => return,
        }
        // A beat that failed: the store may have been wiped. What this
        // host's user may make is made again, and what it may not is said.
        if failing && looked.is_none_or(|t| t.elapsed() >= REMAKE_EVERY) {
            looked = Some(tokio::time::Instant::now());
            for r in super::lost::remake_own(&beat.link.js, &beat.names, beat.heartbeat_ms).await {
                r.log();
            }
        }
        beat.presence.lanes = lanes();
        beat.presence.heartbeat_at = crate::time::to_millis(chrono::Utc::now());
        match membership::put(&beat.link.kv, &beat.presence).await {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("fleet heartbeat restored");
            }
            Ok(()) => {}
            // Logged once per outage: the client reconnects by itself.
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "fleet heartbeat failed; retrying");
            }
            Err(_) => {}
        }
    }
}

/// A supervisor's feed on its way to the fleet's stream.
pub struct EventsSink {
    link: watch::Receiver<Option<Link>>,
    stop: watch::Receiver<bool>,
    names: Names,
    host: String,
}

impl EventsSink {
    /// Resolves once the membership stopped.
    pub async fn stopped(&mut self) {
        let _ = self.stop.wait_for(|s| *s).await;
    }

    /// Publish one event line, waiting for the connection and retrying
    /// until the stream stored it, so the host's order is kept; false once
    /// the membership stopped (the line is then not sent).
    pub async fn send(&mut self, line: &str) -> bool {
        let mut delay = crate::backoff::Backoff::new(RETRY_MIN, RETRY_MAX);
        let mut failing = false;
        loop {
            if *self.stop.borrow() {
                return false;
            }
            let link = self.link.borrow().clone();
            if let Some(l) = link {
                match super::events::publish(&l.js, &self.names, &self.host, line).await {
                    Ok(()) => {
                        if failing {
                            tracing::info!("fleet events flowing again");
                        }
                        return true;
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!(error = %e, "fleet event not stored; retrying");
                        }
                        failing = true;
                        // Its stream gone (a wiped store): made again by
                        // the creator; said by any other host.
                        if let Some(r) = super::lost::remake_events(&l.js, &self.names).await {
                            r.log();
                        }
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(delay.next_delay()) => {}
                _ = self.stop.wait_for(|s| *s) => return false,
            }
        }
    }
}
