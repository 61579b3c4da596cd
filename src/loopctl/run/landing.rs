//! The runner's landing steps: one landing of everything queued, what a
//! landed task gets (board Done mark, agent-mix ledger, lease release), the
//! ship command, the board re-read, and the removal of a landed worktree.

use crate::loopctl::land::{self, Fate, Queued};
use crate::loopctl::ops::{LaneOps, Role};
use crate::loopctl::run::runner::{Phase, Runner, slug};
use crate::loopctl::{LoopError, board, land::capture, land::git};
use crate::registry::{lease, mix};
use chrono::Utc;
use std::path::Path;

impl<O: LaneOps> Runner<'_, O> {
    /// One landing: everything queued, onto the integration branch.
    pub(in crate::loopctl) fn land(&mut self) -> Result<(), LoopError> {
        let ids = std::mem::take(&mut self.landing_queue);
        let queued: Vec<Queued> = ids
            .iter()
            .filter_map(|id| {
                let t = self.task(id)?;
                let lane = format!("l{}-impl-{}", self.run.n, slug(id));
                Some(Queued {
                    task: id.clone(),
                    title: t.title.clone(),
                    patch: self.run.path.join(lane).join("candidate.patch"),
                })
            })
            .collect();
        let gate = self.cfg.charter.gate.clone().unwrap_or_default();
        let _one_at_a_time = crate::store::lock_beside(&self.run.file("landing"))?;
        let number = self.status.landings + 1;
        let l = land::land(
            &self.status.integration_worktree,
            &self.status.integration_branch,
            &queued,
            &gate,
            &self.run.file("gate-evidence"),
            number,
        )?;
        self.status.landings = number;
        self.status.integration_head = Some(l.head.clone());
        let mut landed = 0;
        for (id, fate) in &l.fates {
            match fate {
                Fate::Landed { sha } => {
                    landed += 1;
                    self.landed(id, sha)?;
                }
                Fate::Dropped { reason } => {
                    let lane_dir =
                        self.run
                            .lane_dir(&format!("l{}-impl-{}", self.run.n, slug(id)))?;
                    let prior =
                        std::fs::read_to_string(lane_dir.join("return.md")).unwrap_or_default();
                    let text = format!("{prior}- dropped at landing {number}: {reason}\n");
                    crate::store::write_bytes_atomic(&lane_dir.join("return.md"), text.as_bytes())?;
                    let branch = self
                        .task(id)
                        .and_then(|t| t.branch.clone())
                        .unwrap_or_default();
                    let integ = self.status.integration_branch.clone();
                    self.park(
                        id,
                        &format!("dropped at landing {number}: {reason}"),
                        &format!("rebase the work of {branch} onto {integ}, then rerun"),
                    )?;
                }
            }
        }
        self.decide(
            "landing",
            &format!("landing {number}: {landed} landed, head {}", l.head),
        )?;
        if landed > 0 {
            self.ship(&l.head)?;
            self.refresh_board()?;
        }
        self.persist()
    }

    fn landed(&mut self, id: &str, sha: &str) -> Result<(), LoopError> {
        let now = Utc::now();
        if let Some(task) = self.board.task(id).cloned() {
            // Re-read: the file is the board's, it may have moved on.
            let fresh = board::read_task(&task.path).unwrap_or(task);
            board::write_done(&fresh)?;
        }
        let agent = self.task(id).and_then(|t| t.agent);
        if let Some(a) = agent {
            mix::record(
                &self.cfg.state_dir,
                &mix::RecordRequest {
                    task: id.to_string(),
                    agent: a,
                    wu: 1,
                    session: Some(Role::Implementer.session_id().into()),
                },
                now,
            )?;
        }
        lease::release(&self.cfg.state_dir, id, false, now)?;
        if let Some(t) = self.task_mut(id) {
            t.phase = Phase::Landed;
            t.sha = Some(sha.to_string());
            t.lane = None;
            t.job = None;
        }
        self.consecutive_blockers = 0;
        self.say(&format!("{id}: landed as {sha}"));
        self.notify("landed", Some(id), sha, &format!("{id} landed as {sha}"));
        crate::registry::events::emit_quiet(
            &self.cfg.state_dir,
            "loop.landed",
            serde_json::json!({"run": self.run.n, "task": id, "sha": sha}),
        );
        Ok(())
    }

    fn ship(&mut self, head: &str) -> Result<(), LoopError> {
        let Some(cmd) = self.cfg.ship_cmd.clone() else {
            return Ok(());
        };
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .current_dir(&self.status.integration_worktree)
            .env("DROVER_INTEGRATION_BRANCH", &self.status.integration_branch)
            .env("DROVER_INTEGRATION_SHA", head)
            .env("DROVER_LOOP_RUN", format!("loop{}", self.run.n))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let exit = match out {
            Ok(s) => s
                .code()
                .map_or("killed by a signal".into(), |c| format!("exit {c}")),
            Err(e) => format!("did not start: {e}"),
        };
        self.decide("ship", &format!("ship command for {head}: {exit}"))?;
        self.status
            .notes
            .push(format!("ship command at {head}: {exit}"));
        Ok(())
    }

    /// After a landing, tasks whose dependencies are now Done become Ready.
    fn refresh_board(&mut self) -> Result<(), LoopError> {
        self.board = board::load(&self.cfg.board_dir)?;
        let split = crate::loopctl::board::ready::split(&self.board, &self.cfg.charter);
        for t in self.status.tasks.iter_mut() {
            if t.phase == Phase::Held && split.ready.contains(&t.id) {
                t.phase = Phase::Ready;
                t.reason = None;
            }
        }
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
        let (_, _, patch) = capture::diff(wt, &self.status.base_sha).map_err(|e| e.to_string())?;
        if Some(crate::loopctl::sha256::hex(patch.as_bytes())) != t.candidate_sha256 {
            return Err("it changed since its candidate landed".into());
        }
        let branch = t.branch.clone().unwrap_or_default();
        let own = git::line(
            wt,
            &[
                "rev-list",
                "--count",
                &format!("{}..HEAD", self.status.base_sha),
            ],
        )
        .map_err(|e| e.to_string())?;
        if own != "0" {
            return Err(format!("{branch} has commits of its own"));
        }
        let p = wt.to_string_lossy();
        git::run(&self.cfg.repo, &["worktree", "remove", "--force", &p])
            .map_err(|e| e.to_string())?;
        git::run(&self.cfg.repo, &["branch", "-D", &branch]).map_err(|e| e.to_string())?;
        Ok(())
    }
}
