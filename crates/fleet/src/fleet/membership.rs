//! Presence: one key per host in the fleet's KV bucket, rewritten every
//! heartbeat. The bucket's `max_age` is the fleet's TTL, so the key of a host
//! that stops heartbeating (kill -9, power, a cut link) expires on the server
//! by itself; nobody has to notice the death.

use super::{FleetError, Names};
use async_nats::jetstream;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A key lives this many heartbeats without a rewrite.
pub const TTL_HEARTBEATS: u32 = 3;
/// The shortest heartbeat accepted (the server's expiry timer is coarse below).
pub const MIN_HEARTBEAT_MS: u64 = 200;

/// What a host says about itself every heartbeat. Nothing secret, no paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    pub host: String,
    pub slots: usize,
    /// Panes the supervisor holds now.
    pub lanes: usize,
    pub pid: u32,
    /// drover's version on that host.
    pub version: String,
    /// When this supervisor joined (RFC 3339 with milliseconds).
    #[serde(with = "crate::time::millis")]
    pub joined_at: chrono::DateTime<chrono::Utc>,
    /// When this record was written (RFC 3339 with milliseconds).
    #[serde(with = "crate::time::millis")]
    pub heartbeat_at: chrono::DateTime<chrono::Utc>,
    pub heartbeat_ms: u64,
    /// The agents installed on that host (`claude`, `codex`), each with
    /// its version.
    #[serde(default)]
    pub agents: std::collections::BTreeMap<String, String>,
}

/// How a listed host looks from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostState {
    /// Heartbeats arrive.
    Up,
    /// A heartbeat is overdue; the key expires unless one comes.
    Late,
}

impl HostState {
    /// The word `fleet ls` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Up => "up",
            HostState::Late => "late",
        }
    }
}

/// A host is late once two heartbeats were missed (one may be in flight).
pub fn state_of(since_heartbeat: Duration, heartbeat_ms: u64) -> HostState {
    if since_heartbeat > Duration::from_millis(heartbeat_ms.saturating_mul(2)) {
        HostState::Late
    } else {
        HostState::Up
    }
}

/// The TTL of a bucket whose hosts heartbeat every `heartbeat_ms`.
pub fn ttl_for(heartbeat_ms: u64) -> Duration {
    Duration::from_millis(heartbeat_ms.max(MIN_HEARTBEAT_MS) * u64::from(TTL_HEARTBEATS))
}

/// The heartbeat a host uses in a bucket of TTL `ttl`: its own, but never
/// so slow that its key could expire between two beats.
pub fn heartbeat_for(own_ms: u64, ttl: Duration) -> Duration {
    let own = Duration::from_millis(own_ms.max(MIN_HEARTBEAT_MS));
    let cap = ttl / TTL_HEARTBEATS;
    if cap.is_zero() { own } else { own.min(cap) }
}

/// The fleet's presence bucket, created when missing with a TTL of
/// [`ttl_for`]`(heartbeat_ms)`. An existing bucket keeps its TTL (the fleet's,
/// set by whoever created it); the second value is that TTL.
///
/// The bucket is made as its stream directly, as a KV bucket of history 1
/// but with rollups refused: a KV bucket made by the client allows a
/// `Nats-Rollup: all` header, with which any host publishing its own key
/// would erase every host's key. Leaving deletes the key instead of purging it.
pub async fn bucket(
    js: &jetstream::Context,
    names: &Names,
    heartbeat_ms: u64,
) -> Result<(jetstream::kv::Store, Duration), FleetError> {
    let name = names.hosts_bucket();
    let store = match js.get_key_value(name.clone()).await {
        Ok(s) => s,
        Err(_) => {
            let ttl = ttl_for(heartbeat_ms);
            js.create_stream(jetstream::stream::Config {
                name: names.hosts_stream(),
                description: Some(format!(
                    "drover fleet {}: one key per joined host",
                    names.fleet
                )),
                subjects: vec![format!("$KV.{name}.>")],
                max_messages_per_subject: 1,
                max_age: ttl,
                duplicate_window: ttl.min(Duration::from_secs(120)),
                storage: jetstream::stream::StorageType::File,
                num_replicas: names.replicas,
                discard: jetstream::stream::DiscardPolicy::New,
                allow_rollup: false,
                deny_delete: true,
                allow_direct: true,
                ..Default::default()
            })
            .await
            .map_err(|e| FleetError::Bus {
                op: "create the presence bucket",
                message: format!(
                    "{e} (the fleet has no presence bucket yet; a host whose user may not create it joins after the fleet's creator host)"
                ),
            })?;
            js.get_key_value(name.clone())
                .await
                .map_err(|e| FleetError::bus("open the presence bucket", e))?
        }
    };
    let mut stream = js
        .get_stream(names.hosts_stream())
        .await
        .map_err(|e| FleetError::bus("read the presence bucket", e))?;
    let config = stream
        .info()
        .await
        .map_err(|e| FleetError::bus("read the presence bucket", e))?
        .config
        .clone();
    if config.allow_rollup {
        // Made by an older drover: turned off in place where this host's
        // user may update streams (no per-host users), else said.
        let mut fixed = config.clone();
        fixed.allow_rollup = false;
        match js.update_stream(&fixed).await {
            Ok(_) => tracing::info!(
                bucket = %name,
                "the presence bucket allowed rollups (an older drover made it); it refuses them now"
            ),
            Err(e) => tracing::warn!(
                bucket = %name,
                error = %e,
                "the presence bucket allows rollups (an older drover made it): any host could erase every host's key; delete the stream KV_<bucket> with the server's admin user and let the fleet's creator host make it again"
            ),
        }
    }
    Ok((store, config.max_age))
}

/// Write this host's presence.
pub async fn put(kv: &jetstream::kv::Store, p: &Presence) -> Result<(), FleetError> {
    let body = serde_json::to_vec(p).map_err(|e| FleetError::bus("encode presence", e))?;
    kv.put(&p.host, body.into())
        .await
        .map_err(|e| FleetError::bus("write presence", e))?;
    Ok(())
}

/// How long a host's first presence is retried while its bucket's stream
/// is not ready: on a cluster, a bucket another host just made with
/// replicas takes a moment to elect its leader ("no stream found").
pub const FIRST_PUT_WAIT: Duration = Duration::from_secs(15);

/// Write this host's first presence, retried within [`FIRST_PUT_WAIT`]
/// while the bucket's stream is not ready; any other error at once.
pub async fn put_first(kv: &jetstream::kv::Store, p: &Presence) -> Result<(), FleetError> {
    let deadline = tokio::time::Instant::now() + FIRST_PUT_WAIT;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        let body = serde_json::to_vec(p).map_err(|e| FleetError::bus("encode presence", e))?;
        match kv.put(&p.host, body.into()).await {
            Ok(_) => return Ok(()),
            Err(e) if not_ready(&e) && tokio::time::Instant::now() + delay.current() < deadline => {
                tracing::debug!(error = %e, "presence bucket not ready; retrying");
                tokio::time::sleep(delay.next_delay()).await;
            }
            Err(e) => return Err(FleetError::bus("write presence", e)),
        }
    }
}

/// Whether a put failed because the bucket's stream is not (yet) there to
/// store it: no stream for the subject, or no ack in time.
fn not_ready(e: &jetstream::kv::PutError) -> bool {
    use async_nats::jetstream::context::{PublishError, PublishErrorKind};
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<PublishError>())
        .is_some_and(|p| {
            matches!(
                p.kind(),
                PublishErrorKind::StreamNotFound | PublishErrorKind::TimedOut
            )
        })
}

/// Remove a host's presence (it left): a delete marker, which in a bucket
/// of history 1 replaces the key's record (a purge would need a rollup).
pub async fn remove(kv: &jetstream::kv::Store, host: &str) -> Result<(), FleetError> {
    kv.delete(host)
        .await
        .map_err(|e| FleetError::bus("remove presence", e))
}

/// Every host present, sorted by id. A record that does not parse (its
/// times included) is skipped with a warning (another drover version may
/// write more).
pub async fn list(kv: &jetstream::kv::Store) -> Result<Vec<Presence>, FleetError> {
    use futures_util::StreamExt;
    let mut keys = kv
        .keys()
        .await
        .map_err(|e| FleetError::bus("list hosts", e))?;
    let mut out = Vec::new();
    while let Some(k) = keys.next().await {
        let k = k.map_err(|e| FleetError::bus("list hosts", e))?;
        let Some(v) = kv
            .get(k.clone())
            .await
            .map_err(|e| FleetError::bus("read a host", e))?
        else {
            continue; // expired between the two calls
        };
        match serde_json::from_slice::<Presence>(&v) {
            Ok(p) => out.push(p),
            Err(e) => tracing::warn!(host = %k, error = %e, "unreadable presence record skipped"),
        }
    }
    out.sort_by(|a, b| a.host.cmp(&b.host));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as a host writes it reads its times, and is written back
    /// byte for byte; a time that is no time makes the record unreadable
    /// (`list` skips it with a warning).
    #[test]
    fn a_presence_record_round_trips_and_a_bad_time_is_refused() {
        let text = r#"{"host":"h1","slots":2,"lanes":1,"pid":42,"version":"0.1.0","joined_at":"2026-12-06T01:06:05.728Z","heartbeat_at":"2026-12-06T01:07:05.000Z","heartbeat_ms":5000,"agents":{"claude":"2.0.1"}}"#;
        let p: Presence = serde_json::from_str(text).unwrap();
        assert_eq!(p.joined_at.timestamp_millis(), 1_796_519_165_728);
        assert_eq!(p.heartbeat_at.timestamp_millis(), 1_796_519_225_000);
        assert_eq!(serde_json::to_string(&p).unwrap(), text);
        let bad = text.replace("2026-12-06T01:07:05.000Z", "later");
        let e = serde_json::from_str::<Presence>(&bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"later\" is not an RFC 3339 time"), "{e}");
    }

    #[test]
    fn a_host_is_late_after_two_missed_heartbeats() {
        assert_eq!(state_of(Duration::from_millis(900), 1000), HostState::Up);
        assert_eq!(state_of(Duration::from_millis(2000), 1000), HostState::Up);
        assert_eq!(state_of(Duration::from_millis(2001), 1000), HostState::Late);
    }

    #[test]
    fn a_heartbeat_never_outlives_the_bucket_ttl() {
        assert_eq!(ttl_for(5000), Duration::from_secs(15));
        assert_eq!(ttl_for(1), Duration::from_millis(600));
        assert_eq!(
            heartbeat_for(5000, Duration::from_secs(3)),
            Duration::from_secs(1)
        );
        assert_eq!(
            heartbeat_for(500, Duration::from_secs(15)),
            Duration::from_millis(500)
        );
        assert_eq!(
            heartbeat_for(500, Duration::ZERO),
            Duration::from_millis(500)
        );
    }
}
