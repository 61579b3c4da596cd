//! [`LaneOps`] for `drover loop run --fleet FLEET`: the coordinator's side
//! of work across hosts (docs/fleet.md). A task's first implementer step
//! goes on the fleet's work-queue; a host with a free slot that takes its
//! agent pulls it, builds the lane from the base bundle, runs it and sends
//! back the candidate as a binary patch, which is applied here, in the
//! task's own worktree, before the job completes. Its review goes on the
//! queue as well, with the candidate as a patch, for a host other than the
//! implementer's when one is free; the verdict comes back and is recorded
//! here. Repair and rebase rounds, the gate and landing run on this host's
//! own lanes (`local`), as on one host.
//!
//! This process alone writes the jobs: a host asks for an attempt (`start`)
//! and reports its result (`finish`) by request/reply, on a subject only its
//! own user may publish on, and is answered only on its own inbox. An
//! attempt is given only for a delivery this process saw go to that host
//! (every delivery comes here too), and only this process acks the items:
//! it keeps a delivery alive for its holder alone, acks it once its result
//! is taken, and never after a refusal. The engine's CAS on the attempt
//! refuses the result of a superseded one (a host that was given up and
//! came back). Every request and answer is recorded in
//! `<state>/fleet/<run>.jsonl`.

mod answer;
mod deliveries;
mod takers;

use crate::engine::{Action, Actor, Engine, Request};
use crate::fleet::blocking::WorkQueue;
use crate::fleet::work::{self, CoordReply, ObjectRef, Step, WorkItem};
use crate::fleet::{FleetConfig, FleetError, Handed, Names};
use crate::loopctl::LoopError;
use crate::loopctl::land::{capture, git};
use crate::loopctl::lanes::renew::Renewal;
use crate::loopctl::ops::{JobSpec, LaneHandle, LaneObs, LaneOps, LaneSpec, Outcome, Role};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The sim script of a lane sent to the fleet (None: real agents).
pub type ItemScript = Box<dyn FnMut(&LaneSpec) -> Option<String>>;

/// What every step the coordinator puts on the fleet carries besides its
/// job: where the board is and the run's timings.
#[derive(Debug, Clone)]
pub struct RemoteSteps {
    /// The board's directory relative to the repository (a host builds the
    /// brief from it); None when the board is outside the repository.
    pub board: Option<String>,
    pub turn_timeout: Duration,
    pub report_grace: Duration,
}

/// How often the fleet's streams are looked for while steps are out.
const STREAMS_EVERY: Duration = Duration::from_secs(2);

/// How often remote outcomes are looked for while waiting.
const POLL: Duration = Duration::from_millis(50);

/// One step on the fleet, as the coordinator keeps it.
struct Remote {
    lane: LaneHandle,
    worktree: PathBuf,
    /// Where the job's report goes here (a review's verdict and reason).
    report: PathBuf,
    /// Attempts given out, by (stream seq, delivery count).
    starts: BTreeMap<(u64, i64), String>,
    /// Answers given to finished attempts, by attempt.
    finished: BTreeMap<String, CoordReply>,
    /// The host each attempt was given to.
    given: BTreeMap<String, String>,
    /// The item's stream sequence, once published.
    seq: Option<u64>,
    outcome: Option<Outcome>,
}

/// The latest delivery of one of this run's items, as this process saw it
/// go out: to which host, the how-manieth, and its ack subject.
#[derive(Debug, Clone)]
struct Delivery {
    host: String,
    delivered: i64,
    ack: String,
}

/// What the request handler and the runner share.
struct Shared {
    state_dir: PathBuf,
    log: PathBuf,
    remotes: BTreeMap<String, Remote>,
    /// The host whose candidate of a task was taken, by task: its review
    /// goes elsewhere when another host is free.
    implemented_by: BTreeMap<String, String>,
    /// The latest delivery of each of this run's items, by stream sequence.
    deliveries: BTreeMap<u64, Delivery>,
    /// Hosts that asked: their deliveries are watched even before their
    /// presence is seen.
    asked: BTreeSet<String>,
}

/// The coordinator's lanes: the fleet for first implementer rounds, `local`
/// for the rest.
pub struct FleetLanes<L: LaneOps> {
    local: L,
    /// The fleet's work-queue, on a runtime of its own.
    queue: WorkQueue,
    run: String,
    state_dir: PathBuf,
    scripts: ItemScript,
    shared: Arc<Mutex<Shared>>,
    /// Remote lanes that are up (not yet down), by lane id.
    up: BTreeSet<String>,
    /// Remote lanes' jobs, by lane id.
    jobs: BTreeMap<String, String>,
    bundles: BTreeMap<String, ObjectRef>,
    renewals: BTreeMap<String, Renewal>,
    lease_ttl: Duration,
    steps: RemoteSteps,
    /// Whether a host took each agent's steps, and when that was seen.
    takers: BTreeMap<crate::registry::Agent, (Instant, bool)>,
    /// When the fleet's streams were last seen to exist.
    checked: Instant,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn record(log: &Path, entry: serde_json::Value) {
    let mut e = entry;
    e["at"] = json!(crate::paths::now_rfc3339());
    if let Err(err) = crate::store::append_jsonl(log, &e, true) {
        tracing::warn!(error = %err, "fleet.jsonl not written");
    }
}

/// What [`FleetLanes::start`] needs besides the lanes up here.
pub struct FleetStart<'a> {
    /// This host's fleet.
    pub cfg: &'a FleetConfig,
    /// The secrets handed to this process for the bus.
    pub handed: &'a Handed,
    /// The run's key: its hosts' requests come on its subjects.
    pub run: &'a str,
    pub state_dir: &'a Path,
    /// The run's record (`<state>/fleet/<run>.jsonl`).
    pub log: &'a Path,
    /// The sim script of each lane sent to the fleet.
    pub scripts: ItemScript,
    /// The write lease of a task whose step is out, renewed here.
    pub lease_ttl: Duration,
    /// The work consumer, when this makes it, redelivers a step unacked
    /// for this long.
    pub ack_wait: Duration,
    pub steps: RemoteSteps,
}

impl<L: LaneOps> FleetLanes<L> {
    /// Connect as this host of `opts.cfg`'s fleet and answer run
    /// `opts.run`'s hosts; `local` runs what stays here.
    pub fn start(local: L, opts: FleetStart<'_>) -> Result<Self, LoopError> {
        let FleetStart {
            cfg,
            handed,
            run,
            state_dir,
            log,
            scripts,
            lease_ttl,
            ack_wait,
            steps,
        } = opts;
        // A config that names no fleet is said before a bad run id.
        Names::of(cfg)?;
        crate::fleet::subjects::check_id("run", run)?;
        let shared = Arc::new(Mutex::new(Shared {
            state_dir: state_dir.to_path_buf(),
            log: log.to_path_buf(),
            remotes: BTreeMap::new(),
            implemented_by: BTreeMap::new(),
            deliveries: BTreeMap::new(),
            asked: BTreeSet::new(),
        }));
        // The runs this state dir made before (a coordinator that died): their
        // items nobody answers any more are termed when they are delivered.
        let earlier: BTreeSet<String> =
            std::fs::read_dir(crate::statedir::StateDir::new(state_dir).fleet_dir())
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".jsonl").map(str::to_string)
                })
                .filter(|r| r != run)
                .collect();
        let queue = WorkQueue::open(cfg, handed, ack_wait)?;
        let names = queue.names().clone();
        let sub = queue.subscribe(names.coord_filter(run))?;
        queue.spawn(deliveries::watch(
            queue.client().clone(),
            queue.jetstream().clone(),
            Arc::clone(&shared),
            names.clone(),
            run.to_string(),
            earlier,
        ));
        queue.spawn(answer::serve(
            queue.client().clone(),
            sub,
            queue.jetstream().clone(),
            Arc::clone(&shared),
            names,
            run.to_string(),
        ));
        Ok(FleetLanes {
            local,
            queue,
            run: run.to_string(),
            state_dir: state_dir.to_path_buf(),
            scripts,
            shared,
            up: BTreeSet::new(),
            jobs: BTreeMap::new(),
            bundles: BTreeMap::new(),
            renewals: BTreeMap::new(),
            lease_ttl,
            steps,
            takers: BTreeMap::new(),
            checked: Instant::now(),
        })
    }

    fn is_remote(&self, lane: &LaneHandle) -> bool {
        self.up.contains(&lane.id) || self.jobs.contains_key(&lane.id)
    }

    /// `Err` when the work stream or the object store is gone from the
    /// server (a wiped store): nothing queued there will come back. A
    /// server that cannot be asked now is not taken for that.
    fn streams_present(&mut self) -> Result<(), LoopError> {
        let gone = self.queue.lost();
        self.checked = Instant::now();
        match gone {
            Some(what) => {
                let log = lock(&self.shared).log.clone();
                record(&log, json!({"event": "lost", "what": what}));
                Err(FleetError::Lost { what }.into())
            }
            None => Ok(()),
        }
    }

    /// The bundle of `base` in the object store (made once per base).
    fn bundle(&mut self, repo: &Path, base: &str) -> Result<ObjectRef, LoopError> {
        if let Some(r) = self.bundles.get(base) {
            return Ok(r.clone());
        }
        let refname = format!("{}/{base}", work::BUNDLE_REF);
        git::run(repo, &["update-ref", &refname, base])?;
        let file = crate::statedir::StateDir::new(&self.state_dir)
            .fleet_dir()
            .join(format!("base-{base}.bundle"));
        crate::store::create_private_dir(file.parent().unwrap_or(&self.state_dir))?;
        let made = git::run(
            repo,
            &["bundle", "create", "-q", &file.to_string_lossy(), &refname],
        );
        let _ = git::run(repo, &["update-ref", "-d", &refname]);
        made?;
        let bytes = std::fs::read(&file).map_err(|e| LoopError::io(&file, e))?;
        let _ = std::fs::remove_file(&file);
        let r = self.queue.put(&format!("base-{base}.bundle"), &bytes)?;
        self.bundles.insert(base.to_string(), r.clone());
        Ok(r)
    }
}

impl<L: LaneOps> FleetLanes<L> {
    /// Up here or on a host; `setup` runs for a lane up here.
    fn route(
        &mut self,
        spec: &LaneSpec,
        setup: Option<&crate::loopctl::land::setup::Setup>,
    ) -> Result<LaneHandle, LoopError> {
        // A round whose worktree is in a merge is told of the merge: here.
        let merging = spec.worktree.is_none() && crate::loopctl::land::rebase::in_merge(&spec.cwd);
        if !spec.portable || merging {
            return match setup {
                Some(x) => self.local.up_set(spec, x),
                None => self.local.up(spec),
            };
        }
        if !self.taken(spec.agent) {
            // No host pulls or works this agent's steps: it would wait out
            // its turn on the queue. It runs here instead.
            let log = lock(&self.shared).log.clone();
            record(
                &log,
                json!({"event": "local", "task": spec.task, "lane": spec.id,
                       "agent": spec.agent.as_str(), "role": spec.role.as_str(),
                       "why": format!("no host takes {} steps", spec.agent.as_str())}),
            );
            return match setup {
                Some(x) => self.local.up_set(spec, x),
                None => self.local.up(spec),
            };
        }
        // A review goes to the fleet: its candidate travels as a patch.
        if spec.role == Role::Reviewer {
            self.up.insert(spec.id.clone());
            return Ok(LaneHandle {
                id: spec.id.clone(),
                role: spec.role,
                agent: spec.agent,
                task: spec.task.clone(),
                pane: format!("fleet:{}", spec.id),
                cwd: spec.cwd.clone(),
                lane_dir: spec.lane_dir.clone(),
            });
        }
        // An implementer's step goes to the fleet. A fresh worktree is made
        // here, from the base, for the candidate to land in; a later round's
        // is the task's own, its work so far travelling with the step.
        let cwd = match &spec.worktree {
            Some(w) => {
                git::add_worktree(&w.repo, &w.path, &w.branch, &w.base)?;
                w.path.clone()
            }
            None => spec.cwd.clone(),
        };
        self.up.insert(spec.id.clone());
        self.renewals.insert(
            spec.id.clone(),
            Renewal::start(
                crate::statedir::StateDir::new(&self.state_dir),
                &spec.task,
                self.lease_ttl,
            ),
        );
        Ok(LaneHandle {
            id: spec.id.clone(),
            role: spec.role,
            agent: spec.agent,
            task: spec.task.clone(),
            pane: format!("fleet:{}", spec.id),
            cwd,
            lane_dir: spec.lane_dir.clone(),
        })
    }
}

impl<L: LaneOps> LaneOps for FleetLanes<L> {
    fn up(&mut self, spec: &LaneSpec) -> Result<LaneHandle, LoopError> {
        self.route(spec, None)
    }

    /// A lane up here runs the setup; a step sent to a host does not.
    fn up_set(
        &mut self,
        spec: &LaneSpec,
        setup: &crate::loopctl::land::setup::Setup,
    ) -> Result<LaneHandle, LoopError> {
        self.route(spec, Some(setup))
    }

    fn live(&mut self) -> Result<Vec<String>, LoopError> {
        let mut live = self.local.live()?;
        live.extend(self.up.iter().cloned());
        Ok(live)
    }

    fn dispatch(&mut self, lane: &LaneHandle, job: &JobSpec) -> Result<String, LoopError> {
        if !self.up.contains(&lane.id) {
            return self.local.dispatch(lane, job);
        }
        let repo = git::line(
            &lane.cwd,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )?;
        let repo = PathBuf::from(repo);
        let repo = repo.parent().map(Path::to_path_buf).unwrap_or(repo);
        let base = git::line(&lane.cwd, &["rev-parse", "HEAD"])?;
        let bundle = self.bundle(&repo, &base)?;
        // The worktree against its HEAD, bytes exact: a review's candidate,
        // or a later round's work so far (none for a fresh worktree).
        let (_, _, patch) = capture::diff(&lane.cwd, &base)?;
        let candidate = if patch.is_empty() && lane.role == Role::Implementer {
            None
        } else {
            Some(
                self.queue
                    .put(&format!("cand-{}.patch", job.job_id), &patch)?,
            )
        };
        let (step, avoid_host) = match lane.role {
            Role::Implementer => (Step::Implement, None),
            Role::Reviewer => {
                let by = lock(&self.shared).implemented_by.get(&lane.task).cloned();
                (Step::Review, by)
            }
        };
        // After a rebase round the reviewer sees the candidate before it too.
        let before_rebase = match &job.brief.before_rebase {
            Some(p) => {
                let bytes = std::fs::read(p).map_err(|e| LoopError::io(p, e))?;
                Some(
                    self.queue
                        .put(&format!("before-{}.patch", job.job_id), &bytes)?,
                )
            }
            None => None,
        };
        let spec = LaneSpec {
            id: lane.id.clone(),
            role: lane.role,
            agent: lane.agent,
            task: lane.task.clone(),
            lane_dir: lane.lane_dir.clone(),
            worktree: None,
            cwd: lane.cwd.clone(),
            effort: None,
            portable: true,
        };
        let item = WorkItem {
            run: self.run.clone(),
            job: job.job_id.clone(),
            lane: lane.id.clone(),
            step,
            agent: lane.agent.as_str().to_string(),
            task: lane.task.clone(),
            base,
            bundle,
            report_files: job.report_files.clone(),
            sim_script: (self.scripts)(&spec),
            candidate,
            avoid_host,
            board: self.steps.board.clone(),
            round: job.brief.round.max(1),
            tier: job.brief.tier.clone(),
            others: job.brief.others.clone(),
            before_rebase,
            repair: job.brief.repair.clone(),
            turn_timeout_s: Some(self.steps.turn_timeout.as_secs().max(1)),
            report_grace_s: Some(self.steps.report_grace.as_secs().max(1)),
        };
        Engine::open(crate::statedir::StateDir::new(&self.state_dir))?.transition(
            &Request::new(
                job.job_id.clone(),
                Action::Create { deadline: None },
                Actor::operator(),
            ),
        )?;
        lock(&self.shared).remotes.insert(
            job.job_id.clone(),
            Remote {
                lane: lane.clone(),
                worktree: lane.cwd.clone(),
                report: job.report_path.clone(),
                starts: BTreeMap::new(),
                finished: BTreeMap::new(),
                given: BTreeMap::new(),
                seq: None,
                outcome: None,
            },
        );
        self.jobs.insert(lane.id.clone(), job.job_id.clone());
        // Retried while the server is away; the run and job id dedupe a repeat.
        let seq = self.queue.publish(&item)?;
        if let Some(r) = lock(&self.shared).remotes.get_mut(&job.job_id) {
            r.seq = Some(seq);
        }
        let log = lock(&self.shared).log.clone();
        record(
            &log,
            json!({"event": "queued", "job": item.job, "task": item.task, "lane": item.lane,
                   "agent": item.agent, "step": item.step, "avoid_host": item.avoid_host}),
        );
        // The attempt is the host's to ask for when it pulls the item.
        Ok(String::new())
    }

    fn wait_decision(
        &mut self,
        jobs: &[String],
        timeout: Duration,
    ) -> Result<Vec<(String, Outcome)>, LoopError> {
        let (remote, local): (Vec<String>, Vec<String>) = {
            let s = lock(&self.shared);
            jobs.iter()
                .cloned()
                .partition(|j| s.remotes.contains_key(j))
        };
        let deadline = Instant::now() + timeout;
        loop {
            if !remote.is_empty() && self.checked.elapsed() >= STREAMS_EVERY {
                self.streams_present()?;
            }
            let mut out: Vec<(String, Outcome)> = {
                let s = lock(&self.shared);
                remote
                    .iter()
                    .filter_map(|j| Some((j.clone(), s.remotes.get(j)?.outcome.clone()?)))
                    .collect()
            };
            if out.is_empty() && !local.is_empty() {
                let left = deadline.saturating_duration_since(Instant::now());
                let slice = if remote.is_empty() {
                    left
                } else {
                    POLL.min(left)
                };
                out = self.local.wait_decision(&local, slice)?;
            } else if out.is_empty() {
                std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
            }
            if !out.is_empty() || Instant::now() >= deadline {
                return Ok(out);
            }
        }
    }

    fn down(&mut self, lane: &LaneHandle) -> Result<(), LoopError> {
        if !self.is_remote(lane) {
            return self.local.down(lane);
        }
        self.up.remove(&lane.id);
        self.jobs.remove(&lane.id);
        if let Some(r) = self.renewals.remove(&lane.id) {
            r.stop();
        }
        Ok(())
    }

    fn observe(&mut self, lane: &LaneHandle) -> Result<Option<LaneObs>, LoopError> {
        if self.is_remote(lane) {
            // The lane's screen is on its host: nothing to park or stall on here.
            return Ok(None);
        }
        self.local.observe(lane)
    }

    fn answer(&mut self, lane: &LaneHandle, label: &str) -> Result<bool, LoopError> {
        if self.is_remote(lane) {
            return Ok(false);
        }
        self.local.answer(lane, label)
    }

    fn reap(&mut self, prefix: &str) -> Result<Vec<String>, LoopError> {
        self.local.reap(prefix)
    }

    fn interrupt(&mut self, lane: &LaneHandle) -> Result<(), LoopError> {
        if self.is_remote(lane) {
            return Ok(());
        }
        self.local.interrupt(lane)
    }

    fn prompt(&mut self, lane: &LaneHandle, text: &str) -> Result<bool, LoopError> {
        if self.is_remote(lane) {
            return Ok(false);
        }
        self.local.prompt(lane, text)
    }

    fn report_command(&self) -> String {
        self.local.report_command()
    }

    fn holds_for_owner(&self, lane: &LaneHandle) -> bool {
        !self.is_remote(lane) && self.local.holds_for_owner(lane)
    }
}
