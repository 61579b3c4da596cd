//! The fusion rules over real captured screens (tests/fixtures/screens) with
//! synthetic signal sequences: what each rule decides when the screen is
//! what an agent really drew, and a screen rule switched off still fusing
//! right (with the disagreement that is the drift canary).

use drover::agent::signals::Ledger;
use drover::agent::signals::fuse::{DISAGREE_BOUND_MS, Fused, Tracker};
use drover::agent::{AgentKind, Classifier, Observation, Signals, rows_from_text};
use drover::proto::signal::{LimitWindow, Limits, Notice, Signal, SignalNote, Source};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/screens")
}

fn screen(c: &Classifier, file: &str) -> Observation {
    let agent: AgentKind = file.split(['/', '-']).next().unwrap().parse().unwrap();
    let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
    c.classify(agent, &Signals::screen_only(&rows_from_text(&text)))
}

fn ledger(notes: &[(u64, Signal)]) -> Ledger {
    let mut l = Ledger::default();
    for (at, s) in notes {
        l.apply(
            *at,
            SignalNote {
                source: Source::Hook,
                session: Some("s1".into()),
                signal: s.clone(),
            },
        );
    }
    l
}

const T0: u64 = 1_000_000;

fn prompt() -> (u64, Signal) {
    (T0 + 100, Signal::PromptSubmitted)
}

fn stop(at: u64) -> (u64, Signal) {
    (
        at,
        Signal::TurnEnded {
            message_sha256: Some("0f".repeat(32)),
        },
    )
}

fn asked(at: u64) -> (u64, Signal) {
    (
        at,
        Signal::PermissionAsked {
            tool: "Bash".into(),
        },
    )
}

/// Steps of (screen file, time): the tracker sees each screen in turn with
/// the same signals; the last step's outcome.
fn run(c: &Classifier, steps: &[(&str, u64)], notes: &[(u64, Signal)]) -> Fused {
    let l = ledger(notes);
    let mut t = Tracker::default();
    let mut last = None;
    for (file, at) in steps {
        last = Some(t.step(&screen(c, file), &l, 1, T0, *at));
    }
    last.unwrap()
}

#[test]
fn without_signals_every_labelled_screen_fuses_to_its_own_observation() {
    let c = Classifier::builtin().unwrap();
    let tsv = std::fs::read_to_string(fixtures().join("labels.tsv")).unwrap();
    let files: Vec<&str> = tsv
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').next())
        .collect();
    assert!(files.len() >= 26);
    for f in files {
        let o = screen(&c, f);
        let fused = run(&c, &[(f, T0 + 1_000)], &[]);
        assert_eq!(fused.observation, o, "{f}: untouched");
        assert!(fused.disagreement.is_none(), "{f}");
    }
}

struct Case {
    what: &'static str,
    steps: &'static [(&'static str, u64)],
    notes: Vec<(u64, Signal)>,
    label: &'static str,
    rule: &'static str,
    /// The disagreement's (screen, signals), when there is one.
    disagree: Option<(&'static str, &'static str)>,
}

#[test]
fn synthetic_signals_over_real_screens_fuse_as_the_rules_say() {
    let c = Classifier::builtin().unwrap();
    let cases = vec![
        Case {
            what: "a turn open over an idle screen is working",
            steps: &[("claude/startup-1.txt", T0 + 500)],
            notes: vec![prompt()],
            label: "working",
            rule: "turn_open",
            disagree: Some(("idle", "working")),
        },
        Case {
            what: "a turn open over Codex's done screen is working",
            steps: &[("codex/idle-after-reply-1.txt", T0 + 500)],
            notes: vec![prompt()],
            label: "working",
            rule: "turn_open",
            disagree: Some(("done", "working")),
        },
        Case {
            what: "Stop over a spinner drawn before it is done",
            steps: &[
                ("claude/working-1.txt", T0 + 200),
                ("claude/working-1.txt", T0 + 400),
            ],
            notes: vec![prompt(), stop(T0 + 300)],
            label: "done",
            rule: "turn_ended",
            disagree: Some(("working", "done")),
        },
        Case {
            what: "Codex's agent-turn-complete over its Working row is done",
            steps: &[("codex/working-think-1.txt", T0 + 200)],
            notes: vec![prompt(), stop(T0 + 300)],
            label: "done",
            rule: "turn_ended",
            disagree: Some(("working", "done")),
        },
        Case {
            what: "a spinner drawn after the Stop is a new turn: the screen's",
            steps: &[
                ("claude/idle-after-reply-1.txt", T0 + 350),
                ("claude/working-1.txt", T0 + 400),
            ],
            notes: vec![prompt(), stop(T0 + 300)],
            label: "working",
            rule: "screen",
            disagree: Some(("working", "done")),
        },
        Case {
            what: "a permission latch with no dialog on screen",
            steps: &[("claude/working-1.txt", T0 + 400)],
            notes: vec![prompt(), asked(T0 + 300)],
            label: "blocked:permission",
            rule: "permission_latch",
            disagree: Some(("working", "blocked:permission")),
        },
        Case {
            what: "the dialog on screen is the screen's",
            steps: &[("claude/blocked-bash-1.txt", T0 + 400)],
            notes: vec![prompt(), asked(T0 + 300)],
            label: "blocked:permission",
            rule: "screen_dialog",
            disagree: None,
        },
        Case {
            what: "the dialog answered on screen clears the latch",
            steps: &[
                ("claude/blocked-bash-1.txt", T0 + 400),
                ("claude/working-1.txt", T0 + 2_000),
            ],
            notes: vec![prompt(), asked(T0 + 300)],
            label: "working",
            rule: "turn_open",
            disagree: None,
        },
        Case {
            what: "Codex's approval answered on screen clears a notification's latch",
            steps: &[
                ("codex/blocked-escalate-1.txt", T0 + 400),
                ("codex/working-think-1.txt", T0 + 2_000),
            ],
            notes: vec![
                prompt(),
                (
                    T0 + 450,
                    Signal::Notified {
                        notice: Notice::PermissionPrompt,
                    },
                ),
            ],
            label: "working",
            rule: "turn_open",
            disagree: None,
        },
        Case {
            what: "a long tool call does not fade to idle",
            steps: &[("claude/startup-1.txt", T0 + 600_000)],
            notes: vec![
                prompt(),
                (
                    T0 + 200,
                    Signal::ToolStarted {
                        tool: "Bash".into(),
                    },
                ),
            ],
            label: "working",
            rule: "tool_running",
            disagree: Some(("idle", "working")),
        },
        Case {
            what: "a hook says stopped while the screen shows a question",
            steps: &[("claude/blocked-question-1.txt", T0 + 400)],
            notes: vec![prompt(), stop(T0 + 300)],
            label: "blocked:question",
            rule: "screen_dialog",
            disagree: Some(("blocked:question", "done")),
        },
        // No hook fires for an interrupt or a denial on screen
        // (tests/fixtures/signals): the screen's marker ends the turn.
        Case {
            what: "an interrupt drawn after the prompt ends the open turn",
            steps: &[
                ("claude-2.1.332/working-reply-1.txt", T0 + 200),
                ("claude-2.1.332/interrupted-1.txt", T0 + 400),
            ],
            notes: vec![prompt()],
            label: "idle",
            rule: "screen_interrupted",
            disagree: None,
        },
        Case {
            what: "a tool call denied on screen ends the open turn and its latch",
            steps: &[
                ("claude-2.1.332/blocked-bash-1.txt", T0 + 200),
                ("claude-2.1.332/denied-bash-1.txt", T0 + 400),
            ],
            notes: vec![prompt(), asked(T0 + 150)],
            label: "idle",
            rule: "screen_interrupted",
            disagree: None,
        },
        // 2.1.337 draws an interrupted reply's marker on a line of its own
        // (`∷ Interrupted · …`); read as plain idle, the open turn stayed
        // `working` until the next prompt.
        Case {
            what: "Claude 2.1.337's interrupt drawn after the prompt ends the open turn",
            steps: &[
                ("claude-2.1.337/working-reply-1.txt", T0 + 200),
                ("claude-2.1.337/interrupted-1.txt", T0 + 400),
            ],
            notes: vec![prompt()],
            label: "idle",
            rule: "screen_interrupted",
            disagree: None,
        },
        Case {
            what: "a tool call denied on Claude 2.1.337's screen ends the open turn and its latch",
            steps: &[
                ("claude-2.1.337/blocked-bash-1.txt", T0 + 200),
                ("claude-2.1.337/denied-bash-1.txt", T0 + 400),
            ],
            notes: vec![prompt(), asked(T0 + 150)],
            label: "idle",
            rule: "screen_interrupted",
            disagree: None,
        },
        Case {
            what: "Codex's interrupt on screen ends the open turn",
            steps: &[
                ("codex/working-think-1.txt", T0 + 200),
                ("codex/interrupted-1.txt", T0 + 400),
            ],
            notes: vec![prompt()],
            label: "idle",
            rule: "screen_interrupted",
            disagree: None,
        },
        Case {
            what: "a marker left from the turn before does not end a new one",
            steps: &[
                ("claude-2.1.332/interrupted-1.txt", T0 + 50),
                ("claude-2.1.332/interrupted-1.txt", T0 + 200),
            ],
            notes: vec![prompt()],
            label: "working",
            rule: "turn_open",
            disagree: Some(("idle", "working")),
        },
    ];
    let mut bad = Vec::new();
    for k in &cases {
        let f = run(&c, k.steps, &k.notes);
        let d = f
            .disagreement
            .as_ref()
            .map(|d| (d.screen.as_str(), d.signals.as_str()));
        if f.observation.label() != k.label || f.rule != k.rule || d != k.disagree {
            bad.push(format!(
                "{}: got {} by {} ({d:?}) {:?}",
                k.what,
                f.observation.label(),
                f.rule,
                f.observation.evidence
            ));
        }
        if !matches!(f.rule, "screen" | "screen_dialog" | "screen_interrupted") {
            assert_eq!(f.observation.source, Source::Hook, "{}", k.what);
            assert_eq!(f.observation.evidence[0], format!("fuse:{}", f.rule));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_limit_on_screen_takes_the_full_windows_reset() {
    let c = Classifier::builtin().unwrap();
    let limits = Signal::Limits(Limits {
        short: Some(LimitWindow {
            used_percent: 100.0,
            resets_at: Some(1_796_000_000),
            window_minutes: Some(300),
        }),
        long: None,
    });
    for f in ["claude/limit-menu-1.txt", "codex/limit-1.txt"] {
        let fused = run(&c, &[(f, T0 + 500)], &[(T0 + 10, limits.clone())]);
        assert_eq!(fused.observation.label(), "blocked:usage_limit", "{f}");
        assert_eq!(fused.rule, "screen_limit");
        assert_eq!(
            fused.observation.resets_at.as_deref(),
            Some("2026-11-30T00:53:20Z"),
            "{f}"
        );
    }
}

/// The classifier built from the builtin rules without one rule.
fn without_rule(name: &str) -> Classifier {
    let builtin = drover::agent::rules::BUILTIN_RULES;
    let mut kept = String::new();
    for (i, block) in builtin.split("[[rule]]").enumerate() {
        if i > 0 && block.contains(&format!("name = \"{name}\"\n")) {
            continue;
        }
        if i > 0 {
            kept.push_str("[[rule]]");
        }
        kept.push_str(block);
    }
    assert!(kept.len() < builtin.len(), "no rule {name}");
    Classifier::from_toml(&kept, "test").unwrap()
}

/// The screen's permission rule switched off (a changed dialog the rules no
/// longer read): the agent's own `PermissionRequest` still makes the pane
/// `blocked:permission`, and the disagreement is due after the bound.
#[test]
fn with_the_permission_rule_switched_off_the_latch_still_blocks_and_disagrees() {
    let c = without_rule("claude.permission");
    let file = "claude/blocked-bash-1.txt";
    let blind = screen(&c, file);
    assert_ne!(blind.label(), "blocked:permission", "the rule is off");
    let l = ledger(&[prompt(), asked(T0 + 300)]);
    let mut t = Tracker::default();
    let f = t.step(&blind, &l, 1, T0, T0 + 400);
    assert_eq!(f.observation.label(), "blocked:permission");
    assert_eq!(f.rule, "permission_latch");
    let d = f.disagreement.expect("a disagreement");
    assert_eq!(d.screen, blind.label());
    assert!(t.due(T0 + 400 + DISAGREE_BOUND_MS - 1).is_none());
    t.step(&blind, &l, 1, T0, T0 + 2_000);
    let due = t
        .due(T0 + 400 + DISAGREE_BOUND_MS)
        .expect("due after the bound");
    assert_eq!(due.signals, "blocked:permission");
    // With the rule on, the same screen and signals agree.
    let on = Classifier::builtin().unwrap();
    let f = Tracker::default().step(&screen(&on, file), &l, 1, T0, T0 + 400);
    assert_eq!((f.rule, f.disagreement), ("screen_dialog", None));
}
