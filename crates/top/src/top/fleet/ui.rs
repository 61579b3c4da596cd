//! `top --fleet`'s keys, as a pure function like `top`'s: move, next that
//! needs you, filter, quit. Remote panes are view only: the keys that act
//! on a pane in `top` say where to act instead. A loop run of this host
//! (the coordinator of a fleet run) takes `top`'s run keys: `p`, `r`, `c`
//! (after a `y`), `Tab`.

use super::model::{FleetRow, FleetView};
use crate::runstate::control::Control;
use crate::top::ui::Key;
use std::collections::BTreeMap;

/// What the terminal loop should do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetCommand {
    Redraw,
    Quit,
    /// Set a control on a run of this host, as `drover loop control` does.
    Control(u32, Control),
}

/// The interaction state.
#[derive(Debug, Clone, Default)]
pub struct FleetUi {
    /// The selected row: (host, pane).
    pub selected: Option<(String, String)>,
    pub filter: String,
    /// Typing the filter.
    pub filtering: bool,
    /// One line for the footer.
    pub message: Option<String>,
    /// Done panes selected in this run: (host, pane) → the since_ms seen.
    pub seen: BTreeMap<(String, String), u64>,
    /// The run the run keys act on (the first shown when unset or gone).
    pub run: Option<u32>,
    /// A close-out waiting for its `y`.
    pub confirm: Option<(Control, u32)>,
}

/// The rows the filter lets through: a substring of the host, the pane's
/// name, its state or state kind.
pub fn visible<'a>(view: &'a FleetView, filter: &str) -> Vec<&'a FleetRow> {
    view.rows
        .iter()
        .filter(|r| {
            filter.is_empty()
                || r.host.contains(filter)
                || r.pane.contains(filter)
                || r.cell.state.as_str().contains(filter)
                || r.cell
                    .state_kind
                    .as_deref()
                    .is_some_and(|k| k.contains(filter))
        })
        .collect()
}

impl FleetUi {
    /// The selected row's index among `rows` (the first when it is gone).
    pub fn selected_index(&self, rows: &[&FleetRow]) -> Option<usize> {
        if rows.is_empty() {
            return None;
        }
        Some(
            self.selected
                .as_ref()
                .and_then(|s| rows.iter().position(|r| r.host == s.0 && r.pane == s.1))
                .unwrap_or(0),
        )
    }

    fn select(&mut self, row: &FleetRow) {
        self.selected = Some(row.key());
        if row.cell.state == crate::agent::State::Done {
            self.seen.insert(row.key(), row.cell.since_ms);
        }
    }

    /// The run the run keys act on.
    pub fn selected_run(&self, view: &FleetView) -> Option<u32> {
        let shown = || view.runs.iter().map(|r| r.n);
        self.run
            .filter(|n| shown().any(|m| m == *n))
            .or_else(|| shown().next())
    }

    /// Handle one key.
    pub fn on_key(&mut self, view: &FleetView, key: Key) -> FleetCommand {
        if key == Key::Interrupt {
            return FleetCommand::Quit;
        }
        if let Some((c, run)) = self.confirm.take() {
            if matches!(key, Key::Char('y' | 'Y')) {
                return FleetCommand::Control(run, c);
            }
            self.message = Some(format!("{} of loop{run} cancelled", c.as_str()));
            return FleetCommand::Redraw;
        }
        if self.filtering {
            match key {
                Key::Enter => self.filtering = false,
                Key::Esc => {
                    self.filter.clear();
                    self.filtering = false;
                }
                Key::Backspace => {
                    self.filter.pop();
                }
                Key::Char(c) => self.filter.push(c),
                _ => {}
            }
            return FleetCommand::Redraw;
        }
        let rows = visible(view, &self.filter);
        let cur = self.selected_index(&rows);
        match key {
            Key::Char('q') => return FleetCommand::Quit,
            Key::Down | Key::Char('j') => {
                if let Some(i) = cur {
                    self.select(rows[(i + 1).min(rows.len() - 1)]);
                }
            }
            Key::Up | Key::Char('k') => {
                if let Some(i) = cur {
                    self.select(rows[i.saturating_sub(1)]);
                }
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
            }
            Key::Enter | Key::Char('a' | 'd' | 's') => {
                self.message = Some(match cur.map(|i| rows[i]) {
                    Some(r) => format!(
                        "{} runs on {}: act on it with `drover top` there (top --fleet only watches)",
                        r.pane, r.host
                    ),
                    None => "top --fleet only watches".into(),
                });
            }
            Key::Char('/') => self.filtering = true,
            Key::Char(c @ ('p' | 'r' | 'c')) => match self.selected_run(view) {
                None => self.message = Some("no loop run in this host's state dir".into()),
                Some(run) if c == 'p' => return FleetCommand::Control(run, Control::Pause),
                Some(run) if c == 'r' => return FleetCommand::Control(run, Control::Resume),
                Some(run) => self.confirm = Some((Control::CloseOut, run)),
            },
            Key::Tab => {
                let ns: Vec<u32> = view.runs.iter().map(|r| r.n).collect();
                if let Some(cur) = self.selected_run(view) {
                    let i = ns.iter().position(|n| *n == cur).unwrap_or(0);
                    self.run = ns.get((i + 1) % ns.len()).copied();
                }
            }
            Key::Esc => {
                self.filter.clear();
                self.message = None;
            }
            _ => {}
        }
        FleetCommand::Redraw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::fleet::model::PaneCell;
    use crate::top::view::Attention;

    fn row(host: &str, pane: &str, state: &str, attention: Attention) -> FleetRow {
        FleetRow {
            host: host.into(),
            pane: pane.into(),
            cell: PaneCell {
                state: state.parse().unwrap_or(crate::agent::State::Unknown),
                since_ms: 7,
                ..Default::default()
            },
            attention,
        }
    }

    fn view() -> FleetView {
        FleetView {
            rows: vec![
                row("h2", "a", "blocked", Attention::Blocked),
                row("h1", "a", "done", Attention::Done),
                row("h1", "b", "idle", Attention::None),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn the_same_pane_name_on_two_hosts_is_two_rows_to_select() {
        let v = view();
        let mut ui = FleetUi::default();
        ui.on_key(&v, Key::Down);
        assert_eq!(ui.selected, Some(("h1".into(), "a".into())));
        assert_eq!(ui.seen.get(&("h1".into(), "a".into())), Some(&7));
        ui.on_key(&v, Key::Char('n'));
        assert_eq!(ui.selected, Some(("h2".into(), "a".into())));
    }

    #[test]
    fn acting_keys_say_where_to_act_and_the_filter_takes_a_host() {
        let v = view();
        let mut ui = FleetUi::default();
        assert_eq!(ui.on_key(&v, Key::Char('a')), FleetCommand::Redraw);
        assert!(ui.message.as_deref().unwrap().contains("a runs on h2"));
        for k in [Key::Char('/'), Key::Char('h'), Key::Char('1'), Key::Enter] {
            ui.on_key(&v, k);
        }
        let rows = visible(&v, &ui.filter);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.host == "h1"));
        assert_eq!(ui.on_key(&v, Key::Char('q')), FleetCommand::Quit);
    }

    #[test]
    fn a_run_of_this_host_takes_the_run_keys() {
        let mut v = view();
        let mut ui = FleetUi::default();
        ui.on_key(&v, Key::Char('p'));
        assert_eq!(
            ui.message.as_deref(),
            Some("no loop run in this host's state dir")
        );
        v.runs = vec![crate::top::runs::RunCell {
            n: 2,
            ..Default::default()
        }];
        assert_eq!(
            ui.on_key(&v, Key::Char('p')),
            FleetCommand::Control(2, Control::Pause)
        );
        assert_eq!(ui.on_key(&v, Key::Char('c')), FleetCommand::Redraw);
        assert_eq!(
            ui.on_key(&v, Key::Char('y')),
            FleetCommand::Control(2, Control::CloseOut)
        );
    }
}
