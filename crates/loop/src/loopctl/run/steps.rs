//! The runner's task steps: start (lease, brief, lane, dispatch), the outcome
//! of an implementer or reviewer turn, capture, review, repair, the pre-land
//! gate check, landing, and the removal of a landed worktree (parking is in
//! `park.rs`).

use crate::engine::{Action, Actor, Engine, Request};
use crate::loopctl::LoopError;
use crate::loopctl::board::brief::{self, Tier};
use crate::loopctl::land::capture;
use crate::loopctl::ops::{
    BriefFacts, JobSpec, LaneHandle, LaneOps, LaneSpec, Outcome, Role, WorktreeSpec,
};
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::{Phase, Runner, slug};
use crate::registry::heartbeat::{self, SessionVerdict};
use crate::registry::{Agent, lease, lend, mix};
use chrono::Utc;
use std::path::Path;

impl<O: LaneOps> Runner<'_, O> {
    pub(in crate::loopctl) fn cancel_job(&mut self, job: &str) {
        self.usage_ended(job);
        if let Ok(engine) = Engine::open(self.run.cfg.state()) {
            let _ = engine.transition(&Request::new(
                job.to_string(),
                Action::Cancel {
                    reason: Some("the loop stopped waiting".into()),
                },
                Actor::operator(),
            ));
        }
    }

    /// Cancel every open job of this run, recorded or not (one dispatched
    /// just before a crash may not be in run.json yet); how many there were.
    pub(in crate::loopctl) fn cancel_open_jobs(&mut self) -> Result<usize, LoopError> {
        let prefix = format!("loop{}-", self.run.dir.n);
        let open: Vec<String> = Engine::open(self.run.cfg.state())?
            .list()?
            .into_iter()
            .filter(|j| j.job_id.starts_with(&prefix) && !j.status.is_terminal())
            .map(|j| j.job_id)
            .collect();
        for j in &open {
            self.cancel_job(j);
        }
        Ok(open.len())
    }

    pub(in crate::loopctl) fn start_task(&mut self, id: &str) -> Result<(), LoopError> {
        let task = self.run.board_task(id)?;
        let agent = self.run.pick_agent();
        let lane = self.run.impl_lane(id);
        let lane_dir = self.run.dir.lane_dir(&lane)?;
        self.reclaim(id)?;
        lend::borrow(self.run.cfg.state(), id, agent, Utc::now())?;
        let tier = brief::tier_of(&task.files, &self.run.cfg.charter.guarded_paths);
        let others = self.run.others(id);
        let b = brief::build(&lane, &task, tier, &others, &self.ops.report_command());
        let text = brief::render(&b);
        brief::parse(&text, &self.run.cfg.charter.guarded_paths)?;
        crate::store::write_bytes_atomic(&lane_dir.join("brief.md"), text.as_bytes())?;
        self.implementer_up(id, agent, tier, 1, true)?;
        self.say(&format!(
            "{id}: implementing in lane {lane} ({agent}, {})",
            tier.as_str()
        ));
        self.dispatch_impl(
            id,
            &format!("{text}\n{}", brief::implementer_trailer(id, 1, "")),
            None,
        )
    }

    /// Bring up task `id`'s implementer lane (its lane dir made) in its worktree (made
    /// from the base when `fresh` or when it is not there yet), the task
    /// marked implementing in `round`.
    pub(in crate::loopctl) fn implementer_up(
        &mut self,
        id: &str,
        agent: Agent,
        tier: Tier,
        round: u32,
        fresh: bool,
    ) -> Result<LaneHandle, LoopError> {
        let lane = self.run.impl_lane(id);
        let lane_dir = self.run.dir.path.join(&lane);
        let wt = self.run.worktree_of(id);
        let branch = format!("drover/loop{}/{id}", self.run.dir.n);
        let worktree = (fresh || !wt.exists()).then(|| WorktreeSpec {
            repo: self.run.cfg.repo.clone(),
            path: wt.clone(),
            branch: branch.clone(),
            base: self.run.status.base_sha.clone(),
        });
        let spec = LaneSpec {
            id: lane.clone(),
            role: Role::Implementer,
            agent,
            task: id.to_string(),
            lane_dir,
            worktree,
            cwd: wt.clone(),
            effort: None,
            // A first round, or a round re-run after a resume that merged
            // nothing in: all it is told is built from the board.
            portable: fresh || self.run.task(id).is_none_or(|t| t.rebase().is_none()),
        };
        if let Some(t) = self.run.task_mut(id) {
            t.phase.enter_implementing();
            t.agent = Some(agent);
            t.tier = Some(tier.as_str().into());
            if let Some(w) = t.work_mut() {
                w.reviewer = Some(agent.other());
                w.round = round;
                w.lane = Some(lane);
                w.worktree = Some(wt);
                w.branch = Some(branch);
            }
        }
        let handle = self.lane_up(spec)?;
        self.run.slots.lanes.insert(id.to_string(), handle.clone());
        Ok(handle)
    }

    /// `repair`: a portable repair round's evidence ([`BriefFacts::repair`]).
    pub(in crate::loopctl) fn dispatch_impl(
        &mut self,
        id: &str,
        prompt: &str,
        repair: Option<String>,
    ) -> Result<(), LoopError> {
        let (round, lane_dir) = match (self.run.task(id), self.run.slots.lanes.get(id)) {
            (Some(t), Some(h)) => (t.round(), h.lane_dir.clone()),
            _ => return Err(LoopError::usage("task", format!("{id} has no lane"))),
        };
        let job = format!(
            "loop{}-{}-i{round}{}",
            self.run.dir.n,
            slug(id),
            self.run.resume_tag
        );
        self.dispatch(
            id,
            &job,
            prompt,
            &lane_dir.join(format!("report-i{round}.json")),
            BriefFacts {
                repair,
                ..Default::default()
            },
        )
    }

    pub(in crate::loopctl) fn dispatch(
        &mut self,
        id: &str,
        job: &str,
        prompt: &str,
        report: &Path,
        told: BriefFacts,
    ) -> Result<(), LoopError> {
        let lane = self
            .run
            .slots
            .lanes
            .get(id)
            .cloned()
            .ok_or_else(|| LoopError::usage("task", format!("{id} has no lane")))?;
        let report_files = match lane.role {
            Role::Implementer => self
                .run
                .board
                .view
                .task(id)
                .map(|t| t.files.clone())
                .unwrap_or_default(),
            Role::Reviewer => Vec::new(),
        };
        let facts = {
            let t = self.run.task(id);
            BriefFacts {
                round: t.map_or(1, |t| t.round()),
                tier: t.and_then(|t| t.tier.clone()),
                others: match lane.role {
                    Role::Implementer => self.run.others(id),
                    Role::Reviewer => Vec::new(),
                },
                before_rebase: None,
                repair: None,
            }
        };
        let spec = JobSpec {
            job_id: job.to_string(),
            prompt: prompt.to_string(),
            report_path: report.to_path_buf(),
            autocomplete: self.run.cfg.autocomplete,
            report_files,
            brief: BriefFacts {
                before_rebase: told.before_rebase,
                repair: told.repair,
                ..facts
            },
        };
        self.ops.dispatch(&lane, &spec)?;
        self.usage_dispatched(job, &lane);
        let now = self.run.now();
        self.run
            .slots
            .jobs
            .insert(job.to_string(), (id.to_string(), now));
        if let Some(t) = self.run.task_mut(id) {
            if let Some(w) = t.work_mut() {
                w.job = Some(job.to_string());
            }
            if t.first_dispatch.is_none() {
                t.first_dispatch = Some(crate::time::to_secs(now));
            }
        }
        self.run.persist()
    }

    fn lane_down(&mut self, id: &str) -> Result<(), LoopError> {
        if let Some(h) = self.run.slots.lanes.remove(id) {
            self.usage_down(&h);
            self.ops.down(&h)?;
        }
        Ok(())
    }

    pub(in crate::loopctl) fn on_outcome(
        &mut self,
        id: &str,
        job: &str,
        outcome: Outcome,
    ) -> Result<(), LoopError> {
        let phase = self.run.task(id).map(|t| t.kind());
        match outcome {
            Outcome::Escalated { decision, reason } => self.escalated(id, job, &decision, &reason),
            Outcome::Failed { status, reason }
                if status == crate::loopctl::review::verdict_watch::NO_VERDICT =>
            {
                self.lane_down(id)?;
                self.park(
                    id,
                    &format!("review {job} stated no verdict: {reason}"),
                    "rerun the task; the reviewer's last reply must end with `VERDICT: pass` or `VERDICT: fail: <reason>`",
                )
            }
            Outcome::Failed { status, reason } => {
                self.lane_down(id)?;
                let reason = if reason.trim().is_empty() {
                    "no reason given".to_string()
                } else {
                    reason
                };
                // The lane's own words: a blocked lane asked for something.
                let resume = if status == "blocked" {
                    "give the task what its lane asked for, then rerun it"
                } else {
                    "rerun the task"
                };
                self.park(id, &format!("job {job} {status}: {reason}"), resume)
            }
            Outcome::Completed if phase == Some(Phase::Implementing) => self.after_implement(id),
            Outcome::Completed => self.after_review(id),
        }
    }

    fn after_implement(&mut self, id: &str) -> Result<(), LoopError> {
        let (agent, wt, lane_dir) = match (self.run.task(id), self.run.slots.lanes.get(id)) {
            (Some(t), Some(h)) => (t.agent, t.worktree().cloned(), h.lane_dir.clone()),
            _ => return Ok(()),
        };
        self.lane_down(id)?;
        if let Some(a) = agent {
            lend::give_back(self.run.cfg.state(), id, a, Utc::now())?;
        }
        let Some(wt) = wt else { return Ok(()) };
        // A round that began with a merge: markers refused, the merge
        // concluded, and whether it needs a new review.
        let rebased = self.run.task(id).is_some_and(|t| t.rebase().is_some());
        let conflicts = self
            .run
            .task(id)
            .and_then(|t| t.rebase())
            .is_some_and(|r| !r.merged.conflicts.is_empty());
        let review = if rebased {
            match self.finish_rebase(id)? {
                Some(review) => review,
                None => return Ok(()),
            }
        } else {
            true
        };
        if conflicts && review {
            // The reviewer is shown the candidate before the rebase too.
            let round = self.run.task(id).map_or(0, |t| t.round());
            let prior = lane_dir.join(format!("candidate-r{}.patch", round.saturating_sub(1)));
            if std::fs::copy(lane_dir.join("candidate.patch"), &prior).is_ok()
                && let Some(w) = self.run.task_mut(id).and_then(|t| t.work_mut())
            {
                w.prior_candidate = Some(prior);
            }
        }
        // The lease's claim is the authority (it may have been renewed with more files).
        let claimed = lease::list(self.run.cfg.state(), Utc::now())?
            .into_iter()
            .find(|l| l.task_id.as_deref() == Some(id))
            .map(|l| l.claimed_files)
            .unwrap_or_default();
        let base = self
            .run
            .task(id)
            .and_then(|t| t.work().and_then(|w| w.onto.clone()))
            .unwrap_or_else(|| self.run.status.base_sha.clone());
        match capture::capture(id, &wt, &base, &claimed, &lane_dir)? {
            Err(refusal) => {
                let why = refusal.describe();
                capture::write_return(&lane_dir, id, &[format!("blocked: {why}")])?;
                self.park(id, &format!("blocked: {why}"), refusal.resume())
            }
            Ok(c) => {
                let mut lines = vec![format!(
                    "candidate: {} file(s) against {}: {}",
                    c.files.len(),
                    c.base,
                    c.files.join(", ")
                )];
                if !c.redactions.is_empty() {
                    let note = format!(
                        "{id}: its candidate holds secret-looking text ({}); it lands as written, the copies shown are redacted",
                        c.redactions.join(", ")
                    );
                    lines.push(note.clone());
                    if !self.run.status.notes.contains(&note) {
                        self.run.status.notes.push(note);
                    }
                }
                capture::write_return(&lane_dir, id, &lines)?;
                if let Some(w) = self.run.task_mut(id).and_then(|t| t.work_mut()) {
                    w.candidate_sha256 = Some(c.raw_sha256.clone());
                    w.candidate_base = Some(c.base.clone());
                }
                self.say(&format!(
                    "{id}: candidate captured ({})",
                    c.files.join(", ")
                ));
                if !review {
                    self.run.queues.carried.push(id.to_string());
                    return self.start_carried();
                }
                // A (session, agent) lane reviews one task at a time, so one
                // heartbeat can never answer for another task's review.
                self.run.queues.reviews.push((id.to_string(), c.patch_path));
                self.start_reviews()
            }
        }
    }

    /// Start the queued reviews whose reviewer lane is free, within the cap.
    pub(in crate::loopctl) fn start_reviews(&mut self) -> Result<(), LoopError> {
        self.start_carried()?;
        let mut i = 0;
        while i < self.run.queues.reviews.len() {
            let (id, patch) = self.run.queues.reviews[i].clone();
            let reviewer = self.run.task(&id).and_then(|t| t.reviewer());
            let busy = self
                .run
                .status
                .tasks
                .iter()
                .any(|t| t.kind() == Phase::Reviewing && t.reviewer() == reviewer);
            if busy || self.ops.live()?.len() >= self.run.status.lanes_cap {
                i += 1;
                continue;
            }
            self.run.queues.reviews.remove(i);
            if let Err(e) = self.start_review(&id, &patch) {
                if self.supervisor_lost() {
                    return Err(e);
                }
                self.lane_down(&id)?;
                self.park(
                    &id,
                    &format!("review could not start: {e}"),
                    "fix the cause, then rerun",
                )?;
            }
        }
        Ok(())
    }

    fn start_review(&mut self, id: &str, patch: &Path) -> Result<(), LoopError> {
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(());
        };
        let (Some(reviewer), Some(wt)) = (t.reviewer(), t.worktree().cloned()) else {
            return Ok(());
        };
        let lane = format!("l{}-rev-{}", self.run.dir.n, slug(id));
        let lane_dir = self.run.dir.lane_dir(&lane)?;
        let tier = brief::tier_named(t.tier.as_deref());
        // The reviewer reads its own copy, in its lane dir (a real Claude
        // reviewer's added directory), so reading it asks nothing.
        let bytes =
            capture::shown_copy(&std::fs::read(patch).map_err(|e| LoopError::io(patch, e))?);
        let patch = lane_dir.join(format!("candidate-v{}.patch", t.round()));
        crate::store::write_bytes_atomic(&patch, &bytes)?;
        // After a rebase round the reviewer sees both diffs: before and after.
        let before = match t
            .work()
            .and_then(|w| w.prior_candidate.as_deref())
            .map(std::fs::read)
        {
            Some(Ok(b)) => {
                let p = lane_dir.join(format!("candidate-v{}-before-rebase.patch", t.round()));
                crate::store::write_bytes_atomic(&p, &capture::shown_copy(&b))?;
                Some(p)
            }
            _ => None,
        };
        // The reviewer checks the candidate against what the task asks.
        let criteria = self
            .run
            .board
            .view
            .task(id)
            .map(|task| task.criteria.clone())
            .unwrap_or_default();
        let text = brief::review(
            &brief::ReviewOf {
                lane: &lane,
                task: id,
                title: &t.title,
                tier,
                round: t.round(),
                reviewer: reviewer.as_str(),
                patch: &patch,
                before: before.as_deref(),
            },
            &criteria,
        );
        brief::parse(&text, &self.run.cfg.charter.guarded_paths)?;
        crate::store::write_bytes_atomic(&lane_dir.join("brief.md"), text.as_bytes())?;
        let spec = LaneSpec {
            id: lane.clone(),
            role: Role::Reviewer,
            agent: reviewer,
            task: id.to_string(),
            lane_dir: lane_dir.clone(),
            worktree: None,
            cwd: wt,
            effort: None,
            portable: true,
        };
        let handle = self.lane_up(spec)?;
        self.run.slots.lanes.insert(id.to_string(), handle);
        if let Some(t) = self.run.task_mut(id) {
            t.phase.enter_reviewing();
            if let Some(w) = t.work_mut() {
                w.lane = Some(lane.clone());
                w.prior_candidate = None;
            }
        }
        self.say(&format!("{id}: review in lane {lane} ({reviewer})"));
        let job = format!(
            "loop{}-{}-v{}{}",
            self.run.dir.n,
            slug(id),
            t.round(),
            self.run.resume_tag
        );
        let report = lane_dir.join(format!("report-v{}.json", t.round()));
        self.dispatch(
            id,
            &job,
            &format!("{text}{}", brief::review_trailer(id, t.round(), &patch)),
            &report,
            BriefFacts {
                before_rebase: before,
                ..Default::default()
            },
        )
    }

    fn after_review(&mut self, id: &str) -> Result<(), LoopError> {
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(());
        };
        let report_path = self
            .run
            .slots
            .lanes
            .get(id)
            .map(|h| h.lane_dir.join(format!("report-v{}.json", t.round())));
        self.lane_down(id)?;
        let reg = crate::registry::load_required(self.run.cfg.state())?;
        let verdict = reg
            .session(Role::Reviewer.session_id())
            .map(|s| heartbeat::verdict(s, id, Utc::now()))
            .unwrap_or(SessionVerdict::NoPass("no reviewer session".into()));
        let report = report_path.and_then(|p| {
            crate::store::read_json::<serde_json::Value>(&p)
                .ok()
                .flatten()
        });
        let field = |k: &str| {
            report
                .as_ref()
                .and_then(|v| v[k].as_str().map(str::to_string))
        };
        let (findings, class) = (field("findings"), field("class"));
        match verdict {
            SessionVerdict::Pass => {
                self.say(&format!("{id}: review passed"));
                self.gate_check(id)
            }
            SessionVerdict::Fail(why) | SessionVerdict::NoPass(why) => {
                let evidence = findings.unwrap_or(why);
                self.say(&format!("{id}: review failed: {evidence}"));
                let class =
                    crate::loopctl::night::tripwire::finding_class("review", class.as_deref());
                self.repair(id, &format!("the review failed: {evidence}"), &class, true)
            }
        }
    }
}

impl Run {
    /// The next implementer's agent: the one that reduces the mix's skew,
    /// counting tasks in flight as one WU each.
    fn pick_agent(&self) -> Agent {
        let ledger = mix::load(self.cfg.state()).ok().flatten();
        let target = ledger
            .as_ref()
            .map(|l| l.policy.target)
            .unwrap_or_else(|| mix::MixPolicy::default().target);
        let mut spent = ledger.map(|l| l.spent).unwrap_or_default();
        for t in &self.status.tasks {
            if matches!(
                t.kind(),
                Phase::Implementing | Phase::Reviewing | Phase::Landing
            ) {
                match t.agent {
                    Some(Agent::Claude) => spent.claude += 1,
                    Some(Agent::Codex) => spent.codex += 1,
                    None => {}
                }
            }
        }
        mix::next_agent(target, mix::skew(target, spent), None)
    }

    /// The files of the tasks other than `id` whose lanes are live (an
    /// implementer's brief names them).
    fn others(&self, id: &str) -> Vec<String> {
        self.status
            .tasks
            .iter()
            .filter(|t| t.id != id)
            .filter(|t| matches!(t.kind(), Phase::Implementing | Phase::Reviewing))
            .filter_map(|t| self.board.view.task(&t.id))
            .flat_map(|t| t.files.clone())
            .collect()
    }

    /// Task `id`'s implementer lane.
    pub(in crate::loopctl) fn impl_lane(&self, id: &str) -> String {
        format!("l{}-impl-{}", self.dir.n, slug(id))
    }
}
