//! The runner and the board it works, which the owner (or the `backlog`
//! CLI) may edit while it runs: tasks are found by id, never by the path
//! they had when the run read them (`backlog task edit` renames a file on a
//! title change); a file the board leaves out (unreadable, malformed, an id
//! that collides) is reported once — a `board` entry in `DECISIONS.md` —
//! and listed in the close-out, and never stops the run.

use crate::loopctl::LoopError;
use crate::loopctl::board::charter::Charter;
use crate::loopctl::board::{self, ready};
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::cause::TaskCause;
use crate::loopctl::run::runner::Run;
use crate::loopctl::run::runner::{Phase, Runner, TaskState};
use crate::loopctl::run::task::Note;

impl<O: LaneOps> Runner<'_, O> {
    /// Record each problem of the board not recorded before in this process.
    pub(in crate::loopctl) fn report_board(&mut self) -> Result<(), LoopError> {
        for p in self.run.board.view.problems.clone() {
            let line = p.describe();
            if self.run.board.reported.insert(line.clone()) {
                self.run.decide("board", &format!("left out: {line}"))?;
                self.say(&format!("board: left out: {line}"));
            }
        }
        Ok(())
    }

    /// Read the board again; when its directory cannot be listed the board
    /// read before is kept (reported once).
    pub(in crate::loopctl) fn reread_board(&mut self) -> Result<(), LoopError> {
        match board::load(&self.run.cfg.board_dir) {
            Ok(b) => {
                self.run.board.view = b;
                self.report_board()
            }
            Err(e) => {
                let line = format!("cannot be read, the board read before is kept: {e}");
                if self.run.board.reported.insert(line.clone()) {
                    self.run.decide("board", &line)?;
                    self.say(&format!("board: {line}"));
                }
                Ok(())
            }
        }
    }

    /// Mark a landed task Done in its file, found by id on the board as it
    /// is now. A task no longer on the board, or a file that cannot be
    /// written, is recorded (a note and a `board` entry): the landing stands.
    pub(in crate::loopctl) fn mark_done(&mut self, id: &str) -> Result<(), LoopError> {
        self.reread_board()?;
        let why = match self.run.board.view.task(id).cloned() {
            Some(t) => match board::write_done(&t) {
                Ok(()) => return Ok(()),
                Err(e) => format!("could not be marked Done: {e}"),
            },
            None => "is no longer on the board; not marked Done".to_string(),
        };
        let line = format!("{id} landed but {why}");
        self.run.decide("board", &line)?;
        self.say(&format!("board: {line}"));
        self.run.status.notes.push(line);
        Ok(())
    }

    /// After a landing, tasks whose dependencies are now Done become Ready.
    pub(in crate::loopctl) fn refresh_board(&mut self) -> Result<(), LoopError> {
        self.reread_board()?;
        let split = ready::split(&self.run.board.view, &self.run.cfg.charter);
        for t in self.run.status.tasks.iter_mut() {
            if t.kind() == Phase::Held && split.ready.contains(&t.id) {
                t.phase.enter_ready();
                t.note_mut().reason = None;
                t.note_mut().cause = None;
            }
        }
        Ok(())
    }
}

/// A new run's tasks: every task of the board not Done, Ready or Held
/// with the reason (pure).
pub(in crate::loopctl) fn initial_tasks(board: &board::Board, charter: &Charter) -> Vec<TaskState> {
    let split = ready::split(board, charter);
    board
        .tasks
        .iter()
        .filter(|t| !t.is_done())
        .map(|t| {
            let held = split.hold.iter().find(|h| h.id == t.id);
            let note = held.map(|h| Note {
                reason: Some(h.reason.clone()),
                resume: None,
                cause: Some(TaskCause::Held(h.cause)),
            });
            TaskState::new(&t.id, &t.title, note)
        })
        .collect()
}

/// `1 task to work, of 3 on the board (2 Done)`: what the run takes and
/// what it leaves out.
pub(in crate::loopctl) fn on_the_board(work: usize, board: &board::Board) -> String {
    let tasks = |n: usize| {
        if n == 1 {
            "1 task".to_string()
        } else {
            format!("{n} tasks")
        }
    };
    let total = board.tasks.len();
    let done = board.tasks.iter().filter(|t| t.is_done()).count();
    let mut out = vec![];
    if done > 0 {
        out.push(format!("{done} Done"));
    }
    let other = total.saturating_sub(work + done);
    if other > 0 {
        out.push(format!("{other} left out by the charter or its labels"));
    }
    if !board.problems.is_empty() {
        out.push(format!(
            "{} file(s) left out: see above",
            board.problems.len()
        ));
    }
    let why = if out.is_empty() {
        String::new()
    } else {
        format!(" ({})", out.join(", "))
    };
    format!("{} to work, of {total} on the board{why}", tasks(work))
}

impl Run {
    /// The board's problems as close-out rows: (file, reason, resume).
    pub(in crate::loopctl) fn board_rows(&self) -> Vec<(String, String, String)> {
        self.board
            .view
            .problems
            .iter()
            .map(|p| {
                let d = p.describe();
                let (file, reason) = d.split_once(": ").unwrap_or((&d, ""));
                let resume = if p.id.is_some() {
                    "give each task its own id, then rerun"
                } else {
                    "fix the file, then rerun"
                };
                (
                    file.to_string(),
                    format!("left out of the board: {reason}"),
                    resume.to_string(),
                )
            })
            .collect()
    }
}
