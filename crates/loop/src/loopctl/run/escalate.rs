//! The runner's escalations and tripwire: an escalation the policy could
//! not rule holds its lane for the owner (owner present) or goes to
//! `QUESTIONS.md` and parks its task (overnight); the end of overnight mode
//! lists the held questions first; the convergence tripwire's time count
//! (pauses, holds and usage-limit parks excluded) and its call.

use crate::loopctl::LoopError;
use crate::loopctl::night::overnight::{self, Mode, Route};
use crate::loopctl::night::tripwire::{self, Call, Reason};
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::{Phase, Question, Runner};
use std::time::Duration;

impl<O: LaneOps> Runner<'_, O> {
    /// Put a question to the owner: QUESTIONS.md, run.json and a notification.
    pub(in crate::loopctl) fn ask(
        &mut self,
        task: &str,
        question: &str,
        rec: &str,
        key: &str,
    ) -> Result<(), LoopError> {
        let at = crate::loopctl::night::clock::rfc3339(self.run.now());
        self.run.dir.ask_at(task, question, rec, &at)?;
        let overnight = self.run.controls.mode.is_overnight();
        self.run.status.questions.push(Question {
            at,
            task: task.to_string(),
            question: question.to_string(),
            recommendation: rec.to_string(),
            overnight,
        });
        let held = if overnight { " (held overnight)" } else { "" };
        self.run.notify(
            "escalation",
            Some(task),
            key,
            &format!("{task}: a question for the owner{held}: see QUESTIONS.md"),
        );
        Ok(())
    }

    /// The policy escalated `job` of `id` (not a usage limit): hold the lane
    /// for the owner, or — overnight — hold the question and park the task.
    pub(in crate::loopctl) fn escalated(
        &mut self,
        id: &str,
        job: &str,
        decision: &str,
        reason: &str,
    ) -> Result<(), LoopError> {
        if let Some(since) = self.run.slots.held.get(job).copied() {
            // Still waiting for the owner: keep watching it.
            self.run
                .slots
                .jobs
                .insert(job.to_string(), (id.to_string(), since));
            return Ok(());
        }
        let lane = self.run.slots.lanes.get(id).cloned();
        let kind = match &lane {
            Some(l) => self.ops.observe(l).ok().flatten().and_then(|o| o.kind),
            None => None,
        };
        let lane_id = lane.as_ref().map_or_else(String::new, |l| l.id.clone());
        let what = kind.map_or_else(|| decision.to_string(), |k| k.as_str().to_string());
        let overnight = self.run.controls.mode.is_overnight();
        let rec = overnight::recommendation(kind, &lane_id, id, overnight);
        let q = format!("lane {lane_id} is waiting for a human ({what}): {reason}");
        self.ask(id, &q, &rec, job)?;
        // A lane that is not here to answer (a fleet host's) is not held.
        let gone = lane.as_ref().is_some_and(|l| !self.ops.holds_for_owner(l));
        let route = if gone {
            Route::Park
        } else {
            overnight::route(self.run.controls.mode)
        };
        let when = if gone {
            "its fleet host took the lane down"
        } else {
            "overnight"
        };
        match route {
            Route::Hold => {
                self.run.slots.held.insert(job.to_string(), self.run.now());
                self.run
                    .slots
                    .jobs
                    .insert(job.to_string(), (id.to_string(), self.run.now()));
                self.run.decide(
                    "question",
                    &format!("{id}: {q}; lane {lane_id} held for the owner; recommendation: {rec}"),
                )?;
                self.say(&format!(
                    "{id}: lane {lane_id} is held for the owner ({what}); see QUESTIONS.md"
                ));
                self.run.persist()
            }
            Route::Park => {
                self.run.decide(
                    "question",
                    &format!("{id}: {q}; held in QUESTIONS.md ({when}), task parked; recommendation: {rec}"),
                )?;
                self.cancel_job(job);
                if let Some(h) = self.run.slots.lanes.remove(id) {
                    self.usage_down(&h);
                    self.ops.down(&h)?;
                }
                self.park_question(
                    id,
                    &format!("{what} escalation held in QUESTIONS.md ({when}): {reason}"),
                    "the owner answers its question in QUESTIONS.md, then rerun",
                )
            }
        }
    }

    /// A park for the owner: not a blocker for the guards (the loop could
    /// go on; it chose to ask).
    fn park_question(&mut self, id: &str, reason: &str, resume: &str) -> Result<(), LoopError> {
        let streak = self.run.controls.consecutive_blockers;
        self.park(id, reason, resume)?;
        self.run.controls.consecutive_blockers = streak;
        Ok(())
    }

    /// Overnight ends at its `--until` on the loop's clock: the questions
    /// held overnight are listed first, then the run goes on owner present.
    pub(in crate::loopctl) fn check_overnight(&mut self) -> Result<(), LoopError> {
        if !self.run.controls.mode.ended(self.run.now()) {
            return Ok(());
        }
        self.run.controls.mode = Mode::OwnerPresent;
        let held: Vec<Question> = self
            .run
            .status
            .questions
            .iter()
            .filter(|q| q.overnight)
            .cloned()
            .collect();
        self.run.decide(
            "overnight",
            &format!(
                "overnight mode ended; {} question(s) held overnight, listed first",
                held.len()
            ),
        )?;
        self.say(&format!(
            "OVERNIGHT OVER: {} question(s) held overnight",
            held.len()
        ));
        for q in &held {
            self.say(&format!(
                "QUESTION: {} ({}): {} — recommendation: {}",
                q.task, q.at, q.question, q.recommendation
            ));
        }
        self.run.notify(
            "overnight.end",
            None,
            "",
            &format!(
                "overnight mode ended: {} question(s) held; see QUESTIONS.md",
                held.len()
            ),
        );
        self.run.persist()
    }

    /// Count the time since the last pass as excluded for the tripwire when
    /// the task could not work (paused, held for the owner, at a limit),
    /// then trip every task in flight past the tripwire's active time.
    pub(in crate::loopctl) fn account_time(&mut self) -> Result<(), LoopError> {
        let now = self.run.now();
        let dt = self.run.clocks.pass(now);
        let paused = self.run.controls.paused.is_some();
        let held = self.run.slots.held_tasks();
        let limited = self.run.slots.limited_tasks();
        let mut due = Vec::new();
        for t in self.run.status.tasks.iter_mut() {
            let in_flight = matches!(t.kind(), Phase::Implementing | Phase::Reviewing);
            if (in_flight && paused) || held.contains(&t.id) || limited.contains(&t.id) {
                t.excluded_s += dt;
            }
            let Some(first) = t.first_dispatch else {
                continue;
            };
            let active = tripwire::active(
                crate::loopctl::night::clock::since(first, now),
                Duration::from_secs(t.excluded_s),
            );
            if in_flight
                && !held.contains(&t.id)
                && let Some(r @ Reason::Time { .. }) = tripwire::check(&Default::default(), active)
            {
                due.push((t.id.clone(), r));
            }
        }
        for (id, r) in due {
            self.trip_task(&id, &r)?;
        }
        Ok(())
    }

    /// The tripwire tripped for `id`: stop its work, record the call in
    /// DECISIONS.md, and park it — until the owner is back overnight, with a
    /// question to the owner when present.
    pub(in crate::loopctl) fn trip_task(&mut self, id: &str, r: &Reason) -> Result<(), LoopError> {
        let jobs: Vec<String> = self
            .run
            .slots
            .jobs
            .iter()
            .filter(|(_, (t, _))| t == id)
            .map(|(j, _)| j.clone())
            .collect();
        for j in jobs {
            self.run.slots.jobs.remove(&j);
            self.run.slots.held.remove(&j);
            self.cancel_job(&j);
        }
        if let Some(h) = self.run.slots.lanes.remove(id) {
            self.usage_down(&h);
            self.ops.down(&h)?;
        }
        self.run.queues.reviews.retain(|(t, _)| t != id);
        let overnight = self.run.controls.mode.is_overnight();
        let (call, rec) = tripwire::call(r, overnight);
        let why = r.describe();
        let d = self.run.decide(
            "tripwire",
            &format!(
                "{id}: {why}; call: {}; recommended: {}; options: new approach, split, escalation, park",
                call.as_str(),
                rec.as_str()
            ),
        )?;
        let advice = match rec {
            Call::Split => "split the task into parts that each converge",
            _ => "try a named new approach (a different brief or agent)",
        };
        if call == Call::Escalate {
            self.ask(
                id,
                &format!("tripwire {d}: {why}"),
                &format!("{}: {advice}", rec.as_str()),
                &d,
            )?;
        } else {
            self.run.controls.rulings.push((
                format!("{d} {id} parked by the tripwire: {why}"),
                format!("{}: {advice}", rec.as_str()),
            ));
        }
        let resume = if overnight {
            format!("until the owner is back: rule on {d} ({})", rec.as_str())
        } else {
            format!("the owner rules on {d}: {advice}")
        };
        self.park(id, &format!("tripwire: {why}"), &resume)
    }

    /// A stopping run cannot wait for the owner: lanes held for one are
    /// parked with their question open.
    pub(in crate::loopctl) fn release_held(&mut self) -> Result<(), LoopError> {
        let held: Vec<(String, String)> = self
            .run
            .slots
            .jobs
            .iter()
            .filter(|(j, _)| self.run.slots.held.contains_key(*j))
            .map(|(j, (t, _))| (j.clone(), t.clone()))
            .collect();
        for (job, task) in held {
            self.run.slots.jobs.remove(&job);
            self.run.slots.held.remove(&job);
            self.cancel_job(&job);
            if let Some(h) = self.run.slots.lanes.remove(&task) {
                self.usage_down(&h);
                self.ops.down(&h)?;
            }
            self.park_question(
                &task,
                "held for the owner when the run stopped",
                "the owner answers its question in QUESTIONS.md, then rerun",
            )?;
        }
        Ok(())
    }
}

impl Run {
    /// What the close-out lists for ratification: the questions held
    /// overnight first, then the other questions, then the rulings.
    pub(in crate::loopctl) fn ratification(&self) -> Vec<(String, String)> {
        let q = |overnight: bool| {
            self.status
                .questions
                .iter()
                .filter(move |q| q.overnight == overnight)
                .map(move |q| {
                    let tag = if overnight {
                        "question held overnight"
                    } else {
                        "question"
                    };
                    (
                        format!("{tag} ({}) on {}: {}", q.at, q.task, q.question),
                        q.recommendation.clone(),
                    )
                })
        };
        q(true)
            .chain(q(false))
            .chain(self.controls.rulings.clone())
            .collect()
    }
}
