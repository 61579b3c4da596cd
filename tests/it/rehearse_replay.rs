//! Recordings of the real agents (made by `tests/real_agents.rs` with
//! `DROVER_RECORD`) replayed through the screen model: at every labelled
//! checkpoint the screen shows the markers that were seen live. Runs without npm.

use drover::rehearse::recording::{Labels, failed_markers};
use drover::screen::Screen;
use std::collections::BTreeSet;
use std::path::Path;

fn recordings() -> Vec<(String, Labels, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/fixtures/recordings") {
        let path = entry.expect("dir entry").path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".labels.tsv"))
        else {
            continue;
        };
        let labels = Labels::parse(&std::fs::read_to_string(&path).expect("labels"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = std::fs::read(dir.join(format!("{name}.bin"))).expect("recording");
        out.push((name.to_string(), labels, bytes));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_checkpoint_replays_to_its_markers() {
    for (name, labels, bytes) in recordings() {
        let mut screen = Screen::new(labels.cols, labels.rows);
        let mut fed = 0;
        for c in &labels.checkpoints {
            assert!(
                c.bytes >= fed && c.bytes <= bytes.len(),
                "{name}: bad offset {}",
                c.bytes
            );
            screen.process(&bytes[fed..c.bytes]);
            fed = c.bytes;
            let text = screen.text();
            let failed = failed_markers(&text, &c.markers);
            assert!(
                failed.is_empty(),
                "{name} at byte {} ({}): markers {failed:?} fail; screen:\n{text}",
                c.bytes,
                c.state
            );
        }
        // The labels describe the whole recording: its last state is at its end.
        assert_eq!(fed, bytes.len(), "{name}: bytes after the last checkpoint");
    }
}

/// Guards against the fixture set shrinking: both agents, every state the suite checks.
#[test]
fn recordings_cover_both_agents_and_every_checked_state() {
    let all = recordings();
    for agent in ["claude", "codex"] {
        let states: BTreeSet<String> = all
            .iter()
            .filter(|(_, l, _)| l.agent == agent)
            .flat_map(|(_, l, _)| l.checkpoints.iter().map(|c| c.state.to_string()))
            .collect();
        for s in [
            "idle",
            "working",
            "done",
            "blocked:permission",
            "blocked:setup",
        ] {
            assert!(states.contains(s), "no {agent} recording reaches {s}");
        }
        // Only Claude has a question tool (docs/agents.md).
        if agent == "claude" {
            assert!(states.contains("blocked:question"), "no claude question");
        }
    }
}

/// The committed recordings hold no paths of the machine that made them (the
/// suite replaces its temp root with `/rehearsal___…`).
#[test]
fn recordings_hold_no_machine_paths() {
    // A root directory at the start of a path: after a non-path byte or an SGR.
    let re = regex::bytes::Regex::new(
        r"(?:^|[^A-Za-z0-9_.-]|\x1b\[[0-9;]*m)/(?:home|root|tmp|work|Users|var)/",
    )
    .expect("regex");
    for (name, _, bytes) in recordings() {
        if let Some(m) = re.find(&bytes) {
            panic!(
                "{name} holds a machine path: {:?}",
                String::from_utf8_lossy(&bytes[m.start()..(m.end() + 40).min(bytes.len())])
            );
        }
    }
}

/// The classifier on the replayed real screens: at every checkpoint, with
/// the signals the supervisor would have (title, OSC 7501, quiet output), the
/// state is the one seen live. A detection regression shows here without npm.
#[test]
fn every_checkpoint_classifies_as_labelled() {
    use drover::agent::{AgentKind, Classifier, Signals};
    let classifier = Classifier::builtin().expect("builtin rules");
    let mut wrong = Vec::new();
    for (name, labels, bytes) in recordings() {
        let kind: AgentKind = labels.agent.parse().expect("agent kind");
        let mut screen = Screen::new(labels.cols, labels.rows);
        let mut fed = 0;
        for c in &labels.checkpoints {
            screen.process(&bytes[fed..c.bytes]);
            fed = c.bytes;
            let rows = screen.rows();
            let hooks = screen.hooks();
            let signals = Signals {
                rows: &rows,
                cols: screen.size().0,
                title: hooks.title(),
                osc7501: hooks.osc7501(),
                exited: None,
                quiet_ms: u64::MAX / 2,
                foreground_job: None,
                shell_child: false,
                since_spawn_ms: u64::MAX / 2,
            };
            let o = classifier.classify(kind, &signals);
            let got = match o.kind {
                Some(k) => format!("{}:{}", o.state, k),
                None => o.state.to_string(),
            };
            if got != c.state.to_string() {
                wrong.push(format!(
                    "{name} at byte {}: labelled {}, classified {got} ({:?})",
                    c.bytes, c.state, o.evidence
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
}
