//! The loop's runs as `top` shows them: each run of the state dir with its
//! state (as `loop status` reads it: `interrupted` when its loop process is
//! gone), its tasks under way with phase, round, agent and lane, what is
//! parked and why, the questions waiting for the owner and the last
//! landing; the runs that need a human first. Built by a pure function
//! ([`cell_of`]) from `run.json` (read as `loop status --json` reads it)
//! and the tail of `DECISIONS.md`; [`RunsReader`] reads a run's files again
//! only when they changed.

use crate::loopctl::run::run_state::RunState;
use crate::loopctl::run::runner::RunStatus;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

/// How much of the end of `DECISIONS.md` is read for the last landing.
const DECISIONS_TAIL: u64 = 64 * 1024;

/// One task of a run that is not landed or held.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunTask {
    pub id: String,
    /// Its title on the board.
    pub title: String,
    /// `implementing`, `reviewing`, `landing`, `parked`, `ready`.
    pub phase: String,
    pub round: u64,
    pub agent: Option<String>,
    pub lane: Option<String>,
    /// Why it is parked (or why it is not moving).
    pub reason: Option<String>,
    /// Why its lane is not progressing (`stalled`, `needs-human`, …).
    pub stall: Option<String>,
}

impl RunTask {
    /// Whether it waits for a human: parked, or its lane needs one.
    pub fn needs_human(&self) -> bool {
        self.phase == "parked" || self.stall.is_some()
    }
}

/// A question put to the owner.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunQuestion {
    pub task: String,
    pub question: String,
    /// When it was asked, as the loop wrote it.
    pub at: String,
}

/// One run as `top` shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunCell {
    pub n: u32,
    /// The state as an operator reads it (`loop status`'s word).
    pub state: String,
    /// A loop process works it now.
    pub live: bool,
    /// It was closed (its close-out written, or stopped for good).
    pub finished: bool,
    /// `owner-present`, `overnight`, …
    pub mode: String,
    /// The branch the run lands on.
    pub integration_branch: String,
    /// Tasks not landed and not held, the ones that need a human first.
    pub tasks: Vec<RunTask>,
    pub landed: usize,
    pub held: usize,
    pub total: usize,
    pub questions: Vec<RunQuestion>,
    /// The last landing, in words (from `DECISIONS.md`), with its time.
    pub last_landing: Option<String>,
    /// Why it stopped before its queue drained.
    pub stopped_by: Option<String>,
}

impl RunCell {
    /// Its parked tasks.
    pub fn parked(&self) -> usize {
        self.tasks.iter().filter(|t| t.phase == "parked").count()
    }

    /// How urgent it is, most first: something parked or asked (0), paused
    /// or stopped midway (1), running (2), closed (3).
    pub fn rank(&self) -> u8 {
        if !self.finished
            && (self.tasks.iter().any(RunTask::needs_human) || !self.questions.is_empty())
        {
            0
        } else if self.finished {
            3
        } else if self.state == "running" {
            2
        } else {
            1
        }
    }

    /// Whether it belongs with the ones that need a human.
    pub fn needs_human(&self) -> bool {
        self.rank() < 2
    }
}

fn s(v: &Value, k: &str) -> Option<String> {
    v[k].as_str().filter(|x| !x.is_empty()).map(str::to_string)
}

/// A run from its `run.json` (as read), the state `loop status` gives it
/// (`None`: the file's own word) and the tail of its `DECISIONS.md` (pure).
pub fn cell_of(n: u32, v: &Value, state: Option<(RunState, bool)>, decisions: &str) -> RunCell {
    let (state, live) = match state {
        Some((st, live)) => (st.as_str().to_string(), live),
        None => (s(v, "state").unwrap_or_else(|| "?".into()), false),
    };
    let tasks_v: Vec<&Value> = v["tasks"].as_array().into_iter().flatten().collect();
    let phase = |t: &Value| t["phase"].as_str().unwrap_or("?").to_string();
    let mut tasks: Vec<RunTask> = tasks_v
        .iter()
        .filter(|t| !matches!(t["phase"].as_str(), Some("landed" | "held")))
        .map(|t| RunTask {
            id: s(t, "id").unwrap_or_else(|| "?".into()),
            title: s(t, "title").unwrap_or_default(),
            phase: phase(t),
            round: t["round"].as_u64().unwrap_or(0),
            agent: s(t, "agent"),
            lane: s(t, "lane"),
            reason: s(t, "reason"),
            stall: s(t, "stall"),
        })
        .collect();
    // Needs a human first, then as the board orders them.
    tasks.sort_by_key(|t| !t.needs_human());
    let questions = v["questions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| RunQuestion {
            task: s(q, "task").unwrap_or_else(|| "?".into()),
            question: s(q, "question").unwrap_or_default(),
            at: s(q, "at").unwrap_or_default(),
        })
        .collect();
    RunCell {
        n,
        finished: !v["finished_at"].is_null(),
        live,
        state,
        mode: s(v, "mode").unwrap_or_default(),
        integration_branch: s(v, "integration_branch").unwrap_or_default(),
        landed: tasks_v.iter().filter(|t| t["phase"] == "landed").count(),
        held: tasks_v.iter().filter(|t| t["phase"] == "held").count(),
        total: tasks_v.len(),
        tasks,
        questions,
        last_landing: last_landing(decisions),
        stopped_by: s(v, "stopped_by"),
    }
}

/// The last landing `DECISIONS.md` records (`- D7 <RFC3339> landing:
/// landing 2: 1 landed of 1 in 1 gate run(s), head <sha>`), as
/// `14:02 landing 2: 1 landed of 1 …, head 3f2a9c1d` (pure).
pub fn last_landing(decisions: &str) -> Option<String> {
    decisions.lines().rev().find_map(|l| {
        let rest = l.strip_prefix("- D")?;
        let (_, rest) = rest.split_once(' ')?;
        let (at, rest) = rest.split_once(' ')?;
        let text = rest.strip_prefix("landing: landing ")?;
        let when = chrono::DateTime::parse_from_rfc3339(at)
            .map(|t| t.with_timezone(&chrono::Local).format("%H:%M").to_string())
            .unwrap_or_else(|_| at.to_string());
        // A head as a short sha.
        let text = match text.rsplit_once(", head ") {
            Some((a, head)) => format!("{a}, head {}", head.chars().take(8).collect::<String>()),
            None => text.to_string(),
        };
        Some(format!("{when} landing {text}"))
    })
}

/// Order runs for the screen: the ones that need a human first, then the
/// newest.
pub fn order(runs: &mut [RunCell]) {
    runs.sort_by(|a, b| a.rank().cmp(&b.rank()).then(b.n.cmp(&a.n)));
}

/// The runs to show: every run not closed, and the newest run even when
/// closed (its last landing); how many older closed runs were left out.
pub fn shown(all: &BTreeMap<u32, RunCell>) -> (Vec<RunCell>, usize) {
    let newest = all.keys().next_back().copied();
    let mut out: Vec<RunCell> = all
        .values()
        .filter(|r| !r.finished || Some(r.n) == newest)
        .cloned()
        .collect();
    let left = all.len() - out.len();
    order(&mut out);
    (out, left)
}

/// A file's modification time and size.
type FileStamp = Option<(SystemTime, u64)>;

/// What a run was last read from.
#[derive(Debug, Clone)]
struct Read {
    /// `run.json`'s and `DECISIONS.md`'s stamps.
    files: (FileStamp, FileStamp),
    /// The loop process recorded in it (whether it still runs decides
    /// `interrupted`).
    process: Option<crate::loopctl::run::runner::LoopProcess>,
    cell: RunCell,
}

fn stamp_of(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

fn tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > DECISIONS_TAIL {
        let _ = f.seek(SeekFrom::Start(len - DECISIONS_TAIL));
    }
    let mut buf = Vec::new();
    let _ = f.take(DECISIONS_TAIL).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The runs of a state dir, each read again only when its files changed
/// or its loop process stopped: a closed run is read once.
#[derive(Debug, Default)]
pub struct RunsReader {
    read: BTreeMap<u32, Read>,
    /// A run whose `run.json` could not be read: the last problem.
    pub warning: Option<String>,
}

impl RunsReader {
    /// Look at the runs; whether anything changed since the last look.
    pub fn update(&mut self, state_dir: &Path) -> bool {
        self.warning = None;
        let ns = crate::loopctl::run::rundir::runs(state_dir);
        let before = self.read.len();
        self.read.retain(|n, _| ns.contains(n));
        let mut changed = self.read.len() != before;
        for n in ns {
            let dir = crate::statedir::StateDir::new(state_dir).run_dir(n);
            let run_json = dir.join("run.json");
            let decisions = dir.join("DECISIONS.md");
            let files = (stamp_of(&run_json), stamp_of(&decisions));
            if let Some(r) = self.read.get(&n)
                && r.files == files
                && r.cell.live == r.process.is_some_and(|p| p.runs())
            {
                continue;
            }
            let v: Value = match crate::store::read_json(&run_json) {
                Ok(Some(v)) => v,
                // A run dir without its file yet: nothing to show.
                Ok(None) => continue,
                Err(e) => {
                    self.warning = Some(format!("loop{n}: {e}"));
                    continue;
                }
            };
            let st = serde_json::from_value::<RunStatus>(v.clone()).ok();
            let state = st.as_ref().map(|st| (st.live_state(), st.is_live()));
            let cell = cell_of(n, &v, state, &tail(&decisions));
            let process = st.and_then(|st| st.process).filter(|_| !cell.finished);
            self.read.insert(
                n,
                Read {
                    files,
                    process,
                    cell,
                },
            );
            changed = true;
        }
        changed
    }

    /// Whether a loop process works one of the runs (they may change
    /// without an event: worth looking again now and then).
    pub fn any_live(&self) -> bool {
        self.read.values().any(|r| r.cell.live)
    }

    /// Every run read, by number.
    pub fn runs(&self) -> BTreeMap<u32, RunCell> {
        self.read
            .iter()
            .map(|(n, r)| (*n, r.cell.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(n: u32, state: &str, tasks: Value) -> RunCell {
        let v = json!({"state": state, "tasks": tasks, "finished_at": if state == "closed" { json!("t") } else { Value::Null }, "questions": []});
        cell_of(n, &v, None, "")
    }

    #[test]
    fn a_run_lists_its_tasks_under_way_parked_first_and_counts_the_rest() {
        let v = json!({"state": "running", "finished_at": null, "mode": "overnight",
            "tasks": [
                {"id": "TASK-1", "phase": "landed", "round": 1},
                {"id": "TASK-2", "phase": "implementing", "round": 2, "agent": "claude", "lane": "l3-impl-task-2"},
                {"id": "TASK-3", "phase": "parked", "round": 3, "agent": "codex", "lane": "l3-impl-task-3", "reason": "the gate stayed red"},
                {"id": "TASK-4", "phase": "held", "round": 0, "reason": "needs-owner"}],
            "questions": [{"task": "TASK-3", "question": "Which API?", "at": "x", "recommendation": "y", "overnight": true}]});
        let c = cell_of(3, &v, Some((RunState::Paused, true)), "");
        assert_eq!(c.state, "paused");
        assert!(c.live);
        assert_eq!((c.landed, c.held, c.total), (1, 1, 4));
        let ids: Vec<&str> = c.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["TASK-3", "TASK-2"]);
        assert_eq!(c.tasks[0].reason.as_deref(), Some("the gate stayed red"));
        assert_eq!(c.tasks[1].round, 2);
        assert_eq!(c.tasks[1].lane.as_deref(), Some("l3-impl-task-2"));
        assert_eq!(c.questions[0].question, "Which API?");
        assert_eq!(c.rank(), 0);
    }

    #[test]
    fn runs_that_need_a_human_come_first_and_old_closed_runs_are_left_out() {
        let mut all = BTreeMap::new();
        all.insert(1, run(1, "closed", json!([])));
        all.insert(2, run(2, "running", json!([])));
        all.insert(3, run(3, "paused", json!([])));
        all.insert(
            4,
            run(
                4,
                "running",
                json!([{"id": "T", "phase": "parked", "round": 1}]),
            ),
        );
        all.insert(5, run(5, "closed", json!([])));
        let (shown, left) = shown(&all);
        let ns: Vec<u32> = shown.iter().map(|r| r.n).collect();
        assert_eq!(ns, [4, 3, 2, 5]);
        assert_eq!(left, 1);
    }

    #[test]
    fn the_last_landing_is_read_from_the_decisions() {
        let d = "# Decisions: loop1\n\n- D1 2026-12-06T01:00:00Z start: x\n- D2 2026-12-06T01:02:00Z landing: landing 1: 1 landed of 1 in 1 gate run(s), head 0123456789abcdef\n- D3 2026-12-06T01:03:00Z control: pause: lunch\n";
        let l = last_landing(d).unwrap_or_default();
        assert!(
            l.ends_with("landing 1: 1 landed of 1 in 1 gate run(s), head 01234567"),
            "{l}"
        );
        assert_eq!(last_landing("- D1 2026-12-06T01:00:00Z start: x\n"), None);
    }
}
