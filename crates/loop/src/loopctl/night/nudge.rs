//! What the loop says to an implementer that ended its turn without a
//! report that counts (LOOP.md, "Briefs"): a report file that does not fit
//! the schema is answered once in the lane, naming exactly what to change;
//! a lane done on screen with no report for `--report-grace-s` gets one
//! reminder naming the command; as long again with still no report parks
//! the task. Decided here; the runner (`run::nudge`) and a fleet host's
//! lane act on it.

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

/// The report at `path` as the loop finds it for the attempt `expect`
/// names: none, one the policy takes, or one with what to change.
pub fn found(path: &std::path::Path, expect: &Expect) -> Found {
    match std::fs::read(path) {
        Err(_) => Found::None,
        // A report the policy takes is the policy's; only one it cannot
        // take is answered, with every change it needs.
        Ok(bytes) if schema::counts(&bytes, expect) => Found::Fits,
        Ok(bytes) => {
            let mut p = schema::check(&bytes, expect);
            if p.is_empty() {
                p.push("it must be the finished report of this attempt".into());
            }
            Found::Misfit(p)
        }
    }
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
        let r = reminder("J1", "/opt/drover/bin/drover", "/lane/report-i1.json");
        assert!(
            r.contains("run `/opt/drover/bin/drover report done`"),
            "{r}"
        );
        let a = answer(
            "J1",
            "/lane/r.json",
            &["add `x`".into(), "remove `y`".into()],
            "{\"a\":1}",
            "/opt/drover/bin/drover",
        );
        assert!(
            a.contains("does not count yet: add `x`; remove `y`."),
            "{a}"
        );
        assert!(a.contains("{\"a\":1}"), "{a}");
        assert!(
            a.contains("(or run `/opt/drover/bin/drover report done`)"),
            "{a}"
        );
    }
}
