//! Events fleet-wide: every event of a joined supervisor's feed is also
//! published on `drover.<fleet>.events.<host>` into the fleet's stream, one
//! JetStream stream per fleet, so a follower sees every host. Order per host
//! is the order of its feed: one publisher per host, each publish acked
//! before the next.

use super::{FleetError, Names};
use async_nats::jetstream;
use serde_json::Value;
use std::time::Duration;

/// How long the fleet's stream keeps an event (replay with `--since`).
pub const EVENTS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most the fleet's stream holds before the oldest events go.
pub const EVENTS_MAX_BYTES: i64 = 1 << 30;

/// The fleet's event stream, created when missing.
pub async fn stream(
    js: &jetstream::Context,
    names: &Names,
) -> Result<jetstream::stream::Stream, FleetError> {
    js.get_or_create_stream(jetstream::stream::Config {
        name: names.events_stream(),
        description: Some(format!(
            "drover fleet {}: every host's event feed",
            names.fleet
        )),
        subjects: vec![names.events_wildcard()],
        max_age: EVENTS_MAX_AGE,
        max_bytes: EVENTS_MAX_BYTES,
        storage: jetstream::stream::StorageType::File,
        num_replicas: names.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::bus("open the event stream", e))
}

/// Publish one event line of `host` and wait for the stream to store it.
pub async fn publish(
    js: &jetstream::Context,
    names: &Names,
    host: &str,
    line: &str,
) -> Result<(), FleetError> {
    js.publish(names.events_subject(host), line.to_string().into())
        .await
        .map_err(|e| FleetError::bus("publish an event", e))?
        .await
        .map_err(|e| FleetError::bus("publish an event", e))?;
    Ok(())
}

/// One event as a follower sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetEvent {
    /// The stream's sequence: `--since` resumes after it.
    pub fleet_seq: u64,
    pub host: String,
    /// The event as its host's feed carried it (`seq`, `at`, `kind`, …).
    pub event: Value,
}

impl FleetEvent {
    /// Its kind (`pane.state`, …; empty when its host sent none). The event
    /// itself stays as its host sent it: a host of a newer drover may send
    /// kinds this one does not know, and a follower passes them on.
    pub fn kind(&self) -> &str {
        self.event
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The pane it is about, when it names one.
    pub fn pane(&self) -> Option<&str> {
        self.event.get("pane").and_then(Value::as_str)
    }

    /// The event with `host` and `fleet_seq` added, as one JSON line.
    pub fn to_line(&self) -> String {
        let mut v = self.event.clone();
        if let Value::Object(m) = &mut v {
            m.insert("host".into(), Value::String(self.host.clone()));
            m.insert("fleet_seq".into(), Value::from(self.fleet_seq));
        }
        v.to_string()
    }
}

/// The event stream for a follower, made again when gone where this user
/// may (the creator's); else said as gone, not as a request timed out (a
/// host's user may not make it, and its refused request gets no answer).
async fn open_to_follow(
    js: &jetstream::Context,
    names: &Names,
) -> Result<jetstream::stream::Stream, FleetError> {
    use jetstream::context::GetStreamErrorKind;
    match js.get_stream(names.events_stream()).await {
        Ok(s) => Ok(s),
        Err(e) if matches!(e.kind(), GetStreamErrorKind::JetStream(_)) => {
            stream(js, names).await.map_err(|_| FleetError::EventsGone {
                stream: names.events_stream(),
            })
        }
        Err(e) => Err(FleetError::bus("open the event stream", e)),
    }
}

/// Follow every host's events from `start`.
pub async fn follow(
    js: &jetstream::Context,
    names: &Names,
    start: super::follow::Start,
) -> Result<jetstream::consumer::pull::Ordered, FleetError> {
    use super::follow::Start;
    use jetstream::consumer::DeliverPolicy;
    let s = open_to_follow(js, names).await?;
    let deliver_policy = match start {
        Start::New => DeliverPolicy::New,
        Start::After(0) => DeliverPolicy::All,
        Start::After(n) => DeliverPolicy::ByStartSequence {
            start_sequence: n + 1,
        },
        Start::SinceMs(ms) => DeliverPolicy::ByStartTime {
            start_time: async_nats::datetime::from_nanos(i128::from(ms) * 1_000_000)
                .map_err(|e| FleetError::bus("follow the event stream", e))?,
        },
    };
    s.create_consumer(jetstream::consumer::pull::OrderedConfig {
        filter_subject: names.events_wildcard(),
        deliver_policy,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::bus("follow the event stream", e))?
    .messages()
    .await
    .map_err(|e| FleetError::bus("follow the event stream", e))
}

/// Read one delivered message as a fleet event; `None` for one that is not
/// an event of this fleet (a subject or body another writer made).
pub fn decode(names: &Names, m: &jetstream::Message) -> Option<FleetEvent> {
    let host = names.host_of(m.subject.as_str())?.to_string();
    let fleet_seq = m.info().ok()?.stream_sequence;
    let event: Value = serde_json::from_slice(&m.payload).ok()?;
    event.is_object().then_some(FleetEvent {
        fleet_seq,
        host,
        event,
    })
}
