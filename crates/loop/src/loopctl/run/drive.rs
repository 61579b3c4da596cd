//! The runner's loop: one bounded wait per pass, and between waits the
//! controls (`control.json`), the guards, usage-limit resumes and the
//! pipeline's next steps. Every stop goes through the close-out.

use crate::loopctl::LoopError;
use crate::loopctl::night::control::{self, Control};
use crate::loopctl::night::guards::{self, Counters, Trip};
use crate::loopctl::ops::{LaneOps, Outcome, Role};
use crate::loopctl::run::run_state::RunState;
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::Runner;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// Longest one wait for outcomes before the loop looks at its queue and its
/// controls again (wall-clock time).
pub const WAIT_SLICE: Duration = Duration::from_millis(500);

/// Why a run stops before its queue drains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A guard tripped: decision `blocked`.
    Guard(Trip),
    /// `loop control <run> close-out`.
    CloseOut(String),
    /// `loop control <run> emergency-stop`.
    Emergency(String),
}

impl Stop {
    /// The run's final state.
    pub fn state(&self) -> RunState {
        match self {
            Stop::Guard(_) => RunState::Blocked,
            Stop::CloseOut(_) => RunState::Closed,
            Stop::Emergency(_) => RunState::Stopped,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Stop::Guard(t) => format!("guard {}: {}", t.guard, t.why),
            Stop::CloseOut(r) => format!("control close-out: {r}"),
            Stop::Emergency(r) => format!("control emergency-stop: {r}"),
        }
    }
}

/// A lane parked at a usage limit: its task waits for `resume_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitPark {
    pub job: String,
    pub role: Role,
    /// When the agent said the limit resets.
    pub resets_at: Option<DateTime<Utc>>,
    /// When the loop looks again (a minute after `resets_at`, or backoff).
    pub resume_at: DateTime<Utc>,
    /// Limits seen in a row on this lane without progress in between.
    pub parks: u32,
    /// `WAITING:` was printed for this park.
    pub announced: bool,
}

impl<O: LaneOps> Runner<'_, O> {
    /// True when nothing new may start (a stop, a pause, or a guard that
    /// trips now).
    pub(in crate::loopctl) fn guard_before_start(&mut self) -> Result<bool, LoopError> {
        if self.run.controls.holds_starts() {
            return Ok(true);
        }
        match guards::check_start(&self.run.cfg.unattended.guards, &self.run.counters()) {
            Some(t) => {
                self.trip(t)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn trip(&mut self, t: Trip) -> Result<(), LoopError> {
        self.run.decide(
            "blocked",
            &format!(
                "guard {}: {}; nothing new starts, in-flight work settles, then the close-out",
                t.guard, t.why
            ),
        )?;
        self.say(&format!("stopping: guard {}: {}", t.guard, t.why));
        self.run.controls.stop = Some(Stop::Guard(t));
        self.run.persist()
    }

    /// Read `control.json` and act on the control that rules.
    fn poll_controls(&mut self) -> Result<(), LoopError> {
        let c = match control::read(&self.run.dir.path) {
            Ok(c) => c,
            Err(e) => {
                // Reported, never read as "no controls": nothing changes.
                self.say(&format!(
                    "control file unreadable, ignored until fixed: {e}"
                ));
                return Ok(());
            }
        };
        match c.ruling() {
            Some((Control::EmergencyStop, r)) => {
                if !matches!(self.run.controls.stop, Some(Stop::Emergency(_))) {
                    self.run
                        .decide("control", &format!("emergency stop: {r}"))?;
                    self.say(&format!("EMERGENCY STOP: {r}"));
                    self.run.controls.stop = Some(Stop::Emergency(r.to_string()));
                }
            }
            Some((Control::Pause, r)) => {
                if self.run.controls.paused.is_none() {
                    self.run
                        .decide("control", &format!("pause: {r}; in-flight work settles"))?;
                    self.say(&format!("pausing: {r} (in-flight work settles)"));
                    self.run.controls.paused = Some((r.to_string(), false));
                    self.run.status.state = RunState::Pausing;
                    self.run.persist()?;
                }
            }
            Some((Control::CloseOut, r)) => {
                self.unpause()?;
                if self.run.controls.stop.is_none() {
                    self.run.decide("control", &format!("close out: {r}"))?;
                    self.say(&format!("closing out: {r} (in-flight work finishes)"));
                    self.run.controls.stop = Some(Stop::CloseOut(r.to_string()));
                }
            }
            Some((Control::Resume, _)) | None => self.unpause()?,
        }
        Ok(())
    }

    fn unpause(&mut self) -> Result<(), LoopError> {
        if self.run.controls.paused.take().is_some() {
            self.run.decide("control", "resume")?;
            self.say("resumed");
            self.run.status.state = RunState::Running;
            self.run.persist()?;
        }
        Ok(())
    }

    pub(in crate::loopctl) fn drive(&mut self) -> Result<(), LoopError> {
        loop {
            if let Some(signal) = crate::loopctl::child::stop_requested() {
                return Err(LoopError::Signalled {
                    run: self.run.dir.n,
                    signal,
                });
            }
            self.poll_controls()?;
            if matches!(self.run.controls.stop, Some(Stop::Emergency(_))) {
                return Ok(());
            }
            self.check_overnight()?;
            self.account_time()?;
            if self.run.clocks.checkpoint_due() {
                self.run.persist()?;
            }
            if self.run.controls.stop.is_none()
                && let Some(t) =
                    guards::check_running(&self.run.cfg.unattended.guards, &self.run.counters())
            {
                self.trip(t)?;
            }
            // Paused, in-flight work settles (reviews, landings); nothing new starts.
            if self.run.controls.paused.is_none() {
                self.resume_limits()?;
            }
            self.start_reviews()?;
            self.start_ready()?;
            if !self.run.queues.landing.is_empty() {
                self.land()?;
                continue;
            }
            // A stopping run cannot wait for the owner.
            if self.run.controls.stop.is_some()
                && self
                    .run
                    .slots
                    .jobs
                    .keys()
                    .all(|j| self.run.slots.held.contains_key(j))
            {
                self.release_held()?;
            }
            if self.run.slots.jobs.is_empty() {
                if let Some((reason, shown)) = self.run.controls.paused.clone() {
                    if !shown {
                        self.run.controls.paused = Some((reason.clone(), true));
                        self.run.status.state = RunState::Paused;
                        self.run.persist()?;
                        self.say(&format!("PAUSED: {reason}"));
                    }
                    self.run.idle(WAIT_SLICE);
                    continue;
                }
                if self.run.controls.stop.is_none() && !self.run.slots.limited.is_empty() {
                    self.wait_for_limits();
                    continue;
                }
                // Nothing runs that could free a lane: a waiting review never starts.
                for (id, _) in std::mem::take(&mut self.run.queues.reviews) {
                    let cap = self.run.status.lanes_cap;
                    self.park(
                        &id,
                        &format!("no lane free for its review (cap {cap})"),
                        "free a lane, then rerun",
                    )?;
                }
                return Ok(());
            }
            self.wait_slice()?;
        }
    }

    /// Nothing runs but lanes parked at a usage limit: say what the loop
    /// waits for, and sleep one slice toward the earliest resume.
    fn wait_for_limits(&mut self) {
        let mut lines = Vec::new();
        for (task, p) in self.run.slots.limited.iter_mut() {
            if !p.announced {
                p.announced = true;
                lines.push(format!(
                    "WAITING: {task} usage limit until {}",
                    crate::loopctl::night::clock::rfc3339(p.resume_at)
                ));
            }
        }
        for l in lines {
            self.say(&l);
        }
        let next = self.run.slots.limited.values().map(|p| p.resume_at).min();
        let wait = next.map_or(WAIT_SLICE, |t| {
            crate::loopctl::night::clock::since(self.run.now(), t)
        });
        let wait = guards::bound(&self.run.cfg.unattended.guards, self.run.elapsed(), wait);
        self.run.idle(wait);
    }

    /// One wait for outcomes, bounded by the wall-clock budget; turns past
    /// the turn timeout (or the budget) are cancelled and their tasks parked.
    fn wait_slice(&mut self) -> Result<(), LoopError> {
        let jobs: Vec<String> = self.run.slots.jobs.keys().cloned().collect();
        let g = self.run.cfg.unattended.guards;
        let budget = guards::remaining(&g, self.run.elapsed());
        let slice = budget.map_or(WAIT_SLICE, |b| {
            self.run.cfg.unattended.clock.real(b).min(WAIT_SLICE)
        });
        // Lanes held for the owner are looked at, never waited on: their
        // escalation stays the last word until the owner answers.
        let (held, free): (Vec<String>, Vec<String>) = jobs
            .into_iter()
            .partition(|j| self.run.slots.held.contains_key(j));
        let mut outs = if free.is_empty() {
            std::thread::sleep(slice.max(Duration::from_millis(10)));
            Vec::new()
        } else {
            self.ops.wait_decision(&free, slice)?
        };
        if !held.is_empty() {
            outs.extend(self.ops.wait_decision(&held, Duration::ZERO)?);
        }
        for (job, outcome) in outs {
            if let Some((task, at)) = self.run.slots.jobs.remove(&job) {
                self.usage_ended(&job);
                if !matches!(outcome, Outcome::Escalated { .. }) {
                    self.run.slots.held.remove(&job);
                }
                if self.limit_hit(&task, &job, &outcome)? {
                    continue;
                }
                // A wait for the owner is not a lane's speed: escalations are not timed.
                match &outcome {
                    Outcome::Completed => self.run.time_turn(&task, at, false),
                    Outcome::Failed { .. } => self.run.time_turn(&task, at, true),
                    Outcome::Escalated { .. } => {}
                }
                self.on_outcome(&task, &job, outcome)?;
            }
        }
        self.watch_stalls()?;
        self.watch_reports()?;
        let now = self.run.now();
        let turn = self.run.cfg.turn_timeout;
        // The budget bounds every turn: none outlives it.
        let over_budget = guards::remaining(&g, self.run.elapsed()) == Some(Duration::ZERO);
        let late: Vec<(String, String, DateTime<Utc>)> = self
            .run
            .slots
            .jobs
            .iter()
            .filter(|(_, (_, at))| {
                over_budget || crate::loopctl::night::clock::since(*at, now) > turn
            })
            .map(|(j, (t, at))| (j.clone(), t.clone(), *at))
            .collect();
        for (job, task, at) in late {
            self.run.slots.jobs.remove(&job);
            if !self.run.slots.held.contains_key(&job) {
                self.run.time_turn(&task, at, true);
            }
            self.cancel_job(&job);
            let lane = self
                .run
                .slots
                .lanes
                .get(&task)
                .map(|l| l.id.clone())
                .unwrap_or_default();
            if self.run.slots.held.remove(&job).is_some() && !over_budget {
                // The owner's wait ends at its deadline; the lane stays up
                // for a human until the close-out.
                self.park(
                    &task,
                    &format!(
                        "no answer from the owner within {} s (job {job} cancelled)",
                        self.run.cfg.turn_timeout.as_secs()
                    ),
                    &format!("answer the agent in lane {lane} (drover attach {lane}), then rerun"),
                )?;
                continue;
            }
            let why = if over_budget {
                format!(
                    "the wall-clock budget ran out (job {job} cancelled); deferred for the rest of the run"
                )
            } else {
                format!(
                    "no outcome within {} s (job {job} cancelled)",
                    self.run.cfg.turn_timeout.as_secs()
                )
            };
            self.park(
                &task,
                &why,
                "look at the lane's pane and log, then rerun the task",
            )?;
        }
        Ok(())
    }
}

impl Run {
    /// Notify (deduplicated by the intent: run, event, task, `key`).
    pub(in crate::loopctl) fn notify(
        &mut self,
        event: &str,
        task: Option<&str>,
        key: &str,
        text: &str,
    ) {
        let run = format!("loop{}", self.dir.n);
        let id = crate::loopctl::night::notify::intent_id(
            &run,
            event,
            &format!("{}\n{key}", task.unwrap_or("")),
        );
        let at = crate::loopctl::night::clock::rfc3339(self.now());
        self.notifier.send(crate::loopctl::night::notify::Note {
            intent_id: id,
            event: event.to_string(),
            run,
            task: task.map(str::to_string),
            text: text.to_string(),
            at,
        });
    }

    fn counters(&self) -> Counters {
        Counters {
            iterations: self.status.iterations,
            consecutive_blockers: self.controls.consecutive_blockers,
            elapsed: self.elapsed(),
        }
    }

    /// Sleep one slice on the loop's clock (nothing else to do).
    fn idle(&self, d: Duration) {
        let real = self.cfg.unattended.clock.real(d).min(WAIT_SLICE);
        std::thread::sleep(real.max(Duration::from_millis(10)));
    }
}
