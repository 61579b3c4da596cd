//! The runner's close-out: stop every lane the run started, cancel jobs
//! still open, remove clean landed worktrees (re-checked), keep those with
//! unlanded work, and write `closeout.md` — or, when the supervisor holding
//! the lanes is lost, stop with the run unclosed, for `--resume`.

use crate::loopctl::board::ready::HoldCause;
use crate::loopctl::ops::{LaneHandle, LaneOps};
use crate::loopctl::run::cause::TaskCause;
use crate::loopctl::run::run_state::RunState;
use crate::loopctl::run::runner::{NOTIFY_DRAIN, Phase, RunStatus, Runner, TaskState};
use crate::loopctl::{LoopError, land::closeout, land::git};

impl<O: LaneOps> Runner<'_, O> {
    /// After the loop: the close-out — unless the loop failed because the
    /// supervisor holding its lanes cannot be reached (killed, crashed): its
    /// lanes went with it, so the run stops unclosed, for `--resume`.
    pub(in crate::loopctl) fn finish(
        &mut self,
        result: Result<(), LoopError>,
    ) -> Result<RunStatus, LoopError> {
        if let Err(e) = &result
            && self.supervisor_lost()
        {
            let why = format!("the supervisor cannot be reached ({e})");
            self.run.decide(
                "interrupted",
                &format!(
                    "{why}; the run stops unclosed, for `drover loop run --resume {}`",
                    self.run.dir.n
                ),
            )?;
            self.say(&format!("interrupted: {why}"));
            self.run.status.state = RunState::Interrupted;
            self.run.persist()?;
            return Err(LoopError::Interrupted {
                run: self.run.dir.n,
                why,
            });
        }
        if let Err(LoopError::Signalled { run, signal }) = result {
            // A controlled stop: in-flight work is ended (lanes down, jobs
            // cancelled; their worktrees and leases kept for `--resume`),
            // and the run is left unclosed with a close-out that says so.
            let why = format!("stopped by {signal}");
            self.say(&format!(
                "{why}: ending the lanes; resume with `drover loop run --resume {run}`"
            ));
            self.run.decide(
                "interrupted",
                &format!("{why}; the run stops unclosed, for `drover loop run --resume {run}`"),
            )?;
            self.run.status.state = RunState::Interrupted;
            self.run.status.stopped_by = Some(format!("signal {signal}"));
            self.close_out_as(Some(&why))?;
            return Err(LoopError::Signalled { run, signal });
        }
        if let Err(e) = result {
            // Anything else that stops the loop (a file it cannot write, a
            // git error) leaves the run unclosed, for `--resume`, with its
            // cause in run.json, DECISIONS.md and the close-out.
            let why = e.to_string();
            let n = self.run.dir.n;
            self.run.status.state = RunState::Interrupted;
            self.run.status.stopped_by = Some(format!("error: {why}"));
            // Best effort (a full disk may refuse these too): the cause is
            // what is returned, and run.json stays unclosed either way.
            self.say(&format!("stopped: {why}"));
            let _ = self.run.persist();
            let _ = self.run.decide(
                "interrupted",
                &format!("{why}; the run stops unclosed, for `drover loop run --resume {n}`"),
            );
            let _ = self.close_out_as(Some(&why));
            return Err(LoopError::Stopped { run: n, why });
        }
        self.close_out()
    }

    /// A closed run holds nothing: each of its write leases still held (a
    /// task in flight at an emergency stop or a close-out) is released and
    /// its borrowed agent given back. Only this run's leases (by branch):
    /// another run's lease for a task of the same id is not touched.
    fn release_unlanded(&mut self) {
        let now = chrono::Utc::now();
        let prefix = format!("drover/loop{}/", self.run.dir.n);
        let Ok(leases) = crate::registry::lease::list(self.run.cfg.state(), now) else {
            return;
        };
        for l in leases {
            let (Some(task), Some(branch)) = (&l.task_id, &l.branch) else {
                continue;
            };
            if !branch.starts_with(&prefix) {
                continue;
            }
            if let Some(a) = l.active_agent {
                let _ = crate::registry::lend::give_back(self.run.cfg.state(), task, a, now);
            }
            if let Err(e) = crate::registry::lease::release(self.run.cfg.state(), task, false, now)
            {
                self.say(&format!("{task}: its write lease stays held: {e}"));
            }
        }
    }

    /// Stop every lane, tidy worktrees, write closeout.md.
    pub fn close_out(&mut self) -> Result<RunStatus, LoopError> {
        self.close_out_as(None)
    }

    /// The close-out; with `unclosed` (why the loop had to stop) the report
    /// is written but the run stays open for `--resume`.
    fn close_out_as(&mut self, unclosed: Option<&str>) -> Result<RunStatus, LoopError> {
        let lanes: Vec<LaneHandle> = self.run.slots.lanes.values().cloned().collect();
        for l in lanes {
            self.usage_down(&l);
            let _ = self.ops.down(&l);
        }
        self.run.slots.lanes.clear();
        for job in self.run.slots.jobs.keys().cloned().collect::<Vec<_>>() {
            self.cancel_job(&job);
        }
        if unclosed.is_none() {
            self.release_unlanded();
        }
        let mut notes = Vec::new();
        for t in self.run.status.tasks.clone() {
            let Some(wt) = t.worktree().cloned() else {
                continue;
            };
            // A gate's checkout left by a killed run is drover's own.
            crate::loopctl::land::gate_checkout::remove_checkout(&self.run.cfg.repo, &wt);
            if t.kind() == Phase::Landed {
                match self.remove_landed_worktree(&t, &wt) {
                    Ok(()) => {}
                    Err(why) => {
                        notes.push(format!("{}: worktree {} kept ({why})", t.id, wt.display()))
                    }
                }
            } else if wt.exists() {
                let what = if git::has_work(&wt, &self.run.status.base_sha) {
                    "with its unlanded work"
                } else {
                    "(no changes in it)"
                };
                notes.push(format!("{}: worktree {} kept {what}", t.id, wt.display()));
            }
        }
        let head = git::line(
            &self.run.status.integration_worktree,
            &["rev-parse", "HEAD"],
        )
        .unwrap_or_else(|_| "?".into());
        let mut c = closeout::Closeout {
            repo: self
                .run
                .cfg
                .repo
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "repo".into()),
            run: self.run.dir.n,
            charter_sha256: self.run.status.charter_sha256.clone(),
            ratify: self.run.ratification(),
            ..Default::default()
        };
        for t in &self.run.status.tasks {
            match t.kind() {
                Phase::Landed => {
                    c.landed.push((
                        t.id.clone(),
                        t.title.clone(),
                        t.sha().unwrap_or_default().to_string(),
                    ));
                    if t.work().map_or(0, |w| w.rebases) > 0 {
                        c.rebased.push(t.id.clone());
                    }
                }
                Phase::Parked | Phase::Held => {
                    let reason = t.note().reason.clone().unwrap_or_default();
                    let Some(resume) = closeout_resume(t) else {
                        continue;
                    };
                    c.parked.push((t.id.clone(), reason, resume));
                }
                _ => c.parked.push((
                    t.id.clone(),
                    "the run closed before it finished".into(),
                    "rerun the task".into(),
                )),
            }
        }
        c.parked.extend(self.run.board_rows());
        if let Some(why) = unclosed {
            c.notes.push(format!(
                "the run stopped unclosed: {why}; resume it with `drover loop run --resume {}`",
                self.run.dir.n
            ));
        }
        c.notes.push(format!(
            "integration branch {} at {head}; nothing was pushed and main was not touched",
            self.run.status.integration_branch
        ));
        // A landing that turned a task back (a conflict) counts as a landing:
        // say how many tasks it came to, so 4 landings of 3 tasks add up.
        let landed = self
            .run
            .status
            .tasks
            .iter()
            .filter(|t| t.kind() == Phase::Landed)
            .count();
        c.notes.push(format!(
            "{landed} task(s) landed, in {} landing(s); gate evidence under {}",
            self.run.status.landings,
            self.run.dir.file("gate-evidence").display()
        ));
        if self.run.status.resumes > 0 {
            c.notes.push(format!(
                "resumed {} time(s) after the loop stopped unclosed (see the `recover` entries of DECISIONS.md)",
                self.run.status.resumes
            ));
        }
        c.notes.extend(self.run.status.notes.iter().cloned());
        c.notes.extend(notes);
        c.notes.push(format!(
            "drover's commits on {} are by {} <{}>, {} (your own git identity is not used)",
            self.run.status.integration_branch,
            crate::git::IDENTITY_NAME,
            crate::git::IDENTITY_EMAIL,
            if crate::loopctl::land::git::signing() {
                "signed"
            } else {
                "unsigned"
            }
        ));
        let started: Vec<_> = self
            .run
            .status
            .tasks
            .iter()
            .filter(|t| t.work().is_some())
            .collect();
        if !started.is_empty() {
            c.usage = started
                .iter()
                .map(|t| {
                    let line = t.usage.map_or_else(|| "not reported".into(), |u| u.brief());
                    (t.id.clone(), line)
                })
                .collect();
            let total = crate::runstate::usage::RunUsage::of(&self.run.status.tasks);
            c.usage_total = Some(total.line(started.len()));
        }
        if unclosed.is_none() {
            c.take = self.take_the_work();
        }
        let text = crate::loopctl::run::rundir::shown(&closeout::render(&c));
        let path = self.run.dir.file("closeout.md");
        crate::store::write_bytes_atomic(&path, text.as_bytes())?;
        if unclosed.is_some() {
            self.run.status.closeout = Some(path);
            self.run.persist()?;
            self.run.notifier.finish(NOTIFY_DRAIN);
            return Ok(self.run.status.clone());
        }
        self.run.decide(
            "closeout",
            &format!("{} landed, {} parked", c.landed.len(), c.parked.len()),
        )?;
        self.run.status.state = match &self.run.controls.stop {
            Some(s) => s.state(),
            None => RunState::Closed,
        };
        self.run.status.stopped_by = self.run.controls.stop.as_ref().map(|s| s.describe());
        self.run.status.finished_at = Some(crate::time::to_secs(self.run.now()));
        self.run.status.closeout = Some(path);
        self.run.persist()?;
        let summary = format!(
            "loop{} closed ({}): {} landed, {} parked",
            self.run.dir.n,
            self.run.status.state,
            c.landed.len(),
            c.parked.len()
        );
        self.run.notify("closeout", None, "", &summary);
        // Off the loop's path until now; the close-out gives it a few seconds.
        self.run.notifier.finish(NOTIFY_DRAIN);
        crate::registry::events::emit_quiet(
            self.run.cfg.state(),
            "loop.closeout",
            serde_json::json!({"run": self.run.dir.n, "landed": c.landed.len(), "parked": c.parked.len()}),
        );
        Ok(self.run.status.clone())
    }

    /// The exact commands that take the run's work: merge what landed
    /// (fast-forward), commit the board's Done marks, and start the next run
    /// from this one's branch.
    fn take_the_work(&self) -> Vec<String> {
        let repo = self.run.cfg.repo.display().to_string();
        let q = |s: &str| crate::shell::quote(s);
        let branch = &self.run.status.integration_branch;
        let mut out = Vec::new();
        if self.run.status.landings > 0 {
            out.push(format!(
                "take what landed, on the branch the run started from ({}): `git -C {} merge --ff-only {branch}` (or open a pull request from {branch})",
                self.run.status.base,
                q(&repo)
            ));
        }
        let board = self
            .run
            .cfg
            .board_dir
            .strip_prefix(&self.run.cfg.repo)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if !board.is_empty() {
            let changed = git::line(&self.run.cfg.repo, &["status", "--porcelain", "--", &board])
                .unwrap_or_default();
            if !changed.trim().is_empty() {
                out.push(format!(
                    "commit the board's marks: `git -C {} add -- {} && git -C {} commit -m {}`",
                    q(&repo),
                    q(&board),
                    q(&repo),
                    q(&format!("backlog: loop{} close-out", self.run.dir.n))
                ));
            }
        }
        if self.run.status.landings > 0 {
            out.push(format!(
                "or carry on from it tonight: `drover loop run --charter {} --base {branch}`",
                q(&self.run.status.charter.display().to_string())
            ));
        }
        out
    }
}

/// What the close-out says resumes a held or parked task; `None` for one the
/// charter excludes (the close-out leaves it out). Decided on the task's
/// cause: its reason is for people.
pub(super) fn closeout_resume(t: &TaskState) -> Option<String> {
    let held = |c| t.kind() == Phase::Held && t.cause() == Some(TaskCause::Held(c));
    if held(HoldCause::Excluded) {
        return None;
    }
    Some(t.note().resume.clone().unwrap_or_else(|| match t.kind() {
        _ if held(HoldCause::NeedsOwner) => "an owner ruling removes the needs-owner label".into(),
        _ if held(HoldCause::NoFiles) => {
            "add `modified_files:` (the files it will change) to the task, then rerun".into()
        }
        Phase::Held => "its dependencies are Done".into(),
        _ => "rerun the task".into(),
    }))
}
