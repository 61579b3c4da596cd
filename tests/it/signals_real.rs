//! The agents' own signals from the real TUIs (every supported version of
//! Claude Code and Codex, against drover's mock model): started with the
//! flags `pane new --agent claude|codex` wires, a turn's hooks, status line
//! or notify call reach the supervisor as `pane.signal` events of that pane.
//!
//! The agent runs in a `drover rehearse` pane (its mock, home and project);
//! its program is a two-line script that starts the real binary with the
//! flags a `pane new` of the same state dir was given, so what runs is
//! exactly what drover wires.

use crate::common::{self, Drover};
use drover::rehearse::discover;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const STEP: Duration = Duration::from_secs(60);

/// A pane's `pane.signal` events from the moment it was made on. The
/// feed replays what the supervisor holds (`--since 0`): a follower that
/// subscribes after the agent's first signal (a loaded machine starts it
/// late) misses nothing; what was published before `from` (the rehearsal's
/// own turns) is left out.
struct Feed {
    follow: common::EventFollow,
    from: chrono::DateTime<chrono::Utc>,
}

impl Feed {
    fn follow(d: &Drover) -> Feed {
        let from = chrono::Utc::now();
        let args = ["--since", "0", "--kind", "pane.signal"];
        Feed {
            follow: common::EventFollow::of(d, &args),
            from,
        }
    }

    /// Events until one of `pane` with `signal` from `source`; all of them.
    fn until(&self, pane: &str, signal: &str, source: &str) -> Vec<Value> {
        let deadline = Instant::now() + STEP;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(line) = self.follow.next_line(left) else {
                panic!("no {signal} from {source} for {pane}; saw {seen:#?}");
            };
            let v = serde_json::from_str::<Value>(&line).unwrap_or(Value::Null);
            let at = v["at"]
                .as_str()
                .and_then(|a| chrono::DateTime::parse_from_rfc3339(a).ok());
            if at.is_some_and(|a| a < self.from) {
                continue;
            }
            let hit = v["pane"] == pane && v["signal"] == signal && v["source"] == source;
            seen.push(v);
            if hit {
                return seen;
            }
        }
    }
}

/// The flags `pane new --agent <agent>` puts after the program name in
/// `d`'s state dir (of a stand-in pane `wiring`, left running).
fn wired_flags(d: &Drover, agent: &str) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let dir = d.scratch().join("stand-in");
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join(agent);
    std::fs::write(&prog, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The stand-in stays up: a `pane kill` would take Claude's settings
    // file (written for this pane) with it.
    let v = d.new_pane("wiring", &["--agent", agent], &[prog.to_str().unwrap()]);
    let argv: Vec<String> = serde_json::from_value(v["argv"].clone()).unwrap();
    argv[1..].to_vec()
}

/// A script that runs `real` with `flags` first.
fn wrapper(dir: &Path, agent: &str, real: &Path, flags: &[String]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let words: Vec<String> = std::iter::once(real.display().to_string())
        .chain(flags.iter().cloned())
        .map(|w| drover::shell::quote(&w))
        .collect();
    let p = dir.join("bin").join(agent);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, format!("#!/bin/sh\nexec {} \"$@\"\n", words.join(" "))).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn rehearse(d: &Drover, agent: drover::rehearse::Agent, name: &str, version: &str) {
    let flags = wired_flags(d, agent.name());
    let real = discover::cached_version(agent, version)
        .unwrap_or_else(|| panic!("{version} is not installed: run scripts/install-agents.sh"));
    let bin = wrapper(&d.scratch(), agent.name(), &real, &flags);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mock-scripts")
        .join(format!("{}-suite.toml", agent.name()));
    d.ok(&[
        "rehearse",
        "--json",
        "--agent",
        agent.name(),
        "--name",
        name,
        "--script",
        script.to_str().unwrap(),
        &format!("--{}-bin", agent.name()),
        bin.to_str().unwrap(),
    ]);
    let w = d.wait_state(&[name], "idle", 60_000);
    assert!(w.status.success(), "{name} never idle: {}", d.read(name));
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn real_claude_hooks_and_status_line_reach_their_pane() {
    for version in discover::versions(drover::rehearse::Agent::Claude) {
        // Not under /tmp: the agents warn about helper binaries there.
        let d = Drover::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let name = format!("c{}", version.replace('.', "_"));
        rehearse(&d, drover::rehearse::Agent::Claude, &name, &version);
        let feed = Feed::follow(&d);
        d.ok(&["send", &name, "say hello"]);
        feed.until(&name, "prompt_submitted", "hook");
        feed.until(&name, "turn_ended", "hook");
        d.wait_text(&name, &format!("drover · {name}"), STEP);
        d.ok(&["send", &name, "run the command"]);
        feed.until(&name, "tool_started", "hook");
        feed.until(&name, "permission_asked", "hook");
    }
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn real_codex_notify_reaches_its_pane_once_per_turn() {
    for version in discover::versions(drover::rehearse::Agent::Codex) {
        let d = Drover::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let name = format!("x{}", version.replace('.', "_"));
        rehearse(&d, drover::rehearse::Agent::Codex, &name, &version);
        let feed = Feed::follow(&d);
        d.ok(&["send", &name, "say hello"]);
        let mut seen = feed.until(&name, "turn_ended", "notify");
        d.ok(&["send", &name, "say hello"]);
        seen.extend(feed.until(&name, "turn_ended", "notify"));
        // A barrier: a hook from a shell pane of the same supervisor, long
        // after the notify calls of both turns.
        d.new_pane("sh", &[], &["bash", "--norc", "--noprofile"]);
        let start = d.scratch().join("start.json");
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/signals/claude-2.1.332/SessionStart.json");
        let v: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
        // The fixture is the payload itself (a capture's wrapper had it under `payload`).
        let payload = if v.get("argv").is_some() {
            v["payload"].clone()
        } else {
            v
        };
        std::fs::write(&start, payload.to_string()).unwrap();
        let line = format!(
            "{} signal claude-hook < {}",
            crate::common::BIN,
            start.display()
        );
        crate::report_cli::in_pane(&d, "sh", &d.scratch(), 1, &line);
        seen.extend(feed.until("sh", "session_started", "hook"));
        let ends = seen
            .iter()
            .filter(|v| v["pane"] == name.as_str() && v["signal"] == "turn_ended")
            .count();
        // One per turn. (Under the mock Codex runs no thread-title side
        // turn, so its notify call, which the parser skips, is not seen
        // here: signals_fixtures covers it on the captured payload.)
        assert_eq!(ends, 2, "{seen:#?}");
    }
}
