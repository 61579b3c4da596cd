//! Fusing the screen's observation with what the agent's own signals add up
//! to (docs/agents.md, "Fusing the screen with the agents' signals").
//!
//! The rules are data: [`RULES`], a table of (name, pure decision), tried in
//! order, the first that decides wins. The screen keeps the last word on
//! what it alone can see (an exit, a dialog's kind and options: what
//! `answer` acts on); the signals decide what the screen cannot see or gets
//! wrong (a turn still open over a quiet screen, a turn that ended while a
//! spinner is still drawn, a permission prompt the screen rules miss). With
//! no signals the screen's observation is the answer, untouched.
//!
//! When the screen and the signals give different states, the pane follows
//! the rule and the [`Disagreement`] is kept; once it has held for
//! [`DISAGREE_BOUND_MS`] it is reported, once per episode (the supervisor
//! publishes `signal.disagree`: the drift canary).

use super::Ledger;
use super::view::fold;
use crate::proto::fuse::{Disagreement, EndHow, Mark, SignalView};
use crate::proto::signal::{LimitWindow, TurnError};
use crate::proto::state::{BlockedKind, Observation, State};

/// How long the screen and the signals may disagree before it is reported
/// (`signal.disagree`): longer than any redraw lag between a hook and the
/// frame that shows the same thing (a spinner after `Stop`, a dialog after
/// `PermissionRequest`).
pub const DISAGREE_BOUND_MS: u64 = 3_000;

/// A dialog the screen showed up to this long before a permission latch
/// was set counts as that latch's dialog: a `Notification` hook may arrive
/// after the dialog is drawn.
pub const LATCH_SCREEN_SLACK_MS: u64 = 1_000;

/// What the fusion remembers of the screen between observations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScreenMemo {
    /// The screen's last state, as labelled (`working`, `blocked:permission`).
    pub label: String,
    /// Since when the screen says so (ms since the epoch).
    pub since_ms: u64,
    /// The last time the screen showed a permission or question dialog.
    pub dialog_seen_ms: Option<u64>,
    /// Since when the screen shows a turn interrupted (or a tool call denied)
    /// on screen (a `*.interrupted` rule), while it does.
    pub interrupted_since_ms: Option<u64>,
    /// The disagreement open at the last fusion, if any.
    pub disagree: Option<Disagreement>,
}

/// What one fusion rule looks at.
pub struct Input<'a> {
    pub screen: &'a Observation,
    pub view: &'a SignalView,
    pub memo: &'a ScreenMemo,
    pub now_ms: u64,
}

/// A rule's decision.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The screen's observation stands (with `resets_at` replaced when given).
    Screen { resets_at: Option<(Mark, String)> },
    /// The signals decide.
    Signals {
        state: State,
        kind: Option<BlockedKind>,
        resets_at: Option<String>,
        /// The signal that decided, and what it was.
        mark: Mark,
        what: String,
    },
}

/// One fusion rule: a name (`fuse:<name>` in the evidence) and a pure decision.
pub struct Rule {
    pub name: &'static str,
    pub decide: fn(&Input) -> Option<Verdict>,
}

/// The rules, in order; the first that decides wins. `screen` always does.
pub const RULES: &[Rule] = &[
    Rule {
        name: "exited",
        decide: exited,
    },
    Rule {
        name: "screen_limit",
        decide: screen_limit,
    },
    Rule {
        name: "screen_dialog",
        decide: screen_dialog,
    },
    Rule {
        name: "usage_limit",
        decide: usage_limit,
    },
    Rule {
        name: "permission_latch",
        decide: permission_latch,
    },
    Rule {
        name: "turn_ended",
        decide: turn_ended,
    },
    Rule {
        name: "turn_aborted",
        decide: turn_aborted,
    },
    Rule {
        name: "screen_interrupted",
        decide: screen_interrupted,
    },
    Rule {
        name: "tool_running",
        decide: tool_running,
    },
    Rule {
        name: "turn_open",
        decide: turn_open,
    },
    Rule {
        name: "screen",
        decide: screen,
    },
];

/// The outcome of one fusion.
#[derive(Clone, Debug, PartialEq)]
pub struct Fused {
    /// The pane's state: `.source` says who decided, the evidence names the
    /// rule first (`fuse:turn_open`) unless the screen alone decided.
    pub observation: Observation,
    /// The rule that decided.
    pub rule: &'static str,
    /// The screen and the signals give different states.
    pub disagreement: Option<Disagreement>,
}

/// Fuse the screen's observation with the signals' view.
pub fn fuse(screen_obs: &Observation, view: &SignalView, memo: &ScreenMemo, now_ms: u64) -> Fused {
    let input = Input {
        screen: screen_obs,
        view,
        memo,
        now_ms,
    };
    let (rule, verdict) = RULES
        .iter()
        .find_map(|r| (r.decide)(&input).map(|v| (r.name, v)))
        .unwrap_or(("screen", Verdict::Screen { resets_at: None }));
    let observation = apply(screen_obs, rule, verdict);
    let disagreement = signals_say(&input).and_then(|(state, kind)| {
        let signals = label(state, kind);
        (!compatible(screen_obs, state, kind)).then(|| {
            let screen = screen_obs.label();
            let since_ms = memo
                .disagree
                .as_ref()
                .filter(|d| d.screen == screen && d.signals == signals)
                .map_or(now_ms, |d| d.since_ms);
            Disagreement {
                screen,
                signals,
                since_ms,
            }
        })
    });
    Fused {
        observation,
        rule,
        disagreement,
    }
}

fn apply(screen_obs: &Observation, rule: &str, verdict: Verdict) -> Observation {
    match verdict {
        Verdict::Screen { resets_at: None } => screen_obs.clone(),
        Verdict::Screen {
            resets_at: Some((mark, t)),
        } => {
            let mut o = screen_obs.clone();
            o.evidence.retain(|e| !e.starts_with("resets_at:"));
            o.evidence.insert(0, format!("fuse:{rule}"));
            o.evidence.push(format!("resets_at:{t}"));
            o.evidence.push(format!("{}:limits", mark.source));
            o.resets_at = Some(t);
            o.source = mark.source;
            o
        }
        Verdict::Signals {
            state,
            kind,
            resets_at,
            mark,
            what,
        } => {
            let mut evidence = vec![
                format!("fuse:{rule}"),
                format!("{}:{what}", mark.source),
                format!("screen:{}", screen_obs.label()),
            ];
            if let Some(t) = &resets_at {
                evidence.push(format!("resets_at:{t}"));
            }
            evidence.extend(screen_obs.evidence.iter().cloned());
            Observation {
                state,
                kind,
                exit_code: None,
                evidence,
                resets_at,
                source: mark.source,
            }
        }
    }
}

fn label(state: State, kind: Option<BlockedKind>) -> String {
    let mut o = Observation::new(state, Vec::new());
    o.kind = kind;
    o.label()
}

/// Whether the screen's state and the signals' state say the same thing:
/// equal; both ready (idle and done); a dialog on screen within an open
/// turn; or the process gone (its last signals are history).
fn compatible(screen_obs: &Observation, state: State, kind: Option<BlockedKind>) -> bool {
    let ready = |s: State| matches!(s, State::Idle | State::Done);
    (screen_obs.state == state && (state != State::Blocked || screen_obs.kind == kind))
        || (ready(screen_obs.state) && ready(state))
        || (screen_obs.state == State::Blocked && state == State::Working)
        || screen_obs.state == State::Exited
}

/// What the signals alone say, when they say anything.
fn signals_say(i: &Input) -> Option<(State, Option<BlockedKind>)> {
    let v = i.view;
    if let Some(end) = ended(v) {
        return match (end.how, end.error) {
            (EndHow::Failed, Some(TurnError::RateLimit)) => {
                Some((State::Blocked, Some(BlockedKind::UsageLimit)))
            }
            (EndHow::Ended, _) => Some((State::Done, None)),
            (EndHow::Aborted, _) => Some((State::Idle, None)),
            _ => None,
        };
    }
    if let Some(l) = latch_held(i) {
        return Some((State::Blocked, Some(l)));
    }
    if interrupted_on_screen(i) {
        return Some((State::Idle, None));
    }
    (v.turn_open.is_some() || v.tool.is_some()).then_some((State::Working, None))
}

/// Whether the screen drew the open turn's interruption (Esc, C-c, a tool
/// call denied on screen): no hook fires for it (tests/fixtures/signals), so
/// the screen's `*.interrupted` rule is what ends the turn. Only a marker
/// first drawn after the turn's last signal counts: one left on screen from
/// an earlier turn does not end a turn whose prompt just came in.
fn interrupted_on_screen(i: &Input) -> bool {
    let Some(since) = i.memo.interrupted_since_ms else {
        return false;
    };
    let v = i.view;
    let last = v
        .turn_open
        .map(|m| m.at_ms)
        .into_iter()
        .chain(v.tool.as_ref().map(|t| t.at.at_ms))
        .max();
    last.is_some_and(|at| since >= at)
}

/// Whether the screen's observation came from an `*.interrupted` rule.
pub fn shows_interrupted(o: &Observation) -> bool {
    o.evidence
        .iter()
        .any(|e| e.starts_with("rule:") && e.ends_with(".interrupted"))
}

/// The last turn's end, when no prompt came after it.
fn ended(v: &SignalView) -> Option<&crate::proto::fuse::TurnEnd> {
    v.turn_end.as_ref().filter(|_| v.turn_open.is_none())
}

/// The latch's kind while it holds: not answered on screen (a dialog shown
/// since it was set, and gone now).
fn latch_held(i: &Input) -> Option<BlockedKind> {
    let l = i.view.latch.as_ref()?;
    let shown = i
        .memo
        .dialog_seen_ms
        .is_some_and(|t| t + LATCH_SCREEN_SLACK_MS >= l.at.at_ms);
    let answered_on_screen = shown && !is_dialog(i.screen);
    (!answered_on_screen).then_some(l.kind)
}

fn is_dialog(o: &Observation) -> bool {
    o.state == State::Blocked
        && matches!(
            o.kind,
            Some(BlockedKind::Permission | BlockedKind::Question)
        )
}

/// Whether the screen went to `working` after `at_ms`: a new turn the
/// signals have not announced yet (a prompt sent, its hook not in).
fn screen_moved_on(i: &Input, at_ms: u64) -> bool {
    i.screen.state == State::Working && i.memo.since_ms > at_ms
}

/// The newest full window's reset time (RFC 3339, UTC), and its signal.
fn full_window_reset(v: &SignalView) -> Option<(Mark, String)> {
    let (mark, l) = v.limits.as_ref()?;
    let full = |w: &Option<LimitWindow>| {
        w.filter(|w| w.used_percent >= 100.0)
            .and_then(|w| w.resets_at)
    };
    let t = full(&l.short).into_iter().chain(full(&l.long)).max()?;
    let t = chrono::DateTime::from_timestamp(t, 0)?;
    Some((*mark, t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
}

// The rules.

/// The process exited: only the screen (the pane) knows.
fn exited(i: &Input) -> Option<Verdict> {
    (i.screen.state == State::Exited).then_some(Verdict::Screen { resets_at: None })
}

/// A usage limit on screen, with the reset time from the agent's own
/// figures when a window is full (they carry the exact instant).
fn screen_limit(i: &Input) -> Option<Verdict> {
    if i.screen.state != State::Blocked || i.screen.kind != Some(BlockedKind::UsageLimit) {
        return None;
    }
    Some(Verdict::Screen {
        resets_at: full_window_reset(i.view),
    })
}

/// A dialog on screen: its kind and options are the screen's.
fn screen_dialog(i: &Input) -> Option<Verdict> {
    (i.screen.state == State::Blocked).then_some(Verdict::Screen { resets_at: None })
}

/// The turn failed on the rate limit: parked, with the reset time from a
/// full window when the agent reported one, else the screen's.
fn usage_limit(i: &Input) -> Option<Verdict> {
    let end = ended(i.view)?;
    if end.how != EndHow::Failed || end.error != Some(TurnError::RateLimit) {
        return None;
    }
    if screen_moved_on(i, end.at.at_ms) {
        return None;
    }
    let resets_at = full_window_reset(i.view)
        .map(|(_, t)| t)
        .or_else(|| i.screen.resets_at.clone());
    Some(Verdict::Signals {
        state: State::Blocked,
        kind: Some(BlockedKind::UsageLimit),
        resets_at,
        mark: end.at,
        what: "turn_failed:rate_limit".into(),
    })
}

/// A permission or question the agent is waiting on, with no dialog on
/// screen (a rule that missed it, or a frame not drawn yet). Cleared by a
/// tool's result, a prompt, the turn's end, or the dialog having been shown
/// and gone (answered on screen: no hook says so).
fn permission_latch(i: &Input) -> Option<Verdict> {
    let kind = latch_held(i)?;
    let l = i.view.latch.as_ref()?;
    let what = match &l.tool {
        Some(t) => format!("latch:{kind}:{t}"),
        None => format!("latch:{kind}"),
    };
    Some(Verdict::Signals {
        state: State::Blocked,
        kind: Some(kind),
        resets_at: None,
        mark: l.at,
        what,
    })
}

/// The turn ended after the last prompt: done, even while the screen still
/// draws a spinner it drew before the end; not when the screen went to
/// working since (a new turn whose prompt hook is not in yet).
fn turn_ended(i: &Input) -> Option<Verdict> {
    let end = ended(i.view).filter(|e| e.how == EndHow::Ended)?;
    if screen_moved_on(i, end.at.at_ms) {
        return None;
    }
    let what = match &end.message_sha256 {
        Some(h) => format!("turn_ended:{}", &h[..h.len().min(12)]),
        None => "turn_ended".into(),
    };
    Some(Verdict::Signals {
        state: State::Done,
        kind: None,
        resets_at: None,
        mark: end.at,
        what,
    })
}

/// The turn was interrupted: ready, with no finished turn.
fn turn_aborted(i: &Input) -> Option<Verdict> {
    let end = ended(i.view).filter(|e| e.how == EndHow::Aborted)?;
    if screen_moved_on(i, end.at.at_ms) {
        return None;
    }
    Some(Verdict::Signals {
        state: State::Idle,
        kind: None,
        resets_at: None,
        mark: end.at,
        what: "turn_aborted".into(),
    })
}

/// The open turn was interrupted on screen (no hook says so): the screen's
/// ready state stands.
fn screen_interrupted(i: &Input) -> Option<Verdict> {
    interrupted_on_screen(i).then_some(Verdict::Screen { resets_at: None })
}

/// A tool call runs (started, no result yet): working, however quiet the
/// screen is — a long tool call does not fade to idle.
fn tool_running(i: &Input) -> Option<Verdict> {
    let t = i.view.tool.as_ref()?;
    Some(Verdict::Signals {
        state: State::Working,
        kind: None,
        resets_at: None,
        mark: t.at,
        what: format!("tool:{}", t.tool),
    })
}

/// A turn is open (a prompt submitted, no end since): working, even when
/// the screen reads idle or done.
fn turn_open(i: &Input) -> Option<Verdict> {
    let at = i.view.turn_open?;
    Some(Verdict::Signals {
        state: State::Working,
        kind: None,
        resets_at: None,
        mark: at,
        what: "prompt_submitted".into(),
    })
}

/// Nothing from the signals: the screen decides.
fn screen(_: &Input) -> Option<Verdict> {
    Some(Verdict::Screen { resets_at: None })
}

/// A pane's fusion between observations: its screen memo and whether the
/// open disagreement was reported.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    pub memo: ScreenMemo,
    generation: u64,
    reported: bool,
    last: Option<(Observation, Fused, SignalView)>,
}

impl Tracker {
    /// Fuse the screen's observation of `generation` (started at
    /// `from_ms`: earlier signals are another process's) with the ledger.
    pub fn step(
        &mut self,
        screen_obs: &Observation,
        ledger: &Ledger,
        generation: u64,
        from_ms: u64,
        now_ms: u64,
    ) -> Fused {
        if generation != self.generation {
            *self = Tracker {
                generation,
                ..Tracker::default()
            };
        }
        let label = screen_obs.label();
        if label != self.memo.label {
            self.memo.label = label;
            self.memo.since_ms = now_ms;
        }
        if is_dialog(screen_obs) {
            self.memo.dialog_seen_ms = Some(now_ms);
        }
        self.memo.interrupted_since_ms =
            shows_interrupted(screen_obs).then(|| self.memo.interrupted_since_ms.unwrap_or(now_ms));
        let view = fold(ledger, from_ms);
        let fused = fuse(screen_obs, &view, &self.memo, now_ms);
        if fused.disagreement.as_ref().map(|d| d.since_ms)
            != self.memo.disagree.as_ref().map(|d| d.since_ms)
        {
            self.reported = false;
        }
        self.memo.disagree.clone_from(&fused.disagreement);
        self.last = Some((screen_obs.clone(), fused.clone(), view));
        fused
    }

    /// The open disagreement, once it has held for [`DISAGREE_BOUND_MS`] and
    /// was not reported yet (it is marked reported).
    pub fn due(&mut self, now_ms: u64) -> Option<Disagreement> {
        let d = self.memo.disagree.as_ref()?;
        if self.reported || now_ms < d.since_ms + DISAGREE_BOUND_MS {
            return None;
        }
        self.reported = true;
        Some(d.clone())
    }

    /// When the open, unreported disagreement becomes due (ms since the epoch).
    pub fn deadline(&self) -> Option<u64> {
        let d = self.memo.disagree.as_ref()?;
        (!self.reported).then_some(d.since_ms + DISAGREE_BOUND_MS)
    }

    /// Whether the open disagreement was reported.
    pub fn reported(&self) -> bool {
        self.reported
    }

    /// The last step's screen observation, outcome and view.
    pub fn last(&self) -> Option<&(Observation, Fused, SignalView)> {
        self.last.as_ref()
    }

    /// The generation the tracker follows.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

#[cfg(test)]
#[path = "fuse_tests.rs"]
mod tests;
