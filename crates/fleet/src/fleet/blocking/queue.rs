//! The coordinator's side of the fleet's work-queue as plain methods: its
//! connection, work stream, consumers and object store, on a runtime of
//! its own whose worker runs the tasks that answer the hosts.

use super::{FleetRuntime, Threads};
use crate::fleet::work::{self, ObjectRef, WorkItem};
use crate::fleet::{FleetConfig, FleetError, Handed, Names, connection};
use async_nats::jetstream;
use std::future::Future;
use std::time::Duration;

/// How often a consumer is asked whether a host pulls on it.
const TAKER_POLL: Duration = Duration::from_millis(250);

/// The work-queue of a fleet, open for its coordinator.
pub struct WorkQueue {
    rt: FleetRuntime,
    client: async_nats::Client,
    js: jetstream::Context,
    objects: jetstream::object_store::ObjectStore,
    names: Names,
}

impl WorkQueue {
    /// Connect as this host of `cfg`'s fleet and make what the queue needs
    /// (the work stream, a consumer per agent that redelivers a step unacked
    /// for `ack_wait`, the object store); a store wiped since the last run
    /// gets its presence bucket and event stream again (from their creator).
    pub fn open(
        cfg: &FleetConfig,
        handed: &Handed,
        ack_wait: Duration,
    ) -> Result<WorkQueue, FleetError> {
        let names = Names::of(cfg)?;
        let rt = FleetRuntime::new(Threads::Worker("drover-fleet"))?;
        let (client, js, objects) = rt.block_on(async {
            let client = connection::connect(cfg, handed).await?;
            let js = jetstream::new(client.clone());
            // A cluster that cannot place a replicated stream just now (a
            // peer offline or behind) is asked again, as a call while the
            // server is away is.
            work::while_placing(|| work::work_stream(&js, &names)).await?;
            work::while_placing(|| work::consumers(&js, &names, ack_wait)).await?;
            let objects = work::while_placing(|| work::objects(&js, &names)).await?;
            for r in crate::fleet::lost::remake_own(&js, &names, cfg.heartbeat_ms).await {
                r.log();
            }
            Ok::<_, FleetError>((client, js, objects))
        })?;
        Ok(WorkQueue {
            rt,
            client,
            js,
            objects,
            names,
        })
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// Subscribe to `subject` (the hosts' requests of a run).
    pub fn subscribe(&self, subject: String) -> Result<async_nats::Subscriber, FleetError> {
        self.rt.block_on(async {
            self.client
                .subscribe(subject)
                .await
                .map_err(|e| FleetError::bus("answer the hosts", e))
        })
    }

    /// Run `f` on the queue's worker, in the background.
    pub fn spawn<F>(&self, f: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.rt.spawn(f);
    }

    /// Store `bytes` as `name` in the fleet's object store, retried while
    /// the server is away.
    pub fn put(&self, name: &str, bytes: &[u8]) -> Result<ObjectRef, FleetError> {
        let bucket = self.names.objects_bucket();
        self.rt.block_on(work::retrying(|| {
            work::put_bytes(&self.js, &bucket, &self.objects, name, bytes)
        }))
    }

    /// Put `item` on the queue, retried while the server is away (the run
    /// and job id dedupe a repeat); its stream sequence.
    pub fn publish(&self, item: &WorkItem) -> Result<u64, FleetError> {
        self.rt.block_on(work::retrying(|| {
            work::publish(&self.js, &self.names, item)
        }))
    }

    /// The stream a run's steps need that the server no longer has, named;
    /// None while both are there or the server cannot be asked now.
    pub fn lost(&self) -> Option<String> {
        self.rt
            .block_on(crate::fleet::lost::gone(&self.js, &self.names))
    }

    /// Whether some host pulls on `agent`'s consumer or works one of its
    /// steps, seen within `window`. A bus that cannot be asked says yes.
    pub fn taken(&self, agent: &str, window: Duration) -> bool {
        self.rt.block_on(async {
            let name = work::consumer_name(agent);
            let Ok(stream) = self.js.get_stream(self.names.work_stream()).await else {
                return true;
            };
            let Ok(mut c) = stream
                .get_consumer::<jetstream::consumer::pull::Config>(&name)
                .await
            else {
                return true;
            };
            let until = tokio::time::Instant::now() + window;
            loop {
                match c.info().await {
                    Ok(i) if i.num_waiting > 0 || i.num_ack_pending > 0 => return true,
                    Ok(_) => {}
                    Err(_) => return true,
                }
                if tokio::time::Instant::now() >= until {
                    return false;
                }
                tokio::time::sleep(TAKER_POLL).await;
            }
        })
    }
}
