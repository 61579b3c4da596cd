//! The runs block of `top`, as lines of text (pure): per run a line with its
//! state, what landed and the last landing, then its parked tasks with their
//! reasons, the questions waiting for the owner and the tasks under way
//! (phase, round, agent, lane). The selected run (the one the keys act on)
//! is marked `>` when there is more than one.

use super::columns::clip;
use super::runs::{RunCell, RunTask};

/// The keys that act on the selected run, for its line.
pub const RUN_KEYS: &str = "p pause  r resume  c close out";

/// One run's head line.
pub fn head(r: &RunCell) -> String {
    let mut out = format!("loop{} {}", r.n, r.state);
    if r.state == crate::runstate::RunState::Interrupted {
        out.push_str(&format!(
            " (its loop process is gone: `drover loop run --resume {}`, or c to close it out)",
            r.n
        ));
    }
    if !r.mode.is_empty() && r.mode != "owner-present" {
        out.push_str(&format!(" ({})", r.mode));
    }
    out.push_str(&format!(" · {} of {} landed", r.landed, r.total));
    let parked = r.parked();
    if parked > 0 {
        out.push_str(&format!(" · {parked} parked"));
    }
    if !r.questions.is_empty() {
        out.push_str(&format!(" · {} question(s) for you", r.questions.len()));
    }
    if r.held > 0 {
        out.push_str(&format!(" · {} held", r.held));
    }
    match &r.last_landing {
        Some(l) => out.push_str(&format!(" · last {l}")),
        None => out.push_str(" · nothing landed yet"),
    }
    if let Some(u) = &r.usage {
        out.push_str(&format!(" · usage {u}"));
    }
    if let Some(s) = r
        .stopped_by
        .as_ref()
        .filter(|_| r.state != crate::runstate::RunState::Interrupted)
    {
        out.push_str(&format!(" · stopped by {s}"));
    }
    out
}

/// One task's line.
pub fn task(t: &RunTask) -> String {
    let mark = if t.needs_human() { "P" } else { " " };
    let mut out = format!("  {mark} {} {}", t.id, t.phase);
    if t.round > 0 {
        out.push_str(&format!(" round {}", t.round));
    }
    if let Some(a) = &t.agent {
        out.push_str(&format!(" {a}"));
    }
    if let Some(l) = &t.lane {
        out.push_str(&format!(" lane {l}"));
    }
    if let Some(s) = &t.stall {
        out.push_str(&format!(" · {s}"));
    }
    if let Some(r) = &t.reason {
        out.push_str(&format!(": {}", r.replace('\n', " ")));
    }
    out
}

/// The block's lines for `runs` at `width`, at most `max` of them (the
/// last saying what did not fit).
pub fn lines(
    runs: &[RunCell],
    older: usize,
    selected: Option<u32>,
    width: usize,
    max: usize,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let many = runs.len() > 1;
    for r in runs {
        let sel = if many && selected == Some(r.n) {
            ">"
        } else {
            " "
        };
        out.push(format!("{sel}{}", head(r)));
        let (urgent, rest): (Vec<&RunTask>, Vec<&RunTask>) =
            r.tasks.iter().partition(|t| t.needs_human());
        out.extend(urgent.into_iter().map(task));
        out.extend(
            r.questions
                .iter()
                .map(|q| format!("  ? {} asks: {}", q.task, q.question.replace('\n', " "))),
        );
        if !r.finished {
            out.extend(rest.into_iter().map(task));
        }
    }
    if older > 0 {
        out.push(format!(
            "  ({older} older closed run(s): `drover loop status N`)"
        ));
    }
    if out.len() > max {
        let cut = out.len() - max + 1;
        out.truncate(max.saturating_sub(1));
        out.push(format!("  … {cut} more line(s): `drover loop status`"));
    }
    out.into_iter().map(|l| clip(&l, width)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Agent;
    use crate::runstate::{Phase, RunState};
    use crate::top::runs::RunQuestion;

    fn run() -> RunCell {
        RunCell {
            n: 3,
            state: RunState::Paused,
            live: true,
            total: 3,
            landed: 1,
            tasks: vec![
                RunTask {
                    id: "TASK-3".into(),
                    phase: Phase::Parked,
                    round: 3,
                    agent: Some(Agent::Codex),
                    lane: Some("l3-impl-task-3".into()),
                    reason: Some("the gate stayed red".into()),
                    stall: None,
                    ..Default::default()
                },
                RunTask {
                    id: "TASK-2".into(),
                    phase: Phase::Implementing,
                    round: 1,
                    agent: Some(Agent::Claude),
                    lane: Some("l3-impl-task-2".into()),
                    ..Default::default()
                },
            ],
            questions: vec![RunQuestion {
                task: "TASK-3".into(),
                question: "Which API?".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_run_shows_its_state_parked_tasks_questions_and_work_under_way() {
        let l = lines(&[run()], 0, Some(3), 200, 10);
        assert!(
            l[0].starts_with(" loop3 paused · 1 of 3 landed · 1 parked · 1 question(s) for you"),
            "{l:?}"
        );
        assert_eq!(
            l[1],
            "  P TASK-3 parked round 3 codex lane l3-impl-task-3: the gate stayed red"
        );
        assert_eq!(l[2], "  ? TASK-3 asks: Which API?");
        assert_eq!(
            l[3],
            "    TASK-2 implementing round 1 claude lane l3-impl-task-2"
        );
    }

    #[test]
    fn a_run_s_head_line_gives_its_usage_when_a_task_started() {
        let mut r = run();
        assert!(!head(&r).contains("usage"), "{}", head(&r));
        r.usage = Some("not reported".into());
        assert!(head(&r).ends_with(" · usage not reported"), "{}", head(&r));
        r.usage = Some("1600 in · 340 out · $0.06 (1 of 2 task(s) reported, 1 a cost)".into());
        assert!(
            head(&r).ends_with(
                " · usage 1600 in · 340 out · $0.06 (1 of 2 task(s) reported, 1 a cost)"
            ),
            "{}",
            head(&r)
        );
    }

    #[test]
    fn what_does_not_fit_is_counted() {
        let l = lines(&[run(), run()], 2, Some(3), 40, 4);
        assert_eq!(l.len(), 4);
        assert!(l[3].starts_with("  … 6 more line(s)"), "{l:?}");
        assert!(l.iter().all(|x| x.chars().count() <= 40));
        assert!(l[0].starts_with(">loop3"));
    }
}
