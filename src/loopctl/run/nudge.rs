//! What the loop says to an implementer that ended its turn without a
//! report that counts (LOOP.md, "Briefs"): a report file that does not fit the schema is answered once
//! in the lane, naming exactly what to change; a lane done on screen with
//! no report for `--report-grace-s` gets one reminder naming the command;
//! as long again with still no report parks the task. Each is one
//! `DECISIONS.md` line.

use crate::engine::Engine;
use crate::loopctl::LoopError;
use crate::loopctl::ops::{LaneOps, Role};
use crate::loopctl::run::runner::Runner;
use crate::report::schema::{self, Expect};
use chrono::{DateTime, Utc};

/// What was said to one job's lane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nudge {
    /// Since when the lane has been at the end of its turn (loop clock).
    pub ended_since: Option<DateTime<Utc>>,
    /// The malformed report was answered.
    pub answered: bool,
    /// When the one reminder was sent.
    pub reminded: Option<DateTime<Utc>>,
}

/// What to do about one lane now (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Answer the report's problems.
    Answer(Vec<String>),
    Remind,
    Park,
}

/// The report as the loop finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    None,
    Fits,
    /// A report that does not fit, with what to change.
    Misfit(Vec<String>),
}

/// Decide for one lane at the end of its turn for `ended` (pure).
pub fn step(
    n: &Nudge,
    found: &Found,
    ended: std::time::Duration,
    grace: std::time::Duration,
) -> Step {
    match found {
        Found::Fits => Step::Nothing,
        Found::Misfit(p) if !n.answered => Step::Answer(p.clone()),
        _ if ended < grace => Step::Nothing,
        _ if n.reminded.is_none() => Step::Remind,
        _ => Step::Park,
    }
}

/// The reminder prompt (pure).
pub fn reminder(job: &str, cmd: &str, report: &str) -> String {
    format!(
        "[drover] job={job}: your turn ended with no report. When finished, run `{cmd} report done` (or `{cmd} report failed --reason \"<why>\"` if you cannot finish); an agent that cannot run commands writes {report} as the [drover] line of the task showed."
    )
}

/// The answer to a report that does not fit (pure): each change, then the
/// whole report as it should be.
pub fn answer(job: &str, report: &str, problems: &[String], example: &str, cmd: &str) -> String {
    format!(
        "[drover] job={job}: the report {report} does not count yet: {}. Write {report} again as this one JSON object, one side_effects entry per file you changed: {example} (or run `{cmd} report done`).",
        problems.join("; ")
    )
}

impl<O: LaneOps> Runner<'_, O> {
    /// Look at every implementer job in flight whose lane is at the end of
    /// its turn and act once per [`step`].
    pub(in crate::loopctl) fn watch_reports(&mut self) -> Result<(), LoopError> {
        let jobs: Vec<(String, String)> = self
            .jobs
            .iter()
            .filter(|(j, _)| !self.held.contains_key(*j))
            .map(|(j, (t, _))| (j.clone(), t.clone()))
            .collect();
        self.nudges.retain(|j, _| self.jobs.contains_key(j));
        let grace = self.cfg.unattended.report_grace;
        for (job, task) in jobs {
            let Some(lane) = self.lanes.get(&task).cloned() else {
                continue;
            };
            if lane.role != Role::Implementer || self.limited.contains_key(&task) {
                continue;
            }
            let Some(obs) = self.ops.observe(&lane)? else {
                continue;
            };
            let now = self.now();
            let n = self.nudges.entry(job.clone()).or_default();
            if !matches!(obs.state.as_str(), "idle" | "done") {
                n.ended_since = None;
                continue;
            }
            let since = *n.ended_since.get_or_insert(now);
            let n = n.clone();
            let round = self.task(&task).map_or(1, |t| t.round);
            let report = lane.lane_dir.join(format!("report-i{round}.json"));
            let attempt = Engine::open(&self.cfg.state_dir)
                .ok()
                .and_then(|e| e.show(&job).ok())
                .and_then(|r| r.attempt_id)
                .unwrap_or_default();
            let expect = Expect {
                attempt_id: &attempt,
                session_id: Role::Implementer.session_id(),
            };
            let found = match std::fs::read(&report) {
                Err(_) => Found::None,
                // A report the policy takes is the policy's; only one it
                // cannot take is answered, with every change it needs.
                Ok(bytes) if schema::counts(&bytes, &expect) => Found::Fits,
                Ok(bytes) => {
                    let mut p = schema::check(&bytes, &expect);
                    if p.is_empty() {
                        p.push("it must be the finished report of this attempt".into());
                    }
                    Found::Misfit(p)
                }
            };
            let ended = crate::loopctl::night::clock::since(since, now);
            let cmd = self.ops.report_command();
            let shown = report.display().to_string();
            match step(&n, &found, ended, grace) {
                Step::Nothing => {}
                Step::Answer(problems) => {
                    let files = self
                        .board
                        .task(&task)
                        .map(|t| t.files.clone())
                        .unwrap_or_default();
                    let files: Vec<&str> = files.iter().map(String::as_str).collect();
                    let example = schema::example(&expect, &files);
                    let text = answer(&job, &shown, &problems, &example, &cmd);
                    let sent = self.ops.prompt(&lane, &text)?;
                    self.decide(
                        "report",
                        &format!(
                            "{task}: the report of job {job} does not fit: {}; {} in lane {} once, with the report as it should be",
                            problems.join("; "),
                            if sent { "answered" } else { "could not be answered" },
                            lane.id
                        ),
                    )?;
                    self.say(&format!("{task}: its report does not fit; answered once"));
                    let e = self.nudges.entry(job.clone()).or_default();
                    e.answered = true;
                    e.ended_since = None;
                }
                Step::Remind => {
                    let sent = self.ops.prompt(&lane, &reminder(&job, &cmd, &shown))?;
                    self.decide(
                        "reminder",
                        &format!(
                            "{task}: lane {} ended its turn with no report for {} s; {} once to run `{cmd} report done`",
                            lane.id,
                            grace.as_secs(),
                            if sent { "reminded" } else { "could not be reminded" },
                        ),
                    )?;
                    self.say(&format!("{task}: no report; reminded once"));
                    let e = self.nudges.entry(job.clone()).or_default();
                    e.reminded = Some(now);
                    e.ended_since = None;
                }
                Step::Park => {
                    self.jobs.remove(&job);
                    self.nudges.remove(&job);
                    self.cancel_job(&job);
                    self.park(
                        &task,
                        &format!(
                            "no report from lane {} after a reminder (job {job} cancelled)",
                            lane.id
                        ),
                        &format!(
                            "look at the lane's pane; its agent must run `{cmd} report done`, then rerun the task"
                        ),
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const G: Duration = Duration::from_secs(60);

    #[test]
    fn a_misfit_is_answered_once_then_reminded_then_parked() {
        let mut n = Nudge::default();
        let misfit = Found::Misfit(vec!["add `state`".into()]);
        assert_eq!(
            step(&n, &misfit, Duration::ZERO, G),
            Step::Answer(vec!["add `state`".into()])
        );
        n.answered = true;
        assert_eq!(step(&n, &misfit, Duration::from_secs(59), G), Step::Nothing);
        assert_eq!(step(&n, &misfit, G, G), Step::Remind);
        n.reminded = Some(Utc::now());
        assert_eq!(
            step(&n, &Found::None, Duration::from_secs(10), G),
            Step::Nothing
        );
        assert_eq!(step(&n, &Found::None, G, G), Step::Park);
        assert_eq!(
            step(&n, &Found::Fits, G * 10, G),
            Step::Nothing,
            "a report that fits is the policy's"
        );
    }

    #[test]
    fn the_reminder_and_the_answer_name_the_command_and_the_file() {
        let r = reminder("J1", "drover", "/lane/report-i1.json");
        assert!(r.contains("run `drover report done`"), "{r}");
        let a = answer(
            "J1",
            "/lane/r.json",
            &["add `x`".into(), "remove `y`".into()],
            "{\"a\":1}",
            "drover",
        );
        assert!(
            a.contains("does not count yet: add `x`; remove `y`."),
            "{a}"
        );
        assert!(a.contains("{\"a\":1}"), "{a}");
    }
}
