//! Watching the fleet from a joined host: what `events --follow --fleet` and
//! `top --fleet` share. A [`Watch`] is one connection as this host's user;
//! it lists the hosts present and follows every host's events from the
//! fleet's stream. It writes nothing (the stream and the bucket are made
//! when missing, as every fleet command does).

use super::events::{self, FleetEvent};
use super::membership::{self, Presence};
use super::{FleetConfig, FleetError, Handed, Names, connection};
use async_nats::jetstream;
use std::time::Duration;

/// How long closing a watch may take before the connection is just dropped.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Where a follower starts in the fleet's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Only events stored from now on.
    New,
    /// After the stream's event N (`fleet_seq`); 0: all the stream holds.
    After(u64),
    /// The first event the stream stored at or after this time (ms since
    /// the epoch, the server's clock).
    SinceMs(u64),
}

impl Start {
    /// `--since N` as `events --follow --fleet` takes it: none is new events only.
    pub fn from_since(since: Option<u64>) -> Start {
        since.map_or(Start::New, Start::After)
    }
}

/// Refuse a fleet name that is not the one this host joined.
pub fn check_fleet(cfg: &FleetConfig, asked: &str) -> Result<(), FleetError> {
    if cfg.fleet == asked {
        Ok(())
    } else {
        Err(FleetError::OtherFleet {
            joined: cfg.fleet.clone(),
            asked: asked.to_string(),
        })
    }
}

/// One connection that watches the fleet as this host.
pub struct Watch {
    client: async_nats::Client,
    js: jetstream::Context,
    names: Names,
    heartbeat_ms: u64,
    hosts: Option<jetstream::kv::Store>,
}

impl Watch {
    /// Connect as `cfg`'s host (its credentials, read now).
    pub async fn connect(cfg: &FleetConfig, handed: &Handed) -> Result<Watch, FleetError> {
        let names = Names::of(cfg)?;
        let client = connection::connect(cfg, handed).await?;
        let js = jetstream::new(client.clone());
        Ok(Watch {
            client,
            js,
            names,
            heartbeat_ms: cfg.heartbeat_ms,
            hosts: None,
        })
    }

    /// The fleet's names.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// Every host present now, sorted by id.
    pub async fn hosts(&mut self) -> Result<Vec<Presence>, FleetError> {
        let kv = match &self.hosts {
            Some(kv) => kv.clone(),
            None => {
                let (kv, _) = membership::bucket(&self.js, &self.names, self.heartbeat_ms).await?;
                self.hosts = Some(kv.clone());
                kv
            }
        };
        membership::list(&kv).await
    }

    /// Follow every host's events from `start`.
    pub async fn follow(&self, start: Start) -> Result<Follower, FleetError> {
        Ok(Follower {
            names: self.names.clone(),
            msgs: events::follow(&self.js, &self.names, start).await?,
            last: match start {
                Start::After(n) => Some(n),
                Start::New | Start::SinceMs(_) => None,
            },
            held: None,
        })
    }

    /// Let the connection go (bounded by [`CLOSE_TIMEOUT`]).
    pub async fn close(self) {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.client.drain()).await;
    }
}

/// Every host's events in the stream's order (each host's in its feed's).
pub struct Follower {
    names: Names,
    msgs: jetstream::consumer::pull::Ordered,
    /// The stream sequence of the last message seen (or the one `--since`
    /// named): a later one that skips some means the stream no longer held
    /// them (its age or size limit took them first).
    last: Option<u64>,
    /// An event read after a gap, given after its `missed` record.
    held: Option<FleetEvent>,
}

impl Follower {
    /// The next event of this fleet; `None` once the stream ended. A message
    /// that is not one of this fleet's events is skipped. Events the stream
    /// dropped before this follower read them come as one `missed` record
    /// ([`missed`]), as the local feed tells a subscriber that fell behind.
    pub async fn next(&mut self) -> Option<Result<FleetEvent, FleetError>> {
        use futures_util::StreamExt;
        if let Some(ev) = self.held.take() {
            return Some(Ok(ev));
        }
        loop {
            let m = match self.msgs.next().await? {
                Ok(m) => m,
                Err(e) => return Some(Err(FleetError::bus("follow the event stream", e))),
            };
            let seq = m.info().ok().map(|i| i.stream_sequence);
            let gap = match (self.last, seq) {
                (Some(last), Some(seq)) if seq > last + 1 => Some((last + 1, seq - last - 1)),
                _ => None,
            };
            if let Some(seq) = seq {
                self.last = Some(seq);
            }
            let ev = events::decode(&self.names, &m);
            if let Some((first, n)) = gap {
                self.held = ev;
                return Some(Ok(missed(first, n)));
            }
            if let Some(ev) = ev {
                return Some(Ok(ev));
            }
        }
    }
}

/// The record a fleet follower gets for `n` events from the stream's
/// `first` on that the stream no longer held: its `fleet_seq` is the last
/// one missed, its host `-` (they may be any host's).
pub fn missed(first: u64, n: u64) -> FleetEvent {
    FleetEvent {
        fleet_seq: first + n - 1,
        host: "-".into(),
        event: serde_json::json!({
            "at": crate::paths::now_rfc3339(),
            "kind": "missed",
            "missed": n,
            "first": first,
        }),
    }
}
