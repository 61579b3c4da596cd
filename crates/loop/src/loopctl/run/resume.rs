//! `drover loop run --resume <run>` (`LOOP.md`, "Resume after a crash"):
//! after a `kill -9` of the loop (or a reboot) the run goes on from its run
//! dir — `run.json`, the append-only `DECISIONS.md` — and the live listing:
//!
//! - the lanes of the run still up are stopped and its unfinished jobs
//!   cancelled (a killed lane is never resurrected; its turn is re-run);
//! - the integration worktree goes back to the integration branch, which
//!   moves only after a green gate: an unfinished landing is redone once,
//!   and a task whose `Task:` trailer is on the branch is landed (its board
//!   mark, ledger entry and lease release made if the stop cut them short),
//!   never landed twice;
//! - landed, held and parked tasks stay as they are; a task queued to land
//!   is landed; a task in flight (implementing, reviewing, parked at a usage
//!   limit) is restarted in its own worktree as a new job
//!   (`<job>-k<resume>`), unless its turn had finished before the stop (its
//!   report for the round is written, or its job completed): then that
//!   result is used and nothing is re-run; a Ready task is started as usual.

use crate::loopctl::LoopError;
use crate::loopctl::board::brief;
use crate::loopctl::ops::{BriefFacts, JobSpec, LaneHandle, LaneOps, Outcome, Role};
use crate::loopctl::run::cause::TaskCause;
use crate::loopctl::run::run_state::RunState;
use crate::loopctl::run::rundir::RunDir;
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::{Phase, RunConfig, RunStatus, Runner, slug};
use crate::loopctl::{board, land, land::git};
use crate::registry::{lease, lend};
use chrono::Utc;

/// The file locked while a process runs the loop of a run dir.
pub const RUN_LOCK: &str = crate::statedir::RUN_LOCK;

/// Hold the run's lock for this process (refused while another runs it).
pub fn lock_run(run: &RunDir) -> Result<crate::store::LockGuard, LoopError> {
    match crate::store::LockGuard::try_exclusive(&run.file(RUN_LOCK))? {
        Some(g) => Ok(g),
        None => Err(LoopError::Refused(format!(
            "loop{} is being run by another process; see `drover loop status`",
            run.n
        ))),
    }
}

/// Resume run `n` and run it to its close-out.
pub fn resume<'a, O: LaneOps>(
    ops: &'a mut O,
    cfg: RunConfig,
    n: u32,
    say: impl FnMut(&str) + 'a,
) -> Result<RunStatus, LoopError> {
    let mut r = Runner::reopen(ops, cfg, n, Box::new(say))?;
    let result = r.reconcile().and_then(|()| r.drive());
    r.finish(result)
}

/// The recorded run, for `--resume`: refused when it already closed.
pub fn recorded(run: &RunDir) -> Result<RunStatus, LoopError> {
    let path = run.file("run.json");
    let mut st: RunStatus = crate::store::read_json(&path)?
        .ok_or_else(|| LoopError::parse(&path, "missing: the run never started"))?;
    st.fill_legacy_causes();
    if st.finished_at.is_some() {
        return Err(LoopError::Refused(format!(
            "loop{} is closed ({}); its close-out is {}",
            run.n,
            st.state,
            st.closeout
                .as_ref()
                .map_or("missing".into(), |p| p.display().to_string())
        )));
    }
    Ok(st)
}

impl<'a, O: LaneOps> Runner<'a, O> {
    pub(super) fn reopen(
        ops: &'a mut O,
        cfg: RunConfig,
        n: u32,
        say: Box<dyn FnMut(&str) + 'a>,
    ) -> Result<Self, LoopError> {
        let run = RunDir::open(cfg.state(), n)?;
        let lock = lock_run(&run)?;
        let mut status = recorded(&run)?;
        if status.charter_sha256 != cfg.charter.sha256 {
            return Err(LoopError::Refused(format!(
                "the charter {} changed since loop{n} started (sha256 {} then, {} now)",
                cfg.charter.path.display(),
                status.charter_sha256,
                cfg.charter.sha256
            )));
        }
        let board_lock = crate::loopctl::run::rundir::lock_board(cfg.state(), &cfg.board_dir)?;
        crate::loopctl::run::rundir::note_board_holder(&board_lock, n);
        status.resumes += 1;
        status.state = RunState::Running;
        let board = board::load(&cfg.board_dir)?;
        let mut r = Runner::assemble(ops, cfg, run, board, status, say);
        r.run.locks.run = Some(lock);
        r.run.locks.board = Some(board_lock);
        r.report_board()?;
        r.run.resume_tag = format!("-k{}", r.run.status.resumes);
        // Recorded before any job carries the tag: a kill from here on makes
        // the next resume use the next number, so no job id is reused.
        r.run.persist()?;
        Ok(r)
    }

    /// Reconcile the recorded run with the live listing and the git state.
    fn reconcile(&mut self) -> Result<(), LoopError> {
        let n = self.run.dir.n;
        let k = self.run.status.resumes;
        let reaped = self.ops.reap(&format!("l{n}-"))?;
        // A gate or ship command the killed loop left running (what its
        // shell started outlives the parent-death signal) must not work in
        // the worktrees this resume resets.
        let left = crate::loopctl::child::end_marked(&self.run.dir.path.display().to_string());
        if left > 0 {
            self.run.decide(
                "recover",
                &format!("{left} process(es) a gate or ship command of the stopped loop left running were ended"),
            )?;
        }
        // Turns that finished before the stop, found before their jobs are cancelled.
        let finished = self.finished_turns()?;
        let cancelled = self.cancel_open_jobs()?;
        // The integration branch is the truth of what landed: it moves only
        // after a green gate, so the worktree goes back to it (a landing cut
        // short is dropped, never the branch reset) and every task whose
        // `Task:` trailer is on it is landed, whatever run.json says.
        let head = self.integration_worktree_back()?;
        let found = land::landed_on(
            &self.run.status.integration_worktree,
            &self.run.status.base_sha,
            &self.run.status.integration_branch,
        )?;
        self.run.status.integration_head = Some(head.clone());
        for (id, sha) in found {
            let Some(t) = self.run.task(&id).cloned() else {
                continue;
            };
            if t.kind() != Phase::Landed || t.sha() != Some(sha.as_str()) {
                self.run.decide(
                    "recover",
                    &format!(
                        "{id}: found landed on {} as {sha} (its `Task:` trailer); not landed again",
                        self.run.status.integration_branch
                    ),
                )?;
                self.landed(&id, &sha)?;
            } else {
                // Landed before the stop; what it gets may have been cut short.
                self.book_landed(&id)?;
            }
        }
        self.run.decide(
            "recover",
            &format!(
                "resume #{k} after the loop stopped unclosed: {} lane(s) stopped, {cancelled} job(s) cancelled, integration worktree at {head}",
                reaped.len()
            ),
        )?;
        self.say(&format!(
            "loop{n}: resumed (#{k}); {} lane(s) of the run stopped, integration at {head}",
            reaped.len()
        ));
        let mut restarted = Vec::new();
        let mut used = Vec::new();
        for t in self.run.status.tasks.clone() {
            let limit_park = t.kind() == Phase::Parked && t.cause() == Some(TaskCause::LimitWait);
            let wt_exists = t.worktree().is_some_and(|w| w.exists());
            match t.kind() {
                Phase::Landing => self.run.queues.landing.push(t.id.clone()),
                Phase::Implementing | Phase::Reviewing => {
                    match finished.iter().find(|(id, _, _)| *id == t.id) {
                        Some(f) => used.push(f.clone()),
                        None => restarted.push(t.id.clone()),
                    }
                }
                Phase::Parked if limit_park => restarted.push(t.id.clone()),
                Phase::Ready if wt_exists || self.run.worktree_of(&t.id).exists() => {
                    restarted.push(t.id.clone())
                }
                _ => {}
            }
        }
        for (id, job, lane) in used {
            if let Err(e) = self.use_finished(&id, &job, &lane) {
                if self.supervisor_lost() {
                    return Err(e);
                }
                self.park_because(
                    &id,
                    crate::loopctl::run::cause::of_error(&e),
                    &format!("could not use its finished turn after the crash: {e}"),
                    "look at its worktree and lane dir, then rerun",
                )?;
            }
        }
        for id in restarted {
            if let Err(e) = self.restart(&id) {
                if self.supervisor_lost() {
                    return Err(e);
                }
                self.park_because(
                    &id,
                    crate::loopctl::run::cause::of_error(&e),
                    &format!("could not restart after the crash: {e}"),
                    "look at its worktree, then rerun",
                )?;
            }
        }
        self.run.persist()
    }

    /// Put the integration worktree back on the integration branch's head
    /// (made again when it is gone, on the branch as it is); returns that head.
    pub(super) fn integration_worktree_back(&mut self) -> Result<String, LoopError> {
        let wt = self.run.status.integration_worktree.clone();
        let branch = self.run.status.integration_branch.clone();
        if !wt.join(".git").exists() {
            let _ = git::run(&self.run.cfg.repo, &["worktree", "prune"]);
            let p = wt.to_string_lossy().into_owned();
            if git::rev(&self.run.cfg.repo, &format!("refs/heads/{branch}")).is_ok() {
                git::run(
                    &self.run.cfg.repo,
                    &["worktree", "add", "-q", "-f", &p, &branch],
                )?;
            } else {
                let from = self
                    .run
                    .status
                    .integration_head
                    .clone()
                    .unwrap_or_else(|| self.run.status.base_sha.clone());
                git::add_worktree(&self.run.cfg.repo, &wt, &branch, &from)?;
            }
            self.run.decide(
                "recover",
                &format!(
                    "integration worktree {} made again on {branch}",
                    wt.display()
                ),
            )?;
        }
        git::run(&wt, &["checkout", "-q", "-f", &branch])?;
        git::run(
            &wt,
            &["reset", "-q", "--hard", &format!("refs/heads/{branch}")],
        )?;
        git::run(&wt, &["clean", "-q", "-fd"])?;
        git::line(&wt, &["rev-parse", "HEAD"])
    }

    /// The in-flight tasks whose turn finished before the stop: (task, job,
    /// lane) — the lane dir holds the round's report, or the engine says
    /// the round's job completed.
    fn finished_turns(&self) -> Result<Vec<(String, String, String)>, LoopError> {
        let engine = crate::engine::Engine::open(self.run.cfg.state())?;
        let n = self.run.dir.n;
        let mut out = Vec::new();
        for t in &self.run.status.tasks {
            let Some(job) = t.job().map(str::to_string) else {
                continue;
            };
            let (lane, report, tag) = match t.kind() {
                Phase::Implementing => (
                    format!("l{n}-impl-{}", slug(&t.id)),
                    format!("report-i{}.json", t.round()),
                    format!("-i{}", t.round()),
                ),
                Phase::Reviewing => (
                    format!("l{n}-rev-{}", slug(&t.id)),
                    format!("report-v{}.json", t.round()),
                    format!("-v{}", t.round()),
                ),
                _ => continue,
            };
            let reported = self.run.dir.path.join(&lane).join(report).is_file();
            let completed = job.contains(&tag)
                && engine
                    .show(&job)
                    .is_ok_and(|r| r.status == crate::engine::Status::Completed);
            if reported || completed {
                out.push((t.id.clone(), job, lane));
            }
        }
        Ok(out)
    }

    /// Take a turn that finished before the stop as its outcome: the task
    /// goes on from it (capture and review, or the gate) and nothing is re-run.
    fn use_finished(&mut self, id: &str, job: &str, lane: &str) -> Result<(), LoopError> {
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(());
        };
        let (Some(agent), Some(wt)) = (t.agent, t.worktree().cloned()) else {
            return self.restart(id);
        };
        let (role, agent) = match t.kind() {
            Phase::Reviewing => (Role::Reviewer, t.reviewer().unwrap_or(agent.other())),
            _ => (Role::Implementer, agent),
        };
        self.reclaim(id)?;
        let lane_dir = self.run.dir.lane_dir(lane)?;
        // The lane itself is gone (reaped); its record of the turn is what counts.
        self.run.slots.lanes.insert(
            id.to_string(),
            LaneHandle {
                id: lane.to_string(),
                role,
                agent,
                task: id.to_string(),
                pane: lane.to_string(),
                cwd: wt,
                lane_dir,
            },
        );
        self.run.decide(
            "recover",
            &format!(
                "{id}: its {} turn (job {job}) finished before the stop: its result is used, nothing re-run",
                role.as_str()
            ),
        )?;
        self.say(&format!("{id}: using its finished {} turn", role.as_str()));
        self.on_outcome(id, job, Outcome::Completed)
    }

    /// Claim a task's write lease again (a resume may come after it lapsed).
    pub(in crate::loopctl) fn reclaim(&mut self, id: &str) -> Result<(), LoopError> {
        let task = self.run.board_task(id)?;
        let n = self.run.dir.n;
        let claimed = lease::claim(
            self.run.cfg.state(),
            &lease::ClaimRequest {
                task: id.to_string(),
                session: Some(Role::Implementer.session_id().into()),
                branch: Some(format!("drover/loop{n}/{id}")),
                worktree: Some(self.run.worktree_of(id)),
                files: task.files.clone(),
                ttl_s: None,
            },
            Utc::now(),
        );
        match claimed {
            Ok(_) => Ok(()),
            Err(e @ crate::registry::RegistryError::Refused { .. }) => {
                Err(LoopError::LeaseRefused(e))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Re-run a task's implementer turn in its own worktree (created when
    /// the crash came before it was).
    fn restart(&mut self, id: &str) -> Result<(), LoopError> {
        let task = self.run.board_task(id)?;
        let n = self.run.dir.n;
        let agent = self
            .run
            .task(id)
            .and_then(|t| t.agent)
            .unwrap_or(crate::registry::Agent::Claude);
        let round = self.run.task(id).map_or(1, |t| t.round().max(1));
        let lane = self.run.impl_lane(id);
        let lane_dir = self.run.dir.lane_dir(&lane)?;
        let now = Utc::now();
        self.reclaim(id)?;
        let _ = lend::give_back(self.run.cfg.state(), id, agent.other(), now);
        lend::borrow(self.run.cfg.state(), id, agent, now)?;
        let tier = brief::tier_of(&task.files, &self.run.cfg.charter.guarded_paths);
        let text = match std::fs::read_to_string(lane_dir.join("brief.md")) {
            Ok(t) if brief::parse(&t, &self.run.cfg.charter.guarded_paths).is_ok() => t,
            _ => {
                let b = brief::render(&brief::build(
                    &lane,
                    &task,
                    tier,
                    &[],
                    &self.ops.report_command(),
                ));
                brief::parse(&b, &self.run.cfg.charter.guarded_paths)?;
                crate::store::write_bytes_atomic(&lane_dir.join("brief.md"), b.as_bytes())?;
                b
            }
        };
        let handle = self.implementer_up(id, agent, tier, round, false)?;
        if let Some(t) = self.run.task_mut(id) {
            t.note_mut().reason = None;
            t.note_mut().resume = None;
            t.note_mut().cause = None;
            t.stall = None;
        }
        let job = format!("loop{n}-{}-i{round}{}", slug(id), self.run.resume_tag);
        self.run.decide(
            "recover",
            &format!("{id}: its round {round} is re-run in lane {lane} as job {job}"),
        )?;
        self.say(&format!("{id}: restarted in lane {lane} (round {round})"));
        // A round that began with a merge is re-run with what it was told
        // (the brief alone would have the lane redo the task over the
        // other side of its conflicts).
        let prompt = match self.run.task(id).and_then(|t| t.rebase().cloned()) {
            Some(r) if !r.addendum.is_empty() => format!(
                "{text}{}{}",
                r.addendum,
                brief::implementer_trailer(id, round, &r.tag)
            ),
            _ => format!("{text}\n{}", brief::implementer_trailer(id, round, "")),
        };
        let report = lane_dir.join(format!("report-i{round}.json"));
        let spec = JobSpec {
            job_id: job.clone(),
            prompt,
            report_path: report,
            autocomplete: self.run.cfg.autocomplete,
            report_files: task.files.clone(),
            brief: BriefFacts {
                round,
                tier: Some(tier.as_str().to_string()),
                ..Default::default()
            },
        };
        self.ops.dispatch(&handle, &spec)?;
        let at = self.run.now();
        self.run
            .slots
            .jobs
            .insert(job.clone(), (id.to_string(), at));
        if let Some(w) = self.run.task_mut(id).and_then(|t| t.work_mut()) {
            w.job = Some(job);
        }
        self.run.persist()
    }
}

impl Run {
    /// Where a task's worktree is (by the run's naming rule).
    pub(in crate::loopctl) fn worktree_of(&self, id: &str) -> std::path::PathBuf {
        self.cfg
            .state()
            .worktrees_dir()
            .join(format!("loop{}-{}", self.dir.n, slug(id)))
    }
}
