//! The runner's landing steps: one landing of everything queued, what a
//! landed task gets (board Done mark, agent-mix ledger, lease release), the
//! ship command, the board re-read, and the removal of a landed worktree.

use crate::loopctl::land::{self, Fate, Queued};
use crate::loopctl::ops::{LaneOps, Role};
use crate::loopctl::run::runner::{Runner, slug};
use crate::loopctl::{LoopError, land::capture, land::git};
use crate::registry::{lease, lend, mix};
use chrono::Utc;
use std::path::Path;

impl<O: LaneOps> Runner<'_, O> {
    /// One landing: the first `--land-batch` queued candidates, gated as
    /// one tree (bisected when red), onto the integration branch.
    pub(in crate::loopctl) fn land(&mut self) -> Result<(), LoopError> {
        let n = self
            .run
            .cfg
            .unattended
            .land_batch
            .max(1)
            .min(self.run.queues.landing.len());
        let ids: Vec<String> = self.run.queues.landing.drain(..n).collect();
        let queued: Vec<Queued> = ids
            .iter()
            .filter_map(|id| {
                let t = self.run.task(id)?;
                let lane = format!("l{}-impl-{}", self.run.dir.n, slug(id));
                Some(Queued {
                    task: id.clone(),
                    title: t.title.clone(),
                    patch: self.run.dir.path.join(lane).join("candidate.patch"),
                    base: t.work().and_then(|w| w.candidate_base.clone()),
                })
            })
            .collect();
        let gate = self.run.cfg.charter.gate.clone().unwrap_or_default();
        if !self.integration_set_up(&ids)? {
            return Ok(());
        }
        let _one_at_a_time = crate::store::lock_beside(&self.run.dir.file("landing"))?;
        let number = self.run.status.landings + 1;
        let bounds = self.child_bounds(self.run.gate_timeout());
        let l = land::land_bounded(
            &self.run.status.integration_worktree,
            &self.run.status.integration_branch,
            &queued,
            &gate,
            &self.run.dir.file("gate-evidence"),
            number,
            &bounds,
        )?;
        // The branch holds the landing now: recorded before it is acted on
        // (board, ledger, ship), so a crash from here never lands it again.
        self.run.status.landings = number;
        self.run.status.integration_head = Some(l.head.clone());
        for (id, fate) in &l.fates {
            if let (Fate::Landed { sha, .. }, Some(t)) = (fate, self.run.task_mut(id)) {
                t.phase.land(sha);
            }
        }
        self.run.persist()?;
        let mut landed = 0;
        for (id, fate) in &l.fates {
            match fate {
                Fate::Landed { sha, three_way } => {
                    landed += 1;
                    if *three_way {
                        self.run.decide(
                            "landing",
                            &format!("{id}: its candidate no longer applied to the integration head; applied three-way against its base"),
                        )?;
                    }
                    self.landed(id, sha)?;
                }
                Fate::TimedOut { reason } => {
                    // The gate could not say: parked, the run goes on.
                    let reason = format!("not landed at landing {number}: {reason}");
                    self.park(
                        id,
                        &reason,
                        "make the gate finish within the charter's `gate-timeout:` (or raise it), then rerun",
                    )?;
                }
                Fate::Stopped { reason } => {
                    // Still queued: the close-out (or a resume) says so.
                    if let Some(t) = self.run.task_mut(id) {
                        t.note_mut().reason = Some(reason.clone());
                        t.note_mut().resume = Some("resume the run, or rerun the task".into());
                        t.note_mut().cause = None;
                    }
                    self.say(&format!("{id}: not landed: {reason}"));
                }
                Fate::Dropped {
                    reason, gate_tail, ..
                } => {
                    let lane_dir =
                        self.run
                            .dir
                            .lane_dir(&format!("l{}-impl-{}", self.run.dir.n, slug(id)))?;
                    let prior =
                        std::fs::read_to_string(lane_dir.join("return.md")).unwrap_or_default();
                    let text = crate::loopctl::run::rundir::shown(&format!(
                        "{prior}- dropped at landing {number}: {reason}\n"
                    ));
                    crate::store::write_bytes_atomic(&lane_dir.join("return.md"), text.as_bytes())?;
                    // Back to its lane (a rebase or repair round), not parked.
                    self.send_back(id, number, reason, gate_tail.as_deref())?;
                }
            }
        }
        self.run.status.gate_runs += l.gates.len() as u32;
        self.run.decide(
            "landing",
            &format!(
                "landing {number}: {landed} landed of {} in {} gate run(s), head {}",
                queued.len(),
                l.gates.len(),
                l.head
            ),
        )?;
        if landed > 0 {
            self.ship(&l.head)?;
            self.refresh_board()?;
        }
        self.run.persist()
    }

    /// What a landed task gets: its board file marked Done, one WU in the
    /// agent-mix ledger (once, a resume that finds it landed included), its
    /// lease released.
    pub(in crate::loopctl) fn landed(&mut self, id: &str, sha: &str) -> Result<(), LoopError> {
        self.book_landed(id)?;
        if let Some(t) = self.run.task_mut(id) {
            t.phase.land(sha);
            if let Some(w) = t.work_mut() {
                w.lane = None;
                w.job = None;
            }
        }
        self.run.controls.consecutive_blockers = 0;
        self.say(&format!("{id}: landed as {sha}"));
        self.run
            .notify("landed", Some(id), sha, &format!("{id} landed as {sha}"));
        crate::registry::events::emit_quiet(
            self.run.cfg.state(),
            "loop.landed",
            serde_json::json!({"run": self.run.dir.n, "task": id, "sha": sha}),
        );
        Ok(())
    }

    /// The bookkeeping of a landed task, each part done once however often
    /// it is asked (a resume asks again).
    pub(in crate::loopctl) fn book_landed(&mut self, id: &str) -> Result<(), LoopError> {
        let now = Utc::now();
        self.mark_done(id)?;
        let agent = self.run.task(id).and_then(|t| t.agent);
        let booked = mix::load(self.run.cfg.state())
            .ok()
            .flatten()
            .is_some_and(|l| l.ledger.iter().any(|e| e.task == id));
        if let Some(a) = agent.filter(|_| !booked) {
            mix::record(
                self.run.cfg.state(),
                &mix::RecordRequest {
                    task: id.to_string(),
                    agent: a,
                    wu: 1,
                    session: Some(Role::Implementer.session_id().into()),
                },
                now,
            )?;
        }
        if let Some(a) = agent {
            // A borrow left by a crash would refuse the release.
            let _ = lend::give_back(self.run.cfg.state(), id, a, now);
        }
        lease::release(self.run.cfg.state(), id, false, now)?;
        Ok(())
    }

    fn ship(&mut self, head: &str) -> Result<(), LoopError> {
        let Some(cmd) = self.run.cfg.ship_cmd.clone() else {
            return Ok(());
        };
        let mut c = std::process::Command::new("sh");
        c.arg("-c")
            .arg(&cmd)
            .current_dir(&self.run.status.integration_worktree)
            .env(
                crate::statedir::env::INTEGRATION_BRANCH,
                &self.run.status.integration_branch,
            )
            .env(crate::statedir::env::INTEGRATION_SHA, head)
            .env(
                crate::statedir::env::LOOP_RUN,
                format!("loop{}", self.run.dir.n),
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let bounds = self.child_bounds(self.run.cfg.unattended.ship_timeout);
        let exit = match crate::loopctl::child::run(&mut c, &bounds) {
            Ok(e) => e.describe(bounds.timeout),
            Err(e) => format!("did not start: {e}"),
        };
        self.run
            .decide("ship", &format!("ship command for {head}: {exit}"))?;
        self.run
            .status
            .notes
            .push(format!("ship command at {head}: {exit}"));
        Ok(())
    }

    /// Remove a landed task's worktree and branch, only when the worktree
    /// still holds exactly the landed candidate and the branch has no commits
    /// of its own (re-checked now).
    pub(in crate::loopctl) fn remove_landed_worktree(
        &self,
        t: &crate::loopctl::run::runner::TaskState,
        wt: &Path,
    ) -> Result<(), String> {
        // A task sent back from landing was captured against the
        // integration head merged into it.
        if !wt.exists() {
            return self.forget_removed_worktree(t);
        }
        let base = t
            .work()
            .and_then(|w| w.onto.clone())
            .unwrap_or_else(|| self.run.status.base_sha.clone());
        let (_, _, patch) = capture::diff(wt, &base).map_err(|e| e.to_string())?;
        if Some(crate::loopctl::sha256::hex(&patch))
            != t.work().and_then(|w| w.candidate_sha256.clone())
        {
            return Err("it changed since its candidate landed".into());
        }
        let branch = t.branch().map(str::to_string).unwrap_or_default();
        // Commits of its own: on its branch, not on the integration branch,
        // and not drover's (the work committed before a merge, the merge).
        let authors = git::run(
            wt,
            &[
                "log",
                "--format=%ae",
                &format!("refs/heads/{}..HEAD", self.run.status.integration_branch),
            ],
        )
        .map_err(|e| e.to_string())?;
        if authors.lines().any(|a| a.trim() != git::IDENTITY_EMAIL) {
            return Err(format!("{branch} has commits of its own"));
        }
        let p = wt.to_string_lossy();
        git::run(&self.run.cfg.repo, &["worktree", "remove", "--force", &p])
            .map_err(|e| e.to_string())?;
        git::run(&self.run.cfg.repo, &["branch", "-D", &branch]).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// A landed task whose worktree is gone already (an earlier close-out of
    /// the run, cut short, removed it): git forgets it, and its branch goes
    /// too when it has no commits of its own; nothing is kept that is not there.
    fn forget_removed_worktree(
        &self,
        t: &crate::loopctl::run::runner::TaskState,
    ) -> Result<(), String> {
        let repo = &self.run.cfg.repo;
        git::run(repo, &["worktree", "prune"]).map_err(|e| e.to_string())?;
        let Some(branch) = t.branch().map(str::to_string) else {
            return Ok(());
        };
        let r = format!("refs/heads/{branch}");
        if !git::output(repo, &["rev-parse", "-q", "--verify", &r])
            .map_err(|e| e.to_string())?
            .status
            .success()
        {
            return Ok(());
        }
        let authors = git::run(
            repo,
            &[
                "log",
                "--format=%ae",
                &format!("refs/heads/{}..{r}", self.run.status.integration_branch),
            ],
        )
        .map_err(|e| e.to_string())?;
        if authors.lines().any(|a| a.trim() != git::IDENTITY_EMAIL) {
            return Err(format!(
                "it is gone, but {branch} has commits of its own: kept"
            ));
        }
        git::run(repo, &["branch", "-D", &branch]).map_err(|e| e.to_string())?;
        Ok(())
    }
}
