//! `drover fleet work`: a host's side of work across hosts (docs/fleet.md).
//! It pulls the loop's steps from the fleet's work-queue while it has free
//! slots, and for each: asks the coordinator for an attempt, builds the
//! lane's repository from the base bundle in the object store, runs the lane
//! on this host's supervisor (the same lanes as `loop run`), keeps the item
//! alive with progress acks while the lane works, sends the candidate back
//! as a binary patch in the object store and reports the attempt's result.
//! The item is acked only once the coordinator has answered; a host that
//! dies before that leaves it to be delivered again, to any host.
//!
//! Nothing of the lane's prompt, environment or transcript leaves this host.

use crate::daemon::Client;
use crate::engine::{Action, Actor, Engine, Request};
use crate::fleet::work::{self, CoordReply, Finished, HostRequest, Step, WorkItem};
use crate::fleet::{FleetConfig, FleetError, Handed, Names, connection};
use crate::loopctl::LoopError;
use crate::loopctl::board::{self, brief};
use crate::loopctl::land::{capture, git};
use crate::loopctl::lanes::lanes_ops::{LaneOptions, RealLanes};
use crate::loopctl::night::nudge::{self, Nudge};
use crate::loopctl::ops::{JobSpec, LaneHandle, LaneOps, LaneSpec, Outcome, Role};
use crate::registry::Agent;
use crate::registry::heartbeat::{self, SessionVerdict};
use crate::report::schema::Expect;
use async_nats::jetstream::AckKind;
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long one pull waits for an item before it asks again (a slot held
/// by one agent's pull is free for the other's within it).
const PULL_EXPIRES: Duration = Duration::from_secs(2);
/// How many deliveries of a review its implementer's host hands back
/// before it takes the review itself (no other host was free).
const AVOID_TRIES: i64 = 3;
/// How long one wait for a lane's outcome lasts (it is asked again).
const POLL: Duration = Duration::from_secs(1);
/// How often a paused agent's puller looks again.
const PAUSE_CHECK: Duration = Duration::from_secs(5);
/// The first pause of an agent at its limit with no reset time on screen.
const LIMIT_BACKOFF_FIRST: Duration = Duration::from_secs(15 * 60);
/// The longest such pause (it doubles each time).
const LIMIT_BACKOFF_MAX: Duration = Duration::from_secs(60 * 60);
/// The longest pause until a reset time on screen.
const LIMIT_PAUSE_MAX: Duration = Duration::from_secs(12 * 3600);
/// A lane's turn timeout when its item names none (an older coordinator):
/// the loop's default.
const TURN_TIMEOUT_S: u64 = 30 * 60;
/// The report grace when its item names none: the loop's default.
const REPORT_GRACE_S: u64 = crate::loopctl::night::settings::DEFAULT_REPORT_GRACE.as_secs();

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
    pub backend: String,
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
        &opts.state_dir,
        &crate::registry::InitRequest {
            topology: crate::registry::Topology::FourRole,
            agent_mix: None,
            force: false,
        },
    );
    if let Err(e) = made
        && crate::registry::load(&opts.state_dir)?.is_none()
    {
        return Err(e.into());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("drover-fleet-work")
        .enable_all()
        .build()
        .map_err(FleetError::Runtime)?;
    let h = rt.handle().clone();
    rt.block_on(async {
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
                        say(&format!(
                            "waiting for the fleet's work-queue (the first `loop run --fleet {}` makes it): {e}",
                            opts.cfg.fleet
                        ));
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
            host_repo(&opts.state_dir).display()
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
        let pullers: Vec<_> = consumers
            .into_iter()
            .zip(opts.agents.clone())
            .map(|(c, agent)| {
                tokio::spawn(pull(c, agent, Arc::clone(&slots), Arc::clone(&ctx), progress))
            })
            .collect();
        for p in pullers {
            let _ = p.await;
        }
        Ok::<(), LoopError>(())
    })
}

/// Pull one agent's steps, one whenever a slot is free, each run on a
/// thread of its own.
async fn pull(
    consumer: async_nats::jetstream::consumer::PullConsumer,
    agent: String,
    slots: Arc<tokio::sync::Semaphore>,
    ctx: Arc<ItemCtx>,
    progress: Duration,
) {
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
        let batch = consumer
            .fetch()
            .max_messages(1)
            .expires(PULL_EXPIRES)
            .messages()
            .await;
        let mut batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "cannot pull from the work-queue; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Some(Ok(msg)) = batch.next().await else {
            continue;
        };
        // Progress is said from the moment the item is taken until it
        // is answered, whatever its thread is doing (fetching the bundle,
        // waiting for the agent to start): a slow start is not a dead host.
        let (done, mut done_rx) = tokio::sync::oneshot::channel::<()>();
        let beat = msg.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(progress) => {
                        let _ = beat.ack_with(AckKind::Progress).await;
                    }
                    _ = &mut done_rx => return,
                }
            }
        });
        let ctx = Arc::clone(&ctx);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let worked = ctx.run(&msg, done);
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
    /// The pause without a reset time on screen; doubled each time.
    backoff: Duration,
}

/// How the wait for a lane's job ended.
enum Ended {
    Outcome(Outcome),
    /// At this host's usage limit (`resets_at` when the screen gave one).
    Limited(Option<String>),
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
        let backoff = p.get(agent).map_or(LIMIT_BACKOFF_FIRST, |x| {
            (x.backoff * 2).min(LIMIT_BACKOFF_MAX)
        });
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
                backoff,
            },
        );
        wait
    }

    /// Ask the coordinator, retried while the server or the coordinator is
    /// away (the requests are idempotent: asking again gets the same answer).
    fn ask(&self, run: &str, req: &HostRequest) -> Result<CoordReply, FleetError> {
        self.h
            .block_on(work::ask_retrying(&self.client, &self.names, run, req))
    }

    /// Run one delivered item to its end; acks it once the coordinator
    /// answered (or the item cannot be run by anyone).
    fn run(&self, msg: &async_nats::jetstream::Message, done: Done) -> Worked {
        let worked = self.run_item(msg);
        // The item is answered (acked, nak'd or termed): no more progress.
        let _ = done.send(());
        worked
    }

    fn run_item(&self, msg: &async_nats::jetstream::Message) -> Worked {
        let item: WorkItem = match serde_json::from_slice(&msg.payload) {
            Ok(i) => i,
            Err(e) => {
                let _ = self.h.block_on(msg.ack_with(AckKind::Term));
                return Worked {
                    job: "?".into(),
                    attempt: None,
                    reply: format!("not a work item, dropped: {e}"),
                };
            }
        };
        let (seq, delivered) = match msg.info() {
            Ok(i) => (i.stream_sequence, i.delivered),
            Err(_) => (0, 1),
        };
        // A review goes to another host than its implementer's: handed back
        // for a while, then taken here if no other host took it meanwhile.
        if item.avoid_host.as_deref() == Some(self.opts.cfg.host.as_str())
            && delivered <= AVOID_TRIES
        {
            let _ = self
                .h
                .block_on(msg.ack_with(AckKind::Nak(Some(Duration::from_millis(500)))));
            return Worked {
                job: item.job,
                attempt: None,
                reply: "left to another host (this one implemented it)".into(),
            };
        }
        // Taken by a pull made before this host's limit was seen.
        if self.paused_for(&item.agent).is_some() {
            let _ = self
                .h
                .block_on(msg.ack_with(AckKind::Nak(Some(Duration::from_secs(1)))));
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
                host: self.opts.cfg.host.clone(),
                stream_seq: seq,
                delivered,
            },
        );
        let attempt = match started {
            Ok(CoordReply::Started { attempt }) => attempt,
            Ok(other) => {
                // The job has its outcome, or is not the coordinator's any more.
                let _ = self.h.block_on(msg.ack_with(AckKind::Term));
                return Worked {
                    job: item.job,
                    attempt: None,
                    reply: format!("not started: {}", describe(&other)),
                };
            }
            Err(e) => {
                // No coordinator answered for a minute: its run is gone (a
                // resumed run answers under a new name and runs such a step
                // itself). Nobody can take this item's result: give it up.
                let _ = self.h.block_on(msg.ack_with(AckKind::Term));
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
            // out anew): its lane already runs here. Ack this copy once
            // that lane is answered; its progress is said meanwhile.
            while self
                .running
                .lock()
                .map(|r| r.contains(&attempt))
                .unwrap_or(false)
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = self.h.block_on(msg.double_ack());
            return Worked {
                job: item.job,
                attempt: Some(attempt),
                reply: "a repeat of a delivery at work here, acked with it".into(),
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
                let _ = self.h.block_on(msg.ack_with(AckKind::Nak(None)));
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
                host: self.opts.cfg.host.clone(),
                attempt: attempt.clone(),
                finished,
            },
        );
        let reply = match reply {
            Ok(r) => {
                let _ = self.h.block_on(msg.double_ack());
                describe(&r)
            }
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

    /// The lane of one attempt, from the bundle to the result.
    fn lane(&self, item: &WorkItem, attempt: &str) -> Result<LaneEnd, LoopError> {
        let agent: Agent = match item.agent.as_str() {
            "claude" => Agent::Claude,
            "codex" => Agent::Codex,
            other => {
                return Err(LoopError::usage(
                    "agent",
                    format!("unknown agent {other:?}"),
                ));
            }
        };
        if item.sim_script.is_none() {
            let path = std::env::var("PATH").unwrap_or_default();
            if crate::pane::find_executable(agent.as_str(), &path, None).is_none() {
                return Ok(LaneEnd::Finished(Finished::Failed {
                    status: "refused".into(),
                    reason: format!(
                        "{} is not on host {}'s PATH",
                        agent.as_str(),
                        self.opts.cfg.host
                    ),
                }));
            }
        }
        let short: String = attempt
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(8)
            .collect();
        let id = format!("{}-{short}", item.lane);
        let root = self
            .opts
            .state_dir
            .join("fleet")
            .join("work")
            .join(&item.run);
        let dir = root.join(&id);
        // The lane dir (brief, report, the reviewer's copies of the
        // candidate: an added directory of the agent's) lies in the host
        // repository's own checkout, so trusting that repository covers it.
        let lane_dir = host_repo(&self.opts.state_dir)
            .join("lanes")
            .join(&item.run)
            .join(&id);
        let bundle = self.h.block_on(work::retrying(|| {
            work::get_bytes(&self.objects, &item.bundle)
        }))?;
        let branch = format!("drover/fleet/{id}");
        let result = self
            .checkout(item, &dir, &lane_dir, &branch, &bundle)
            .and_then(|()| self.lane_in(item, agent, &id, &dir, &lane_dir));
        // The worktree is this host's scratch copy of the coordinator's
        // tree: its candidate went back as a patch.
        {
            let _held = self.repo.lock().unwrap_or_else(|p| p.into_inner());
            let repo = host_repo(&self.opts.state_dir);
            let _ = git::run(
                &repo,
                &["worktree", "remove", "--force", &dir.to_string_lossy()],
            );
            let _ = git::run(&repo, &["worktree", "prune"]);
            let _ = git::run(&repo, &["branch", "-q", "-D", &branch]);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&lane_dir);
        // The run's dirs go with its last lane here (removed only empty).
        for d in [dir.parent(), lane_dir.parent()].into_iter().flatten() {
            let _ = std::fs::remove_dir(d);
        }
        result
    }

    /// The lane's worktree of this host's repository ([`host_repo`]) on a
    /// branch of its own at the item's base, fetched from the bundle. Its
    /// agents trust it as a worktree of that repository, as they trust a
    /// worktree of a repository on one host (docs/fleet.md).
    fn checkout(
        &self,
        item: &WorkItem,
        dir: &Path,
        lane_dir: &Path,
        branch: &str,
        bundle: &[u8],
    ) -> Result<(), LoopError> {
        let _ = std::fs::remove_dir_all(dir);
        crate::store::create_private_dir(lane_dir)?;
        if let Some(parent) = dir.parent() {
            crate::store::create_private_dir(parent)?;
        }
        let bundle_file = lane_dir.join("base.bundle");
        crate::store::write_bytes_atomic(&bundle_file, bundle)?;
        let _held = self.repo.lock().unwrap_or_else(|p| p.into_inner());
        let repo = host_repo(&self.opts.state_dir);
        if !repo.join(".git").exists() {
            crate::store::create_private_dir(&repo)?;
            git::run(&repo, &["init", "-q"])?;
        }
        git::run(
            &repo,
            &[
                "fetch",
                "-q",
                &bundle_file.to_string_lossy(),
                &format!("+{}/*:refs/drover/fleet-base/*", work::BUNDLE_REF),
            ],
        )?;
        let _ = std::fs::remove_file(&bundle_file);
        // A worktree of a host that died mid-lane is registered still.
        let _ = git::run(&repo, &["worktree", "prune"]);
        git::run(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-B",
                branch,
                &dir.to_string_lossy(),
                &item.base,
            ],
        )?;
        Ok(())
    }

    /// An object of the item's, fetched and checked.
    fn object(&self, r: &Option<work::ObjectRef>) -> Result<Option<Vec<u8>>, LoopError> {
        Ok(match r {
            Some(r) => Some(
                self.h
                    .block_on(work::retrying(|| work::get_bytes(&self.objects, r)))?,
            ),
            None => None,
        })
    }

    fn lane_in(
        &self,
        item: &WorkItem,
        agent: Agent,
        id: &str,
        dir: &Path,
        lane_dir: &Path,
    ) -> Result<LaneEnd, LoopError> {
        let candidate = self.object(&item.candidate)?;
        let before = self.object(&item.before_rebase)?;
        // A review reads the candidate, a later round goes on from its work
        // so far: the patch applied on the base. What a round adds is
        // what it sends back, against the tree it started from.
        if let Some(bytes) = candidate.as_ref().filter(|b| !b.is_empty()) {
            let file = lane_dir.join("candidate.patch");
            crate::store::write_bytes_atomic(&file, bytes)?;
            git::run(
                dir,
                &["apply", "--binary", "--index", &file.to_string_lossy()],
            )?;
        }
        let start_tree = git::line(dir, &["write-tree"])?;
        let role = match item.step {
            Step::Implement => Role::Implementer,
            Step::Review => Role::Reviewer,
        };
        let socket = crate::paths::socket_path(&self.opts.state_dir)
            .map_err(|e| LoopError::usage("state dir", e.to_string()))?;
        let connect = || {
            Client::connect(&socket).map_err(|e| LoopError::Lane {
                lane: id.to_string(),
                message: format!("this host's supervisor: {e}"),
            })
        };
        let mut opts = LaneOptions::new(&self.opts.exe);
        opts.backend = self.opts.backend.clone();
        opts.env = self.opts.env.clone();
        if let Some(script) = item.sim_script.clone() {
            opts.sim = true;
            opts.scripts = Some(Box::new(move |_: &LaneSpec| script.clone()));
        }
        let mut lanes = RealLanes::new(&self.opts.state_dir, connect()?, connect()?, opts);
        let (prompt, from_board) = prompt(
            item,
            role,
            id,
            dir,
            lane_dir,
            candidate.as_deref(),
            before.as_deref(),
            &lanes.report_command(),
        )?;
        (self.say)(&format!(
            "{}: lane {id} ({}, {}): {}",
            item.job,
            item.agent,
            role.as_str(),
            if from_board {
                "its brief built here from the board at the base"
            } else {
                "its task is not on the board at the base: a short prompt naming it"
            }
        ));
        let spec = LaneSpec {
            id: id.to_string(),
            role,
            agent,
            task: item.task.clone(),
            lane_dir: lane_dir.to_path_buf(),
            worktree: None,
            cwd: dir.to_path_buf(),
            effort: None,
            portable: false,
        };
        let handle = lanes.up(&spec)?;
        let job = format!("{}-{}", item.job, id.rsplit('-').next().unwrap_or("a"));
        let report = lane_dir.join("report.json");
        let run = || -> Result<LaneEnd, LoopError> {
            lanes.dispatch(
                &handle,
                &JobSpec {
                    job_id: job.clone(),
                    prompt,
                    report_path: report.clone(),
                    autocomplete: true,
                    report_files: item.report_files.clone(),
                    brief: Default::default(),
                },
            )?;
            let outcome = match self.outcome(&mut lanes, &handle, item, &job, &report)? {
                Ended::Outcome(o) => o,
                Ended::Limited(resets_at) => {
                    self.cancel(&job, "its agent is at its usage limit on this host");
                    return Ok(LaneEnd::Limited(resets_at));
                }
            };
            Ok(LaneEnd::Finished(match outcome {
                Outcome::Completed if role == Role::Reviewer => {
                    let reg = crate::registry::load_required(&self.opts.state_dir)?;
                    let verdict = reg
                        .session(Role::Reviewer.session_id())
                        .map(|s| heartbeat::verdict(s, &item.task, chrono::Utc::now()))
                        .unwrap_or(SessionVerdict::NoPass("no reviewer session".into()));
                    match verdict {
                        SessionVerdict::Pass => Finished::Reviewed {
                            pass: true,
                            reason: String::new(),
                        },
                        SessionVerdict::Fail(why) | SessionVerdict::NoPass(why) => {
                            Finished::Reviewed {
                                pass: false,
                                reason: stated_reason(&report).unwrap_or(why),
                            }
                        }
                    }
                }
                Outcome::Completed => {
                    git::run(dir, &["add", "-A"])?;
                    let patch = git::run_bytes(
                        dir,
                        &["diff", "--cached", "--binary", "--full-index", &start_tree],
                    )?;
                    let name = format!("patch-{}-{}.patch", item.job, job);
                    let patch = self.h.block_on(work::retrying(|| {
                        work::put_bytes(&self.objects, &name, &patch)
                    }))?;
                    Finished::Implemented { patch }
                }
                Outcome::Failed { status, reason } => Finished::Failed { status, reason },
                Outcome::Escalated { decision, reason } => Finished::Escalated { decision, reason },
            }))
        };
        let result = run();
        let _ = lanes.down(&handle);
        result
    }

    /// Wait for the outcome of the lane's job, within the run's turn
    /// timeout; an implementer at the end of its turn with no report that
    /// counts is answered or reminded once, as on the coordinator
    /// ([`crate::loopctl::night::nudge`]), then failed.
    fn outcome(
        &self,
        lanes: &mut RealLanes,
        lane: &LaneHandle,
        item: &WorkItem,
        job: &str,
        report: &Path,
    ) -> Result<Ended, LoopError> {
        let turn = Duration::from_secs(item.turn_timeout_s.unwrap_or(TURN_TIMEOUT_S).max(1));
        let grace = Duration::from_secs(item.report_grace_s.unwrap_or(REPORT_GRACE_S).max(1));
        let started = std::time::Instant::now();
        let mut said = Nudge::default();
        loop {
            if let Some((_, o)) = lanes
                .wait_decision(&[job.to_string()], POLL)?
                .into_iter()
                .next()
            {
                // The policy escalates a lane at a usage limit: on a fleet
                // that is this host's login, not the task's; another host's
                // may have room.
                if matches!(o, Outcome::Escalated { .. })
                    && let Some(obs) = lanes.observe(lane)?
                    && obs.kind.as_deref() == Some("usage_limit")
                {
                    return Ok(Ended::Limited(obs.resets_at));
                }
                return Ok(Ended::Outcome(o));
            }
            if started.elapsed() >= turn {
                self.cancel(job, "the turn timed out on this host");
                return Ok(Ended::Outcome(Outcome::Failed {
                    status: "timed-out".into(),
                    reason: format!("no outcome within {} s", turn.as_secs()),
                }));
            }
            if lane.role != Role::Implementer {
                continue;
            }
            let Some(obs) = lanes.observe(lane)? else {
                continue;
            };
            let now = chrono::Utc::now();
            if !matches!(obs.state.as_str(), "idle" | "done") {
                said.ended_since = None;
                continue;
            }
            let since = *said.ended_since.get_or_insert(now);
            let attempt = Engine::open(&self.opts.state_dir)
                .ok()
                .and_then(|e| e.show(job).ok())
                .and_then(|r| r.attempt_id)
                .unwrap_or_default();
            let expect = Expect {
                attempt_id: &attempt,
                session_id: Role::Implementer.session_id(),
            };
            let found = nudge::found(report, &expect);
            let ended = crate::loopctl::night::clock::since(since, now);
            let cmd = lanes.report_command();
            let shown = report.display().to_string();
            match nudge::step(&said, &found, ended, grace) {
                nudge::Step::Nothing => {}
                nudge::Step::Answer(problems) => {
                    let files: Vec<&str> = item.report_files.iter().map(String::as_str).collect();
                    let example = crate::report::schema::example(&expect, &files);
                    let text = nudge::answer(job, &shown, &problems, &example, &cmd);
                    let sent = lanes.prompt(lane, &text)?;
                    (self.say)(&format!(
                        "{}: the report of {job} does not fit; {}",
                        item.job,
                        if sent {
                            "answered once"
                        } else {
                            "could not be answered"
                        }
                    ));
                    said.answered = true;
                    said.ended_since = None;
                }
                nudge::Step::Remind => {
                    let sent = lanes.prompt(lane, &nudge::reminder(job, &cmd, &shown))?;
                    (self.say)(&format!(
                        "{}: no report from {job}; {}",
                        item.job,
                        if sent {
                            "reminded once"
                        } else {
                            "could not be reminded"
                        }
                    ));
                    said.reminded = Some(now);
                    said.ended_since = None;
                }
                nudge::Step::Park => {
                    self.cancel(job, "no report after a reminder");
                    return Ok(Ended::Outcome(Outcome::Failed {
                        status: "no-report".into(),
                        reason: format!(
                            "no report from lane {} after a reminder; its agent must run `{cmd} report done`",
                            lane.id
                        ),
                    }));
                }
            }
        }
    }

    /// Cancel this host's job of a lane given up.
    fn cancel(&self, job: &str, why: &str) {
        if let Ok(engine) = Engine::open(&self.opts.state_dir) {
            let _ = engine.transition(&Request::new(
                job.to_string(),
                Action::Cancel {
                    reason: Some(why.to_string()),
                },
                Actor::operator(),
            ));
        }
    }
}

/// The repository every lane on this host works in a worktree of
/// (`<state>/fleet/repo`): the coordinators' bases are fetched into it, and
/// its own checkout holds the lanes' dirs (`lanes/<run>/<lane>`). An
/// operator trusts it once in Claude Code and Codex, as a repository of
/// their own, and every lane's worktree and dir is trusted with it.
pub fn host_repo(state_dir: &Path) -> PathBuf {
    state_dir.join("fleet").join("repo")
}

/// A reviewer's stated one-line reason, from the report its verdict was
/// written to (the findings stay on this host).
fn stated_reason(report: &Path) -> Option<String> {
    let v: serde_json::Value = crate::store::read_json(report).ok().flatten()?;
    v["reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// The lane's first prompt, built here from the board at the base, as the
/// coordinator builds it (no prompt body travels): the implementer's brief
/// or the reviewer's, with its copies of the candidate in the lane dir. A
/// simulated lane whose task is not on the board at the base gets a short
/// prompt naming the task; a real agent's is an error.
#[allow(clippy::too_many_arguments)]
fn prompt(
    item: &WorkItem,
    role: Role,
    id: &str,
    dir: &Path,
    lane_dir: &Path,
    candidate: Option<&[u8]>,
    before: Option<&[u8]>,
    report_cmd: &str,
) -> Result<(String, bool), LoopError> {
    let task = item
        .board
        .as_deref()
        .and_then(|rel| board::load(&dir.join(rel)).ok())
        .and_then(|b| b.task(&item.task).cloned());
    let Some(task) = task else {
        if item.sim_script.is_none() {
            return Err(LoopError::usage(
                "board",
                format!(
                    "task {} is not on the board ({}) at {}: commit the board before `loop run --fleet`",
                    item.task,
                    item.board.as_deref().unwrap_or("outside the repository"),
                    item.base
                ),
            ));
        }
        let short = match role {
            Role::Implementer => format!(
                "Implement task {} of this repository's board.\n[loop] task={} round={} role=implementer",
                item.task, item.task, item.round
            ),
            Role::Reviewer => format!(
                "Review the change in this repository for task {} of its board; end with `VERDICT: pass` or `VERDICT: fail: <reason>`.\n[loop] task={} role=reviewer",
                item.task, item.task
            ),
        };
        return Ok((short, false));
    };
    let tier = brief::tier_named(item.tier.as_deref());
    let (text, tail) = match role {
        Role::Implementer => {
            let b = brief::build(id, &task, tier, &item.others, report_cmd);
            let text = brief::render(&b);
            // A repair round is told its evidence after the brief, as the
            // coordinator tells it.
            let tail = match &item.repair {
                Some(evidence) => format!(
                    "{}[loop] task={} round={} role=implementer repair",
                    brief::repair_addendum(evidence),
                    item.task,
                    item.round
                ),
                None => format!(
                    "\n[loop] task={} round={} role=implementer",
                    item.task, item.round
                ),
            };
            (text, tail)
        }
        Role::Reviewer => {
            // The reviewer reads its own copies, in its lane dir (a real
            // Claude reviewer's added directory), so reading asks nothing.
            let patch = lane_dir.join(format!("candidate-v{}.patch", item.round));
            crate::store::write_bytes_atomic(
                &patch,
                &capture::shown_copy(candidate.unwrap_or_default()),
            )?;
            let before = match before {
                Some(b) => {
                    let p = lane_dir.join(format!("candidate-v{}-before-rebase.patch", item.round));
                    crate::store::write_bytes_atomic(&p, &capture::shown_copy(b))?;
                    Some(p)
                }
                None => None,
            };
            let text = brief::review(
                &brief::ReviewOf {
                    lane: id,
                    task: &item.task,
                    title: &task.title,
                    tier,
                    round: item.round,
                    reviewer: &item.agent,
                    patch: &patch,
                    before: before.as_deref(),
                },
                &task.criteria,
            );
            let tail = format!(
                "[loop] task={} round={} role=reviewer patch={}",
                item.task,
                item.round,
                patch.display()
            );
            (text, tail)
        }
    };
    crate::store::write_bytes_atomic(&lane_dir.join("brief.md"), text.as_bytes())?;
    Ok((format!("{text}{tail}"), true))
}

fn describe(r: &CoordReply) -> String {
    match r {
        CoordReply::Started { attempt } => format!("started {attempt}"),
        CoordReply::Accepted => "accepted".into(),
        CoordReply::Refused { why } => format!("refused: {why}"),
    }
}
