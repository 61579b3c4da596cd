//! Sending a task back to its implementer lane (same worktree, same lease,
//! same scope): a repair round with new evidence (a failed review, a red
//! gate), and the merge queue's rounds for a candidate dropped at landing —
//! the integration head merged into its branch, then either a rebase round
//! (conflict markers to resolve, the files and the commits that caused them
//! named) or, when the merge is clean but the gate is red with it, a repair
//! round with the gate's evidence. Every round counts for the convergence
//! tripwire and `--repair-rounds`; a task whose rounds are spent is parked.

use crate::loopctl::LoopError;
use crate::loopctl::board::brief;
use crate::loopctl::land::rebase;
use crate::loopctl::ops::{LaneOps, LaneSpec, Role};
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::{Runner, slug};
use chrono::Utc;

pub use crate::runstate::records::RebaseRound;

/// How many lines of a red gate's log a round's evidence quotes.
const GATE_TAIL_LINES: usize = 5;

impl<O: LaneOps> Runner<'_, O> {
    /// Send a task back to its implementer lane with new evidence, or park it
    /// when its repair rounds are spent.
    /// `portable`: the evidence is a failed review's (it may travel to the
    /// fleet host that runs the round; a red gate's output stays here).
    pub(in crate::loopctl) fn repair(
        &mut self,
        id: &str,
        evidence: &str,
        class: &str,
        portable: bool,
    ) -> Result<(), LoopError> {
        let Some(round) = self.next_round(id, evidence, class)? else {
            return Ok(());
        };
        let nth = self.run.counted(id, round, "repair");
        self.run
            .decide("repair", &format!("{id}: round {nth}: {evidence}"))?;
        self.send_round(
            id,
            round,
            evidence,
            &brief::repair_addendum(evidence),
            "repair",
            portable.then_some(evidence),
        )
    }

    /// The number of the task's next round, or `None` once it is parked: the
    /// tripwire fired, or its rounds are spent.
    fn next_round(
        &mut self,
        id: &str,
        evidence: &str,
        class: &str,
    ) -> Result<Option<u32>, LoopError> {
        let tripped = self.run.task_mut(id).and_then(|t| {
            t.findings.failed(class);
            crate::loopctl::night::tripwire::check(&t.findings, std::time::Duration::ZERO)
        });
        if let Some(r) = tripped {
            self.trip_task(id, &r)?;
            return Ok(None);
        }
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(None);
        };
        if t.agent.is_none() || t.worktree().is_none() {
            return Ok(None);
        }
        if t.round() > self.run.cfg.repair_rounds {
            let d = self.run.decide(
                "tripwire",
                &format!("{id}: {} failed rounds; last: {evidence}", t.round()),
            )?;
            self.run.controls.rulings.push((
                format!("{d} {id} parked after {} failed rounds", t.round()),
                "a new approach or a split of the task".into(),
            ));
            self.park(
                id,
                &format!("{} failed rounds: {evidence}", t.round()),
                "a new approach or a split (see DECISIONS.md)",
            )?;
            return Ok(None);
        }
        Ok(Some(t.round() + 1))
    }

    /// Bring the task's implementer lane up again in its worktree and
    /// dispatch round `round`: its brief, then `addendum`, then the trailer
    /// tagged `tag` (`repair`, `rebase`). `repair`: the evidence of a round
    /// that may run on a fleet host (built there as `addendum` is here).
    fn send_round(
        &mut self,
        id: &str,
        round: u32,
        evidence: &str,
        addendum: &str,
        tag: &str,
        repair: Option<&str>,
    ) -> Result<(), LoopError> {
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(());
        };
        let (Some(agent), Some(wt)) = (t.agent, t.worktree().cloned()) else {
            return Ok(());
        };
        let lane = format!("l{}-impl-{}", self.run.dir.n, slug(id));
        let lane_dir = self.run.dir.lane_dir(&lane)?;
        let nth = self.run.counted(id, round, tag);
        let note = format!("- {tag} round {nth}: {}\n", evidence.replace('\n', " "));
        let review = lane_dir.join("review.md");
        let prior =
            std::fs::read_to_string(&review).unwrap_or_else(|_| format!("# Review: {id}\n\n"));
        crate::store::write_bytes_atomic(&review, format!("{prior}{note}").as_bytes())?;
        crate::registry::lend::borrow(self.run.cfg.state(), id, agent, Utc::now())?;
        let spec = LaneSpec {
            id: lane.clone(),
            role: Role::Implementer,
            agent,
            task: id.to_string(),
            lane_dir: lane_dir.clone(),
            worktree: None,
            cwd: wt,
            effort: None,
            portable: repair.is_some(),
        };
        let handle = self.lane_up(spec)?;
        self.run.slots.lanes.insert(id.to_string(), handle);
        if let Some(t) = self.run.task_mut(id) {
            t.phase.enter_implementing();
            if let Some(w) = t.work_mut() {
                w.round = round;
                w.lane = Some(lane.clone());
            }
        }
        self.say(&format!("{id}: {tag} round {nth} in lane {lane}"));
        let brief = std::fs::read_to_string(lane_dir.join("brief.md")).unwrap_or_default();
        self.dispatch_impl(
            id,
            &format!(
                "{brief}{addendum}{}",
                brief::implementer_trailer(id, round, tag)
            ),
            repair.map(str::to_string),
        )
    }

    /// A candidate dropped at landing `number` goes back to its lane: the
    /// integration head is merged into its branch, then a rebase round
    /// (conflicts) or a repair round with the gate's evidence (a red gate
    /// with it on the integration branch). Parked only when its rounds are
    /// spent, the tripwire fires, or the merge itself fails.
    pub(in crate::loopctl) fn send_back(
        &mut self,
        id: &str,
        number: u32,
        reason: &str,
        gate_tail: Option<&str>,
    ) -> Result<(), LoopError> {
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(());
        };
        let branch = self.run.status.integration_branch.clone();
        let task_branch = t.branch().map(str::to_string).unwrap_or_default();
        let park_resume = format!("rebase the work of {task_branch} onto {branch}, then rerun");
        let evidence = match gate_tail {
            Some(tail) => {
                let tail: Vec<&str> = tail.lines().rev().take(GATE_TAIL_LINES).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                let tail = if tail.is_empty() {
                    vec!["(the gate printed nothing)"]
                } else {
                    tail
                };
                format!(
                    "dropped at landing {number}: it {reason} on {branch} (each candidate green alone is not green together; gate evidence under {}): {}",
                    self.run
                        .dir
                        .file("gate-evidence")
                        .join(number.to_string())
                        .display(),
                    tail.join(" / ")
                )
            }
            None => format!("dropped at landing {number}: {reason}"),
        };
        let class = if gate_tail.is_some() {
            "gate"
        } else {
            crate::loopctl::night::tripwire::REBASE_CLASS
        };
        let Some(round) = self.next_round(id, &evidence, class)? else {
            return Ok(());
        };
        let (Some(wt), Ok(onto)) = (
            t.worktree().cloned(),
            crate::loopctl::land::git::rev(
                &self.run.status.integration_worktree,
                &format!("refs/heads/{branch}"),
            ),
        ) else {
            return self.park(id, &evidence, &park_resume);
        };
        let since = t
            .work()
            .and_then(|w| w.candidate_base.clone())
            .unwrap_or_else(|| self.run.status.base_sha.clone());
        let lane_dir = self.run.dir.lane_dir(&self.run.impl_lane(id))?;
        let merged = match rebase::merge_in(&wt, id, &branch, &onto, &since, &lane_dir) {
            Ok(m) => m,
            Err(e) => {
                return self.park(
                    id,
                    &format!("{evidence}; {branch} could not be merged into its worktree: {e}"),
                    &park_resume,
                );
            }
        };
        let conflicts = merged.conflicts.clone();
        let short = onto.chars().take(12).collect::<String>();
        if let Some(t) = self.run.task_mut(id).and_then(|t| t.work_mut()) {
            t.onto = Some(onto.clone());
            t.rebase = Some(RebaseRound {
                merged: merged.clone(),
                why: evidence.clone(),
                addendum: String::new(),
                tag: String::new(),
            });
            if !conflicts.is_empty() {
                t.rebases += 1;
            }
        }
        if conflicts.is_empty() {
            let nth = self.run.counted(id, round, "repair");
            self.run.decide(
                "repair",
                &format!("{id}: round {nth}: {evidence}; {branch} at {short} merged into its branch cleanly, so its gate now runs on the tree it lands on"),
            )?;
            let gate = self.run.cfg.charter.gate.clone().unwrap_or_default();
            let addendum = format!(
                "Repair: {evidence}\nYour change alone is green, but not together with what landed since you started. drover has merged {branch} ({short}) into this worktree, so it now holds what your change lands on. Run the gate here (`{gate}`), fix your change until it is green, keep to the files in Scope, then report as usual.\n"
            );
            self.run.remember_round(id, &addendum, "repair");
            return self.send_round(id, round, &evidence, &addendum, "repair", None);
        }
        let files = conflicts.join(", ");
        let causes = if merged.causes.is_empty() {
            "(none found by path)".to_string()
        } else {
            merged.causes.join("; ")
        };
        let nth = self.run.counted(id, round, "rebase");
        self.run.decide(
            "rebase",
            &format!("{id}: round {nth}: {evidence}; {branch} at {short} merged into its branch, conflicts in {files} (from {causes})"),
        )?;
        let cmd = self.ops.report_command();
        let addendum = format!(
            "Rebase: while you worked, {branch} moved on and your change no longer applies to it. drover has merged {branch} ({short}) into this worktree; the merge stopped with conflict markers in: {files}. The commits that changed them: {causes}.\nDo this: in each of those files, resolve every conflict — the lines between `<<<<<<<` and `=======` are your change, the lines between `=======` and `>>>>>>>` are what landed — by keeping what both changes need, and delete the marker lines (`<<<<<<<`, `=======`, `>>>>>>>`). Change nothing else, and do not run `git merge --abort` or `git reset`; you need not commit, drover concludes the merge. Then report as usual: run `{cmd} report done` (or `{cmd} report failed --reason \"<why>\"` if you cannot resolve them).\n"
        );
        self.run.remember_round(id, &addendum, "rebase");
        self.send_round(id, round, &evidence, &addendum, "rebase", None)
    }

    /// After a round that began with a merge, before the candidate is
    /// captured again: no conflict marker left (else parked, the files
    /// named), the merge concluded. Returns whether the candidate must be
    /// reviewed again: a repair round's always is; a rebase round's only
    /// when it changed more than the conflicts' resolution. `None`: parked.
    pub(in crate::loopctl) fn finish_rebase(
        &mut self,
        id: &str,
    ) -> Result<Option<bool>, LoopError> {
        let Some(t) = self.run.task(id).cloned() else {
            return Ok(None);
        };
        let (Some(r), Some(wt)) = (t.rebase().cloned(), t.worktree().cloned()) else {
            return Ok(Some(true));
        };
        let lane_dir = self.run.dir.lane_dir(&self.run.impl_lane(id))?;
        let left = rebase::with_markers(&wt, &r.merged.conflicts);
        if !left.is_empty() {
            let files = left.join(", ");
            let ret = lane_dir.join("return.md");
            let prior = std::fs::read_to_string(&ret).unwrap_or_default();
            let text = format!(
                "{prior}- refused: conflict markers left in {files} after its rebase round\n"
            );
            crate::store::write_bytes_atomic(&ret, text.as_bytes())?;
            return self
                .park(
                    id,
                    &format!(
                        "conflict markers left in {files} after its rebase round ({})",
                        r.why
                    ),
                    &format!(
                        "resolve the conflict markers in {files} in {}, then rerun",
                        wt.display()
                    ),
                )
                .map(|()| None);
        }
        // What git cannot stage (a nested repository, a path it refuses)
        // parks the task, as at a capture; the run goes on.
        let concluded = if r.merged.conflicts.is_empty() {
            Ok(vec!["(a repair round)".to_string()])
        } else {
            rebase::beyond_resolution(&wt, &r.merged, &lane_dir)
        }
        .and_then(|b| rebase::conclude(&wt).map(|()| b));
        let beyond = match concluded {
            Ok(b) => b,
            Err(e @ LoopError::Git { .. }) => {
                let refusal = crate::loopctl::land::capture::Refusal::Uncapturable {
                    why: crate::registry::redact::redact_shown(&e.to_string()),
                };
                return self
                    .park(
                        id,
                        &format!("blocked: {}", refusal.describe()),
                        refusal.resume(),
                    )
                    .map(|()| None);
            }
            Err(e) => return Err(e),
        };
        if let Some(w) = self.run.task_mut(id).and_then(|t| t.work_mut()) {
            w.rebase = None;
        }
        if r.merged.conflicts.is_empty() {
            return Ok(Some(true));
        }
        if beyond.is_empty() {
            self.run.decide(
                "rebase",
                &format!("{id}: its rebase round resolved the conflicts in {} and changed nothing else: not reviewed again (its passed review stands)", r.merged.conflicts.join(", ")),
            )?;
            return Ok(Some(false));
        }
        self.run.decide(
            "rebase",
            &format!("{id}: its rebase round changed more than the conflicts' resolution ({}): reviewed again", beyond.join(", ")),
        )?;
        Ok(Some(true))
    }

    /// Go on with tasks whose passed review stands after a rebase round:
    /// the gate check reads the reviewer's last heartbeat, so its pass for
    /// the task is recorded again — only while no review by that reviewer
    /// is under way, whose own heartbeat it would overwrite.
    pub(in crate::loopctl) fn start_carried(&mut self) -> Result<(), LoopError> {
        let mut i = 0;
        while i < self.run.queues.carried.len() {
            let id = self.run.queues.carried[i].clone();
            let reviewer = self.run.task(&id).and_then(|t| t.reviewer());
            let busy = self.run.status.tasks.iter().any(|t| {
                t.kind() == crate::loopctl::run::runner::Phase::Reviewing
                    && t.reviewer() == reviewer
            });
            if busy {
                i += 1;
                continue;
            }
            self.run.queues.carried.remove(i);
            crate::registry::heartbeat::heartbeat(
                self.run.cfg.state(),
                &crate::registry::heartbeat::HeartbeatRequest {
                    session_id: Role::Reviewer.session_id().into(),
                    task: Some(id.clone()),
                    status: "pass".into(),
                    agent: reviewer,
                    ..Default::default()
                },
                Utc::now(),
            )?;
            self.gate_check(&id)?;
        }
        Ok(())
    }
}

impl Run {
    /// Round `round` of task `id` as people count it, by kind: its first
    /// repair is repair round 1, its first rebase rebase round 1. On disk a
    /// task's `round` counts every implementer round (the first attempt is
    /// round 1) and `rebases` its rebase rounds so far, this one included.
    fn counted(&self, id: &str, round: u32, tag: &str) -> u32 {
        let rebases = self
            .task(id)
            .map_or(0, |t| t.work().map_or(0, |w| w.rebases));
        if tag == "rebase" {
            rebases.max(1)
        } else {
            round.saturating_sub(1).saturating_sub(rebases).max(1)
        }
    }

    /// Keep what a merge round is told, for a resume to tell it again.
    fn remember_round(&mut self, id: &str, addendum: &str, tag: &str) {
        if let Some(r) = self
            .task_mut(id)
            .and_then(|t| t.work_mut().and_then(|w| w.rebase.as_mut()))
        {
            r.addendum = addendum.to_string();
            r.tag = tag.to_string();
        }
    }
}
