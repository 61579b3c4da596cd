//! The dialogs a human answers, read from the screen, and the keys that give
//! an answer (docs/agents.md "Answering dialogs"). Pure: screen rows in, a
//! [`Dialog`] and a key plan out; the supervisor sends the keys and confirms
//! that the pane left the dialog.
//!
//! Forms: Claude's numbered list (`❯ 1. Yes` … `3. No`), Claude 2.1.332's
//! unnumbered `❯ No` / `Yes` (reached with Up/Down, then Enter), its auto-mode
//! dialog (Enter stays in auto mode and asks again; Esc cancels), a question's
//! options, Claude's usage-limit menu (rows in varying order: always picked by
//! label); Codex's approval (`y` approves, Esc denies) and its limit popup.

use super::state::AgentKind;
use super::wrap;
use regex::Regex;
use std::borrow::Cow;
use std::sync::OnceLock;

/// Rows from the bottom searched for a dialog.
pub const DIALOG_ROWS: usize = 24;

/// What kind of dialog a screen shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogKind {
    /// Claude: `Do you want to …?` with options (numbered or not).
    ClaudePermission,
    /// Claude 2.1.332: `Auto mode can't check actions in this session`.
    ClaudeAutoMode,
    /// Claude: an `AskUserQuestion` (`☐ header`, `Enter to select`).
    ClaudeQuestion,
    /// Claude: `What do you want to do?` at a usage limit.
    ClaudeLimitMenu,
    /// Codex: `Would you like to …?`.
    CodexApproval,
    /// Codex: the model-switch popup under a usage limit.
    CodexLimitPopup,
}

impl DialogKind {
    /// The name used in JSON and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            DialogKind::ClaudePermission => "permission",
            DialogKind::ClaudeAutoMode => "auto_mode",
            DialogKind::ClaudeQuestion => "question",
            DialogKind::ClaudeLimitMenu => "limit_menu",
            DialogKind::CodexApproval => "permission",
            DialogKind::CodexLimitPopup => "limit_menu",
        }
    }
}

/// One option row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Its number when the list is numbered.
    pub number: Option<u32>,
    /// Its text, without number or cursor.
    pub label: String,
    /// The cursor (`❯`, `›`) is on it.
    pub selected: bool,
}

/// A dialog on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialog {
    /// Which one.
    pub kind: DialogKind,
    /// Its question row (`Do you want to create a.txt?`), to tell two apart.
    pub title: String,
    /// The options, top to bottom.
    pub choices: Vec<Choice>,
}

/// What to do with a dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Allow the tool call.
    Approve,
    /// Refuse it.
    Deny,
    /// Pick an option by number.
    Number(u32),
    /// Pick an option by its label (case-insensitive; a unique prefix is enough).
    Label(String),
}

/// Why an action does not fit the dialog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DialogError {
    /// No dialog that the action fits is on screen.
    #[error("{0}")]
    NotFitting(String),
}

/// The keys that answer: first `nav` (then the cursor must be on `target`),
/// then `confirm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Keys that move the cursor (Up/Down), possibly none.
    pub nav: Vec<String>,
    /// The label the cursor must be on before `confirm`.
    pub target: Option<String>,
    /// The keys that give the answer.
    pub confirm: Vec<String>,
}

fn re(cell: &'static OnceLock<Option<Regex>>, p: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(p).ok()).as_ref()
}

/// An option row: optional cursor, optional number, label.
fn choice(row: &str, cursor: char) -> Option<Choice> {
    let t = row.trim_start();
    let (selected, rest) = match t.strip_prefix(cursor) {
        Some(r) => (true, r.trim_start()),
        None => (false, t),
    };
    static NUM: OnceLock<Option<Regex>> = OnceLock::new();
    let num = re(&NUM, r"^(\d{1,2})\.\s+(\S.*)$")?;
    if let Some(c) = num.captures(rest) {
        return Some(Choice {
            number: c[1].parse().ok(),
            label: c[2].trim().to_string(),
            selected,
        });
    }
    None
}

/// The bottom non-blank lines, the rows the agent word-wrapped to a pane
/// `cols` wide (0: unknown, none) joined again (`super::wrap`).
fn bottom(rows: &[String], cols: usize) -> Vec<Cow<'_, str>> {
    let rows: Vec<&str> = rows.iter().map(|r| r.trim_end()).collect();
    let mut lines = wrap::logical_lines(&rows, cols);
    lines.retain(|r| !r.trim().is_empty());
    let from = lines.len().saturating_sub(DIALOG_ROWS);
    lines.split_off(from)
}

/// Numbered options below the row matching `title` (a question: all below).
fn numbered(rows: &[&str], from: usize, cursor: char) -> Vec<Choice> {
    rows[from..]
        .iter()
        .filter_map(|r| choice(r, cursor))
        .collect()
}

/// Claude 2.1.332's unnumbered `❯ No` / `Yes` rows under the title.
fn unnumbered(rows: &[&str], from: usize) -> Vec<Choice> {
    rows[from + 1..]
        .iter()
        .map(|r| r.trim())
        .take_while(|r| !r.starts_with("Esc to cancel"))
        .filter_map(|r| {
            let (selected, label) = match r.strip_prefix('❯') {
                Some(l) => (true, l.trim()),
                None => (false, r),
            };
            matches!(label, "Yes" | "No").then(|| Choice {
                number: None,
                label: label.to_string(),
                selected,
            })
        })
        .collect()
}

/// The dialog the screen (`cols` wide; 0: unknown) shows, if any (bottom
/// rows only: a dialog quoted in the transcript above is not one).
pub fn parse(agent: AgentKind, rows: &[String], cols: usize) -> Option<Dialog> {
    let lines = bottom(rows, cols);
    let rows: Vec<&str> = lines.iter().map(|l| &**l).collect();
    let last = *rows.last()?;
    let last = last.trim();
    let find = |pred: &dyn Fn(&str) -> bool| rows.iter().rposition(|r| pred(r.trim()));
    let claude = matches!(agent, AgentKind::Claude | AgentKind::Sim);
    let codex = matches!(agent, AgentKind::Codex | AgentKind::Sim);
    if claude && last.starts_with("Esc to cancel") {
        let at = find(&|r| r.starts_with("Do you want to") && r.ends_with('?'))?;
        let mut choices = numbered(&rows, at, '❯');
        if choices.is_empty() {
            choices = unnumbered(&rows, at);
        }
        return (!choices.is_empty()).then(|| Dialog {
            kind: DialogKind::ClaudePermission,
            title: rows[at].trim().to_string(),
            choices,
        });
    }
    if claude && last.starts_with("Enter to stay in auto mode") {
        let at = find(&|r| r.starts_with("Auto mode can't check actions"))?;
        return Some(Dialog {
            kind: DialogKind::ClaudeAutoMode,
            title: rows[at].trim().to_string(),
            choices: vec![],
        });
    }
    if claude && last.starts_with("Enter to select") {
        let at = find(&|r| r.starts_with('☐') || r.starts_with("← ☐"))?;
        let choices = numbered(&rows, at, '❯');
        let title = rows
            .get(at + 1)
            .map(|r| r.trim().to_string())
            .unwrap_or_default();
        return (!choices.is_empty()).then_some(Dialog {
            kind: DialogKind::ClaudeQuestion,
            title,
            choices,
        });
    }
    if claude && last.starts_with("Enter to confirm") {
        let at = find(&|r| r.starts_with("What do you want to do?"))?;
        let choices = numbered(&rows, at, '❯');
        return (!choices.is_empty()).then(|| Dialog {
            kind: DialogKind::ClaudeLimitMenu,
            title: rows[at].trim().to_string(),
            choices,
        });
    }
    if codex && last.starts_with("Press enter to confirm or esc to cancel") {
        let at = find(&|r| r.starts_with("Would you like to") && r.ends_with('?'))?;
        let choices = numbered(&rows, at, '›');
        return Some(Dialog {
            kind: DialogKind::CodexApproval,
            title: rows[at].trim().to_string(),
            choices,
        });
    }
    if codex && last.starts_with("enter select · esc back") {
        rows.iter()
            .rposition(|r| r.starts_with("■ You") && r.contains("usage limit"))?;
        let at = find(&|r| r.starts_with("Approaching rate limits")).unwrap_or(0);
        let choices = numbered(&rows, at, '›');
        return (!choices.is_empty()).then(|| Dialog {
            kind: DialogKind::CodexLimitPopup,
            title: rows[at].trim().to_string(),
            choices,
        });
    }
    None
}

fn by_label<'a>(d: &'a Dialog, label: &str) -> Result<&'a Choice, DialogError> {
    let want = label.trim().to_lowercase();
    let exact: Vec<&Choice> = d
        .choices
        .iter()
        .filter(|c| c.label.to_lowercase() == want)
        .collect();
    let found: Vec<&Choice> = if exact.is_empty() {
        d.choices
            .iter()
            .filter(|c| c.label.to_lowercase().starts_with(&want))
            .collect()
    } else {
        exact
    };
    match found.as_slice() {
        [c] => Ok(c),
        [] => Err(DialogError::NotFitting(format!(
            "no option {label:?} in the {} dialog ({})",
            d.kind.as_str(),
            options(d)
        ))),
        _ => Err(DialogError::NotFitting(format!(
            "{label:?} fits several options of the {} dialog ({}); give more of the label",
            d.kind.as_str(),
            options(d)
        ))),
    }
}

fn options(d: &Dialog) -> String {
    d.choices
        .iter()
        .map(|c| match c.number {
            Some(n) => format!("{n}. {}", c.label),
            None => c.label.clone(),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Keys that put the cursor on `c` and confirm it.
fn pick(d: &Dialog, c: &Choice) -> Plan {
    if let Some(n) = c.number {
        // A digit picks a numbered row at once, wherever the cursor is.
        return Plan {
            nav: vec![],
            target: None,
            confirm: vec![n.to_string()],
        };
    }
    let at = d.choices.iter().position(|x| x == c).unwrap_or(0);
    let cur = d.choices.iter().position(|x| x.selected).unwrap_or(0);
    let key = if at > cur { "Down" } else { "Up" };
    Plan {
        nav: vec![key.to_string(); at.abs_diff(cur)],
        target: Some(c.label.clone()),
        confirm: vec!["Enter".to_string()],
    }
}

/// The keys that give `action` to `d`, or why it does not fit.
pub fn plan(d: &Dialog, action: &Action) -> Result<Plan, DialogError> {
    let keys = |k: &[&str]| Plan {
        nav: vec![],
        target: None,
        confirm: k.iter().map(|s| s.to_string()).collect(),
    };
    let not = |what: &str| {
        Err(DialogError::NotFitting(format!(
            "the pane shows a {} dialog, which {what} does not answer; use `drover answer` with one of: {}",
            d.kind.as_str(),
            options(d)
        )))
    };
    match (d.kind, action) {
        (DialogKind::ClaudePermission, Action::Approve) => {
            let yes = d
                .choices
                .iter()
                .find(|c| c.label == "Yes" || c.label.starts_with("Yes,") && c.number == Some(1))
                .ok_or_else(|| DialogError::NotFitting(format!("no Yes in {}", options(d))))?;
            Ok(pick(d, yes))
        }
        (DialogKind::ClaudePermission | DialogKind::ClaudeAutoMode, Action::Deny) => {
            Ok(keys(&["Esc"]))
        }
        // Stay in auto mode: the action is then asked for again (`❯ No / Yes`).
        (DialogKind::ClaudeAutoMode, Action::Approve) => Ok(keys(&["Enter"])),
        (DialogKind::CodexApproval, Action::Approve) => Ok(keys(&["y"])),
        (DialogKind::CodexApproval, Action::Deny) => Ok(keys(&["Esc"])),
        (DialogKind::ClaudeAutoMode, _) => not("a numbered answer"),
        (_, Action::Approve) => not("approve"),
        (_, Action::Deny) => not("deny"),
        // The limit menu's order varies: a number could pick the wrong row.
        (DialogKind::ClaudeLimitMenu, Action::Number(n)) => Err(DialogError::NotFitting(format!(
            "the usage-limit menu's rows change order; answer by label, not {n} ({})",
            options(d)
        ))),
        (_, Action::Number(n)) => {
            let c = d
                .choices
                .iter()
                .find(|c| c.number == Some(*n))
                .or_else(|| {
                    // Unnumbered rows: N counts from the top.
                    let i = usize::try_from(*n).ok()?.checked_sub(1)?;
                    d.choices.get(i).filter(|c| c.number.is_none())
                })
                .ok_or_else(|| {
                    DialogError::NotFitting(format!("no option {n} ({})", options(d)))
                })?;
            Ok(pick(d, c))
        }
        (_, Action::Label(l)) => Ok(pick(d, by_label(d, l)?)),
    }
}

/// The cursor's row label, if the dialog shows one.
pub fn selected(d: &Dialog) -> Option<&str> {
    d.choices
        .iter()
        .find(|c| c.selected)
        .map(|c| c.label.as_str())
}

#[cfg(test)]
mod tests;
