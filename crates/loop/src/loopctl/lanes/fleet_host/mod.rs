//! `drover fleet work`: a host's side of work across hosts (docs/fleet.md).
//! It pulls the loop's steps from the fleet's work-queue while it has free
//! slots, and for each: asks the coordinator for an attempt, builds the
//! lane's repository from the base bundle in the object store, runs the lane
//! on this host's supervisor (the same lanes as `loop run`), keeps the item
//! alive while the lane works (through the coordinator, which keeps only its
//! holder's delivery alive), sends the candidate back as a binary patch in
//! the object store and reports the attempt's result. Only the coordinator
//! acks: once it took the result; a host that dies before that, or is
//! superseded, leaves the item to be delivered again, to any host.
//!
//! Nothing of the lane's prompt, environment or transcript leaves this host.

mod lane;
mod prompt;

use crate::fleet::blocking::{FleetRuntime, Threads};
use crate::fleet::work::{self, CoordReply, Finished, HostRequest, WorkItem};
use crate::fleet::{FleetConfig, FleetError, Handed, Names, connection};
use crate::loopctl::LoopError;
use crate::statedir::StateDir;
use futures_util::StreamExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long one pull waits for an item before it asks again (a slot held
/// by one agent's pull is free for the other's within it).
const PULL_EXPIRES: Duration = Duration::from_secs(2);
/// How often a paused agent's puller looks again.
const PAUSE_CHECK: Duration = Duration::from_secs(5);
/// The first pause of an agent at its limit with no reset time on screen.
const LIMIT_BACKOFF_FIRST: Duration = Duration::from_secs(15 * 60);
/// The longest such pause (it doubles each time).
const LIMIT_BACKOFF_MAX: Duration = Duration::from_secs(60 * 60);
/// The longest pause until a reset time on screen.
const LIMIT_PAUSE_MAX: Duration = Duration::from_secs(12 * 3600);
/// How many deliveries of a review its implementer's host hands back
/// before it takes the review itself (no other host was free).
const AVOID_TRIES: i64 = 3;

/// How a host works.
#[derive(Debug, Clone)]
pub struct HostOptions {
    pub state_dir: PathBuf,
    /// The drover binary (its lanes run `<exe> sim-agent`).
    pub exe: PathBuf,
    pub cfg: FleetConfig,
    /// Lanes this host runs at once.
    pub slots: usize,
    /// `native`, `tmux` or `herdr`.
    pub backend: crate::pane::Backend,
    /// The agents whose steps this host takes (`claude`, `codex`).
    pub agents: Vec<String>,
    /// How long a delivered item may go unacked (the fleet's consumer is
    /// made with it by whoever makes it first).
    pub ack_wait: Duration,
    /// `--env K=V` for this host's lanes: values only in memory, never on
    /// the bus (the coordinator's `--env` reaches only its own lanes).
    pub env: Vec<(String, String)>,
}

/// What one item came to on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worked {
    pub job: String,
    pub attempt: Option<String>,
    pub reply: String,
}

type Say = Arc<dyn Fn(&str) + Send + Sync>;
/// Said once an item is answered: its progress acks stop.
type Done = tokio::sync::oneshot::Sender<()>;

/// Work the fleet's queue until the connection fails for good; `say` gets
/// one line per item started and finished.
pub fn work(opts: &HostOptions, handed: &Handed, say: Say) -> Result<(), LoopError> {
    let names = Names::of(&opts.cfg)?;
    // Its lanes report to this host's registry (a reviewer's verdict is read
    // there), made as `loop run` makes one when there is none.
    let made = crate::registry::init(
        StateDir::new(&opts.state_dir),
        &crate::registry::InitRequest {
            topology: crate::registry::Topology::FourRole,
            agent_mix: None,
            force: false,
        },
    );
    if let Err(e) = made
        && crate::registry::load(StateDir::new(&opts.state_dir))?.is_none()
    {
        return Err(e.into());
    }
    let rt = FleetRuntime::new(Threads::Worker("drover-fleet-work"))?;
    let h = rt.handle();
    let worked = rt.block_on(async {
        let client = connection::connect(&opts.cfg, handed).await?;
        let js = async_nats::jetstream::new(client.clone());
        // Made by the first `loop run --fleet` (a host's user may not create).
        let mut waiting = false;
        let (mut consumers, objects) = loop {
            match work::open_for_host(&js, &names, &opts.agents).await {
                Ok(found) => break found,
                Err(e) => {
                    if !waiting {
                        waiting = true;
                        // No work stream yet: no run has started, which
                        // is no error; anything else is said as it is.
                        let fleet = &opts.cfg.fleet;
                        say(&if crate::fleet::lost::stream_gone(&js, &names.work_stream()).await {
                            format!("waiting for `loop run --fleet {fleet}` to start")
                        } else {
                            format!("waiting for the fleet's work-queue (the first `loop run --fleet {fleet}` makes it): {e}")
                        });
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        // The consumers' AckWait is the one they were made with (by the
        // coordinator): progress is said three times within it.
        let mut ack_wait = opts.ack_wait;
        for c in &mut consumers {
            if let Ok(i) = c.info().await {
                ack_wait = ack_wait.min(i.config.ack_wait);
            }
        }
        let progress = work::PROGRESS_EVERY.min(ack_wait / 3);
        let slots = Arc::new(tokio::sync::Semaphore::new(opts.slots.max(1)));
        let running: Running = Arc::default();
        say(&format!(
            "working fleet {} as {} with {} slot(s) for {}; lanes work in worktrees of {} (trust it in your agents)",
            opts.cfg.fleet,
            opts.cfg.host,
            opts.slots.max(1),
            opts.agents.join(", "),
            host_repo(StateDir::new(&opts.state_dir)).display()
        ));
        let ctx = ItemCtx {
            h: h.clone(),
            client,
            objects,
            names,
            opts: opts.clone(),
            say: Arc::clone(&say),
            running,
            repo: std::sync::Mutex::new(()),
            paused: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        };
        let ctx = Arc::new(ctx);
        drop(consumers);
        let pullers: Vec<_> = opts
            .agents
            .clone()
            .into_iter()
            .map(|agent| tokio::spawn(pull(agent, Arc::clone(&slots), Arc::clone(&ctx), progress)))
            .collect();
        tokio::select! {
            _ = futures_util::future::join_all(pullers) => Ok::<(), LoopError>(()),
            what = lost(&js, &ctx.names) => Err(FleetError::HostLost { what }.into()),
        }
    });
    // A store wiped under it: the steps its lanes work are lost with it,
    // and nothing waits for their threads.
    rt.shutdown_background();
    worked
}

/// How often a host looks for the fleet's streams gone (a wiped store).
const LOST_EVERY: Duration = Duration::from_secs(2);

/// Resolves with the stream gone once the work stream or the fleet's
/// object store is found missing twice in a row, [`LOST_EVERY`] apart (a
/// server that cannot be asked now is not a loss).
async fn lost(js: &async_nats::jetstream::Context, names: &Names) -> String {
    let mut before: Option<String> = None;
    loop {
        tokio::time::sleep(LOST_EVERY).await;
        let now = crate::fleet::lost::gone(js, names).await;
        if let Some(what) = &now
            && before.as_ref() == Some(what)
        {
            return what.clone();
        }
        before = now;
    }
}

/// One delivery to this host, as its ack subject says.
#[derive(Debug, Clone, Copy)]
struct Delivered {
    seq: u64,
    delivered: i64,
}

/// Pull one agent's steps, one whenever a slot is free, each run on a
/// thread of its own. Deliveries come on this host's own subject, which the
/// coordinator sees too.
async fn pull(
    agent: String,
    slots: Arc<tokio::sync::Semaphore>,
    ctx: Arc<ItemCtx>,
    progress: Duration,
) {
    let host = ctx.opts.cfg.host.clone();
    let deliver = ctx.names.deliver_subject(&host, &agent);
    let consumer = work::consumer_name(&agent);
    let mut sub = loop {
        match ctx.client.subscribe(deliver.clone()).await {
            Ok(s) => break s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for deliveries; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    loop {
        // This host's login of the agent is at its usage limit: its steps
        // are left to the other hosts until the limit resets.
        if let Some(left) = ctx.paused_for(&agent) {
            tokio::time::sleep(left.min(PAUSE_CHECK)).await;
            continue;
        }
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        if let Err(e) =
            work::pull_one(&ctx.client, &ctx.names, &consumer, &deliver, PULL_EXPIRES).await
        {
            tracing::warn!(error = %e, "cannot pull from the work-queue; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        // The item, or the pull's end (a status, no ack subject).
        let msg =
            match tokio::time::timeout(PULL_EXPIRES + Duration::from_secs(1), sub.next()).await {
                Ok(Some(m)) => m,
                Ok(None) => return,
                Err(_) => continue,
            };
        let Some(info) = msg.reply.as_ref().and_then(|r| work::ack_info(r.as_str())) else {
            continue;
        };
        let at = Delivered {
            seq: info.stream_seq,
            delivered: info.delivered,
        };
        let item = if msg.payload.len() > work::MAX_ITEM {
            Err(format!("an item larger than {} bytes", work::MAX_ITEM))
        } else {
            serde_json::from_slice::<WorkItem>(&msg.payload).map_err(|e| e.to_string())
        };
        let item = match item {
            Ok(i) => i,
            Err(e) => {
                (ctx.say)(&format!("not a work item, left alone: {e}"));
                continue;
            }
        };
        // Progress is said from the moment the item is taken until it
        // is answered, whatever its thread is doing (fetching the bundle,
        // waiting for the agent to start): a slow start is not a dead host.
        // The coordinator keeps the item alive only while this delivery is
        // its latest: once it went to another host, the beat stops.
        let (done, mut done_rx) = tokio::sync::oneshot::channel::<()>();
        {
            let ctx = Arc::clone(&ctx);
            let (run, job) = (item.run.clone(), item.job.clone());
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(progress) => {
                            let req = HostRequest::Progress {
                                job: job.clone(),
                                stream_seq: at.seq,
                                delivered: at.delivered,
                            };
                            let said = tokio::time::timeout(
                                progress,
                                work::ask(&ctx.client, &ctx.names, &run, &ctx.opts.cfg.host, &req),
                            )
                            .await;
                            if let Ok(Ok(CoordReply::Refused { why })) = said {
                                (ctx.say)(&format!("{job}: no longer this host's: {why}"));
                                return;
                            }
                        }
                        _ = &mut done_rx => return,
                    }
                }
            });
        }
        let ctx = Arc::clone(&ctx);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let worked = ctx.run(item, at, done);
            (ctx.say)(&format!(
                "{}: {} ({})",
                worked.job,
                worked.reply,
                worked.attempt.as_deref().unwrap_or("no attempt")
            ));
        });
    }
}

/// Everything one item's thread needs.
struct ItemCtx {
    h: tokio::runtime::Handle,
    client: async_nats::Client,
    objects: async_nats::jetstream::object_store::ObjectStore,
    names: Names,
    opts: HostOptions,
    say: Say,
    /// The attempts whose lanes run on this host now.
    running: Running,
    /// Held while the host's repository changes (a fetch, a worktree added
    /// or removed): one item's thread at a time.
    repo: std::sync::Mutex<()>,
    /// The agents whose login here is at its usage limit, by agent.
    paused: std::sync::Mutex<std::collections::BTreeMap<String, Pause>>,
}

/// An agent this host takes no steps of for now.
#[derive(Debug, Clone, Copy)]
struct Pause {
    until: std::time::Instant,
    /// The earlier pauses in a row: the pause without a reset time on
    /// screen doubles with each.
    pauses: u32,
}

/// How a lane of this host ended.
enum LaneEnd {
    /// Its result, for the coordinator.
    Finished(Finished),
    /// Its agent hit this host's usage limit (`resets_at`, RFC 3339, when
    /// the screen gave one): the step goes to another host.
    Limited(Option<String>),
}

/// Attempts at work on this host.
type Running = Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>;

impl ItemCtx {
    /// How long `agent`'s steps are still left to other hosts (None: not).
    fn paused_for(&self, agent: &str) -> Option<Duration> {
        let p = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        let left = p
            .get(agent)?
            .until
            .checked_duration_since(std::time::Instant::now())?;
        (!left.is_zero()).then_some(left)
    }

    /// Leave `agent`'s steps to other hosts until its limit resets here: a
    /// minute past `resets_at`, or, with no time on screen, a backoff from
    /// [`LIMIT_BACKOFF_FIRST`] doubling to [`LIMIT_BACKOFF_MAX`].
    fn pause(&self, agent: &str, resets_at: Option<&str>) -> Duration {
        let mut p = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        let pauses = p.get(agent).map_or(0, |x| x.pauses.saturating_add(1));
        let backoff =
            crate::backoff::Backoff::new(LIMIT_BACKOFF_FIRST, LIMIT_BACKOFF_MAX).delay(pauses);
        let until_reset = resets_at
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .and_then(|t| {
                (t.with_timezone(&chrono::Utc) - chrono::Utc::now())
                    .to_std()
                    .ok()
            })
            .map(|d| (d + Duration::from_secs(60)).min(LIMIT_PAUSE_MAX));
        let wait = until_reset.unwrap_or(backoff);
        p.insert(
            agent.to_string(),
            Pause {
                until: std::time::Instant::now() + wait,
                pauses,
            },
        );
        wait
    }

    /// Ask the coordinator, retried while the server or the coordinator is
    /// away (the requests are idempotent: asking again gets the same answer).
    fn ask(&self, run: &str, req: &HostRequest) -> Result<CoordReply, FleetError> {
        self.h.block_on(work::ask_retrying(
            &self.client,
            &self.names,
            run,
            &self.opts.cfg.host,
            req,
        ))
    }

    /// Hand a delivery back for another host after `delay` (the
    /// coordinator naks it; a host may not).
    fn release(&self, item: &WorkItem, at: Delivered, delay: Duration) {
        let _ = self.ask(
            &item.run,
            &HostRequest::Release {
                job: item.job.clone(),
                stream_seq: at.seq,
                delivered: at.delivered,
                delay_ms: delay.as_millis() as u64,
            },
        );
    }

    /// Run one delivered item to its end; the coordinator acks it once it
    /// took the result (or terms it when nobody can run it).
    fn run(&self, item: WorkItem, at: Delivered, done: Done) -> Worked {
        let worked = self.run_item(item, at);
        // The item is answered: no more progress.
        let _ = done.send(());
        worked
    }

    fn run_item(&self, item: WorkItem, at: Delivered) -> Worked {
        let (seq, delivered) = (at.seq, at.delivered);
        // A review goes to another host than its implementer's: handed back
        // for a while, then taken here if no other host took it meanwhile.
        if item.avoid_host.as_deref() == Some(self.opts.cfg.host.as_str())
            && delivered <= AVOID_TRIES
        {
            self.release(&item, at, Duration::from_millis(500));
            return Worked {
                job: item.job,
                attempt: None,
                reply: "left to another host (this one implemented it)".into(),
            };
        }
        // Taken by a pull made before this host's limit was seen.
        if self.paused_for(&item.agent).is_some() {
            self.release(&item, at, Duration::from_secs(1));
            return Worked {
                job: item.job,
                attempt: None,
                reply: format!(
                    "left to another host ({} is at its usage limit here)",
                    item.agent
                ),
            };
        }
        let started = self.ask(
            &item.run,
            &HostRequest::Start {
                job: item.job.clone(),
                stream_seq: seq,
                delivered,
            },
        );
        let attempt = match started {
            Ok(CoordReply::Started { attempt }) => attempt,
            Ok(other) => {
                // The job has its outcome, or is not the coordinator's any
                // more (it terms the item), or this delivery is not the
                // item's latest.
                return Worked {
                    job: item.job,
                    attempt: None,
                    reply: format!("not started: {}", describe(&other)),
                };
            }
            Err(e) => {
                // No coordinator answered for a minute: its run is gone (a
                // resumed run answers under a new name and runs such a step
                // itself, and terms this item when it sees it again).
                // Nobody here can take this item's result: leave it.
                return Worked {
                    job: item.job,
                    attempt: None,
                    reply: format!("not started: {e}"),
                };
            }
        };
        let first = self
            .running
            .lock()
            .map(|mut r| r.insert(attempt.clone()))
            .unwrap_or(false);
        if !first {
            // The same delivery again (the server came back and handed it
            // out anew): its lane already runs here. This copy ends when
            // that lane is answered; its progress is said meanwhile.
            while self
                .running
                .lock()
                .map(|r| r.contains(&attempt))
                .unwrap_or(false)
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            return Worked {
                job: item.job,
                attempt: Some(attempt),
                reply: "a repeat of a delivery at work here, answered with it".into(),
            };
        }
        (self.say)(&format!(
            "{}: started attempt {attempt} (delivery {delivered})",
            item.job
        ));
        let finished = match self.lane(&item, &attempt) {
            Ok(LaneEnd::Finished(f)) => f,
            Ok(LaneEnd::Limited(resets_at)) => {
                // Not a result: the step goes back on the queue at once for
                // another host (its `start` supersedes this attempt).
                let wait = self.pause(&item.agent, resets_at.as_deref());
                self.release(&item, at, Duration::ZERO);
                if let Ok(mut r) = self.running.lock() {
                    r.remove(&attempt);
                }
                return Worked {
                    job: item.job,
                    attempt: Some(attempt),
                    reply: format!(
                        "{} is at its usage limit on this host: handed back for another host; its steps wait here {} s",
                        item.agent,
                        wait.as_secs()
                    ),
                };
            }
            Err(e) => Finished::Failed {
                status: "failed".into(),
                reason: e.to_string(),
            },
        };
        let reply = self.ask(
            &item.run,
            &HostRequest::Finish {
                job: item.job.clone(),
                attempt: attempt.clone(),
                finished,
            },
        );
        let reply = match reply {
            // Taken (the coordinator acked the item) or refused (it stays
            // with the host it went to since).
            Ok(r) => describe(&r),
            Err(e) => format!("result not taken ({e}); the item will be delivered again"),
        };
        if let Ok(mut r) = self.running.lock() {
            r.remove(&attempt);
        }
        Worked {
            job: item.job,
            attempt: Some(attempt),
            reply,
        }
    }
}

/// The repository every lane on this host works in a worktree of
/// (`<state>/fleet/repo`): the coordinators' bases are fetched into it, and
/// its own checkout holds the lanes' dirs (`lanes/<run>/<lane>`). An
/// operator trusts it once in Claude Code and Codex, as a repository of
/// their own, and every lane's worktree and dir is trusted with it.
pub fn host_repo(state_dir: &StateDir) -> PathBuf {
    state_dir.fleet_repo()
}

fn describe(r: &CoordReply) -> String {
    match r {
        CoordReply::Started { attempt } => format!("started {attempt}"),
        CoordReply::Accepted => "accepted".into(),
        CoordReply::Refused { why } => format!("refused: {why}"),
    }
}
