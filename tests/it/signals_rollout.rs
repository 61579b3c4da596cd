//! A Codex pane's rollout as a signal source (`transcript`): the supervisor
//! follows the file Codex writes under the pane's CODEX_HOME and publishes
//! its turn starts, aborts, ends and usage as `pane.signal` events of that
//! pane. The agent here is a stand-in program named `codex` (so `pane new`
//! wires it as Codex) that writes a rollout the way Codex does, out of the
//! lines captured from the real one; the parser itself is tested on those
//! captures (signals_fixtures).

use crate::common::{self, Drover};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

/// `drover events --follow --jsonl --since 0 --kind pane.signal`, line by
/// line: from the first event the supervisor holds, so a signal published
/// before the follower had subscribed (a loaded machine) is not missed.
struct Signals(common::EventFollow);

impl Signals {
    fn follow(d: &Drover) -> Signals {
        Signals(common::EventFollow::of(
            d,
            &["--since", "0", "--kind", "pane.signal"],
        ))
    }

    /// The next event as (pane, source, signal).
    fn next(&self) -> (String, String, String) {
        let line = self
            .0
            .next_line(LONG)
            .expect("no pane.signal event in time");
        let v: Value = serde_json::from_str(&line).unwrap();
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        (s("pane"), s("source"), s("signal"))
    }
}

/// A captured rollout line, compact.
fn captured(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/signals/codex-0.171.0")
        .join(format!("rollout-{name}.json"));
    let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    v.to_string()
}

/// The stand-in: answers `--version` as Codex does (drover asks; a stand-in
/// that waited for `$GO` there would outlive the test), else writes
/// `$CODEX_HOME/sessions/…/rollout-…-$THREAD.jsonl`,
/// its `session_meta` naming the cwd, then the lines of `$LINES`, once
/// `$GO` exists; then stays up as Codex does. Without `$THREAD`, each
/// process writes a file of its own.
fn stand_in(bin: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = bin.join("codex");
    std::fs::write(
        &p,
        r#"#!/bin/sh
if [ "$1" = --version ]; then echo "codex-cli 0.171.0"; exit 0; fi
while [ ! -e "$GO" ]; do sleep 0.05; done
d="$CODEX_HOME/sessions/2026/12/06"
mkdir -p "$d"
t="${THREAD:-0199aaaa-0000-7000-8000-$(printf %012d $$)}"
f="$d/rollout-2026-12-06T08-00-00-$t.jsonl"
printf '{"timestamp":"t","type":"session_meta","payload":{"id":"%s","cwd":"%s"}}\n' "$t" "$PWD" >> "$f"
cat "$LINES" >> "$f"
exec sleep 600
"#,
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

/// A pane of the stand-in in `cwd`, writing `lines` once `go` exists.
fn pane(
    d: &Drover,
    (codex, home): (&str, &Path),
    name: &str,
    cwd: &Path,
    lines: &[String],
    go: &Path,
    extra: &[&str],
) {
    let file = d.scratch().join(format!("{name}.lines"));
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&file, text).unwrap();
    let envs = [
        format!("CODEX_HOME={}", home.display()),
        format!(
            "THREAD=0199aaaa-0000-7000-8000-0000000000{:02x}",
            name.as_bytes()[0]
        ),
        format!("LINES={}", file.display()),
        format!("GO={}", go.display()),
    ];
    let mut flags: Vec<&str> = vec!["--agent", "codex", "--cwd", cwd.to_str().unwrap()];
    for e in &envs {
        flags.extend(["--env", e.as_str()]);
    }
    flags.extend_from_slice(extra);
    d.new_pane(name, &flags, &[codex]);
}

/// Pane `a`'s rollout reaches `a` only, in order: task_started, a line
/// over 1 MiB (skipped unread, and the log says so), turn_aborted,
/// token_count, task_complete. Pane `b` (another cwd, the same CODEX_HOME)
/// and pane `n` (a's cwd, `--no-signals`) get nothing from it; b's own
/// rollout, written after, is b's. No line's text reaches the log.
#[test]
fn a_panes_rollout_is_its_transcript_and_no_one_elses() {
    let d = Drover::new();
    let root = d.scratch();
    let bin = root.join("bin");
    let home = root.join("codex-home");
    let (cwd_a, cwd_b) = (root.join("lane-a"), root.join("lane-b"));
    for dir in [&bin, &home, &cwd_a, &cwd_b] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let codex = stand_in(&bin);

    let aborted = captured("turn_aborted");
    let mut big: Value = serde_json::from_str(&aborted).unwrap();
    big["payload"]["padding"] = Value::from("secret-rollout-words ".repeat(60_000));
    let big = big.to_string();
    assert!(big.len() > 1024 * 1024);
    let a_lines = [
        captured("task_started"),
        big,
        aborted,
        captured("token_count"),
        captured("task_complete"),
    ];
    let (go_a, go_b) = (root.join("go-a"), root.join("go-b"));
    pane(
        &d,
        (&codex, &home),
        "b",
        &cwd_b,
        &[captured("task_complete")],
        &go_b,
        &[],
    );
    let signals = Signals::follow(&d);
    pane(
        &d,
        (&codex, &home),
        "n",
        &cwd_a,
        &[],
        &root.join("never"),
        &["--no-signals"],
    );
    pane(&d, (&codex, &home), "a", &cwd_a, &a_lines, &go_a, &[]);
    std::fs::write(&go_a, "").unwrap();

    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(signals.next());
    }
    std::fs::write(&go_b, "").unwrap();
    got.push(signals.next());
    let want: Vec<(String, String, String)> = [
        ("a", "prompt_submitted"),
        ("a", "turn_aborted"),
        ("a", "usage"),
        ("a", "turn_ended"),
        ("b", "turn_ended"),
    ]
    .iter()
    .map(|(p, s)| (p.to_string(), "transcript".to_string(), s.to_string()))
    .collect();
    assert_eq!(got, want);

    let log = std::fs::read_to_string(drover::statedir::StateDir::new(&d.state).supervisor_log())
        .unwrap_or_default();
    assert!(!log.contains("secret-rollout-words"));
    assert!(
        log.contains("skipped rollout lines over the bound"),
        "{log}"
    );
}

/// A respawned pane follows its new generation's file, never the previous
/// one's again: one `prompt_submitted` a generation, each of its own.
#[test]
fn a_respawn_follows_the_new_generations_file() {
    let d = Drover::new();
    let root = d.scratch();
    let (bin, home, cwd) = (root.join("bin"), root.join("home"), root.join("lane"));
    for dir in [&bin, &home, &cwd] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let codex = stand_in(&bin);
    let go = root.join("go");
    let lines = root.join("r.lines");
    std::fs::write(&lines, captured("task_started") + "\n").unwrap();
    let envs = [
        format!("CODEX_HOME={}", home.display()),
        format!("LINES={}", lines.display()),
        format!("GO={}", go.display()),
    ];
    let mut flags = vec!["--agent", "codex", "--cwd", cwd.to_str().unwrap()];
    for e in &envs {
        flags.extend(["--env", e.as_str()]);
    }
    d.new_pane("r", &flags, &[&codex]);
    let signals = Signals::follow(&d);
    std::fs::write(&go, "").unwrap();
    let gen_of = |line: String| -> (String, u64) {
        let v: Value = serde_json::from_str(&line).unwrap();
        (
            v["signal"].as_str().unwrap().to_string(),
            v["generation"].as_u64().unwrap(),
        )
    };
    let first = gen_of(signals.0.next_line(LONG).expect("generation 1's signal"));
    assert_eq!(first, ("prompt_submitted".to_string(), 1));
    d.ok(&["pane", "respawn", "r"]);
    let second = gen_of(signals.0.next_line(LONG).expect("generation 2's signal"));
    assert_eq!(second, ("prompt_submitted".to_string(), 2));
    let files: Vec<_> = std::fs::read_dir(home.join("sessions/2026/12/06"))
        .unwrap()
        .collect();
    assert_eq!(files.len(), 2, "one rollout a generation");
    // The previous file gives nothing more: a barrier event from another
    // pane's rollout comes next.
    let go2 = root.join("go2");
    let l2 = root.join("s.lines");
    std::fs::write(&l2, captured("turn_aborted") + "\n").unwrap();
    let envs2 = [
        format!("CODEX_HOME={}", home.display()),
        format!("LINES={}", l2.display()),
        format!("GO={}", go2.display()),
    ];
    let other = root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut flags = vec!["--agent", "codex", "--cwd", other.to_str().unwrap()];
    for e in &envs2 {
        flags.extend(["--env", e.as_str()]);
    }
    d.new_pane("s", &flags, &[&codex]);
    std::fs::write(&go2, "").unwrap();
    assert_eq!(
        signals.next(),
        ("s".into(), "transcript".into(), "turn_aborted".into())
    );
}

/// The flags `pane new --agent codex` puts after the program name in `d`'s
/// state dir (the pane is removed again).
fn wired_codex_flags(d: &Drover) -> Vec<String> {
    let dir = d.scratch().join("stand-in");
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join("codex");
    std::fs::write(&prog, "#!/bin/sh\nexec sleep 600\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let v = d.new_pane("wiring", &["--agent", "codex"], &[prog.to_str().unwrap()]);
    d.ok(&["pane", "kill", "wiring"]);
    let argv: Vec<String> = serde_json::from_value(v["argv"].clone()).unwrap();
    argv[1..].to_vec()
}

/// The next event of `pane` from `source` with `signal`, skipping others.
fn until(s: &Signals, pane: &str, source: &str, signal: &str) -> Vec<(String, String, String)> {
    let mut seen = Vec::new();
    loop {
        let e = s.next();
        let hit = e.0 == pane && e.1 == source && e.2 == signal;
        seen.push(e);
        if hit {
            return seen;
        }
    }
}

/// Every supported real Codex, against the mock, started with the notify
/// `pane new` wires (as `drover rehearse` arguments): its rollout gives its
/// pane `transcript` events: a turn's start and end, and an interrupted
/// turn's abort, which `notify` never reports.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn real_codex_rollout_gives_turn_starts_ends_and_aborts() {
    use drover::rehearse::{Agent, discover};
    for version in discover::versions(Agent::Codex) {
        let d = Drover::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let name = format!("x{}", version.replace('.', "_"));
        let flags = wired_codex_flags(&d);
        let real = discover::cached_version(Agent::Codex, &version)
            .unwrap_or_else(|| panic!("{version} is not installed: run scripts/install-agents.sh"));
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mock-scripts/codex-suite.toml");
        let mut args: Vec<String> = [
            "rehearse",
            "--json",
            "--agent",
            "codex",
            "--name",
            &name,
            "--script",
            script.to_str().unwrap(),
            "--codex-bin",
            real.to_str().unwrap(),
            "--",
        ]
        .map(String::from)
        .to_vec();
        args.extend(flags);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        d.ok(&args);
        let w = d.wait_state(&[&name], "idle", 60_000);
        assert!(w.status.success(), "{name} never idle: {}", d.read(&name));
        let s = Signals::follow(&d);
        d.ok(&["send", &name, "say hello"]);
        let mut seen = until(&s, &name, "transcript", "prompt_submitted");
        seen.extend(until(&s, &name, "transcript", "turn_ended"));
        d.ok(&["send", &name, "take your time"]);
        seen.extend(until(&s, &name, "transcript", "prompt_submitted"));
        d.wait_text(&name, "This reply", LONG);
        d.ok(&["pane", "keys", &name, "Esc"]);
        seen.extend(until(&s, &name, "transcript", "turn_aborted"));
        assert!(seen.iter().all(|(p, _, _)| p == &name), "{seen:?}");
    }
}
