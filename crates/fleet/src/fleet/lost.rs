//! A wiped store (docs/fleet.md, "Faults"): the NATS server restarted on an
//! empty disk, or a stream deleted. Which of the fleet's streams are gone,
//! and making again what this host's user may make: the fleet's creator
//! makes every stream, a host's user none (its attempt is refused by the
//! server, and said).

use super::{FleetError, Names};
use async_nats::jetstream;

/// Whether the server says stream `name` does not exist (false while it
/// exists or the server cannot be asked now: an outage is not a loss).
pub async fn stream_gone(js: &jetstream::Context, name: &str) -> bool {
    use jetstream::context::GetStreamErrorKind;
    match js.get_stream(name).await {
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            GetStreamErrorKind::JetStream(j)
                if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
        ),
    }
}

/// The stream a run's steps need that the server no longer has (the work
/// stream, the fleet's object store), named; None while both are there or
/// the server cannot be asked now.
pub async fn gone(js: &jetstream::Context, names: &Names) -> Option<String> {
    for (what, name) in [
        ("work stream", names.work_stream()),
        ("object store", names.objects_stream()),
    ] {
        if stream_gone(js, &name).await {
            return Some(format!("{what} {name}"));
        }
    }
    None
}

/// One of a supervisor's streams found gone, and whether it was made again.
pub struct Remade {
    /// What it is, named (`event stream drover-lab-events`).
    pub what: String,
    pub made: Result<(), FleetError>,
}

impl Remade {
    /// Said in the supervisor's log: the cause, and what became of it.
    pub fn log(&self) {
        match &self.made {
            Ok(()) => tracing::warn!(
                "the fleet's {} was gone from the NATS server (its store wiped or the stream deleted): made it again",
                self.what
            ),
            Err(e) => tracing::warn!(
                error = %e,
                "the fleet's {} is gone from the NATS server (its store wiped or the stream deleted) and this host may not make it again: the fleet's creator makes it when its supervisor sees it gone",
                self.what
            ),
        }
    }
}

/// The presence bucket and the event stream (what every supervisor
/// opens), each made again when gone: by the creator's user; any other
/// host's attempt is refused and said.
pub async fn remake_own(js: &jetstream::Context, names: &Names, heartbeat_ms: u64) -> Vec<Remade> {
    let mut out = Vec::new();
    if stream_gone(js, &names.hosts_stream()).await {
        out.push(Remade {
            what: format!("presence bucket {}", names.hosts_bucket()),
            made: super::membership::bucket(js, names, heartbeat_ms)
                .await
                .map(|_| ()),
        });
    }
    if let Some(r) = remake_events(js, names).await {
        out.push(r);
    }
    out
}

/// The event stream, made again when gone (by the creator's user).
pub async fn remake_events(js: &jetstream::Context, names: &Names) -> Option<Remade> {
    let name = names.events_stream();
    if !stream_gone(js, &name).await {
        return None;
    }
    Some(Remade {
        what: format!("event stream {name}"),
        made: super::events::stream(js, names).await.map(|_| ()),
    })
}
