//! Turning a pane's screen into an observation: gather the signals the pane
//! and screen hold, hand them to the agent classifier.

use crate::agent::{AgentKind, Classifier, Observation, Signals};
use crate::pane::ScreenMeta;
use crate::screen::Screen;
use std::time::Duration;

/// After a burst, re-classify once each of these quiet times is reached
/// (quiet-based rules: a shell's idle, the settling of disagreeing signals).
/// One timer per burst, cancelled by new output — not a polling loop.
pub fn settle_rechecks() -> [Duration; 2] {
    let slack = 20;
    [
        Duration::from_millis(crate::agent::classify::SHELL_QUIET_MS + slack),
        Duration::from_millis(crate::agent::SETTLE_MS + slack),
    ]
}

/// At spawn: the settle rechecks, and one when a shell pane that drew
/// nothing stops reading `starting` ([`crate::agent::classify::SHELL_EMPTY_MS`]).
pub fn spawn_rechecks() -> [Duration; 3] {
    let [a, b] = settle_rechecks();
    [
        a,
        b,
        Duration::from_millis(crate::agent::classify::SHELL_EMPTY_MS + 20),
    ]
}

/// The agent kind a pane was created with (unknown names read as `shell`).
pub fn kind_of(agent: &str) -> AgentKind {
    agent.parse().unwrap_or(AgentKind::Shell)
}

/// Classify a pane from its screen's rows (rendered once by the caller, who
/// also hashes them), its hooks and meta.
pub fn observe(
    classifier: &Classifier,
    rows: &[String],
    screen: &Screen,
    meta: &ScreenMeta,
) -> Observation {
    let hooks = screen.hooks();
    let kind = kind_of(&meta.agent);
    // Who holds the terminal decides a shell pane; other agents are one
    // process group, so it is only read for shells.
    let foreground_job = match (kind, &meta.exit) {
        (AgentKind::Shell, None) => crate::pane::foreground_job(meta.pid),
        _ => None,
    };
    // Only asked of a shell pane with nothing drawn that holds its terminal.
    let shell_child = kind == AgentKind::Shell
        && meta.exit.is_none()
        && foreground_job == Some(false)
        && rows.iter().all(|r| r.is_empty())
        && crate::pane::shell_child_in_foreground(meta.pid);
    let signals = Signals {
        rows,
        cols: screen.size().0,
        title: hooks.title(),
        osc7501: hooks.osc7501(),
        exited: meta.exit.as_ref().map(|e| e.code),
        quiet_ms: meta.quiet.as_millis() as u64,
        since_spawn_ms: meta.since_spawn.as_millis() as u64,
        foreground_job,
        shell_child,
    };
    classifier.classify(kind, &signals)
}
