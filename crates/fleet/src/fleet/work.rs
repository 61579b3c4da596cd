//! Work across hosts (docs/fleet.md): the loop's steps on a JetStream
//! work-queue, the trees that travel with them in the object store, and the
//! requests a host makes of the coordinator. Only names, documents and bus
//! calls live here; the loop's side (what a step does) is in
//! `loopctl::lanes::fleet_lanes` (the coordinator) and
//! `loopctl::lanes::fleet_host` (a host that pulls).
//!
//! - A **work item** names one step: its job on the coordinator, the lane,
//!   the agent, the task, the base commit and the bundle that holds it. It
//!   carries no prompt body, no env value and no transcript.
//! - The **work stream** `drover-<fleet>-work` keeps items until a host acks
//!   one (work-queue retention, file storage). Every host pulls through one
//!   durable consumer, so an item goes to one host at a time; an item whose
//!   host stops acking (killed, frozen) is delivered again after `AckWait`.
//! - The **object store** `drover-<fleet>-objects` holds the base bundles and
//!   the candidates' binary patches, each checked by its sha256 on arrival.
//! - A host pulls with its deliveries addressed to
//!   `drover.<fleet>.deliver.<host>.<agent>`, a subject only the server
//!   publishes on and only that host and the coordinator receive: the
//!   coordinator sees every delivery and to which host it went.
//! - A host asks the coordinator by request/reply on
//!   `drover.<fleet>.coord.<run>.<host>`, a subject only its own user may
//!   publish on: `start` (an attempt for a delivery the coordinator saw go
//!   to that host), `progress` (keep the delivery alive), `release` (hand it
//!   back) and `finish` (the result of that attempt). The coordinator
//!   answers only on the host's own inbox, and alone acks the items: a
//!   host's user may not ack at all. The coordinator's engine is the only
//!   writer of the job; a result of a superseded attempt is refused.

pub use super::delivery::{AckInfo, ack_info, pull_one};
pub use super::objects::{
    get_bytes, host_objects, objects, open_host_objects, put_bytes, sha256_hex,
};
use super::{FleetError, Names};
use async_nats::jetstream;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long a delivered item may go without an ack or a progress ack
/// before it is delivered again (to any host).
pub const ACK_WAIT: Duration = Duration::from_secs(30);
/// How often a host that works an item says so (well inside [`ACK_WAIT`]).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// The most times one item is delivered before it is given up.
pub const MAX_DELIVER: i64 = 8;
/// How long an object (a bundle, a patch) is kept.
pub const OBJECTS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The agents a step can be for; each has its own consumer, so a host
/// pulls only the steps of the agents it offers.
pub const AGENTS: [&str; 2] = ["claude", "codex"];

/// The durable consumer every host that offers `agent` pulls through.
pub fn consumer_name(agent: &str) -> String {
    format!("hosts-{agent}")
}
/// How long a request to the coordinator may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request a coordinator reads (a bigger one is refused unread).
pub const MAX_REQUEST: usize = 64 * 1024;
/// The largest work item a coordinator or host reads.
pub const MAX_ITEM: usize = 256 * 1024;
/// The longest id (job, attempt, run, lane) a request may name.
pub const MAX_FIELD: usize = 200;
/// The longest reason or status a request may carry (longer is cut).
pub const MAX_REASON: usize = 4096;
/// The largest object (a bundle, a patch) fetched from the store; a
/// request naming a bigger one is refused before anything is fetched.
pub const MAX_OBJECT: u64 = 256 * 1024 * 1024;

/// Which step of a task an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Implement,
    Review,
}

/// An object in the fleet's store, as the sender hashed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    pub name: String,
    pub sha256: String,
    pub size: u64,
}

/// One step of the loop, for any host with a free slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkItem {
    /// The coordinator's run (`<coordinator host>-loop<N>`).
    pub run: String,
    /// The coordinator's job for this step.
    pub job: String,
    /// The lane id on the coordinator (a host's pane takes it plus the attempt).
    pub lane: String,
    pub step: Step,
    /// `claude` or `codex`.
    pub agent: String,
    pub task: String,
    /// The commit the lane starts from, and the bundle that holds it (under
    /// the ref [`BUNDLE_REF`]).
    pub base: String,
    pub bundle: ObjectRef,
    /// The files the task claims (the report lists them).
    #[serde(default)]
    pub report_files: Vec<String>,
    /// For a simulated lane: its sim-agent script (what the simulated agent
    /// does, not a prompt). A host runs only items it can run.
    #[serde(default)]
    pub sim_script: Option<String>,
    /// A review's candidate, or a later implementer round's work so far:
    /// the binary patch against `base`.
    #[serde(default)]
    pub candidate: Option<ObjectRef>,
    /// A review goes to a host other than this one (its implementer's)
    /// when one is free.
    #[serde(default)]
    pub avoid_host: Option<String>,
    /// Where the board lies in the repository (`backlog`): the host builds
    /// the lane's brief from the task there, at `base`, so no prompt body
    /// travels. None: the board is not in the repository.
    #[serde(default)]
    pub board: Option<String>,
    /// The task's round (a review's brief names it).
    #[serde(default = "round_one")]
    pub round: u32,
    /// The task's tier (`routine`, `guarded`), from the coordinator's charter.
    #[serde(default)]
    pub tier: Option<String>,
    /// The files other live lanes work in (an implementer's brief names
    /// them); paths only.
    #[serde(default)]
    pub others: Vec<String>,
    /// A review's candidate before its rebase round (shown beside it).
    #[serde(default)]
    pub before_rebase: Option<ObjectRef>,
    /// A repair round's evidence (a failed review's reason): the round is
    /// told `Repair: <evidence>` after the brief, as on the coordinator.
    /// Its work so far is `candidate`.
    #[serde(default)]
    pub repair: Option<String>,
    /// How long the lane's turn may take; the host gives it up after that,
    /// as the coordinator does.
    #[serde(default)]
    pub turn_timeout_s: Option<u64>,
    /// How long an implementer may sit at the end of its turn with no
    /// report before its one reminder (and as long again before it fails).
    #[serde(default)]
    pub report_grace_s: Option<u64>,
}

fn round_one() -> u32 {
    1
}

/// The ref a base bundle carries its commit under.
pub const BUNDLE_REF: &str = "refs/drover/base";

/// What a host reports of one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Finished {
    /// The lane completed; its candidate is this patch against the base.
    Implemented { patch: ObjectRef },
    /// The review completed with this verdict (`reason`: why it failed).
    Reviewed { pass: bool, reason: String },
    /// The lane's job failed on the host.
    Failed { status: String, reason: String },
    /// The host's policy escalated (a human is needed).
    Escalated { decision: String, reason: String },
}

/// A host's request to the coordinator. Who asks is the host whose
/// subject it came on (`drover.<fleet>.coord.<run>.<host>`, only that
/// host's user may publish there); a `host` field, if an older host sends
/// one, is ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum HostRequest {
    /// An attempt for this delivery of the item (the idempotency key is the
    /// stream sequence and delivery count: asking again gets the same one).
    /// Given only for a delivery the coordinator saw go to this host.
    Start {
        job: String,
        stream_seq: u64,
        delivered: i64,
    },
    /// This host still works its delivery: the coordinator keeps the item
    /// alive (a progress ack), only while the delivery is the item's latest
    /// and this host's; refused once the item went to another host.
    Progress {
        job: String,
        stream_seq: u64,
        delivered: i64,
    },
    /// Hand the delivery back for another host, after `delay_ms`.
    Release {
        job: String,
        stream_seq: u64,
        delivered: i64,
        #[serde(default)]
        delay_ms: u64,
    },
    /// The result of `attempt` (the key is the attempt: asking again gets
    /// the same answer). Taken only from the host the attempt was given to.
    Finish {
        job: String,
        attempt: String,
        finished: Finished,
    },
}

impl HostRequest {
    /// The job it is about.
    pub fn job(&self) -> &str {
        match self {
            HostRequest::Start { job, .. }
            | HostRequest::Progress { job, .. }
            | HostRequest::Release { job, .. }
            | HostRequest::Finish { job, .. } => job,
        }
    }

    /// Why it cannot be a request of an honest host (an id too long, an
    /// object too large), checked before anything is fetched or recorded.
    pub fn unfit(&self) -> Option<String> {
        if self.job().len() > MAX_FIELD {
            return Some(format!("a job id longer than {MAX_FIELD} bytes"));
        }
        if let HostRequest::Finish {
            attempt, finished, ..
        } = self
        {
            if attempt.len() > MAX_FIELD {
                return Some(format!("an attempt id longer than {MAX_FIELD} bytes"));
            }
            if let Finished::Implemented { patch } = finished
                && (patch.size > MAX_OBJECT || patch.name.len() > MAX_FIELD)
            {
                return Some(format!(
                    "a patch larger than {MAX_OBJECT} bytes or with a name longer than {MAX_FIELD}"
                ));
            }
        }
        None
    }
}

/// The coordinator's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "kebab-case")]
pub enum CoordReply {
    Started {
        attempt: String,
    },
    Accepted,
    /// Not taken, and why (a superseded attempt, a job already done).
    Refused {
        why: String,
    },
}

impl Names {
    /// The fleet's work-queue stream.
    pub fn work_stream(&self) -> String {
        format!("drover-{}-work", self.fleet)
    }

    /// Where run `run`'s items for `agent` are published.
    pub fn work_subject(&self, run: &str, agent: &str) -> String {
        format!("drover.{}.work.{run}.{agent}", self.fleet)
    }

    /// Every run's items for `agent` (a consumer's filter).
    pub fn work_filter(&self, agent: &str) -> String {
        format!("drover.{}.work.*.{agent}", self.fleet)
    }

    /// The fleet's object store bucket.
    pub fn objects_bucket(&self) -> String {
        format!("drover-{}-objects", self.fleet)
    }

    /// The stream under the object store.
    pub fn objects_stream(&self) -> String {
        format!("OBJ_{}", self.objects_bucket())
    }

    /// Where host `host` asks run `run`'s coordinator (only its user may
    /// publish there).
    pub fn coord_subject(&self, run: &str, host: &str) -> String {
        format!("drover.{}.coord.{run}.{host}", self.fleet)
    }

    /// Every host's requests to run `run`'s coordinator.
    pub fn coord_filter(&self, run: &str) -> String {
        format!("drover.{}.coord.{run}.*", self.fleet)
    }

    /// The host a request subject of run `run` names.
    pub fn coord_host<'a>(&self, run: &str, subject: &'a str) -> Option<&'a str> {
        let rest = subject
            .strip_prefix("drover.")?
            .strip_prefix(self.fleet.as_str())?
            .strip_prefix(".coord.")?
            .strip_prefix(run)?
            .strip_prefix('.')?;
        (!rest.is_empty() && !rest.contains('.')).then_some(rest)
    }

    /// Where the server delivers the items host `host` pulls for `agent`:
    /// only that host and the coordinator receive there, and only the
    /// server publishes there.
    pub fn deliver_subject(&self, host: &str, agent: &str) -> String {
        format!("drover.{}.deliver.{host}.{agent}", self.fleet)
    }

    /// Every host's deliveries (the coordinator's view).
    pub fn deliver_filter(&self) -> String {
        format!("drover.{}.deliver.*.*", self.fleet)
    }

    /// The host a delivery subject names.
    pub fn deliver_host<'a>(&self, subject: &'a str) -> Option<&'a str> {
        let rest = subject
            .strip_prefix("drover.")?
            .strip_prefix(self.fleet.as_str())?
            .strip_prefix(".deliver.")?;
        let (host, agent) = rest.split_once('.')?;
        (!host.is_empty() && !agent.is_empty() && !agent.contains('.')).then_some(host)
    }
}

/// The fleet's work-queue stream, created when missing.
pub async fn work_stream(
    js: &jetstream::Context,
    names: &Names,
) -> Result<jetstream::stream::Stream, FleetError> {
    js.get_or_create_stream(jetstream::stream::Config {
        name: names.work_stream(),
        description: Some(format!("drover fleet {}: the loop's steps", names.fleet)),
        subjects: vec![format!("drover.{}.work.>", names.fleet)],
        retention: jetstream::stream::RetentionPolicy::WorkQueue,
        storage: jetstream::stream::StorageType::File,
        duplicate_window: Duration::from_secs(120),
        num_replicas: names.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| stream_error("open the work stream", e))
}

/// Whether JetStream error `code` is a cluster that cannot place or serve
/// a replicated stream just now: no suitable peers, one offline or behind
/// (10005), or no metadata leader (10008). Both pass once the cluster has
/// its peers again.
fn placement_pending(code: jetstream::ErrorCode) -> bool {
    code == jetstream::ErrorCode::CLUSTER_NO_PEERS
        || code == jetstream::ErrorCode::CLUSTER_NOT_AVAILABLE
}

/// A stream's creation that failed, as [`FleetError::Placing`] when the
/// cluster could not place it just now or did not answer in time (a
/// cluster whose node just came back answers slowly while it catches up),
/// else as a bus error.
pub(crate) fn stream_error(
    op: &'static str,
    e: jetstream::context::CreateStreamError,
) -> FleetError {
    use jetstream::context::CreateStreamErrorKind;
    let placing = match e.kind() {
        CreateStreamErrorKind::JetStream(j) => placement_pending(j.error_code()),
        CreateStreamErrorKind::TimedOut => true,
        _ => false,
    };
    placing_or_bus(placing, op, e)
}

/// A consumer's creation that failed, as [`stream_error`] says a stream's.
fn consumer_error(op: &'static str, e: jetstream::stream::ConsumerError) -> FleetError {
    use jetstream::stream::ConsumerErrorKind;
    let placing = match e.kind() {
        ConsumerErrorKind::JetStream(j) => placement_pending(j.error_code()),
        ConsumerErrorKind::TimedOut => true,
        _ => false,
    };
    placing_or_bus(placing, op, e)
}

fn placing_or_bus(placing: bool, op: &'static str, e: impl std::fmt::Display) -> FleetError {
    if placing {
        FleetError::Placing {
            op,
            message: e.to_string(),
        }
    } else {
        FleetError::bus(op, e)
    }
}

/// `call` again while a cluster cannot place what it makes, or does not
/// answer ([`FleetError::Placing`]: a peer offline or behind, as under load
/// or around a node lost or back), backing off from 200 ms to 2 s, for up
/// to [`RETRY_FOR`]; said once as a warning. Any other error at once. (A
/// user the server does not let make streams is not answered either: its
/// error comes after [`RETRY_FOR`].)
pub async fn while_placing<T, F, Fut>(call: F) -> Result<T, FleetError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, FleetError>>,
{
    let mut said = false;
    retry_while(
        call,
        |e| matches!(e, FleetError::Placing { .. }),
        |e| {
            if !said {
                said = true;
                tracing::warn!(error = %e, "the NATS cluster cannot place the fleet's streams yet (a node down or catching up?); asking again for up to {} s", RETRY_FOR.as_secs());
            }
        },
    )
    .await
}

/// The durable pull consumers every host shares, one per agent (their
/// filters do not overlap, as a work-queue stream requires), made when
/// missing.
pub async fn consumers(
    js: &jetstream::Context,
    names: &Names,
    ack_wait: Duration,
) -> Result<(), FleetError> {
    let stream = work_stream(js, names).await?;
    for agent in AGENTS {
        let name = consumer_name(agent);
        stream
            .get_or_create_consumer(
                &name,
                jetstream::consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: names.work_filter(agent),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    ack_wait,
                    max_deliver: MAX_DELIVER,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| consumer_error("open the work consumer", e))?;
    }
    Ok(())
}

/// The work consumers of `agents` and the object store as a host finds
/// them: made by a coordinator (the fleet's creator), never by a host.
pub async fn open_for_host(
    js: &jetstream::Context,
    names: &Names,
    agents: &[String],
) -> Result<
    (
        Vec<jetstream::consumer::PullConsumer>,
        jetstream::object_store::ObjectStore,
    ),
    FleetError,
> {
    let stream = js
        .get_stream(names.work_stream())
        .await
        .map_err(|e| FleetError::bus("find the work stream", e))?;
    let mut consumers = Vec::new();
    for agent in agents {
        consumers.push(
            stream
                .get_consumer(&consumer_name(agent))
                .await
                .map_err(|e| FleetError::bus("find the work consumer", e))?,
        );
    }
    let objects = js
        .get_object_store(names.objects_bucket())
        .await
        .map_err(|e| FleetError::bus("find the object store", e))?;
    Ok((consumers, objects))
}

/// Put `item` on the work-queue; publishing the same item again within
/// the stream's duplicate window stores it once. Its id on the bus is the
/// run and the job (`<run>.<job>`): two coordinators' jobs of the same name
/// are two items. Returns the item's stream sequence.
pub async fn publish(
    js: &jetstream::Context,
    names: &Names,
    item: &WorkItem,
) -> Result<u64, FleetError> {
    let body = serde_json::to_vec(item).map_err(|e| FleetError::bus("encode a work item", e))?;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id(item).as_str());
    let ack = js
        .publish_with_headers(
            names.work_subject(&item.run, &item.agent),
            headers,
            body.into(),
        )
        .await
        .map_err(|e| FleetError::bus("publish a work item", e))?
        .await
        .map_err(|e| FleetError::bus("publish a work item", e))?;
    Ok(ack.sequence)
}

/// An item's id on the bus: unique per run, not per state dir.
pub fn msg_id(item: &WorkItem) -> String {
    format!("{}.{}", item.run, item.job)
}

/// How long a call on the bus is retried while the server is away (a
/// restart, a failover in a cluster) before it is given up.
pub const RETRY_FOR: Duration = Duration::from_secs(60);

/// `call` until it succeeds or [`RETRY_FOR`] has passed, backing off from
/// 200 ms to 2 s; the client reconnects by itself meanwhile.
pub async fn retrying<T, F, Fut>(call: F) -> Result<T, FleetError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, FleetError>>,
{
    retry_while(
        call,
        |_| true,
        |e| tracing::debug!(error = %e, "fleet call failed; retrying"),
    )
    .await
}

/// `call` again while its error is one `again` takes (each said to
/// `before_again`), backing off from 200 ms to 2 s, until [`RETRY_FOR`]
/// has passed; then its last error.
async fn retry_while<T, F, Fut>(
    mut call: F,
    again: impl Fn(&FleetError) -> bool,
    mut before_again: impl FnMut(&FleetError),
) -> Result<T, FleetError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, FleetError>>,
{
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
    loop {
        match call().await {
            Err(e) if again(&e) && tokio::time::Instant::now() + delay.current() < deadline => {
                before_again(&e);
                tokio::time::sleep(delay.next_delay()).await;
            }
            r => return r,
        }
    }
}

/// How long a run with no coordinator listening is asked again before it
/// is taken for gone (a coordinator that reconnects after a server restart
/// listens again within seconds).
pub const NO_COORDINATOR_FOR: Duration = Duration::from_secs(10);

/// Ask run `run`'s coordinator as `host`, retried while the server is
/// away ([`RETRY_FOR`]) or nobody listens for the run ([`NO_COORDINATOR_FOR`]).
pub async fn ask_retrying(
    client: &async_nats::Client,
    names: &Names,
    run: &str,
    host: &str,
    req: &HostRequest,
) -> Result<CoordReply, FleetError> {
    let start = tokio::time::Instant::now();
    let mut delay =
        crate::backoff::Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
    loop {
        match ask(client, names, run, host, req).await {
            Ok(r) => return Ok(r),
            Err(e) => {
                let budget = match e {
                    FleetError::NoCoordinator { .. } => NO_COORDINATOR_FOR,
                    _ => RETRY_FOR,
                };
                if start.elapsed() + delay.current() >= budget {
                    return Err(e);
                }
                tokio::time::sleep(delay.next_delay()).await;
            }
        }
    }
}

/// Ask run `run`'s coordinator once as `host` (on its own subject); `Err`
/// when it does not answer in time.
pub async fn ask(
    client: &async_nats::Client,
    names: &Names,
    run: &str,
    host: &str,
    req: &HostRequest,
) -> Result<CoordReply, FleetError> {
    let body = serde_json::to_vec(req).map_err(|e| FleetError::bus("encode a request", e))?;
    let msg = tokio::time::timeout(
        REQUEST_TIMEOUT,
        client.request(names.coord_subject(run, host), body.into()),
    )
    .await
    .map_err(|_| FleetError::bus("ask the coordinator", "timed out"))?
    .map_err(|e| match e.kind() {
        async_nats::client::RequestErrorKind::NoResponders => FleetError::NoCoordinator {
            run: run.to_string(),
        },
        _ => FleetError::bus("ask the coordinator", e),
    })?;
    serde_json::from_slice(&msg.payload)
        .map_err(|e| FleetError::bus("read the coordinator's reply", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placing_is_asked_again_and_anything_else_is_said_at_once() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let placing = || FleetError::Placing {
            op: "open the work stream",
            message: "no suitable peers for placement".into(),
        };
        // Two refusals to place, then the stream.
        let mut calls = 0;
        let got = rt.block_on(while_placing(|| {
            calls += 1;
            let r = if calls < 3 { Err(placing()) } else { Ok(calls) };
            async move { r }
        }));
        assert_eq!(got.unwrap(), 3);
        // Any other error ends it on the first call.
        let mut calls = 0;
        let got: Result<(), _> = rt.block_on(while_placing(|| {
            calls += 1;
            async { Err(FleetError::bus("open the work stream", "permission denied")) }
        }));
        assert!(matches!(got, Err(FleetError::Bus { .. })));
        assert_eq!(calls, 1);
        assert!(placement_pending(jetstream::ErrorCode::CLUSTER_NO_PEERS));
        assert!(placement_pending(
            jetstream::ErrorCode::CLUSTER_NOT_AVAILABLE
        ));
        assert!(!placement_pending(jetstream::ErrorCode::STREAM_NOT_FOUND));
    }

    #[test]
    fn work_names_are_scoped_to_the_fleet() {
        let n = Names::new("lab").unwrap();
        assert_eq!(n.work_stream(), "drover-lab-work");
        assert_eq!(
            n.work_subject("h1-loop3", "codex"),
            "drover.lab.work.h1-loop3.codex"
        );
        assert_eq!(n.work_filter("codex"), "drover.lab.work.*.codex");
        assert_eq!(consumer_name("claude"), "hosts-claude");
        assert_eq!(
            n.coord_subject("h1-loop3", "h2"),
            "drover.lab.coord.h1-loop3.h2"
        );
        assert_eq!(
            n.coord_host("h1-loop3", "drover.lab.coord.h1-loop3.h2"),
            Some("h2")
        );
        assert_eq!(n.coord_host("h1-loop3", "drover.lab.coord.h1-loop3"), None);
        assert_eq!(
            n.coord_host("h1-loop3", "drover.lab.coord.h1-loop3x.h2"),
            None
        );
        assert_eq!(n.deliver_host("drover.lab.deliver.h2.claude"), Some("h2"));
        assert_eq!(n.deliver_host("drover.lab.deliver.h2"), None);
        let a =
            ack_info("$JS.ACK.drover-lab-work.hosts-claude.2.17.30.1700000000000000000.0").unwrap();
        assert_eq!((a.delivered, a.stream_seq), (2, 17));
        assert_eq!(a.stream, "drover-lab-work");
        let b = ack_info("$JS.ACK.dom.hash.drover-lab-work.hosts-claude.3.18.31.17.0.tok").unwrap();
        assert_eq!((b.delivered, b.stream_seq), (3, 18));
        assert_eq!(ack_info("$JS.ACK.x.y"), None);
        assert_eq!(ack_info("_INBOX.x.y.1.2.3.4.5.6"), None);
        assert_eq!(n.objects_bucket(), "drover-lab-objects");
    }

    #[test]
    fn requests_and_replies_round_trip_as_tagged_json() {
        let r = HostRequest::Finish {
            job: "j".into(),
            attempt: "a".into(),
            finished: Finished::Implemented {
                patch: ObjectRef {
                    name: "p".into(),
                    sha256: sha256_hex(b""),
                    size: 0,
                },
            },
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"op\":\"finish\""), "{text}");
        assert!(text.contains("\"result\":\"implemented\""), "{text}");
        assert_eq!(serde_json::from_str::<HostRequest>(&text).unwrap(), r);
        let refused: CoordReply =
            serde_json::from_str(r#"{"reply":"refused","why":"superseded"}"#).unwrap();
        assert_eq!(
            refused,
            CoordReply::Refused {
                why: "superseded".into()
            }
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
