//! Which tasks may start (pure), the task pool size, and `drover loop lint
//! queue`.

use crate::loopctl::board::charter::Charter;
use crate::loopctl::board::{Board, NEEDS_OWNER, Task};

/// The task pool size when nothing is said or the value is not a number.
pub const DEFAULT_POOL: usize = 2;

/// A task kept out of Ready, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    pub id: String,
    pub reason: String,
    /// What the run decides on; `reason` says it to people.
    #[serde(skip)]
    pub cause: HoldCause,
}

pub use crate::runstate::cause::HoldCause;

/// The board split into Ready (in board order) and Hold; Done tasks are in neither.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Split {
    pub ready: Vec<String>,
    pub hold: Vec<Held>,
}

/// Why a task may not be in Ready, if it may not (pure). Done tasks say so.
pub fn offence(charter: &Charter, t: &Task) -> Option<String> {
    offence_with_cause(charter, t).map(|(_, why)| why)
}

/// [`offence`] with its cause.
fn offence_with_cause(charter: &Charter, t: &Task) -> Option<(HoldCause, String)> {
    if t.is_done() {
        return Some((HoldCause::Done, "is Done".into()));
    }
    if charter.excludes(&t.id) {
        return Some((HoldCause::Excluded, "is excluded by the charter".into()));
    }
    if t.has_label(NEEDS_OWNER) {
        return Some((HoldCause::NeedsOwner, format!("is labelled {NEEDS_OWNER}")));
    }
    None
}

/// Split the board into Ready and Hold (pure).
pub fn split(board: &Board, charter: &Charter) -> Split {
    let mut out = Split::default();
    for t in &board.tasks {
        if t.is_done() {
            continue;
        }
        let reason = offence_with_cause(charter, t).or_else(|| {
            let open: Vec<String> = t
                .dependencies
                .iter()
                .filter(|d| !board.task(d).is_some_and(Task::is_done))
                .map(|d| match board.task(d) {
                    Some(_) => d.clone(),
                    None => format!("{d} (not on the board)"),
                })
                .collect();
            if !open.is_empty() {
                return Some((
                    HoldCause::Dependencies,
                    format!("depends on {} (not Done)", open.join(", ")),
                ));
            }
            if t.files.is_empty() {
                return Some((
                    HoldCause::NoFiles,
                    "names no modified_files (the files its lease claims)".to_string(),
                ));
            }
            None
        });
        match reason {
            Some((cause, reason)) => out.hold.push(Held {
                id: t.id.clone(),
                reason,
                cause,
            }),
            None => out.ready.push(t.id.clone()),
        }
    }
    out
}

/// The task pool size X (pure): default 2; a value ≤ 0 is floored to 1; a
/// non-number falls back to the default; clamped to 1 when locks are
/// unavailable or HEAD is not the base. Returns the size and, when it is not
/// what was asked, why.
pub fn pool_size(raw: Option<&str>, locks_ok: bool, head_is_base: bool) -> (usize, Option<String>) {
    let (mut x, mut why) = match raw.map(str::trim) {
        None | Some("") => (DEFAULT_POOL, None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n <= 0 => (1, Some(format!("pool {n} floored to 1"))),
            Ok(n) => (usize::try_from(n).unwrap_or(usize::MAX), None),
            Err(_) => (
                DEFAULT_POOL,
                Some(format!("pool {v:?} is not a number; using {DEFAULT_POOL}")),
            ),
        },
    };
    if x > 1 && !locks_ok {
        x = 1;
        why = Some("locks are unavailable; pool clamped to 1".into());
    } else if x > 1 && !head_is_base {
        x = 1;
        why = Some("HEAD is not the base; pool clamped to 1".into());
    }
    (x, why)
}

/// One offence found by `loop lint queue`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Offence {
    pub line: usize,
    pub task: String,
    pub message: String,
}

/// The task ids of the `## Ready` rows of a QUEUE.md, with their line numbers
/// (the id is the first word of a row, a list item).
pub fn ready_rows(queue: &str) -> Vec<(usize, String)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, line) in queue.lines().enumerate() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h.trim().eq_ignore_ascii_case("Ready");
            continue;
        }
        if !inside {
            continue;
        }
        let l = line.trim_start();
        let item = l
            .strip_prefix("- ")
            .or_else(|| l.strip_prefix("* "))
            .or_else(|| {
                let (n, rest) = l.split_once(". ")?;
                n.bytes().all(|b| b.is_ascii_digit()).then_some(rest)
            });
        if let Some(item) = item {
            let id = item
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_');
            if !id.is_empty() {
                out.push((i + 1, id.to_string()));
            }
        }
    }
    out
}

/// Lint a QUEUE.md against the board and charter (pure): no excluded task,
/// none Done, none labelled needs-owner, none unknown.
pub fn lint_queue(queue: &str, board: &Board, charter: &Charter) -> Vec<Offence> {
    ready_rows(queue)
        .into_iter()
        .filter_map(|(line, id)| {
            let message = match board.task(&id) {
                None => match board.problems.iter().find(|p| p.id.as_deref() == Some(&id)) {
                    // Two files say this id: the board leaves both out.
                    Some(p) => format!("is left out of the board: {}", p.describe()),
                    None => "is not on the board".to_string(),
                },
                Some(t) => offence(charter, t)?,
            };
            Some(Offence {
                line,
                task: id,
                message,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopctl::board::charter;
    use crate::loopctl::board::parse_task;
    use std::path::Path;

    fn task(id: &str, status: &str, labels: &str, deps: &str) -> Task {
        parse_task(
            &format!(
                "---\nid: {id}\ntitle: t {id}\nstatus: {status}\nlabels: [{labels}]\ndependencies: [{deps}]\nmodified_files: [f-{id}]\n---\n"
            ),
            Path::new("t.md"),
        )
        .unwrap()
    }

    fn board() -> Board {
        Board {
            dir: "b".into(),
            tasks: vec![
                task("T-1", "To Do", "", ""),
                task("T-2", "Done", "", ""),
                task("T-3", "To Do", "needs-owner", ""),
                task("T-4", "To Do", "", "T-1"),
                task("T-5", "To Do", "", "T-2"),
                task("T-6", "To Do", "", ""),
                task("T-7", "To Do", "", "T-99"),
            ],
            problems: Vec::new(),
        }
    }

    #[test]
    fn ready_applies_exclusions_dependencies_and_needs_owner() {
        let c = charter::parse("aim: x\nexclude: T-6\n", Path::new("c")).unwrap();
        let s = split(&board(), &c);
        assert_eq!(s.ready, vec!["T-1", "T-5"]);
        let held: Vec<(&str, &str)> = s
            .hold
            .iter()
            .map(|h| (h.id.as_str(), h.reason.as_str()))
            .collect();
        assert_eq!(
            held,
            vec![
                ("T-3", "is labelled needs-owner"),
                ("T-4", "depends on T-1 (not Done)"),
                ("T-6", "is excluded by the charter"),
                ("T-7", "depends on T-99 (not on the board) (not Done)"),
            ]
        );
    }

    #[test]
    fn pool_size_rules() {
        assert_eq!(pool_size(None, true, true).0, 2);
        assert_eq!(pool_size(Some("3"), true, true), (3, None));
        assert_eq!(pool_size(Some("0"), true, true).0, 1);
        assert_eq!(pool_size(Some("-4"), true, true).0, 1);
        assert_eq!(pool_size(Some("lots"), true, true).0, 2);
        assert_eq!(pool_size(Some("3"), false, true).0, 1);
        assert_eq!(pool_size(Some("3"), true, false).0, 1);
        assert!(
            pool_size(Some("3"), true, false)
                .1
                .unwrap()
                .contains("HEAD")
        );
    }

    #[test]
    fn lint_lists_each_offence() {
        let c = charter::parse("aim: x\nexclude: T-6\n", Path::new("c")).unwrap();
        let q = "# Queue\n\n## Ready\n- T-1 (t)\n- T-2 (done)\n1. T-3 (owner)\n- T-6\n- T-42\n\n## Hold\n- T-2: fine here\n";
        let off = lint_queue(q, &board(), &c);
        let got: Vec<(usize, &str)> = off.iter().map(|o| (o.line, o.task.as_str())).collect();
        assert_eq!(got, vec![(5, "T-2"), (6, "T-3"), (7, "T-6"), (8, "T-42")]);
        assert!(off[3].message.contains("not on the board"));
    }
}
