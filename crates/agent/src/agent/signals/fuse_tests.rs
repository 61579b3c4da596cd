//! Every fusion rule, one test or more each, on hand-made screens.

use super::*;
use crate::proto::signal::{Limits, Notice, Signal, SignalNote, Source};

fn obs(state: State, kind: Option<BlockedKind>) -> Observation {
    let mut o = Observation::new(state, vec![format!("rule:test.{state}")]);
    o.kind = kind;
    if state == State::Exited {
        o.exit_code = Some(0);
    }
    o
}

fn idle() -> Observation {
    obs(State::Idle, None)
}

fn working() -> Observation {
    obs(State::Working, None)
}

fn permission() -> Observation {
    obs(State::Blocked, Some(BlockedKind::Permission))
}

fn ledger(notes: &[(u64, Signal)]) -> Ledger {
    let mut l = Ledger::default();
    for (at, s) in notes {
        l.apply(
            *at,
            SignalNote {
                source: Source::Hook,
                session: None,
                signal: s.clone(),
            },
        );
    }
    l
}

/// Fuse once with a memo that says the screen has shown `screen` since `since`.
fn fuse_at(screen: &Observation, notes: &[(u64, Signal)], since: u64, now: u64) -> Fused {
    let memo = ScreenMemo {
        label: screen.label(),
        since_ms: since,
        ..ScreenMemo::default()
    };
    fuse(screen, &fold(&ledger(notes), 0), &memo, now)
}

fn end() -> Signal {
    Signal::TurnEnded {
        message_sha256: Some("c0ffee".repeat(10) + "abcd"),
    }
}

fn asked() -> Signal {
    Signal::PermissionAsked {
        tool: "Bash".into(),
    }
}

#[test]
fn without_signals_the_screen_observation_is_the_answer_untouched() {
    for o in [idle(), working(), permission(), obs(State::Exited, None)] {
        let f = fuse_at(&o, &[], 0, 10);
        assert_eq!(f.observation, o, "byte for byte");
        assert_eq!(
            f.rule,
            if o.state == State::Exited {
                "exited"
            } else if o.state == State::Blocked {
                "screen_dialog"
            } else {
                "screen"
            }
        );
        assert!(f.disagreement.is_none());
    }
}

#[test]
fn exited_comes_from_the_screen_whatever_the_signals_say() {
    let f = fuse_at(
        &obs(State::Exited, None),
        &[(1, Signal::PromptSubmitted)],
        0,
        10,
    );
    assert_eq!((f.rule, f.observation.state), ("exited", State::Exited));
    assert_eq!(f.observation.source, Source::Screen);
    assert!(
        f.disagreement.is_none(),
        "a gone process's signals are history"
    );
}

#[test]
fn a_dialog_on_screen_is_the_screens_even_after_a_stop() {
    let f = fuse_at(
        &permission(),
        &[(1, Signal::PromptSubmitted), (2, end())],
        0,
        10,
    );
    assert_eq!(f.rule, "screen_dialog");
    assert_eq!(f.observation, permission());
    let d = f
        .disagreement
        .expect("a hook says stopped while the screen shows a dialog");
    assert_eq!(
        (d.screen.as_str(), d.signals.as_str()),
        ("blocked:permission", "done")
    );
    // Within an open turn a dialog is no disagreement.
    let f = fuse_at(&permission(), &[(1, Signal::PromptSubmitted)], 0, 10);
    assert!(f.disagreement.is_none());
}

#[test]
fn a_turn_open_over_an_idle_screen_is_working() {
    for screen in [idle(), obs(State::Done, None), obs(State::Unknown, None)] {
        let f = fuse_at(&screen, &[(5, Signal::PromptSubmitted)], 0, 10);
        assert_eq!(f.rule, "turn_open");
        assert_eq!(f.observation.state, State::Working);
        assert_eq!(f.observation.source, Source::Hook);
        assert_eq!(f.observation.evidence[0], "fuse:turn_open");
        assert!(
            f.observation
                .evidence
                .contains(&format!("screen:{}", screen.label()))
        );
        let d = f.disagreement.expect("screen idle while a turn is open");
        assert_eq!((d.signals.as_str(), d.since_ms), ("working", 10));
    }
    let f = fuse_at(&working(), &[(5, Signal::PromptSubmitted)], 0, 10);
    assert_eq!(f.rule, "turn_open");
    assert!(f.disagreement.is_none(), "they agree");
}

#[test]
fn a_turn_ended_over_a_spinner_drawn_before_the_end_is_done() {
    let notes = [(5, Signal::PromptSubmitted), (20, end())];
    let f = fuse_at(&working(), &notes, 4, 21);
    assert_eq!((f.rule, f.observation.state), ("turn_ended", State::Done));
    assert!(f.observation.evidence[1].starts_with("hook:turn_ended:c0ffee"));
    assert!(f.disagreement.is_some());
    // The screen went to working after the end: a new turn, its hook not in.
    let f = fuse_at(&working(), &notes, 30, 31);
    assert_eq!((f.rule, f.observation.state), ("screen", State::Working));
    // Over a ready screen: done, and no disagreement (both ready).
    let f = fuse_at(&idle(), &notes, 30, 31);
    assert_eq!((f.rule, f.observation.state), ("turn_ended", State::Done));
    assert!(f.disagreement.is_none());
}

#[test]
fn an_aborted_turn_is_idle() {
    let f = fuse_at(
        &working(),
        &[(5, Signal::PromptSubmitted), (9, Signal::TurnAborted)],
        4,
        10,
    );
    assert_eq!((f.rule, f.observation.state), ("turn_aborted", State::Idle));
}

#[test]
fn a_permission_latch_without_a_dialog_on_screen_is_blocked_permission() {
    let notes = [(1, Signal::PromptSubmitted), (2, asked())];
    let f = fuse_at(&working(), &notes, 0, 10);
    assert_eq!(f.rule, "permission_latch");
    assert_eq!(f.observation.label(), "blocked:permission");
    assert_eq!(f.observation.evidence[1], "hook:latch:permission:Bash");
    let d = f.disagreement.expect("screen working, signals blocked");
    assert_eq!(d.signals, "blocked:permission");
    // A Notification's permission_prompt latches as well.
    let notes = [
        (1, Signal::PromptSubmitted),
        (
            2,
            Signal::Notified {
                notice: Notice::PermissionPrompt,
            },
        ),
    ];
    assert_eq!(fuse_at(&idle(), &notes, 0, 10).rule, "permission_latch");
    // A tool result clears it.
    let notes = [
        (1, Signal::PromptSubmitted),
        (2, asked()),
        (
            3,
            Signal::ToolFinished {
                tool: "Bash".into(),
                failed: false,
            },
        ),
    ];
    assert_eq!(fuse_at(&working(), &notes, 0, 10).rule, "turn_open");
}

#[test]
fn a_dialog_answered_on_screen_clears_the_latch() {
    let notes = [(1, Signal::PromptSubmitted), (100, asked())];
    let l = ledger(&notes);
    let mut t = Tracker::default();
    let f = t.step(&working(), &l, 1, 0, 101);
    assert_eq!(f.rule, "permission_latch");
    let f = t.step(&permission(), &l, 1, 0, 150);
    assert_eq!(f.rule, "screen_dialog");
    // Approved on screen: no hook fires, the screen shows work again.
    let f = t.step(&working(), &l, 1, 0, 900);
    assert_eq!((f.rule, f.observation.state), ("turn_open", State::Working));
    assert!(f.disagreement.is_none());
    // A dialog drawn just before the latch's hook came counts as its dialog.
    let notes = [(1, Signal::PromptSubmitted), (1_500, asked())];
    let l = ledger(&notes);
    let mut t = Tracker::default();
    t.step(&permission(), &l, 1, 0, 1_000);
    let f = t.step(&working(), &l, 1, 0, 1_600);
    assert_eq!(f.rule, "turn_open");
    // One shown long before the latch does not.
    let mut t = Tracker::default();
    t.step(&permission(), &l, 1, 0, 100);
    let f = t.step(&working(), &l, 1, 0, 1_600);
    assert_eq!(f.rule, "permission_latch");
}

#[test]
fn a_long_tool_call_stays_working_over_a_quiet_screen() {
    let notes = [
        (1, Signal::PromptSubmitted),
        (
            2,
            Signal::ToolStarted {
                tool: "Bash".into(),
            },
        ),
    ];
    let f = fuse_at(&idle(), &notes, 0, 600_000);
    assert_eq!(
        (f.rule, f.observation.state),
        ("tool_running", State::Working)
    );
    assert_eq!(f.observation.evidence[1], "hook:tool:Bash");
}

fn full(resets_at: i64) -> Signal {
    Signal::Limits(Limits {
        short: Some(LimitWindow {
            used_percent: 100.0,
            resets_at: Some(resets_at),
            window_minutes: None,
        }),
        long: Some(LimitWindow {
            used_percent: 40.0,
            resets_at: Some(resets_at + 86_400),
            window_minutes: None,
        }),
    })
}

#[test]
fn a_rate_limit_failure_is_a_usage_limit_with_the_full_windows_reset() {
    let failed = Signal::TurnFailed {
        error: TurnError::RateLimit,
    };
    let notes = [
        (1, full(1_796_000_000)),
        (2, Signal::PromptSubmitted),
        (3, failed.clone()),
    ];
    let f = fuse_at(&idle(), &notes, 0, 10);
    assert_eq!(f.rule, "usage_limit");
    assert_eq!(f.observation.label(), "blocked:usage_limit");
    assert_eq!(
        f.observation.resets_at.as_deref(),
        Some("2026-11-30T00:53:20Z")
    );
    // No full window: the screen's time, if it gave one.
    let mut screen = idle();
    screen.resets_at = Some("2026-12-06T10:00:00Z".into());
    let f = fuse_at(
        &screen,
        &[(2, Signal::PromptSubmitted), (3, failed.clone())],
        0,
        10,
    );
    assert_eq!(
        f.observation.resets_at.as_deref(),
        Some("2026-12-06T10:00:00Z")
    );
    // Another failure is not a limit: the screen decides.
    let other = Signal::TurnFailed {
        error: TurnError::Auth,
    };
    let f = fuse_at(&idle(), &[(2, Signal::PromptSubmitted), (3, other)], 0, 10);
    assert_eq!(f.rule, "screen");
}

#[test]
fn a_limit_on_screen_takes_its_reset_from_a_full_window() {
    let mut screen = obs(State::Blocked, Some(BlockedKind::UsageLimit));
    screen.resets_at = Some("2026-12-06T10:00:00Z".into());
    screen
        .evidence
        .push("resets_at:2026-12-06T10:00:00Z".into());
    let f = fuse_at(&screen, &[(1, full(1_796_000_000))], 0, 10);
    assert_eq!(f.rule, "screen_limit");
    assert_eq!(
        f.observation.resets_at.as_deref(),
        Some("2026-11-30T00:53:20Z")
    );
    assert_eq!(f.observation.kind, Some(BlockedKind::UsageLimit));
    assert!(
        !f.observation
            .evidence
            .contains(&"resets_at:2026-12-06T10:00:00Z".to_string())
    );
    // No full window: the screen's observation as it is.
    let f = fuse_at(&screen, &[], 0, 10);
    assert_eq!(f.observation, screen);
}

#[test]
fn a_disagreement_keeps_its_start_and_is_due_once_after_the_bound() {
    let l = ledger(&[(1, Signal::PromptSubmitted)]);
    let mut t = Tracker::default();
    let f = t.step(&idle(), &l, 1, 0, 1_000);
    assert_eq!(f.disagreement.as_ref().map(|d| d.since_ms), Some(1_000));
    assert_eq!(t.deadline(), Some(1_000 + DISAGREE_BOUND_MS));
    assert!(t.due(1_000 + DISAGREE_BOUND_MS - 1).is_none());
    let f = t.step(&idle(), &l, 1, 0, 2_000);
    assert_eq!(f.disagreement.as_ref().map(|d| d.since_ms), Some(1_000));
    let d = t.due(1_000 + DISAGREE_BOUND_MS).expect("due");
    assert_eq!((d.screen.as_str(), d.signals.as_str()), ("idle", "working"));
    assert!(t.due(9_000).is_none(), "once per episode");
    assert!(t.reported());
    t.step(&idle(), &l, 1, 0, 9_000);
    assert!(t.due(20_000).is_none(), "still the same episode");
    // They agree, then disagree again: a new episode.
    t.step(&working(), &l, 1, 0, 10_000);
    assert!(t.deadline().is_none());
    t.step(&idle(), &l, 1, 0, 11_000);
    assert_eq!(
        t.due(11_000 + DISAGREE_BOUND_MS).map(|d| d.since_ms),
        Some(11_000)
    );
}

#[test]
fn a_new_generation_forgets_the_old_one() {
    let l = ledger(&[(1, Signal::PromptSubmitted)]);
    let mut t = Tracker::default();
    assert_eq!(t.step(&idle(), &l, 1, 0, 10).rule, "turn_open");
    // Respawned at 5: the prompt at 1 was the old process's.
    let f = t.step(&idle(), &l, 2, 5, 20);
    assert_eq!((f.rule, t.generation()), ("screen", 2));
    assert!(t.deadline().is_none());
}

#[test]
fn every_rule_is_named_once_and_screen_is_last() {
    let names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
    let mut uniq = names.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(uniq.len(), names.len());
    assert_eq!(names.last(), Some(&"screen"));
}
