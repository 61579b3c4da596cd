//! Stall classes (`LOOP.md`, "Stall classes"): each lane that is not
//! progressing says why — `stalled` (working with no output change for
//! `--stall-after`), `auth-dead` (a setup dialog), `parked` (a usage limit),
//! `needs-human` (a permission or a question), `unreachable` (its pane cannot
//! be reached). Nothing is killed on a short timer: a stalled lane is
//! recorded, and only past `--stall-kill-after` (off by default) interrupted,
//! once.

use crate::agent::{BlockedKind, State};
use crate::loopctl::ops::LaneObs;
use std::time::Duration;

/// Why a lane is not progressing.
pub fn class(obs: &LaneObs, quiet_for: Duration, stall_after: Duration) -> Option<&'static str> {
    if !obs.reachable {
        return Some("unreachable");
    }
    match (obs.state, obs.kind) {
        (State::Blocked, Some(BlockedKind::Setup)) => Some("auth-dead"),
        (State::Blocked, Some(BlockedKind::UsageLimit)) => Some("parked"),
        (State::Blocked, _) => Some("needs-human"),
        (State::Working, _) if quiet_for >= stall_after => Some("stalled"),
        _ => None,
    }
}

/// The glyphs agents animate at the head of their working row.
const SPINNER_GLYPHS: &[char] = &[
    '·', '✢', '✳', '✶', '✻', '✽', '*', '•', '◦', '⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏',
    '⠂', '⠐',
];

/// True for a row that only animates while the agent works: the spinner
/// row with its timer (`✻ Working… (12s · esc to interrupt)`, Codex's
/// `• Working (5s • esc to interrupt)`), or the hint under it.
pub fn is_spinner_row(row: &str) -> bool {
    let r = row.trim();
    if r.contains("esc to interrupt") {
        return true;
    }
    let mut chars = r.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let rest = chars.as_str().trim_start();
    let word = rest.split_whitespace().next().unwrap_or("");
    SPINNER_GLYPHS.contains(&first) && (word.ends_with('…') || word.ends_with("..."))
}

/// A hash of the screen that moves only with output: the spinner and
/// timer rows are left out, so an agent that only animates them does not
/// count as progressing.
pub fn progress_hash(rows: &[String]) -> u64 {
    let kept: Vec<&str> = rows
        .iter()
        .map(|r| r.trim_end())
        .filter(|r| !is_spinner_row(r))
        .collect();
    crate::paths::fnv1a64(kept.join("\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(state: &str, kind: Option<&str>) -> LaneObs {
        LaneObs {
            state: state.parse().unwrap_or(State::Unknown),
            kind: kind.and_then(|k| k.parse().ok()),
            reachable: true,
            ..Default::default()
        }
    }

    #[test]
    fn the_spinner_and_its_timer_are_not_output() {
        let frame = |spin: &str, secs: u32, out: &str| -> Vec<String> {
            vec![
                "● I will edit the file.".into(),
                out.into(),
                format!("{spin} Working… ({secs}s · esc to interrupt)"),
                "  esc to interrupt".into(),
                "❯ ".into(),
            ]
        };
        let a = progress_hash(&frame("✻", 3, ""));
        assert_eq!(
            a,
            progress_hash(&frame("✳", 9, "")),
            "only the spinner moved"
        );
        assert_ne!(a, progress_hash(&frame("✻", 3, "  ⎿  Wrote 3 lines")));
        assert!(is_spinner_row("• Working (5s • esc to interrupt)"));
        assert!(is_spinner_row("✶ Cogitating… (12s · ↑ 1.2k tokens)"));
        assert!(!is_spinner_row("• Edited src/main.rs"));
        assert!(!is_spinner_row("· a list item"));
    }

    #[test]
    fn each_class_from_its_observation() {
        let m15 = Duration::from_secs(900);
        let short = Duration::from_secs(30);
        assert_eq!(
            class(&obs("working", None), short, m15),
            None,
            "30 s quiet is not a stall"
        );
        assert_eq!(class(&obs("working", None), m15, m15), Some("stalled"));
        assert_eq!(
            class(&obs("blocked", Some("setup")), short, m15),
            Some("auth-dead")
        );
        assert_eq!(
            class(&obs("blocked", Some("usage_limit")), short, m15),
            Some("parked")
        );
        assert_eq!(
            class(&obs("blocked", Some("permission")), short, m15),
            Some("needs-human")
        );
        assert_eq!(
            class(&obs("blocked", Some("question")), short, m15),
            Some("needs-human")
        );
        assert_eq!(class(&obs("idle", None), m15, m15), None);
        let gone = LaneObs {
            reachable: false,
            ..obs("working", None)
        };
        assert_eq!(class(&gone, short, m15), Some("unreachable"));
    }
}
