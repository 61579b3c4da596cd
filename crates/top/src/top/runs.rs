//! The loop's runs as `top` shows them: each run of the state dir with its
//! state (as `loop status` reads it: `interrupted` when its loop process is
//! gone), its tasks under way with phase, round, agent and lane, what is
//! parked and why, the questions waiting for the owner and the last
//! landing; the runs that need a human first. Built by a pure function
//! ([`cell_of`]) from `run.json` (read as the loop's [`RunStatus`], as
//! `loop status` reads it) and the tail of `DECISIONS.md`; [`RunsReader`]
//! reads a run's files again only when they changed, and a `run.json` no
//! run holds is a warning.

use crate::registry::Agent;
use crate::runstate::{Phase, RunState, RunStatus};
use crate::statedir::StateDir;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

/// How much of the end of `DECISIONS.md` is read for the last landing.
const DECISIONS_TAIL: u64 = 64 * 1024;

/// One task of a run that is not landed or held.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTask {
    pub id: String,
    /// Its title on the board.
    pub title: String,
    /// Implementing, reviewing, landing, parked or ready.
    pub phase: Phase,
    pub round: u32,
    pub agent: Option<Agent>,
    pub lane: Option<String>,
    /// Why it is parked (or why it is not moving).
    pub reason: Option<String>,
    /// Why its lane is not progressing (`stalled`, `needs-human`, …).
    pub stall: Option<String>,
}

impl Default for RunTask {
    /// A task not started.
    fn default() -> Self {
        RunTask {
            id: String::new(),
            title: String::new(),
            phase: Phase::Ready,
            round: 0,
            agent: None,
            lane: None,
            reason: None,
            stall: None,
        }
    }
}

impl RunTask {
    /// Whether it waits for a human: parked, or its lane needs one.
    pub fn needs_human(&self) -> bool {
        self.phase == Phase::Parked || self.stall.is_some()
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
#[derive(Debug, Clone, PartialEq)]
pub struct RunCell {
    pub n: u32,
    /// The state as an operator reads it (`loop status`'s word).
    pub state: RunState,
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
    /// What its tasks' lanes reported using, summed (`not reported` when
    /// none did); `None` before any task started.
    pub usage: Option<String>,
}

impl Default for RunCell {
    /// A run that runs and has nothing yet.
    fn default() -> Self {
        RunCell {
            n: 0,
            state: RunState::Running,
            live: false,
            finished: false,
            mode: String::new(),
            integration_branch: String::new(),
            tasks: Vec::new(),
            landed: 0,
            held: 0,
            total: 0,
            questions: Vec::new(),
            last_landing: None,
            stopped_by: None,
            usage: None,
        }
    }
}

impl RunCell {
    /// Its parked tasks.
    pub fn parked(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.phase == Phase::Parked)
            .count()
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
        } else if self.state == RunState::Running {
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

/// A text the loop wrote, unless empty.
fn said(s: Option<&str>) -> Option<String> {
    s.filter(|x| !x.is_empty()).map(str::to_string)
}

/// A run from its `run.json`, the state `loop status` gives it and whether
/// a loop process works it ([`RunStatus::live_state`],
/// [`RunStatus::is_live`]), and the tail of its `DECISIONS.md` (pure).
pub fn cell_of(
    n: u32,
    st: &RunStatus,
    (state, live): (RunState, bool),
    decisions: &str,
) -> RunCell {
    let mut tasks: Vec<RunTask> = st
        .tasks
        .iter()
        .filter(|t| !matches!(t.kind(), Phase::Landed | Phase::Held))
        .map(|t| RunTask {
            id: said(Some(&t.id)).unwrap_or_else(|| "?".into()),
            title: t.title.clone(),
            phase: t.kind(),
            round: t.round(),
            agent: t.agent,
            lane: said(t.lane()),
            reason: said(t.note().reason.as_deref()),
            stall: said(t.stall.as_deref()),
        })
        .collect();
    // Needs a human first, then as the board orders them.
    tasks.sort_by_key(|t| !t.needs_human());
    let questions = st
        .questions
        .iter()
        .map(|q| RunQuestion {
            task: said(Some(&q.task)).unwrap_or_else(|| "?".into()),
            question: q.question.clone(),
            at: q.at.clone(),
        })
        .collect();
    let count = |p: Phase| st.tasks.iter().filter(|t| t.kind() == p).count();
    let started = st.tasks.iter().filter(|t| t.work().is_some()).count();
    let usage =
        (started > 0).then(|| crate::runstate::usage::RunUsage::of(&st.tasks).line(started));
    RunCell {
        n,
        finished: st.finished_at.is_some(),
        live,
        state,
        mode: st.mode.clone(),
        integration_branch: st.integration_branch.clone(),
        landed: count(Phase::Landed),
        held: count(Phase::Held),
        total: st.tasks.len(),
        tasks,
        questions,
        last_landing: last_landing(decisions),
        stopped_by: said(st.stopped_by.as_deref()),
        usage,
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
    process: Option<crate::runstate::LoopProcess>,
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
    pub fn update(&mut self, state: &StateDir) -> bool {
        self.warning = None;
        let ns = crate::runstate::status::runs(state);
        let before = self.read.len();
        self.read.retain(|n, _| ns.contains(n));
        let mut changed = self.read.len() != before;
        for n in ns {
            let run_json = state.run_file(n);
            let decisions = state.run_dir(n).join("DECISIONS.md");
            let files = (stamp_of(&run_json), stamp_of(&decisions));
            if let Some(r) = self.read.get(&n)
                && r.files == files
                && r.cell.live == r.process.is_some_and(|p| p.runs())
            {
                continue;
            }
            let st = match crate::runstate::status::read(state, n) {
                Ok(Some(st)) => st,
                // A run dir without its file yet: nothing to show.
                Ok(None) => continue,
                Err(e) => {
                    self.warning = Some(format!("loop{n}: {e}"));
                    continue;
                }
            };
            let cell = cell_of(n, &st, (st.live_state(), st.is_live()), &tail(&decisions));
            let process = st.process.filter(|_| !cell.finished);
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
    use serde_json::{Value, json};

    /// A `run.json` as the loop writes it, with these fields over the rest.
    fn status(over: Value) -> RunStatus {
        let mut doc = json!({
            "schema_version": 1, "run": 1, "state": "running", "repo": "/r",
            "charter": "/r/CHARTER.md", "charter_sha256": "", "base": "main",
            "base_sha": "", "integration_branch": "drover/integration/loop1",
            "integration_worktree": "/r/wt", "pool": 1, "lanes_cap": 2,
            "landings": 0, "started_at": "2026-12-05T00:00:00Z",
            "finished_at": null, "closeout": null, "tasks": [], "notes": [],
            "stopped_by": null, "iterations": 0,
        });
        if let (Some(d), Some(o)) = (doc.as_object_mut(), over.as_object()) {
            d.extend(o.clone());
        }
        serde_json::from_value(doc).unwrap_or_else(|e| panic!("run.json: {e}"))
    }

    /// A task record with these fields over a Ready task's.
    fn task(over: Value) -> Value {
        let mut t = json!({
            "id": "T", "title": "", "phase": "ready", "tier": null, "agent": null,
            "reviewer": null, "round": 0, "lane": null, "job": null,
            "worktree": null, "branch": null, "candidate_sha256": null,
            "sha": null, "reason": null, "resume": null, "limit_parks": 0,
            "stall": null,
        });
        if let (Some(d), Some(o)) = (t.as_object_mut(), over.as_object()) {
            d.extend(o.clone());
        }
        t
    }

    fn run(n: u32, state: RunState, tasks: Value) -> RunCell {
        let finished = if state == RunState::Closed {
            json!("2026-12-05T01:00:00Z")
        } else {
            Value::Null
        };
        let st = status(json!({"state": state, "tasks": tasks, "finished_at": finished}));
        cell_of(n, &st, (st.state, false), "")
    }

    #[test]
    fn a_run_sums_its_tasks_usage_or_says_it_was_not_reported() {
        let st = status(json!({"state": "running", "tasks": [
            task(json!({"id": "TASK-1", "phase": "landed", "round": 1, "sha": "abc", "lane": "l1",
                "usage": {"input_tokens": 1600, "output_tokens": 340, "cost_usd": 0.06}})),
            task(json!({"id": "TASK-2", "phase": "implementing", "round": 1, "lane": "l2"})),
            task(json!({"id": "TASK-3", "phase": "ready"}))]}));
        let c = cell_of(1, &st, (RunState::Running, true), "");
        assert_eq!(
            c.usage.as_deref(),
            Some("1600 in · 340 out · $0.06 (1 of 2 task(s) reported, 1 a cost)")
        );
        let st = status(json!({"state": "running", "tasks": [
            task(json!({"id": "TASK-2", "phase": "implementing", "round": 1, "lane": "l2"}))]}));
        let c = cell_of(1, &st, (RunState::Running, true), "");
        assert_eq!(c.usage.as_deref(), Some("not reported"));
        let st = status(
            json!({"state": "running", "tasks": [task(json!({"id": "TASK-3", "phase": "ready"}))]}),
        );
        assert_eq!(cell_of(1, &st, (RunState::Running, true), "").usage, None);
    }

    #[test]
    fn a_run_lists_its_tasks_under_way_parked_first_and_counts_the_rest() {
        let st = status(json!({"state": "running", "mode": "overnight",
            "tasks": [
                task(json!({"id": "TASK-1", "phase": "landed", "round": 1, "sha": "abc"})),
                task(json!({"id": "TASK-2", "phase": "implementing", "round": 2, "agent": "claude", "lane": "l3-impl-task-2"})),
                task(json!({"id": "TASK-3", "phase": "parked", "round": 3, "agent": "codex", "lane": "l3-impl-task-3", "reason": "the gate stayed red"})),
                task(json!({"id": "TASK-4", "phase": "held", "round": 0, "reason": "needs-owner"}))],
            "questions": [{"task": "TASK-3", "question": "Which API?", "at": "x", "recommendation": "y", "overnight": true}]}));
        let c = cell_of(3, &st, (RunState::Paused, true), "");
        assert_eq!(c.state, RunState::Paused);
        assert!(c.live);
        assert_eq!(c.mode, "overnight");
        assert_eq!((c.landed, c.held, c.total), (1, 1, 4));
        let ids: Vec<&str> = c.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["TASK-3", "TASK-2"]);
        assert_eq!(c.tasks[0].reason.as_deref(), Some("the gate stayed red"));
        assert_eq!(c.tasks[0].agent, Some(Agent::Codex));
        assert_eq!(c.tasks[1].round, 2);
        assert_eq!(c.tasks[1].phase, Phase::Implementing);
        assert_eq!(c.tasks[1].lane.as_deref(), Some("l3-impl-task-2"));
        assert_eq!(c.questions[0].question, "Which API?");
        assert_eq!(c.rank(), 0);
    }

    #[test]
    fn runs_that_need_a_human_come_first_and_old_closed_runs_are_left_out() {
        let mut all = BTreeMap::new();
        all.insert(1, run(1, RunState::Closed, json!([])));
        all.insert(2, run(2, RunState::Running, json!([])));
        all.insert(3, run(3, RunState::Paused, json!([])));
        all.insert(
            4,
            run(
                4,
                RunState::Running,
                json!([task(json!({"id": "T", "phase": "parked", "round": 1}))]),
            ),
        );
        all.insert(5, run(5, RunState::Closed, json!([])));
        let (shown, left) = shown(&all);
        let ns: Vec<u32> = shown.iter().map(|r| r.n).collect();
        assert_eq!(ns, [4, 3, 2, 5]);
        assert_eq!(left, 1);
    }

    /// The reader reads what the loop wrote: a run dir's `run.json`, its
    /// state as `loop status` says it (a run whose loop process is gone is
    /// `interrupted`), and a file that is not a run's is a warning.
    #[test]
    fn the_reader_reads_the_runs_of_a_state_dir() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let state = StateDir::new(tmp.path());
        for n in [1, 2, 3] {
            std::fs::create_dir_all(state.run_dir(n)).unwrap_or_else(|e| panic!("{e}"));
        }
        let st = status(json!({"run": 1, "state": "paused",
            "tasks": [task(json!({"id": "T-1", "phase": "parked", "round": 1, "reason": "red"}))],
            "process": {"pid": 1, "start_time": 0}}));
        crate::store::write_json_atomic(&state.run_file(1), &st).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(state.run_file(2), r#"{"state": "running"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut r = RunsReader::default();
        assert!(r.update(state));
        let runs = r.runs();
        assert_eq!(runs.keys().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(runs[&1].state, RunState::Interrupted);
        assert!(!runs[&1].live);
        assert_eq!(runs[&1].tasks[0].reason.as_deref(), Some("red"));
        let w = r.warning.clone().unwrap_or_default();
        assert!(w.starts_with("loop2: "), "{w}");
        assert!(!r.update(state), "nothing changed since");
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
