//! `top`'s interaction state and its keys, as a pure function: a key and the
//! current view in, a command for the terminal loop out.

use super::state::RowState;
use super::view::{Row, View};
use crate::agent::State;
use crate::runstate::control::Control;
use std::collections::BTreeMap;

/// A key, independent of the terminal library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    Esc,
    Up,
    Down,
    Backspace,
    Tab,
    /// Ctrl-C.
    Interrupt,
}

/// What to confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Approve,
    Deny,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Approve => "approve",
            Verb::Deny => "deny",
        }
    }
}

/// What the footer is doing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Normal,
    /// Waiting for y/n before approving or denying.
    Confirm { verb: Verb, pane: String },
    /// Waiting for y/n before a control of a run (close-out).
    ConfirmRun { control: Control, run: u32 },
    /// Typing a prompt for a pane.
    Send { pane: String, text: String },
    /// Typing a filter.
    Filter,
}

/// What the terminal loop should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Only redraw.
    Redraw,
    Quit,
    Attach(String),
    Act(Verb, String),
    Send(String, String),
    /// Set a control on a run, as `drover loop control` does.
    Control(u32, Control),
}

/// The interaction state.
#[derive(Debug, Clone, Default)]
pub struct Ui {
    /// The selected row, by pane name (stable across re-sorting).
    pub selected: Option<String>,
    pub filter: String,
    pub mode: Mode,
    /// One line for the footer (the last action's outcome).
    pub message: Option<String>,
    /// Finished panes the operator has looked at: name → the since_ms seen.
    pub seen: BTreeMap<String, u64>,
    /// The run the run keys act on, by number (the first shown when unset
    /// or gone).
    pub run: Option<u32>,
}

/// The rows the filter lets through: a filter matches a pane's name, state
/// or state kind (substring).
pub fn visible<'a>(view: &'a View, filter: &str) -> Vec<&'a Row> {
    view.rows
        .iter()
        .filter(|r| {
            filter.is_empty()
                || r.pane.contains(filter)
                || r.state.as_str().contains(filter)
                || r.state_kind.is_some_and(|k| k.as_str().contains(filter))
        })
        .collect()
}

impl Ui {
    /// The selected row's index among the visible rows (the first when the
    /// selection is filtered out or gone).
    pub fn selected_index(&self, rows: &[&Row]) -> Option<usize> {
        if rows.is_empty() {
            return None;
        }
        Some(
            self.selected
                .as_ref()
                .and_then(|s| rows.iter().position(|r| &r.pane == s))
                .unwrap_or(0),
        )
    }

    /// The selected row's pane.
    pub fn selected_pane(&self, view: &View) -> Option<String> {
        let rows = visible(view, &self.filter);
        self.selected_index(&rows).map(|i| rows[i].pane.clone())
    }

    /// The run the run keys act on: the selected one, else the first shown.
    pub fn selected_run(&self, view: &View) -> Option<u32> {
        let shown = || view.runs.iter().map(|r| r.n);
        self.run
            .filter(|n| shown().any(|m| m == *n))
            .or_else(|| shown().next())
    }

    fn select(&mut self, row: &Row) {
        self.selected = Some(row.pane.clone());
        if row.state == RowState::Agent(State::Done) {
            self.seen.insert(row.pane.clone(), row.since_ms);
        }
    }

    /// Handle one key.
    pub fn on_key(&mut self, view: &View, key: Key) -> Command {
        if key == Key::Interrupt {
            return Command::Quit;
        }
        match std::mem::take(&mut self.mode) {
            Mode::Normal => self.normal(view, key),
            Mode::Confirm { verb, pane } => {
                if matches!(key, Key::Char('y') | Key::Char('Y')) {
                    return Command::Act(verb, pane);
                }
                self.message = Some(format!("{} cancelled", verb.as_str()));
                Command::Redraw
            }
            Mode::ConfirmRun { control, run } => {
                if matches!(key, Key::Char('y') | Key::Char('Y')) {
                    return Command::Control(run, control);
                }
                self.message = Some(format!("{} of loop{run} cancelled", control.as_str()));
                Command::Redraw
            }
            Mode::Send { pane, mut text } => match key {
                Key::Enter if !text.is_empty() => Command::Send(pane, text),
                Key::Esc | Key::Enter => {
                    self.message = Some("send cancelled".into());
                    Command::Redraw
                }
                Key::Backspace => {
                    text.pop();
                    self.mode = Mode::Send { pane, text };
                    Command::Redraw
                }
                Key::Char(c) => {
                    text.push(c);
                    self.mode = Mode::Send { pane, text };
                    Command::Redraw
                }
                _ => {
                    self.mode = Mode::Send { pane, text };
                    Command::Redraw
                }
            },
            Mode::Filter => {
                match key {
                    Key::Enter => {}
                    Key::Esc => self.filter.clear(),
                    Key::Backspace => {
                        self.filter.pop();
                        self.mode = Mode::Filter;
                    }
                    Key::Char(c) => {
                        self.filter.push(c);
                        self.mode = Mode::Filter;
                    }
                    _ => self.mode = Mode::Filter,
                }
                Command::Redraw
            }
        }
    }

    fn normal(&mut self, view: &View, key: Key) -> Command {
        let rows = visible(view, &self.filter);
        let cur = self.selected_index(&rows);
        let pane = cur.map(|i| rows[i].pane.clone());
        match key {
            Key::Char('q') => Command::Quit,
            Key::Down | Key::Char('j') => {
                if let Some(i) = cur {
                    self.select(rows[(i + 1).min(rows.len() - 1)]);
                }
                Command::Redraw
            }
            Key::Up | Key::Char('k') => {
                if let Some(i) = cur {
                    self.select(rows[i.saturating_sub(1)]);
                }
                Command::Redraw
            }
            Key::Char('n') => {
                let n = rows.len();
                let start = cur.map_or(0, |i| i + 1);
                match (0..n)
                    .map(|k| (start + k) % n)
                    .find(|&i| rows[i].attention.needs_human())
                {
                    Some(i) => self.select(rows[i]),
                    None => self.message = Some("nothing needs you".into()),
                }
                Command::Redraw
            }
            Key::Enter => match cur {
                Some(i) if rows[i].has_pane => {
                    self.select(rows[i]);
                    Command::Attach(rows[i].pane.clone())
                }
                Some(_) => {
                    self.message = Some("this lane has no pane to attach to".into());
                    Command::Redraw
                }
                None => Command::Redraw,
            },
            Key::Char(c @ ('a' | 'd')) => {
                if let Some(pane) = pane {
                    let verb = if c == 'a' { Verb::Approve } else { Verb::Deny };
                    self.mode = Mode::Confirm { verb, pane };
                }
                Command::Redraw
            }
            Key::Char('s') => {
                if let Some(pane) = pane {
                    self.mode = Mode::Send {
                        pane,
                        text: String::new(),
                    };
                }
                Command::Redraw
            }
            Key::Char('/') => {
                self.mode = Mode::Filter;
                Command::Redraw
            }
            Key::Char(c @ ('p' | 'r' | 'c')) => match self.selected_run(view) {
                None => {
                    self.message = Some("no loop run in this state dir".into());
                    Command::Redraw
                }
                Some(run) if c == 'p' => Command::Control(run, Control::Pause),
                Some(run) if c == 'r' => Command::Control(run, Control::Resume),
                Some(run) => {
                    self.mode = Mode::ConfirmRun {
                        control: Control::CloseOut,
                        run,
                    };
                    Command::Redraw
                }
            },
            Key::Tab => {
                let ns: Vec<u32> = view.runs.iter().map(|r| r.n).collect();
                if let Some(cur) = self.selected_run(view) {
                    let i = ns.iter().position(|n| *n == cur).unwrap_or(0);
                    self.run = ns.get((i + 1) % ns.len()).copied();
                }
                Command::Redraw
            }
            Key::Esc => {
                self.filter.clear();
                self.message = None;
                Command::Redraw
            }
            _ => Command::Redraw,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::view::{Attention, Inputs, build};
    use super::*;

    fn view() -> View {
        let pane = |n: &str, st: &str| super::super::view::test_pane(n, st, 5);
        build(&Inputs {
            panes: vec![pane("a", "idle"), pane("b", "blocked"), pane("c", "done")],
            ..Default::default()
        })
    }

    #[test]
    fn n_walks_the_rows_that_need_a_human_and_wraps() {
        let v = view();
        let mut ui = Ui::default();
        assert_eq!(ui.selected_pane(&v).as_deref(), Some("b"));
        ui.on_key(&v, Key::Char('n'));
        assert_eq!(ui.selected_pane(&v).as_deref(), Some("c"));
        assert_eq!(
            ui.seen.get("c"),
            Some(&5),
            "looking at a done pane marks it seen"
        );
        ui.on_key(&v, Key::Char('n'));
        assert_eq!(ui.selected_pane(&v).as_deref(), Some("b"));
        assert_eq!(v.rows[0].attention, Attention::Blocked);
    }

    #[test]
    fn approve_needs_a_yes() {
        let v = view();
        let mut ui = Ui::default();
        assert_eq!(ui.on_key(&v, Key::Char('a')), Command::Redraw);
        assert_eq!(ui.on_key(&v, Key::Char('x')), Command::Redraw);
        assert_eq!(ui.message.as_deref(), Some("approve cancelled"));
        ui.on_key(&v, Key::Char('d'));
        assert_eq!(
            ui.on_key(&v, Key::Char('y')),
            Command::Act(Verb::Deny, "b".into())
        );
    }

    #[test]
    fn send_and_filter_take_typed_text() {
        let v = view();
        let mut ui = Ui::default();
        ui.on_key(&v, Key::Char('s'));
        for c in "hi".chars() {
            ui.on_key(&v, Key::Char(c));
        }
        assert_eq!(
            ui.on_key(&v, Key::Enter),
            Command::Send("b".into(), "hi".into())
        );
        ui.on_key(&v, Key::Char('/'));
        ui.on_key(&v, Key::Char('i'));
        ui.on_key(&v, Key::Char('d'));
        ui.on_key(&v, Key::Enter);
        let rows = visible(&v, &ui.filter);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].pane, "a");
        assert_eq!(ui.on_key(&v, Key::Char('q')), Command::Quit);
    }

    #[test]
    fn run_keys_act_on_the_selected_run_and_close_out_needs_a_yes() {
        let mut v = view();
        let mut ui = Ui::default();
        assert_eq!(ui.on_key(&v, Key::Char('p')), Command::Redraw);
        assert_eq!(ui.message.as_deref(), Some("no loop run in this state dir"));
        let run = |n| crate::top::runs::RunCell {
            n,
            state: crate::runstate::RunState::Running,
            ..Default::default()
        };
        v.runs = vec![run(4), run(2)];
        assert_eq!(
            ui.on_key(&v, Key::Char('p')),
            Command::Control(4, Control::Pause)
        );
        ui.on_key(&v, Key::Tab);
        assert_eq!(ui.selected_run(&v), Some(2));
        assert_eq!(
            ui.on_key(&v, Key::Char('r')),
            Command::Control(2, Control::Resume)
        );
        assert_eq!(ui.on_key(&v, Key::Char('c')), Command::Redraw);
        assert_eq!(ui.on_key(&v, Key::Char('n')), Command::Redraw);
        assert_eq!(ui.message.as_deref(), Some("close-out of loop2 cancelled"));
        ui.on_key(&v, Key::Char('c'));
        assert_eq!(
            ui.on_key(&v, Key::Char('y')),
            Command::Control(2, Control::CloseOut)
        );
        ui.on_key(&v, Key::Tab);
        assert_eq!(ui.selected_run(&v), Some(4), "Tab wraps");
    }
}
