//! Real agent screens (tests/fixtures/screens) classify as labelled, through
//! the library and through `drover agent classify`.

use drover::agent::{AgentKind, BlockedKind, Classifier, Signals, State, rows_from_text};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/screens")
}

struct Label {
    file: String,
    agent: AgentKind,
    state: State,
    kind: Option<BlockedKind>,
}

fn labels() -> Vec<Label> {
    let tsv = std::fs::read_to_string(fixtures().join("labels.tsv")).unwrap();
    tsv.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "bad labels.tsv line {l:?}");
            // `claude/…`, `claude-2.1.332/…`: the agent, then its version.
            let dir = f[0].split('/').next().unwrap();
            let agent = dir.split('-').next().unwrap().parse().unwrap();
            Label {
                file: f[0].to_string(),
                agent,
                state: f[1].parse().unwrap(),
                kind: if f[2] == "-" {
                    None
                } else {
                    Some(f[2].parse().unwrap())
                },
            }
        })
        .collect()
}

fn classify_file(c: &Classifier, agent: AgentKind, path: &Path) -> drover::agent::Observation {
    let text = std::fs::read_to_string(path).unwrap();
    let rows = rows_from_text(&text);
    c.classify(agent, &Signals::screen_only(&rows))
}

/// Every labelled screen classifies as labelled; all mismatches are reported at once.
#[test]
fn every_labelled_screen_classifies_as_labelled() {
    let c = Classifier::builtin().unwrap();
    let labels = labels();
    assert!(labels.len() >= 26, "labels.tsv lost rows");
    let mut bad = Vec::new();
    for l in &labels {
        let o = classify_file(&c, l.agent, &fixtures().join(&l.file));
        if o.state != l.state || o.kind != l.kind {
            bad.push(format!(
                "{}: want {}/{:?}, got {}/{:?} {:?}",
                l.file, l.state, l.kind, o.state, o.kind, o.evidence
            ));
        }
        assert!(
            o.evidence.iter().any(|e| e.starts_with("rule:")),
            "{}: no rule named in evidence {:?}",
            l.file,
            o.evidence
        );
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The sim kind uses both profiles' rules, so the real screens classify the same.
#[test]
fn sim_kind_classifies_both_profiles_screens() {
    let c = Classifier::builtin().unwrap();
    let mut bad = Vec::new();
    for l in labels() {
        let o = classify_file(&c, AgentKind::Sim, &fixtures().join(&l.file));
        if o.state != l.state || o.kind != l.kind {
            bad.push(format!("{}: got {} {:?}", l.file, o.label(), o.evidence));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn claude_idle_with_prose(prose: &[&str]) -> Vec<String> {
    let rule = "─".repeat(120);
    let mut rows = vec!["❯ is it safe?".to_string(), String::new()];
    rows.extend(prose.iter().map(|s| s.to_string()));
    rows.extend([
        String::new(),
        "✻ Worked for 2s".to_string(),
        String::new(),
        rule.clone(),
        "❯\u{a0}".to_string(),
        rule,
        "  ? for shortcuts".to_string(),
    ]);
    rows
}

/// Prose that merely quotes a dialog in the transcript must not block the pane.
#[test]
fn prose_quoting_a_dialog_is_not_blocked() {
    let c = Classifier::builtin().unwrap();
    let prose = [
        "● Would you like to run the following command? yes",
        "  Do you want to proceed?",
        "  ❯ 1. Yes",
        "  Press enter to confirm or esc to cancel",
        "  Esc to cancel · Tab to amend",
    ];
    let rows = claude_idle_with_prose(&prose);
    for kind in [AgentKind::Claude, AgentKind::Sim] {
        let o = c.classify(kind, &Signals::screen_only(&rows));
        assert_eq!(o.state, State::Done, "{kind}: {:?}", o.evidence);
    }
    let mut codex: Vec<String> = vec!["› explain".into(), String::new()];
    codex.extend(prose.iter().map(|s| s.to_string()));
    codex.extend(
        [
            "",
            "  Worked for 3s • 01:24",
            "",
            "› Ask Codex to do anything",
            "",
            "  mock-model default · /w",
            "  ? for shortcuts",
        ]
        .map(String::from),
    );
    let o = c.classify(AgentKind::Codex, &Signals::screen_only(&codex));
    assert_eq!(o.state, State::Done, "{:?}", o.evidence);
}

fn drover() -> Command {
    Command::new(env!("CARGO_BIN_EXE_drover"))
}

#[test]
fn cli_classify_prints_json_for_each_label() {
    let state = tempfile::tempdir().unwrap();
    for l in labels()
        .iter()
        .filter(|l| l.file.contains("blocked") || l.file.contains("idle-after"))
    {
        let out = drover()
            .args(["agent", "classify", "--agent", l.agent.as_str(), "--json"])
            .arg(fixtures().join(&l.file))
            .env("DROVER_STATE_DIR", state.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {:?}", l.file, out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["state"], l.state.as_str(), "{}: {v}", l.file);
        let kind = l.kind.map(|k| k.as_str().to_string());
        assert_eq!(v["kind"].as_str().map(String::from), kind, "{}", l.file);
        assert!(v["evidence"].as_array().is_some_and(|e| !e.is_empty()));
    }
}

#[test]
fn cli_classify_human_form() {
    let state = tempfile::tempdir().unwrap();
    let out = drover()
        .args(["agent", "classify", "--agent", "claude"])
        .arg(fixtures().join("claude/blocked-bash-1.txt"))
        .env("DROVER_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("blocked:permission"), "{s}");
    assert!(s.contains("rule:claude.permission"), "{s}");
}

#[test]
fn cli_classify_missing_file_is_usage_error_naming_it() {
    let state = tempfile::tempdir().unwrap();
    let out = drover()
        .args([
            "agent",
            "classify",
            "--agent",
            "codex",
            "no-such-screen.txt",
        ])
        .env("DROVER_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-screen.txt"), "{err}");
}

/// `<state>/rules.toml` replaces the builtin rules without a rebuild.
#[test]
fn override_rules_file_in_state_dir_wins() {
    let state = tempfile::tempdir().unwrap();
    std::fs::write(
        state.path().join("rules.toml"),
        r#"
[[rule]]
name = "custom.everything_blocked"
agents = ["claude"]
state = "blocked"
kind = "usage_limit"
when = [ { region = "last", regex = "for shortcuts" } ]
"#,
    )
    .unwrap();
    let c = Classifier::load(drover::statedir::StateDir::new(state.path())).unwrap();
    let o = classify_file(
        &c,
        AgentKind::Claude,
        &fixtures().join("claude/idle-after-reply-1.txt"),
    );
    assert_eq!(
        (o.state, o.kind),
        (State::Blocked, Some(BlockedKind::UsageLimit))
    );
    assert_eq!(o.evidence, vec!["rule:custom.everything_blocked"]);

    let out = drover()
        .args(["agent", "classify", "--agent", "claude", "--json"])
        .arg(fixtures().join("claude/idle-after-reply-1.txt"))
        .env("DROVER_STATE_DIR", state.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "usage_limit");
}

#[test]
fn bad_rules_file_is_an_error_naming_it() {
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("rules.toml");
    std::fs::write(&path, "[[rule]]\nname = 'x'\nagents = ['claude']\nstate = 'idle'\nwhen = [ { region = 'bottom', regex = '(' } ]\n").unwrap();
    let e = Classifier::load(drover::statedir::StateDir::new(state.path()))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("bad regex"), "{e}");

    std::fs::write(&path, "this is = = not toml").unwrap();
    let out = drover()
        .args(["agent", "classify", "--agent", "claude"])
        .arg(fixtures().join("claude/startup-1.txt"))
        .env("DROVER_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rules.toml"), "{err}");
}

#[test]
fn without_override_load_uses_builtin() {
    let state = tempfile::tempdir().unwrap();
    let c = Classifier::load(drover::statedir::StateDir::new(state.path())).unwrap();
    let o = classify_file(
        &c,
        AgentKind::Codex,
        &fixtures().join("codex/startup-1.txt"),
    );
    assert_eq!(o.state, State::Idle);
}

/// Rows padded with spaces (a screen model that does not trim) classify the same.
#[test]
fn untrimmed_rows_classify_the_same() {
    let c = Classifier::builtin().unwrap();
    for l in labels() {
        let text = std::fs::read_to_string(fixtures().join(&l.file)).unwrap();
        let rows: Vec<String> = rows_from_text(&text)
            .into_iter()
            .map(|r| format!("{r:<120}"))
            .collect();
        let o = c.classify(l.agent, &Signals::screen_only(&rows));
        assert_eq!(
            (o.state, o.kind),
            (l.state, l.kind),
            "{}: {:?}",
            l.file,
            o.evidence
        );
    }
}

/// The supervisor shares one classifier between pane threads.
#[test]
fn classifier_is_send_and_sync() {
    fn check<T: Send + Sync + Clone>() {}
    check::<Classifier>();
}

/// A usage-limit sentence the model writes or a tool prints is not a limit
/// (a peer once waited 22.5 h on a banner quoted in tool output).
#[test]
fn limit_sentence_in_prose_or_tool_output_is_not_a_limit() {
    let c = Classifier::builtin().unwrap();
    let quoted = "You've hit your session limit · resets 12:50am (America/Los_Angeles)";
    let prose = [format!("● {quoted}")];
    let tool = [
        "● Bash(cat limits.log)".to_string(),
        format!("  ⎿  {quoted}"),
    ];
    for lines in [&prose[..], &tool[..]] {
        let text: Vec<&str> = lines.iter().map(String::as_str).collect();
        let rows = claude_idle_with_prose(&text);
        let o = c.classify(AgentKind::Claude, &Signals::screen_only(&rows));
        assert_eq!(o.state, State::Done, "{lines:?}: {:?}", o.evidence);
        assert_eq!(o.resets_at, None);
    }
    // The real limit line, right under the prompt that hit it, is one.
    let rule = "─".repeat(120);
    let rows: Vec<String> = [
        "❯ later",
        &format!("  ⎿  {quoted}"),
        "",
        &rule,
        "❯\u{a0}",
        &rule,
        "  ? for shortcuts",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let o = c.classify(AgentKind::Claude, &Signals::screen_only(&rows));
    assert_eq!(o.kind, Some(BlockedKind::UsageLimit), "{:?}", o.evidence);
    assert!(o.resets_at.is_some(), "{:?}", o.evidence);
    // Codex: its `■` error marker, not the model's `•` prose.
    let codex: Vec<String> = [
        "› is it safe?",
        "",
        "• ■ You've hit your usage limit. Try again at 8:41 AM.",
        "",
        "› Ask Codex to do anything",
        "",
        "  ? for shortcuts",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let o = c.classify(AgentKind::Codex, &Signals::screen_only(&codex));
    assert_ne!(o.kind, Some(BlockedKind::UsageLimit), "{:?}", o.evidence);
}
