//! Frames of the sim agent, imitating the real TUIs' screens (docs/agents.md table and
//! `tests/fixtures/screens/`): rows of text plus the bytes that paint them.

use super::Profile;
use super::model::{Mode, Model};
use std::time::Instant;

const CLAUDE_SPINNER: [&str; 6] = ["·", "✢", "✳", "✶", "✻", "✽"];
const TITLE_SPINNER: [&str; 2] = ["⠂", "⠐"];
const NBSP: char = '\u{a0}';

/// What one frame shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Exactly `rows` rows, each at most `cols` characters.
    pub rows: Vec<String>,
    /// The OSC 0 title (Claude profile).
    pub title: Option<String>,
}

fn rule(cols: usize) -> String {
    "─".repeat(cols)
}

fn cwd_name(m: &Model) -> String {
    m.cwd()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| ".".to_string())
}

/// Build the frame for the model at `now`; `tick` animates spinners.
pub fn frame(m: &Model, now: Instant, tick: u64, cols: u16, rows: u16) -> Frame {
    let (cols, rows) = (usize::from(cols.max(20)), usize::from(rows.max(8)));
    let (lines, title) = match m.profile {
        Profile::Claude => claude(m, now, tick, cols, rows),
        Profile::Codex => (codex(m, now, tick, rows), None),
    };
    let rows = lines
        .into_iter()
        .map(|l| l.chars().take(cols).collect::<String>())
        .collect();
    Frame { rows, title }
}

fn composer_lines(mark: &str, text: &str, placeholder: &str) -> Vec<String> {
    if text.is_empty() {
        return vec![format!("{mark}{placeholder}")];
    }
    let mut out = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        if i == 0 {
            out.push(format!("{mark}{l}"));
        } else {
            out.push(format!("  {l}"));
        }
    }
    out
}

fn claude(
    m: &Model,
    now: Instant,
    tick: u64,
    cols: usize,
    rows: usize,
) -> (Vec<String>, Option<String>) {
    let mut lines: Vec<String> = vec![
        " ▐▛███▜▌   Claude Code (drover sim-agent)".to_string(),
        "▝▜█████▛▘  sim profile: claude".to_string(),
        format!("  ▘▘ ▝▝    {}", cwd_name(m)),
        String::new(),
    ];
    if matches!(m.mode, Mode::Starting { .. }) {
        return (vec![String::new(); rows], None);
    }
    lines.extend(m.transcript.iter().cloned());
    let mut title = "✳ Claude Code".to_string();
    match &m.mode {
        Mode::Permission { cmd } => {
            lines.push(String::new());
            lines.push(rule(cols));
            lines.extend([
                " Bash command".to_string(),
                String::new(),
                format!("   {cmd}"),
                String::new(),
                " Do you want to proceed?".to_string(),
                " ❯ 1. Yes".to_string(),
                "   2. Yes, and don't ask again for this command".to_string(),
                "   3. No".to_string(),
                String::new(),
                " Esc to cancel · Tab to amend".to_string(),
            ]);
        }
        Mode::LimitMenu { labels } => {
            lines.push(String::new());
            lines.push(" What do you want to do?".to_string());
            for (i, l) in labels.iter().enumerate() {
                let cursor = if i == 0 { "❯" } else { " " };
                lines.push(format!(" {cursor} {}. {l}", i + 1));
            }
            lines.push(String::new());
            lines.push(" Enter to confirm · Esc to cancel".to_string());
        }
        mode => {
            let working = matches!(mode, Mode::Working { .. });
            if working {
                let g = CLAUDE_SPINNER[(tick as usize) % CLAUDE_SPINNER.len()];
                lines.push(String::new());
                lines.push(format!(
                    "{g} Working… ({}s · esc to interrupt)",
                    m.working_secs(now)
                ));
                title = format!("{} Claude Code", TITLE_SPINNER[(tick as usize) % 2]);
            }
            lines.push(String::new());
            lines.push(rule(cols));
            lines.extend(composer_lines(&format!("❯{NBSP}"), &m.composer, ""));
            lines.push(rule(cols));
            lines.push(if working {
                "  esc to interrupt".to_string()
            } else if m.composer.is_empty() {
                "  ? for shortcuts".to_string()
            } else {
                String::new()
            });
        }
    }
    // Inline like the real one: content flows from the top; older rows scroll off.
    let skip = lines.len().saturating_sub(rows);
    let mut out: Vec<String> = lines.into_iter().skip(skip).collect();
    out.resize(rows, String::new());
    (out, Some(title))
}

fn codex(m: &Model, now: Instant, tick: u64, rows: usize) -> Vec<String> {
    if matches!(m.mode, Mode::Starting { .. }) {
        return vec![String::new(); rows];
    }
    let mut top: Vec<String> = vec![
        String::new(),
        "  >_ drover sim-agent (codex profile)".to_string(),
        format!("     {}", cwd_name(m)),
        String::new(),
    ];
    top.extend(m.transcript.iter().cloned());
    let bottom: Vec<String> = match &m.mode {
        Mode::Permission { cmd } => vec![
            String::new(),
            "  Would you like to run the following command?".to_string(),
            String::new(),
            "  Reason: the sim-agent script asked for approval".to_string(),
            String::new(),
            format!("  $ {cmd}"),
            String::new(),
            "› 1. Yes, proceed (y)".to_string(),
            "  2. Yes, and don't ask again for this command (p)".to_string(),
            "  3. No, and tell Codex what to do differently (esc)".to_string(),
            String::new(),
            "  Press enter to confirm or esc to cancel".to_string(),
        ],
        // Codex's popup at a limit, in place of the composer (the cursor on
        // the first row, as on the real one).
        Mode::LimitMenu { labels } => {
            let mut b = vec![
                String::new(),
                "  Approaching rate limits".to_string(),
                "  Switch to gpt-6-luna for lower credit usage?".to_string(),
                String::new(),
            ];
            for (i, l) in labels.iter().enumerate() {
                let cursor = if i == 0 { "›" } else { " " };
                b.push(format!("{cursor} {}. {l}", i + 1));
            }
            b.push(String::new());
            b.push("  enter select · esc back".to_string());
            b
        }
        mode => {
            let mut b = Vec::new();
            if matches!(mode, Mode::Working { .. }) {
                let bullet = if tick.is_multiple_of(2) { "•" } else { "◦" };
                b.push(format!(
                    "{bullet} Working ({}s • esc to interrupt)",
                    m.working_secs(now)
                ));
            }
            if m.limited() {
                // Right-aligned, like the real status row under a limit.
                b.push(format!(
                    "{}⚠ 5h limit: only <1% left · /status",
                    " ".repeat(66)
                ));
            }
            b.push(String::new());
            b.extend(composer_lines(
                "› ",
                &m.composer,
                "Ask Codex to do anything",
            ));
            b.push(String::new());
            b.push(format!("  sim-model default · {}", cwd_name(m)));
            b.push(if m.composer.is_empty() {
                "  ? for shortcuts".to_string()
            } else {
                String::new()
            });
            b
        }
    };
    // The transcript fills the space above the pinned bottom block.
    let room = rows.saturating_sub(bottom.len());
    let skip = top.len().saturating_sub(room);
    let mut out: Vec<String> = top.into_iter().skip(skip).collect();
    out.resize(room, String::new());
    out.extend(bottom);
    let skip = out.len().saturating_sub(rows);
    out.into_iter().skip(skip).collect()
}

/// The bytes that paint `f` over `prev` (rows that did not change are skipped).
/// The Codex profile wraps the frame in a synchronized-output block (mode 2026)
/// and reports its OSC 7501 state after it, terminated by ST.
pub fn paint(profile: Profile, f: &Frame, prev: Option<&Frame>, osc: Option<&str>) -> Vec<u8> {
    let mut out = String::new();
    if profile == Profile::Codex {
        out.push_str("\x1b[?2026h");
    }
    for (i, row) in f.rows.iter().enumerate() {
        if prev.and_then(|p| p.rows.get(i)) == Some(row) {
            continue;
        }
        out.push_str(&format!("\x1b[{};1H\x1b[2K{}", i + 1, sanitize(row)));
    }
    if profile == Profile::Codex {
        out.push_str("\x1b[?2026l");
    }
    if let Some(t) = &f.title
        && prev.and_then(|p| p.title.as_ref()) != Some(t)
    {
        out.push_str(&format!("\x1b]0;{}\x07", sanitize(t)));
    }
    if let Some(p) = osc {
        out.push_str(&format!("\x1b]7501;{p}\x1b\\"));
    }
    out.into_bytes()
}

/// Control characters in user text must not reach the terminal as escapes.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::input::Key;
    use super::super::script::Script;
    use super::*;
    use crate::agent::{AgentKind, Classifier, Signals, State};
    use std::path::PathBuf;

    fn classify(f: &Frame) -> State {
        let c = Classifier::builtin().unwrap();
        let mut s = Signals::screen_only(&f.rows);
        s.title = f.title.as_deref();
        c.classify(AgentKind::Sim, &s).state
    }

    #[test]
    fn frames_classify_through_a_turn_for_both_profiles() {
        let script = Script::parse(
            "[[turn]]\nsteps = [ { work = 10 }, { ask = \"touch a\" }, \"finish\" ]\n",
            "t",
        )
        .unwrap();
        for p in [Profile::Claude, Profile::Codex] {
            let t0 = Instant::now();
            let mut m = Model::new(p, script.clone(), PathBuf::from("/tmp/x"), t0);
            let f = |m: &Model| frame(m, t0, 0, 120, 40);
            assert_eq!(classify(&f(&m)), State::Idle, "{p:?}");
            m.key(Key::Paste("hello there".into()), t0);
            assert_eq!(classify(&f(&m)), State::Idle, "{p:?} typed");
            m.key(Key::Enter, t0);
            let fr = f(&m);
            assert_eq!(classify(&fr), State::Working, "{p:?}: {:#?}", fr.rows);
            assert!(fr.rows.iter().any(|r| r.contains("hello there")));
            m.tick(t0 + std::time::Duration::from_millis(10));
            let fr = f(&m);
            assert_eq!(classify(&fr), State::Blocked, "{p:?}: {:#?}", fr.rows);
            m.key(Key::Enter, t0);
            let fr = f(&m);
            assert_eq!(classify(&fr), State::Done, "{p:?}: {:#?}", fr.rows);
            assert_eq!(fr.rows.len(), 40);
        }
    }

    /// Guards the Codex limit screens: the sim's limit (with and without the
    /// model popup) classifies like the real ones (`blocked`, `usage_limit`,
    /// the reset time read), the popup is a dialog whose safe row is chosen
    /// by its label, and the limit line goes when the limit resets.
    #[test]
    fn codex_limit_screens_classify_like_the_real_ones() {
        let c = Classifier::builtin().unwrap();
        let menu = r#", menu = ["Switch to gpt-6-luna", "Keep current model", "Keep current model (never show again)"]"#;
        for popup in [false, true] {
            let m = if popup { menu } else { "" };
            let text = format!(
                "[[turn]]\nsteps = [ {{ work = 10 }}, {{ limit = {{ ms = 1000, resets = \"12:48 PM\"{m} }} }} ]\n"
            );
            let script = Script::parse(&text, "t").unwrap();
            let t0 = Instant::now();
            let mut m = Model::new(Profile::Codex, script, PathBuf::from("/tmp/x"), t0);
            m.key(Key::Paste("go".into()), t0);
            m.key(Key::Enter, t0);
            m.tick(t0 + std::time::Duration::from_millis(10));
            let f = frame(&m, t0, 0, 120, 40);
            let o = c.classify(AgentKind::Sim, &Signals::screen_only(&f.rows));
            assert_eq!(
                (o.state, o.kind),
                (
                    State::Blocked,
                    Some(crate::agent::state::BlockedKind::UsageLimit)
                ),
                "popup {popup}: {:#?}",
                f.rows
            );
            assert!(o.resets_at.is_some(), "the reset time is read: {o:?}");
            assert!(
                f.rows
                    .iter()
                    .any(|r| r.ends_with("or try again at 12:48 PM.")),
                "{:#?}",
                f.rows
            );
            let d = crate::agent::dialog::parse(AgentKind::Sim, &f.rows, 0);
            if popup {
                let d = d.expect("the popup is a dialog");
                assert_eq!(d.kind, crate::agent::dialog::DialogKind::CodexLimitPopup);
                assert_eq!(d.choices.len(), 3);
                m.key(Key::Char('2'), t0);
                assert_eq!(m.exit, None, "keeping the model is safe");
                assert_eq!(m.mode, Mode::Idle);
            } else {
                assert!(d.is_none());
            }
            m.tick(t0 + std::time::Duration::from_millis(1010));
            let f = frame(&m, t0, 0, 120, 40);
            assert!(
                !f.rows.iter().any(|r| r.contains("usage limit")),
                "{:#?}",
                f.rows
            );
        }
    }

    #[test]
    fn paint_skips_unchanged_rows_and_wraps_codex_frames() {
        let f1 = Frame {
            rows: vec!["a".into(), "b".into()],
            title: None,
        };
        let f2 = Frame {
            rows: vec!["a".into(), "c\x1b]52;x".into()],
            title: None,
        };
        let b = String::from_utf8(paint(
            Profile::Codex,
            &f2,
            Some(&f1),
            Some("state=idle:app=codex"),
        ))
        .unwrap();
        assert!(b.starts_with("\x1b[?2026h"));
        assert!(!b.contains("\x1b[1;1H"));
        assert!(b.contains("\x1b[2;1H\x1b[2Kc?]52;x"));
        assert!(b.ends_with("\x1b[?2026l\x1b]7501;state=idle:app=codex\x1b\\"));
    }
}
