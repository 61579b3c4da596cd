//! The runner's side of [`crate::loopctl::night::nudge`]: every implementer
//! job in flight whose lane sits at the end of its turn is looked at, and
//! what the nudge decides is said in the lane once, each one
//! `DECISIONS.md` line.

use crate::engine::Engine;
use crate::loopctl::LoopError;
use crate::loopctl::night::nudge::{Step, answer, found, reminder, step};
use crate::loopctl::ops::{LaneOps, Role};
use crate::loopctl::run::runner::Runner;
use crate::report::schema::{self, Expect};

impl<O: LaneOps> Runner<'_, O> {
    /// Look at every implementer job in flight whose lane is at the end of
    /// its turn and act once per [`step`].
    pub(in crate::loopctl) fn watch_reports(&mut self) -> Result<(), LoopError> {
        let jobs: Vec<(String, String)> = self
            .run
            .slots
            .jobs
            .iter()
            .filter(|(j, _)| !self.run.slots.held.contains_key(*j))
            .map(|(j, (t, _))| (j.clone(), t.clone()))
            .collect();
        self.run
            .slots
            .nudges
            .retain(|j, _| self.run.slots.jobs.contains_key(j));
        let grace = self.run.cfg.unattended.report_grace;
        for (job, task) in jobs {
            let Some(lane) = self.run.slots.lanes.get(&task).cloned() else {
                continue;
            };
            if lane.role != Role::Implementer || self.run.slots.limited.contains_key(&task) {
                continue;
            }
            let Some(obs) = self.ops.observe(&lane)? else {
                continue;
            };
            let now = self.run.now();
            let n = self.run.slots.nudges.entry(job.clone()).or_default();
            if !matches!(
                obs.state,
                crate::agent::State::Idle | crate::agent::State::Done
            ) {
                n.ended_since = None;
                continue;
            }
            let since = *n.ended_since.get_or_insert(now);
            let n = n.clone();
            let round = self.run.task(&task).map_or(1, |t| t.round());
            let report = lane.lane_dir.join(format!("report-i{round}.json"));
            let attempt = Engine::open(self.run.cfg.state())
                .ok()
                .and_then(|e| e.show(&job).ok())
                .and_then(|r| r.attempt_id)
                .unwrap_or_default();
            let expect = Expect {
                attempt_id: &attempt,
                session_id: Role::Implementer.session_id(),
            };
            let found = found(&report, &expect);
            let ended = crate::loopctl::night::clock::since(since, now);
            let cmd = self.ops.report_command();
            let shown = report.display().to_string();
            match step(&n, &found, ended, grace) {
                Step::Nothing => {}
                Step::Answer(problems) => {
                    let files = self
                        .run
                        .board
                        .view
                        .task(&task)
                        .map(|t| t.files.clone())
                        .unwrap_or_default();
                    let files: Vec<&str> = files.iter().map(String::as_str).collect();
                    let example = schema::example(&expect, &files);
                    let text = answer(&job, &shown, &problems, &example, &cmd);
                    let sent = self.ops.prompt(&lane, &text)?;
                    self.run.decide(
                        "report",
                        &format!(
                            "{task}: the report of job {job} does not fit: {}; {} in lane {} once, with the report as it should be",
                            problems.join("; "),
                            if sent { "answered" } else { "could not be answered" },
                            lane.id
                        ),
                    )?;
                    self.say(&format!("{task}: its report does not fit; answered once"));
                    let e = self.run.slots.nudges.entry(job.clone()).or_default();
                    e.answered = true;
                    e.ended_since = None;
                }
                Step::Remind => {
                    let sent = self.ops.prompt(&lane, &reminder(&job, &cmd, &shown))?;
                    self.run.decide(
                        "reminder",
                        &format!(
                            "{task}: lane {} ended its turn with no report for {} s; {} once to run `{cmd} report done`",
                            lane.id,
                            grace.as_secs(),
                            if sent { "reminded" } else { "could not be reminded" },
                        ),
                    )?;
                    self.say(&format!("{task}: no report; reminded once"));
                    let e = self.run.slots.nudges.entry(job.clone()).or_default();
                    e.reminded = Some(now);
                    e.ended_since = None;
                }
                Step::Park => {
                    self.run.slots.jobs.remove(&job);
                    self.run.slots.nudges.remove(&job);
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
