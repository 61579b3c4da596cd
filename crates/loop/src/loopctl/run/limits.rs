//! Usage limits (`LOOP.md`, "Usage limits"): a lane seen `blocked{usage_limit}`
//! is parked — not a blocker — and resumed a minute after its `resets_at`
//! (choosing Claude's "Stop and wait for limit to reset", or "Keep current
//! model" in Codex's popup, by its label when a menu shows, then asking the
//! agent to continue), or, without a reset time,
//! re-checked with backoff up to an hour. A second limit re-parks. Each park
//! and each resume is one `DECISIONS.md` line and one event.
//!
//! The decision is the live observation's, never the reason's text: a limit
//! banner quoted in tool output is not a limit.

use crate::loopctl::LoopError;
use crate::loopctl::ops::{LaneOps, Outcome, Role};
use crate::loopctl::run::cause::TaskCause;
use crate::loopctl::run::drive::LimitPark;
use crate::loopctl::run::runner::{Phase, Runner, slug};
use crate::loopctl::run::task::Note;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// How long after `resets_at` a parked lane is resumed.
pub const RESUME_AFTER_RESET: Duration = Duration::from_secs(60);
/// The first re-check of a limit without a reset time; doubles each time.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(5 * 60);
/// The longest re-check interval of a limit without a reset time.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);
/// The row of Claude's limit menu chosen on resume, by its label.
pub const WAIT_LABEL: &str = "Stop and wait for limit to reset";
/// The row of Codex's popup at a limit chosen on resume (never the first,
/// "Switch to …", which changes the model).
pub const KEEP_LABEL: &str = "Keep current model";

/// The safe row of `agent`'s menu at a usage limit.
pub fn wait_label(agent: crate::registry::Agent) -> &'static str {
    match agent {
        crate::registry::Agent::Claude => WAIT_LABEL,
        crate::registry::Agent::Codex => KEEP_LABEL,
    }
}

/// The observation's `resets_at`, read tolerantly (absent or unreadable: none).
pub fn parse_resets_at(s: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s?.trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The backoff before the `parks`-th re-check of a limit without a reset time.
pub fn backoff(parks: u32) -> Duration {
    crate::backoff::Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).delay(parks.saturating_sub(1))
}

/// When to resume a lane parked at its `parks`-th limit in a row.
pub fn resume_at(
    now: DateTime<Utc>,
    resets_at: Option<DateTime<Utc>>,
    parks: u32,
) -> DateTime<Utc> {
    let after = |d: Duration| chrono::Duration::from_std(d).unwrap_or(chrono::Duration::zero());
    match resets_at {
        Some(r) if r + after(RESUME_AFTER_RESET) > now => r + after(RESUME_AFTER_RESET),
        Some(_) => now + after(RESUME_AFTER_RESET),
        None => now + after(backoff(parks)),
    }
}

impl<O: LaneOps> Runner<'_, O> {
    /// If `outcome` is a usage limit on the live screen, park the lane at it
    /// (true); anything else is the pipeline's (false).
    pub(in crate::loopctl) fn limit_hit(
        &mut self,
        task: &str,
        job: &str,
        outcome: &Outcome,
    ) -> Result<bool, LoopError> {
        if !matches!(outcome, Outcome::Escalated { .. }) {
            return Ok(false);
        }
        let Some(lane) = self.run.slots.lanes.get(task).cloned() else {
            return Ok(false);
        };
        let Some(obs) = self.ops.observe(&lane)? else {
            return Ok(false);
        };
        if obs.state != crate::agent::State::Blocked
            || obs.kind != Some(crate::agent::BlockedKind::UsageLimit)
        {
            return Ok(false);
        }
        let resets_at = parse_resets_at(obs.resets_at.as_deref());
        let parks = self.run.task(task).map_or(0, |t| t.limit_parks) + 1;
        let now = self.run.now();
        let at = resume_at(now, resets_at, parks);
        let resets = resets_at.map_or("no reset time shown".to_string(), |r| {
            format!("resets {}", crate::loopctl::night::clock::rfc3339(r))
        });
        let optout = self.run.cfg.unattended.no_resume_on_limit
            || self
                .run
                .cfg
                .unattended
                .no_resume_tasks
                .iter()
                .any(|t| t == task);
        let (reason, resume) = if optout {
            (
                format!(
                    "usage limit on lane {} ({resets}); not resumed (opted out)",
                    lane.id
                ),
                "after the limit resets, rerun the task".to_string(),
            )
        } else {
            (
                format!("usage limit on lane {} ({resets}); limit #{parks}", lane.id),
                format!("resumes at {}", crate::loopctl::night::clock::rfc3339(at)),
            )
        };
        if let Some(t) = self.run.task_mut(task) {
            t.phase.enter_parked();
            t.limit_parks = parks;
            *t.note_mut() = Note {
                reason: Some(reason.clone()),
                resume: Some(resume.clone()),
                cause: (!optout).then_some(TaskCause::LimitWait),
            };
        }
        self.run
            .decide("park", &format!("{task}: {reason}; resume: {resume}"))?;
        crate::registry::events::emit_quiet(
            self.run.cfg.state(),
            "loop.limit.park",
            serde_json::json!({"run": self.run.dir.n, "task": task, "lane": lane.id,
                "resets_at": resets_at.map(crate::loopctl::night::clock::rfc3339),
                "resume_at": (!optout).then(|| crate::loopctl::night::clock::rfc3339(at))}),
        );
        self.say(&format!("{task}: parked at a usage limit ({resets})"));
        self.run.notify(
            "limit.park",
            Some(task),
            &format!("limit {parks}"),
            &format!("{task} parked at a usage limit ({resets}); {resume}"),
        );
        if !optout {
            self.run.slots.limited.insert(
                task.to_string(),
                LimitPark {
                    job: job.to_string(),
                    role: lane.role,
                    resets_at,
                    resume_at: at,
                    parks,
                    announced: false,
                },
            );
        }
        self.run.persist()?;
        Ok(true)
    }

    /// Resume the lanes whose limit has reset (nothing resumes once the run
    /// is stopping: they stay parked for the close-out).
    pub(in crate::loopctl) fn resume_limits(&mut self) -> Result<(), LoopError> {
        if self.run.controls.stop.is_some() {
            return Ok(());
        }
        let now = self.run.now();
        let due: Vec<String> = self
            .run
            .slots
            .limited
            .iter()
            .filter(|(_, p)| p.resume_at <= now)
            .map(|(t, _)| t.clone())
            .collect();
        for task in due {
            let Some(p) = self.run.slots.limited.remove(&task) else {
                continue;
            };
            let Some(lane) = self.run.slots.lanes.get(&task).cloned() else {
                continue;
            };
            let label = wait_label(lane.agent);
            let answered = self.ops.answer(&lane, label)?;
            self.cancel_job(&p.job);
            let round = self.run.task(&task).map_or(1, |t| t.round());
            let (phase, role, tag) = match p.role {
                Role::Implementer => (Phase::Implementing, "implementer", 'i'),
                Role::Reviewer => (Phase::Reviewing, "reviewer", 'v'),
            };
            let job = format!(
                "loop{}-{}-{tag}{round}{}-r{}",
                self.run.dir.n,
                slug(&task),
                self.run.resume_tag,
                p.parks
            );
            if let Some(t) = self.run.task_mut(&task) {
                match phase {
                    Phase::Reviewing => t.phase.enter_reviewing(),
                    _ => t.phase.enter_implementing(),
                }
                *t.note_mut() = Note::default();
            }
            let menu = if answered {
                format!("chose \"{label}\", ")
            } else {
                String::new()
            };
            let report = lane.lane_dir.join(format!("report-{tag}{round}.json"));
            let prompt = format!(
                "The usage limit has reset: continue the interrupted work.\n[loop] task={task} round={round} role={role} continue"
            );
            if let Err(e) = self.dispatch(&task, &job, &prompt, &report, Default::default()) {
                // Still at its limit (the lane refuses a prompt): park again, backing off.
                let parks = p.parks + 1;
                let at = resume_at(self.run.now(), None, parks);
                let resume = format!("resumes at {}", crate::loopctl::night::clock::rfc3339(at));
                // The menu was answered all the same: the line says so.
                let reason = format!(
                    "usage limit on lane {} not over yet ({menu}{e}); limit #{parks}",
                    lane.id
                );
                if let Some(t) = self.run.task_mut(&task) {
                    t.phase.enter_parked();
                    t.limit_parks = parks;
                    *t.note_mut() = Note {
                        reason: Some(reason.clone()),
                        resume: Some(resume.clone()),
                        cause: Some(TaskCause::LimitWait),
                    };
                }
                self.run
                    .decide("park", &format!("{task}: {reason}; resume: {resume}"))?;
                crate::registry::events::emit_quiet(
                    self.run.cfg.state(),
                    "loop.limit.park",
                    serde_json::json!({"run": self.run.dir.n, "task": task, "lane": lane.id,
                        "resets_at": null, "resume_at": crate::loopctl::night::clock::rfc3339(at)}),
                );
                self.run.slots.limited.insert(
                    task.clone(),
                    LimitPark {
                        resume_at: at,
                        parks,
                        announced: false,
                        ..p
                    },
                );
                self.run.persist()?;
                continue;
            }
            self.run.decide(
                "resume",
                &format!(
                    "{task}: lane {} after its usage limit: {menu}continuing as job {job}",
                    lane.id
                ),
            )?;
            crate::registry::events::emit_quiet(
                self.run.cfg.state(),
                "loop.limit.resume",
                serde_json::json!({"run": self.run.dir.n, "task": task, "lane": lane.id, "job": job}),
            );
            self.say(&format!(
                "{task}: resuming lane {} after its usage limit",
                lane.id
            ));
            self.run.notify(
                "limit.resume",
                Some(&task),
                &format!("limit {}", p.parks),
                &format!("{task} resumed after its usage limit"),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        parse_resets_at(Some(s)).unwrap()
    }

    #[test]
    fn resume_a_minute_after_the_reset() {
        let now = t("2026-12-01T02:00:00Z");
        assert_eq!(
            resume_at(now, Some(t("2026-12-01T03:00:00Z")), 1),
            t("2026-12-01T03:01:00Z")
        );
        // A reset already past: a minute from now.
        assert_eq!(
            resume_at(now, Some(t("2026-12-01T01:00:00Z")), 1),
            t("2026-12-01T02:01:00Z")
        );
    }

    #[test]
    fn without_a_reset_time_back_off_up_to_an_hour() {
        assert_eq!(backoff(1), Duration::from_secs(300));
        assert_eq!(backoff(2), Duration::from_secs(600));
        assert_eq!(backoff(4), Duration::from_secs(2400));
        assert_eq!(backoff(5), MAX_BACKOFF);
        assert_eq!(backoff(40), MAX_BACKOFF);
        let now = t("2026-12-01T02:00:00Z");
        assert_eq!(resume_at(now, None, 1), t("2026-12-01T02:05:00Z"));
    }

    #[test]
    fn resets_at_is_read_tolerantly() {
        assert_eq!(parse_resets_at(None), None);
        assert_eq!(parse_resets_at(Some("3pm")), None);
        assert_eq!(
            parse_resets_at(Some("2026-12-01T03:00:00-08:00")),
            Some(t("2026-12-01T11:00:00Z"))
        );
    }
}
