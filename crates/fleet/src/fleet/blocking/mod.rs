//! The fleet for sync callers (the loop, the CLI): [`FleetRuntime`] is the
//! one place a Tokio runtime for the fleet is built, and the calls here and
//! in [`WorkQueue`] are plain methods that run their bus calls on it. The
//! supervisor's own runtime (`daemon`) is not this one: the fleet's tasks
//! there run on the supervisor's runtime.

mod queue;

pub use queue::WorkQueue;

use super::events::FleetEvent;
use super::follow::{Start, Watch};
use super::membership::{self, Presence};
use super::{FleetConfig, FleetError, Handed, Names, connection};
use std::future::Future;
use std::time::Duration;

/// How many threads a [`FleetRuntime`] runs its tasks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// None of its own: its tasks run while a caller blocks on it (a
    /// command that asks and is done).
    Caller,
    /// One worker, named `name`, that runs its tasks between calls (a
    /// coordinator answering its hosts while the loop works).
    Worker(&'static str),
}

/// A runtime for the fleet's bus calls, owned by whoever calls them.
pub struct FleetRuntime {
    rt: tokio::runtime::Runtime,
}

impl FleetRuntime {
    pub fn new(threads: Threads) -> Result<FleetRuntime, FleetError> {
        let mut b = match threads {
            Threads::Caller => tokio::runtime::Builder::new_current_thread(),
            Threads::Worker(name) => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(1).thread_name(name);
                b
            }
        };
        let rt = b.enable_all().build().map_err(FleetError::Runtime)?;
        Ok(FleetRuntime { rt })
    }

    /// Run `f` to its end on this runtime (not from inside one).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Run `f` on this runtime's worker, in the background.
    pub fn spawn<F>(&self, f: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.rt.spawn(f));
    }

    /// Let the runtime go without waiting for its blocking threads.
    pub fn shutdown_background(self) {
        self.rt.shutdown_background();
    }

    /// A handle that blocking threads use to call into this runtime.
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.rt.handle().clone()
    }
}

/// Every host present in `cfg`'s fleet (`fleet ls`).
pub fn hosts(cfg: &FleetConfig, handed: &Handed) -> Result<Vec<Presence>, FleetError> {
    FleetRuntime::new(Threads::Caller)?.block_on(async {
        let mut watch = Watch::connect(cfg, handed).await?;
        let hosts = watch.hosts().await;
        watch.close().await;
        hosts
    })
}

/// Take this host's key out of the fleet's presence bucket (`fleet leave`
/// with no supervisor to do it).
pub fn remove_own_presence(cfg: &FleetConfig, handed: &Handed) -> Result<(), FleetError> {
    let names = Names::of(cfg)?;
    FleetRuntime::new(Threads::Caller)?.block_on(async {
        let client = connection::connect(cfg, handed).await?;
        let js = async_nats::jetstream::new(client.clone());
        let (kv, _) = membership::bucket(&js, &names, cfg.heartbeat_ms).await?;
        let r = membership::remove(&kv, &cfg.host).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), client.drain()).await;
        r
    })
}

/// How following the fleet's events ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Followed {
    /// `each` said stop.
    Stopped,
    /// The stream ended.
    Ended,
}

/// Every host's events from `start` on, each given to `each` until it says
/// stop (false) or the stream ends (`events --follow --fleet`).
pub fn follow(
    cfg: &FleetConfig,
    handed: &Handed,
    start: Start,
    mut each: impl FnMut(FleetEvent) -> bool,
) -> Result<Followed, FleetError> {
    FleetRuntime::new(Threads::Caller)?.block_on(async {
        let watch = Watch::connect(cfg, handed).await?;
        let mut events = watch.follow(start).await?;
        while let Some(ev) = events.next().await {
            if !each(ev?) {
                return Ok(Followed::Stopped);
            }
        }
        Ok(Followed::Ended)
    })
}
