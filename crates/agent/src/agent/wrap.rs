//! Rows an agent word-wrapped, joined back into the lines it wrote.
//!
//! Claude Code and Codex wrap their own text at word boundaries to the
//! pane's width: a footer or a limit sentence that is one row at 120
//! columns is two at 94 (`… · Esc to` / `cancel`). A rule reads lines, so
//! a screen is read at any width an agent pane may have (80 and up).

use std::borrow::Cow;
use unicode_width::UnicodeWidthStr;

/// How far short of the pane's width an agent may wrap its text: Claude
/// Code's prose box ends up to 8 columns before the edge (its dialogs 2).
pub const WRAP_MARGIN: usize = 8;

fn indent(row: &str) -> usize {
    row.len() - row.trim_start().len()
}

/// Box drawing and block elements (`│`, `╮`, `▔`, `█`).
fn is_box(c: char) -> bool {
    ('\u{2500}'..='\u{259f}').contains(&c)
}

/// Can `row` go on in the next row? Only text does: not a row of
/// decoration (`▔▔▔`), of columns or right-aligned hints (a run of spaces
/// inside it), or one closed by a box side.
fn may_continue(row: &str) -> bool {
    let body = row.trim();
    body.chars().any(char::is_alphanumeric) && !body.contains("   ") && !body.ends_with(is_box)
}

/// A numbered option or list item: `2. Yes, and don't ask again`.
fn is_numbered(row: &str) -> bool {
    let t = row.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && t[digits..].starts_with(". ")
}

/// Does `next` read as the rest of a sentence: it starts with a word, not
/// a prompt (`❯`, `›`), a bullet (`•`, `■`, `⎿`, `-`), a numbered option,
/// a hint arrow or a box, and is not indented further than a hanging indent.
fn continues(prev: &str, next: &str) -> bool {
    let Some(first) = next.trim_start().chars().next() else {
        return false;
    };
    let wordlike =
        first.is_alphanumeric() || (first.is_ascii_punctuation() && !"-*+>|#".contains(first));
    wordlike && !is_numbered(next) && indent(next) <= indent(prev) + 4
}

/// The rows as lines: a row more than half full whose next row's first
/// word would not have fit on it (within [`WRAP_MARGIN`] of `cols`) is
/// joined with that row by one space. Blank rows and rules stay as they
/// are; with `cols` 0 (a saved screen of unknown width) every row does.
pub fn logical_lines<'a>(rows: &[&'a str], cols: usize) -> Vec<Cow<'a, str>> {
    if cols == 0 {
        return rows.iter().map(|&r| Cow::Borrowed(r)).collect();
    }
    let mut out: Vec<Cow<'a, str>> = Vec::with_capacity(rows.len());
    // The last row of the line being built, while that line may go on.
    let mut tail: Option<&'a str> = None;
    for &row in rows {
        let joined = match (tail, out.last_mut()) {
            (Some(prev), Some(line)) if continues(prev, row) => {
                let word = row.split_whitespace().next().unwrap_or("");
                let edge = cols.saturating_sub(WRAP_MARGIN);
                // A wrapped row is well filled: a short row followed by a
                // long word (a path, a URL) is two lines.
                if prev.width() * 2 > cols && prev.width() + 1 + word.width() > edge {
                    let line = line.to_mut();
                    line.push(' ');
                    line.push_str(row.trim_start());
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        if !joined {
            out.push(Cow::Borrowed(row));
        }
        tail = (may_continue(row) && !is_rule(row)).then_some(row);
    }
    out
}

/// A row made only of box-drawing rules (`────`, `╌╌╌╌`) and spaces.
pub fn is_rule(row: &str) -> bool {
    let mut any = false;
    for c in row.chars() {
        match c {
            '─' | '━' | '╌' | '┄' | '═' => any = true,
            c if c.is_whitespace() => {}
            _ => return false,
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(rows: &[&str], cols: usize) -> Vec<String> {
        logical_lines(rows, cols)
            .into_iter()
            .map(|c| c.into_owned())
            .collect()
    }

    /// Regression: at 94 columns Claude's auto-mode footer ends
    /// `… · Esc to` / `cancel`, and the dialog read `unknown`.
    #[test]
    fn a_footer_wrapped_at_the_edge_is_one_line() {
        let rows = [
            "  Enter to stay in auto mode · shift+Tab to leave for accept edits mode and stop · Esc to",
            "  cancel",
        ];
        assert_eq!(
            lines(&rows, 94),
            [
                "  Enter to stay in auto mode · shift+Tab to leave for accept edits mode and stop · Esc to cancel"
            ]
        );
    }

    /// Regression: Codex's limit sentence at 94 columns is three rows with
    /// no hanging indent; the rule read the last two and missed `■ You…`.
    #[test]
    fn a_sentence_wrapped_twice_is_one_line() {
        let rows = [
            "■ You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit",
            "https://chatgpt.com/settings/usage to purchase more credits or try again at Dec 6th, 2026 6:53",
            "AM.",
            "                                                          ⚠ 5h limit: only <1% left · /status",
            "› Ask Codex to do anything",
        ];
        let l = lines(&rows, 94);
        assert_eq!(l.len(), 3, "{l:#?}");
        assert!(l[0].starts_with("■ You’ve") && l[0].ends_with("6:53 AM."));
        assert!(
            l[2].starts_with("› Ask"),
            "a prompt is never joined: {l:#?}"
        );
    }

    #[test]
    fn short_rows_prompts_bullets_hints_and_boxes_stay_apart() {
        let full = "x".repeat(90);
        let boxed = format!("│ {} │", "y".repeat(88));
        let rows = [
            "  Do you want to proceed?",
            "  1. Yes",
            full.as_str(),
            "  2. Yes, and don't ask again",
            "❯ 1. Yes",
            full.as_str(),
            "- a list item",
            full.as_str(),
            "",
            "next paragraph",
            boxed.as_str(),
            "│ the box goes on │",
            "left                                            right hint that reaches the edge ok",
            "word",
            "────────────────────────────────────────────────────────────────────────────────────────────",
            "after the rule",
        ];
        let l = lines(&rows, 94);
        assert_eq!(l.len(), rows.len(), "nothing joined: {l:#?}");
    }

    #[test]
    fn an_unknown_width_joins_nothing() {
        let rows = ["a".repeat(90), "word".to_string()];
        let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
        assert_eq!(lines(&rows, 0).len(), 2);
    }
}
