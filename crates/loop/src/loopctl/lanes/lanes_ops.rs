//! [`LaneOps`] over real lanes (`drover lane`, `docs/lanes.md`): each loop
//! lane is recorded in `lanes.json` and realised by the lane layer — an
//! implementer lane gets its own worktree on `drover/loop<N>/<task>` from the
//! base, `.worktreeinclude` files and the lane's env; its agent (Claude or
//! Codex, or `drover sim-agent` with the agent's profile) starts with the
//! lane's permission mode: the implementer writes (`acceptEdits`,
//! `workspace-write`), a reviewer is read-only (`plan`, `read-only`). A
//! reviewer works in the implementer's worktree, which stays the run's.
//!
//! A real reviewer is read-only, so it states its verdict in its last reply
//! and drover reads it from the agent's transcript ([`crate::loopctl::review::verdict_watch`]);
//! an implementer gets its lane dir as an extra writable directory
//! (`--add-dir`), where its report goes.
//!
//! Spawns take a slot of the state dir's spawn budget until the agent is
//! ready; an implementer's write lease is renewed while its lane is up. Jobs
//! go through the engine, dispatch with confirmed delivery and the
//! supervisor's shadow policy, exactly as on the simulated carrier.

use crate::client::Client;
use crate::lane::single::{self, OneLane};
use crate::lane::spawn::{DEFAULT_SPAWN_BUDGET, DEFAULT_SPAWN_WAIT, SpawnBudget};
use crate::lane::{LaneError, git as lgit};
use crate::loopctl::LoopError;
use crate::loopctl::land::setup::Setup;
use crate::loopctl::lanes::renew::Renewal;
use crate::loopctl::lanes::simlanes::{SimLanes, kill_pane, lane_err};
use crate::loopctl::ops::{JobSpec, LaneHandle, LaneObs, LaneOps, LaneSpec, Outcome, Role};
use crate::loopctl::review::verdict_watch::{READ_EVERY, ReviewWatch};
use crate::proto::{PaneEntry, args};
use crate::registry::Agent;
use crate::registry::lease::DEFAULT_LEASE_TTL_S;
use crate::statedir::StateDir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// How long a new lane's agent may take to become idle.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The sim script text for a lane (TOML or JSON, docs/agents.md).
pub type ScriptFor = Box<dyn FnMut(&LaneSpec) -> String>;

/// How the lanes are made.
pub struct LaneOptions {
    /// Run `drover sim-agent` in every lane instead of the real agents.
    pub sim: bool,
    /// The script each sim lane follows (none: the sim's default turn).
    pub scripts: Option<ScriptFor>,
    /// The drover binary (sim lanes run `<exe> sim-agent`).
    pub exe: PathBuf,
    /// `native`, `tmux` or `herdr`.
    pub backend: crate::pane::Backend,
    pub ready_timeout: Duration,
    /// Agents started at once on this state dir, across every process.
    pub spawn_budget: usize,
    pub spawn_wait: Duration,
    /// The TTL an implementer's lease is renewed to, every third of it.
    pub lease_ttl: Duration,
    /// `--env K=V` for every lane: names recorded, values only in memory.
    pub env: Vec<(String, String)>,
}

impl LaneOptions {
    /// Defaults: real agents on native panes.
    pub fn new(exe: &Path) -> Self {
        LaneOptions {
            sim: false,
            scripts: None,
            exe: exe.to_path_buf(),
            backend: crate::pane::Backend::Native,
            ready_timeout: READY_TIMEOUT,
            spawn_budget: DEFAULT_SPAWN_BUDGET,
            spawn_wait: DEFAULT_SPAWN_WAIT,
            lease_ttl: Duration::from_secs(DEFAULT_LEASE_TTL_S),
            env: Vec::new(),
        }
    }
}

/// Loop lanes as `drover lane` lanes.
pub struct RealLanes {
    state_dir: crate::statedir::StateDirBuf,
    client: Client,
    /// Jobs (dispatch, outcomes, observations) on their own connection.
    jobs: SimLanes,
    opts: LaneOptions,
    budget: SpawnBudget,
    mine: BTreeSet<String>,
    renewals: BTreeMap<String, Renewal>,
    /// Real reviewers' jobs, by job id, watched for a stated verdict.
    reviews: BTreeMap<String, ReviewWatch>,
}

/// The agent programs a run of real agents needs, that are not on `PATH`.
pub fn missing_agents() -> Vec<&'static str> {
    let path = std::env::var("PATH").unwrap_or_default();
    ["claude", "codex"]
        .into_iter()
        .filter(|p| crate::pane::find_executable(p, &path, None).is_none())
        .collect()
}

impl RealLanes {
    /// `client` does the lane operations; `jobs_client` (a second connection
    /// to the same supervisor) carries the jobs.
    pub fn new(
        state_dir: &StateDir,
        client: Client,
        jobs_client: Client,
        opts: LaneOptions,
    ) -> RealLanes {
        let jobs = SimLanes::new(
            state_dir,
            jobs_client,
            &opts.exe,
            Box::new(|_: &LaneSpec| String::new()),
        );
        RealLanes {
            state_dir: state_dir.to_path_buf().into(),
            client,
            jobs,
            budget: SpawnBudget::new(crate::statedir::StateDir::new(state_dir), opts.spawn_budget),
            opts,
            mine: BTreeSet::new(),
            renewals: BTreeMap::new(),
            reviews: BTreeMap::new(),
        }
    }

    /// The pid of a lane's pane, from the live listing.
    fn pane_pid(&mut self, pane: &str) -> Option<u32> {
        let v = self.client.call(args::PaneLs {}).ok()?;
        v.iter().find(|p| p.name() == pane).map(|p| match p {
            PaneEntry::Live(v) => v.info.pid,
            PaneEntry::Lost(l) => l.pid,
        })
    }

    /// The outcomes the watched reviewers' transcripts settle now.
    fn check_reviews(&mut self, jobs: &[String]) -> Result<Vec<(String, Outcome)>, LoopError> {
        let mut out = Vec::new();
        for job in jobs {
            let Some(mut w) = self.reviews.remove(job) else {
                continue;
            };
            let pid = self.pane_pid(&w.lane.pane);
            let obs = self.jobs.observe(&w.lane)?;
            match w.check(
                StateDir::new(&self.state_dir),
                pid,
                obs.as_ref(),
                &self.opts.env,
            )? {
                Some(o) => out.push((job.clone(), o)),
                None => {
                    self.reviews.insert(job.clone(), w);
                }
            }
        }
        Ok(out)
    }

    /// The lane for a spec: its worktree (made, or the one it works in) and agent.
    fn one(&mut self, spec: &LaneSpec) -> Result<OneLane, LoopError> {
        let e = |m: LaneError| lane_err(&spec.id, m);
        let (repo, worktree, branch, base_ref, base_sha) = match &spec.worktree {
            Some(w) => (
                w.repo.clone(),
                w.path.clone(),
                w.branch.clone(),
                w.base.clone(),
                w.base.clone(),
            ),
            None => {
                let common = lgit::ok(
                    &spec.cwd,
                    &["rev-parse", "--path-format=absolute", "--git-common-dir"],
                )
                .map_err(e)?;
                let repo = lgit::toplevel(Path::new(&common).parent().unwrap_or(&spec.cwd))
                    .or_else(|_| lgit::toplevel(&spec.cwd))
                    .map_err(e)?;
                let branch =
                    lgit::ok(&spec.cwd, &["symbolic-ref", "--short", "HEAD"]).map_err(e)?;
                let head = lgit::ok(&spec.cwd, &["rev-parse", "HEAD"]).map_err(e)?;
                (repo, spec.cwd.clone(), branch.clone(), branch, head)
            }
        };
        let owner = spec
            .lane_dir
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "the loop".into());
        let sim = match (self.opts.sim, self.opts.scripts.as_mut()) {
            (false, _) => None,
            (true, None) => Some(None),
            (true, Some(f)) => {
                let script = spec.lane_dir.join("script.toml");
                crate::store::write_bytes_atomic(&script, f(spec).as_bytes())?;
                Some(Some(script))
            }
        };
        let (session, role) = match spec.role {
            Role::Implementer => ("implementer", "Implementer"),
            Role::Reviewer => ("reviewer", "Reviewer"),
        };
        let socket =
            crate::paths::socket_path(&self.state_dir).map_err(|x| lane_err(&spec.id, x))?;
        Ok(OneLane {
            lane_id: spec.id.clone(),
            session_id: session.into(),
            role: role.into(),
            agent: spec.agent,
            writes: spec.role == Role::Implementer,
            repo,
            worktree,
            branch,
            base_ref,
            base_sha,
            owner,
            sim,
            exe: self.opts.exe.clone(),
            backend: self.opts.backend,
            socket,
            env: vec![
                (
                    crate::statedir::env::AGENT.into(),
                    spec.agent.as_str().into(),
                ),
                // Where `drover report` finds the lane's drop box when a
                // sandbox keeps it off the socket (a hint; never trusted).
                (
                    crate::statedir::env::LANE_DIR.into(),
                    spec.lane_dir.display().to_string(),
                ),
            ],
            // An implementer writes its report in its lane dir, outside the
            // worktree: both agents take it as a writable directory.
            // A Claude reviewer reads its copy of the candidate there (Codex's
            // read-only sandbox reads anywhere).
            // An implementer runs `drover report` with no approval asked:
            // Claude Code allows exactly that command; in Codex's sandbox it
            // writes only the lane dir, a writable root.
            extra_args: match (spec.role, spec.agent) {
                (Role::Implementer, Agent::Claude) => vec![
                    format!("--add-dir={}", spec.lane_dir.display()),
                    crate::lane::launch::report_allow_arg(&self.jobs.report_command()),
                ],
                (Role::Implementer, Agent::Codex) | (Role::Reviewer, Agent::Claude) => {
                    vec![format!("--add-dir={}", spec.lane_dir.display())]
                }
                (Role::Reviewer, Agent::Codex) => Vec::new(),
            },
            user_env: self.opts.env.clone(),
            ready_timeout: self.opts.ready_timeout,
            effort: spec.effort.clone(),
        })
    }
}

impl RealLanes {
    /// Record the lane and make its worktree; run `setup` there (a failure
    /// forgets the lane, its pane never started); then start its agent.
    fn bring_up(
        &mut self,
        spec: &LaneSpec,
        setup: Option<&Setup>,
    ) -> Result<LaneHandle, LoopError> {
        let one = self.one(spec)?;
        let rec = match setup {
            None => None,
            Some(setup) => Some(self.set_up(spec, &one, setup)?),
        };
        let rec = {
            let _slot = self
                .budget
                .acquire(self.opts.spawn_wait)
                .map_err(|e| lane_err(&spec.id, e))?;
            match rec {
                Some(_) => single::start(&self.state_dir, &mut self.client, &one),
                None => single::up(&self.state_dir, &mut self.client, &one),
            }
            .map_err(|e| lane_err(&spec.id, e))?
        };
        self.mine.insert(spec.id.clone());
        if spec.role == Role::Implementer {
            self.renewals.insert(
                spec.id.clone(),
                // For as long as the lane lives: one kept up at a weekly
                // usage limit waits days, and its lease, expired with the
                // work in its worktree, parked the task at the gate check
                // ("needs recovery") once a 24 h cap had stopped the renewal.
                Renewal::start(
                    StateDir::new(&self.state_dir),
                    &spec.task,
                    self.opts.lease_ttl,
                ),
            );
        }
        Ok(LaneHandle {
            id: spec.id.clone(),
            role: spec.role,
            agent: spec.agent,
            task: spec.task.clone(),
            pane: rec.pane,
            cwd: rec.worktree,
            lane_dir: spec.lane_dir.clone(),
        })
    }

    /// The lane prepared ([`single::prepare`]) and `setup` run in its new
    /// worktree with its port base; a failed setup forgets the lane.
    fn set_up(
        &mut self,
        spec: &LaneSpec,
        one: &OneLane,
        setup: &Setup,
    ) -> Result<crate::lane::LaneRecord, LoopError> {
        let rec = single::prepare(&self.state_dir, one).map_err(|e| lane_err(&spec.id, e))?;
        let env: Vec<(String, String)> = crate::lane::ports::port_base(&rec)
            .map(|b| (crate::lane::ports::PORT_ENV.to_string(), b.to_string()))
            .into_iter()
            .collect();
        let ran = setup.run(&rec.worktree, &env);
        if !matches!(ran, Ok(Ok(()))) {
            single::down(&self.state_dir, &mut self.client, &spec.id)
                .map_err(|e| lane_err(&spec.id, e))?;
        }
        match ran? {
            Ok(()) => Ok(rec),
            Err(failed) => Err(LoopError::Setup {
                lane: spec.id.clone(),
                reason: failed.reason("the worktree"),
            }),
        }
    }
}

impl LaneOps for RealLanes {
    fn up(&mut self, spec: &LaneSpec) -> Result<LaneHandle, LoopError> {
        self.bring_up(spec, None)
    }

    fn up_set(&mut self, spec: &LaneSpec, setup: &Setup) -> Result<LaneHandle, LoopError> {
        self.bring_up(spec, Some(setup))
    }

    fn live(&mut self) -> Result<Vec<String>, LoopError> {
        crate::loopctl::lanes::simlanes::live_lanes(&mut self.client, &self.mine)
    }
    fn dispatch(&mut self, lane: &LaneHandle, job: &JobSpec) -> Result<String, LoopError> {
        let since = SystemTime::now();
        let attempt = self.jobs.dispatch(lane, job)?;
        if lane.role == Role::Reviewer && !self.opts.sim {
            self.reviews.insert(
                job.job_id.clone(),
                ReviewWatch::new(lane, &job.job_id, &attempt, &job.report_path, since),
            );
        }
        Ok(attempt)
    }

    fn wait_decision(
        &mut self,
        jobs: &[String],
        timeout: Duration,
    ) -> Result<Vec<(String, Outcome)>, LoopError> {
        if !jobs.iter().any(|j| self.reviews.contains_key(j)) {
            return self.jobs.wait_decision(jobs, timeout);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut out = self.jobs.wait_decision(jobs, READ_EVERY.min(left))?;
            if out.is_empty() {
                out = self.check_reviews(jobs)?;
            }
            if !out.is_empty() || Instant::now() >= deadline {
                for (j, _) in &out {
                    self.reviews.remove(j);
                }
                return Ok(out);
            }
        }
    }

    fn down(&mut self, lane: &LaneHandle) -> Result<(), LoopError> {
        self.reviews.retain(|_, w| w.lane.id != lane.id);
        if let Some(r) = self.renewals.remove(&lane.id) {
            r.stop();
        }
        single::down(&self.state_dir, &mut self.client, &lane.id)
            .map_err(|e| lane_err(&lane.id, e))?;
        self.mine.remove(&lane.id);
        Ok(())
    }

    fn usage(&mut self, lane: &LaneHandle) -> Option<crate::proto::usage::Usage> {
        self.jobs.usage(lane)
    }

    fn usage_final(&mut self, lane: &LaneHandle) -> Option<crate::proto::usage::Usage> {
        self.jobs.usage_final(lane)
    }

    fn observe(&mut self, lane: &LaneHandle) -> Result<Option<LaneObs>, LoopError> {
        self.jobs.observe(lane)
    }

    fn answer(&mut self, lane: &LaneHandle, label: &str) -> Result<bool, LoopError> {
        self.jobs.answer(lane, label)
    }

    fn interrupt(&mut self, lane: &LaneHandle) -> Result<(), LoopError> {
        self.jobs.interrupt(lane)
    }

    fn prompt(&mut self, lane: &LaneHandle, text: &str) -> Result<bool, LoopError> {
        self.jobs.prompt(lane, text)
    }

    fn report_command(&self) -> String {
        self.jobs.report_command()
    }

    fn reap(&mut self, prefix: &str) -> Result<Vec<String>, LoopError> {
        // A resumed run's lanes left from before a crash: each goes down
        // (its lane record and its pane); a pane without a record is killed.
        let v = self
            .client
            .call(args::PaneLs {})
            .map_err(|e| lane_err("-", e))?;
        let mut names: Vec<String> = v
            .iter()
            .map(|p| p.name().to_string())
            .filter(|n| n.starts_with(prefix))
            .collect();
        // A lane recorded just before the crash may have no pane yet.
        if let Ok(doc) = crate::lane::load(&self.state_dir) {
            for l in doc.lanes {
                if l.lane_id.starts_with(prefix) && !names.contains(&l.lane_id) {
                    names.push(l.lane_id);
                }
            }
        }
        for n in &names {
            if let Some(r) = self.renewals.remove(n) {
                r.stop();
            }
            if single::down(&self.state_dir, &mut self.client, n).is_err() {
                kill_pane(&mut self.client, n, n)?;
            }
            self.mine.remove(n);
        }
        Ok(names)
    }
}

impl Drop for RealLanes {
    /// Lanes still up (a run that failed before its close-out) go down.
    fn drop(&mut self) {
        self.renewals.clear();
        for id in std::mem::take(&mut self.mine) {
            let _ = single::down(&self.state_dir, &mut self.client, &id);
        }
    }
}
