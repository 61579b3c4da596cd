//! `drover signal`: the agents' own signals reach the supervisor of the pane
//! that holds the caller (docs/agents.md, "The agents' own signals"). Each
//! hook call runs as an agent's would, from the shell in a real pane, with
//! the JSON a real agent sent (tests/fixtures/signals); the one fake is a
//! socket that accepts and never answers, a fault the real supervisor
//! cannot be made to show.

use crate::common::{self, BIN, Drover};
use crate::report_cli::in_pane;
use drover::proto::signal::{Signal, SignalNote, Source};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

    /// The next `pane.signal` event, and its raw line.
    fn next(&self) -> (Value, String) {
        let line = self
            .0
            .next_line(LONG)
            .expect("no pane.signal event in time");
        (serde_json::from_str(&line).unwrap(), line)
    }
}

fn fixture(rel: &str) -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/signals")
        .join(rel);
    let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    // A capture's wrapper (`argv`, `payload`) or the payload itself.
    if v.get("argv").is_some() {
        v["payload"].clone()
    } else {
        v
    }
}

/// `v` written to `dir/name`; its path.
fn file(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// A shell pane, with an env value that must never show up anywhere.
fn shell(d: &Drover, name: &str) {
    d.new_pane(
        name,
        &["--env", "SIGNAL_TEST_TOKEN=env-value-never-shown"],
        &["bash", "--norc", "--noprofile"],
    );
}

/// Run `drover signal ARGS` in pane `pane` with `stdin` from a file.
fn hook_in(d: &Drover, pane: &str, n: u32, what: &str, stdin: &Path) -> crate::report_cli::Ran {
    let line = format!("{BIN} signal {what} < {}", stdin.display());
    in_pane(d, pane, &d.scratch(), n, &line)
}

fn assert_event(v: &Value, pane: &str, signal: &str, source: &str) {
    assert_eq!(v["pane"], pane, "{v}");
    assert_eq!(v["signal"], signal, "{v}");
    assert_eq!(v["source"], source, "{v}");
}

/// A hook in pane a is a's signal, one in b is b's; a caller outside every
/// pane is told `pane: null` and nothing is published; neither the prompt
/// nor an env value reaches the feed or the supervisor's log.
#[test]
fn each_panes_hooks_are_its_own_and_a_stranger_is_nobodys() {
    let d = Drover::new();
    d.serve();
    let feed = Signals::follow(&d);
    shell(&d, "a");
    shell(&d, "b");
    let dir = d.scratch();
    let mut asked = fixture("claude-2.1.197/PermissionRequest.json");
    asked["tool_input"]["command"] = "echo prompt-body-never-shown".into();
    let asked = file(&dir, "asked.json", &asked);
    let mut prompt = fixture("claude-2.1.197/UserPromptSubmit.json");
    prompt["prompt"] = "prompt-body-never-shown".into();
    let prompt = file(&dir, "prompt.json", &prompt);
    let stop = file(&dir, "stop.json", &fixture("claude-2.1.332/Stop.json"));

    // From outside every pane: the op says so, the command exits 0.
    let out = Command::new(BIN)
        .args(["signal", "claude-hook", "--debug"])
        .env("DROVER_STATE_DIR", &d.state)
        .stdin(std::fs::File::open(&prompt).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(
        common::stderr(&out).contains("no supervisor's pane holds this process"),
        "{}",
        common::stderr(&out)
    );
    let mut c = drover::daemon::Client::connect_running(
        drover::statedir::StateDir::new(&d.state),
        &d.socket(),
    )
    .expect("the supervisor");
    let taken = c
        .call(drover::proto::args::Signal {
            note: SignalNote {
                source: Source::Hook,
                session: None,
                signal: Signal::PromptSubmitted,
            },
        })
        .unwrap();
    assert_eq!(taken.pane, None);

    let r = hook_in(&d, "a", 1, "claude-hook", &asked);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (Some(0), "", "")
    );
    // The first event is a's: the stranger's calls above published nothing.
    let (ev, l1) = feed.next();
    assert_event(&ev, "a", "permission_asked", "hook");
    let r = hook_in(&d, "b", 1, "claude-hook", &stop);
    assert_eq!(r.code, Some(0));
    let (ev, l2) = feed.next();
    assert_event(&ev, "b", "turn_ended", "hook");
    let r = hook_in(&d, "a", 2, "claude-hook", &prompt);
    assert_eq!(r.code, Some(0));
    let (ev, l3) = feed.next();
    assert_event(&ev, "a", "prompt_submitted", "hook");

    let log = std::fs::read_to_string(drover::statedir::StateDir::new(&d.state).supervisor_log())
        .unwrap_or_default();
    for text in [&l1, &l2, &l3, &log] {
        assert!(!text.contains("prompt-body-never-shown"), "{text}");
        assert!(!text.contains("env-value-never-shown"), "{text}");
    }
}

/// The status line prints `drover · <pane>` and its limits are taken;
/// Codex's notify JSON as the last argument is a turn's end.
#[test]
fn the_status_line_prints_its_pane_and_notify_takes_its_last_argument() {
    let d = Drover::new();
    d.serve();
    let feed = Signals::follow(&d);
    shell(&d, "st");
    let dir = d.scratch();
    let mut status = fixture("claude-2.1.197/status-line.json");
    status["rate_limits"] = serde_json::json!({
        "five_hour": {"used_percentage": 41, "resets_at": 1796550008},
        "seven_day": {"used_percentage": 12.5, "resets_at": 1797033600}
    });
    let status = file(&dir, "status.json", &status);
    let r = hook_in(&d, "st", 1, "claude-status", &status);
    assert_eq!(r.code, Some(0));
    assert_eq!(r.stdout, "drover · st\n");
    assert_eq!(r.stderr, "");
    // A limits or usage event carries its figures (a feed reader needs no
    // `pane explain` to see them), and nothing else of the status line.
    let (ev, _) = feed.next();
    assert_event(&ev, "st", "limits", "status");
    assert_eq!(ev["limits"]["short"]["used_percent"], 41.0, "{ev}");
    assert_eq!(ev["limits"]["long"]["resets_at"], 1797033600, "{ev}");
    assert!(ev.get("usage").is_none(), "{ev}");
    let (ev, _) = feed.next();
    assert_event(&ev, "st", "usage", "status");
    assert_eq!(ev["usage"]["cost_usd"], 0.0, "{ev}");
    assert!(ev["usage"]["input_tokens"].is_u64(), "{ev}");
    assert!(ev.get("limits").is_none(), "{ev}");
    // Claude gone, its end of the status line closed: still exit 0, no word.
    let closed = format!(
        "( {BIN} signal claude-status < {} >&- ; echo rc=$? )",
        status.display()
    );
    let r = in_pane(&d, "st", &dir, 3, &closed);
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("rc=0\n", ""));

    let notify = fixture("codex-0.171.0/notify.agent-turn-complete.json").to_string();
    let line = format!("{BIN} signal codex-notify \"$(cat {})\"", {
        let p = dir.join("notify.json");
        std::fs::write(&p, &notify).unwrap();
        p.display().to_string()
    });
    let r = in_pane(&d, "st", &dir, 2, &line);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    let (ev, _) = feed.next();
    assert_event(&ev, "st", "turn_ended", "notify");
}

/// Garbage, an unknown event and more than 1 MiB on stdin: exit 0, nothing
/// on stdout or stderr, nothing published (the next real hook is the first
/// event).
#[test]
fn garbage_and_oversized_input_exit_0_and_publish_nothing() {
    let d = Drover::new();
    d.serve();
    let feed = Signals::follow(&d);
    shell(&d, "g");
    let dir = d.scratch();
    std::fs::write(dir.join("garbage"), b"\x00\xffnot json {").unwrap();
    std::fs::write(
        dir.join("unknown.json"),
        br#"{"hook_event_name":"NoSuchEvent","session_id":"s"}"#,
    )
    .unwrap();
    let mut big = br#"{"hook_event_name":"Stop","last_assistant_message":""#.to_vec();
    big.resize(2 << 20, b'a');
    big.extend_from_slice(b"\"}");
    std::fs::write(dir.join("big.json"), &big).unwrap();
    for (n, f) in [(1, "garbage"), (2, "unknown.json"), (3, "big.json")] {
        let r = hook_in(&d, "g", n, "claude-hook", &dir.join(f));
        assert_eq!(
            (r.code, r.stdout.as_str(), r.stderr.as_str()),
            (Some(0), "", ""),
            "{f}"
        );
    }
    let r = in_pane(&d, "g", &dir, 4, &format!("{BIN} signal codex-notify"));
    assert_eq!(r.code, Some(0));
    let r = in_pane(&d, "g", &dir, 5, &format!("{BIN} signal no-such-channel x"));
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    let start = file(
        &dir,
        "start.json",
        &fixture("claude-2.1.332/SessionStart.json"),
    );
    hook_in(&d, "g", 6, "claude-hook", &start);
    let (ev, _) = feed.next();
    assert_event(&ev, "g", "session_started", "hook");
}

/// A private socket dir holding one socket that accepts and never answers
/// (a hung supervisor), for `XDG_RUNTIME_DIR`.
fn hung_runtime_dir(root: &Path) -> (PathBuf, std::os::unix::net::UnixListener) {
    use std::os::unix::fs::PermissionsExt;
    let rt = root.join("rt");
    let sock_dir = rt.join("drover");
    std::fs::create_dir_all(&sock_dir).unwrap();
    std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let l = std::os::unix::net::UnixListener::bind(sock_dir.join("0000000000000000.sock")).unwrap();
    (rt, l)
}

/// `drover signal` as a hook runs it, timed from spawn to exit.
fn timed(envs: &[(&str, &Path)], stdin: Stdio, what: &str) -> (Duration, std::process::Output) {
    let mut c = Command::new(BIN);
    c.args(["signal", what]).stdin(stdin);
    for (k, v) in envs {
        c.env(k, v);
    }
    let t = Instant::now();
    let out = c.output().unwrap();
    (t.elapsed(), out)
}

/// However the supervisor fails — stopped, hung, or stdin never closed —
/// `drover signal` exits 0 at its bound, silently.
#[test]
fn no_supervisor_a_hung_one_or_an_open_stdin_never_hold_the_agent() {
    // Spawn and exit on a loaded machine take time of their own: the
    // bound is 300 ms inside, this much as the agent sees it.
    let seen_bound = Duration::from_millis(1500);
    let d = Drover::new();
    d.serve();
    let root = d.scratch();
    let start = file(
        &root,
        "start.json",
        &fixture("claude-2.1.332/SessionStart.json"),
    );
    d.kill_supervisor();
    let (t, out) = timed(
        &[("DROVER_STATE_DIR", &d.state)],
        Stdio::from(std::fs::File::open(&start).unwrap()),
        "claude-hook",
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty() && out.stdout.is_empty());
    assert!(t < seen_bound, "stopped supervisor: {t:?}");

    let (rt, listener) = hung_runtime_dir(&root);
    // Held open, never answered.
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in listener.incoming().take(2) {
            conns.push(c);
        }
        std::thread::sleep(Duration::from_secs(5));
    });
    let (t, out) = timed(
        &[("XDG_RUNTIME_DIR", &rt)],
        Stdio::from(std::fs::File::open(&start).unwrap()),
        "claude-hook",
    );
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(out.stderr.is_empty() && out.stdout.is_empty());
    assert!(
        t >= Duration::from_millis(250),
        "it did not wait for the answer: {t:?}"
    );
    assert!(t < seen_bound, "hung socket: {t:?}");
    let (t, out) = timed(
        &[("XDG_RUNTIME_DIR", &rt)],
        Stdio::from(std::fs::File::open(&start).unwrap()),
        "claude-status",
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    assert!(t < seen_bound, "hung socket, status line: {t:?}");
    drop(held);

    // A stdin the agent never closes.
    let mut c = Command::new(BIN)
        .args(["signal", "claude-hook"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let _open = c.stdin.take();
    assert!(
        common::wait_until(seen_bound, || c.try_wait().ok().flatten().is_some()),
        "still running with stdin open"
    );
    assert_eq!(c.wait().unwrap().code(), Some(0));
    assert!(t.elapsed() < seen_bound);
}

fn argv_of(p: &Value) -> Vec<String> {
    let a = p
        .get("argv")
        .or_else(|| p.get("info").and_then(|i| i.get("argv")))
        .unwrap_or_else(|| panic!("no argv in {p}"));
    serde_json::from_value(a.clone()).unwrap()
}

/// An executable `name` in `dir` that stays up (a stand-in for the agent's
/// program: only its argv is looked at).
fn program(dir: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// `pane new --agent claude -- claude …` gets `--settings` with a private
/// file naming the absolute drover; `--agent codex -- codex …` gets its
/// notify; `--no-signals` and a program that is not the agent get nothing.
#[test]
fn pane_new_wires_claude_and_codex_unless_no_signals() {
    use std::os::unix::fs::PermissionsExt;
    let d = Drover::new();
    let bin = d.scratch().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = program(&bin, "claude").display().to_string();
    let codex = program(&bin, "codex").display().to_string();

    let p = d.new_pane(
        "c",
        &["--agent", "claude"],
        &[&claude, "--permission-mode", "plan"],
    );
    let argv = argv_of(&p);
    let settings = d.state.join("signals/c/claude-settings.json");
    assert_eq!(
        argv,
        [
            claude.as_str(),
            "--settings",
            settings.to_str().unwrap(),
            "--permission-mode",
            "plan"
        ]
    );
    let mode = std::fs::metadata(&settings).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let doc: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    let hook = doc["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    let state = d.state.display();
    assert_eq!(
        hook,
        format!("{BIN} signal claude-hook --state-dir {state}")
    );
    assert!(Path::new(BIN).is_absolute());
    assert_eq!(
        doc["statusLine"]["command"].as_str().unwrap(),
        format!("{BIN} signal claude-status --state-dir {state}")
    );
    let listed = d.pane("c").unwrap();
    assert!(argv_of(&listed).contains(&"--settings".to_string()));

    let p = d.new_pane("x", &["--agent", "codex"], &[&codex]);
    assert_eq!(
        argv_of(&p),
        [
            codex.as_str(),
            "-c",
            &format!(r#"notify=["{BIN}","signal","codex-notify","--state-dir","{state}"]"#)
        ]
    );

    let p = d.new_pane("n", &["--agent", "claude", "--no-signals"], &[&claude]);
    assert_eq!(argv_of(&p), [claude.as_str()]);
    assert!(!d.state.join("signals/n").exists());
    let p = d.new_pane("s", &["--agent", "claude"], &["sleep", "600"]);
    assert_eq!(argv_of(&p), ["sleep", "600"]);
}

/// A bin dir with `git`, `sh`, `sleep` and, when `agents`, stand-ins for
/// `claude` and `codex` (only their argv is looked at).
fn path_with(root: &Path, agents: bool) -> PathBuf {
    let bin = root.join(if agents { "bin-agents" } else { "bin-git" });
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh", "sleep"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8(found.stdout).unwrap();
        std::os::unix::fs::symlink(path.trim(), bin.join(tool)).unwrap();
    }
    if agents {
        program(&bin, "claude");
        program(&bin, "codex");
    }
    bin
}

/// `lane up` with the real agents' names starts Claude with `--settings`
/// and Codex with its notify, in the argv and the resuming argv; a refused
/// `lane up` writes no settings file.
#[test]
fn lane_up_wires_each_agent_and_a_refused_one_writes_nothing() {
    let d = Drover::new();
    let repo = crate::lanes_common::repo(&d);
    let up = |path: &Path| {
        d.cmd()
            .args(["lane", "up", "--topology", "four-role", "--repo"])
            .arg(&repo)
            .args(["--agents", "claude,codex", "--sessions", "implementer"])
            .args(["--timeout-ms", "1000"])
            .env("PATH", path)
            .output()
            .unwrap()
    };
    let out = up(&path_with(&d.scratch(), false));
    assert!(!out.status.success());
    assert!(common::stderr(&out).contains("is not on PATH"));
    assert!(
        !d.state.join("signals").exists(),
        "a refused lane up wrote settings"
    );

    // The stand-ins never draw a prompt: the lanes are recorded, not ready.
    let _ = up(&path_with(&d.scratch(), true));
    let recs = crate::lanes_common::records(&d);
    let rec = |id: &str| {
        recs.iter()
            .find(|r| r["lane_id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {recs:?}"))
            .clone()
    };
    let words = |v: &Value| -> Vec<String> { serde_json::from_value(v.clone()).unwrap() };
    let settings = d
        .state
        .join("signals/implementer-claude/claude-settings.json");
    let s = settings.display().to_string();
    let c = rec("implementer-claude");
    assert_eq!(words(&c["argv"])[1..3], ["--settings", s.as_str()]);
    assert_eq!(words(&c["resume_argv"])[1..3], ["--settings", s.as_str()]);
    assert!(settings.is_file());
    let x = rec("implementer-codex");
    let notify = format!(
        r#"notify=["{BIN}","signal","codex-notify","--state-dir","{}"]"#,
        d.state.display()
    );
    assert_eq!(words(&x["argv"])[1..3], ["-c", notify.as_str()]);
    assert_eq!(words(&x["resume_argv"])[1..3], ["-c", notify.as_str()]);
    let _ = d.run(&["lane", "down", "--all"]);
}

/// `DROVER_SIGNALS=off` is the lanes' `--no-signals`: the agents start as
/// they would without drover's wiring, and no settings file is written.
#[test]
fn drover_signals_off_starts_lanes_unwired() {
    let d = Drover::new();
    let repo = crate::lanes_common::repo(&d);
    let _ = d
        .cmd()
        .args(["lane", "up", "--topology", "four-role", "--repo"])
        .arg(&repo)
        .args(["--agents", "claude,codex", "--sessions", "implementer"])
        .args(["--timeout-ms", "1000"])
        .env("PATH", path_with(&d.scratch(), true))
        .env("DROVER_SIGNALS", "off")
        .output()
        .unwrap();
    let recs = crate::lanes_common::records(&d);
    assert_eq!(recs.len(), 2, "{recs:?}");
    for r in &recs {
        let argv = r["argv"].to_string();
        assert!(
            !argv.contains("--settings") && !argv.contains("notify="),
            "{argv}"
        );
    }
    assert!(!d.state.join("signals").exists(), "settings written");
    let _ = d.run(&["lane", "down", "--all"]);
}

/// A hook that fires as its pane's first act, before the supervisor has put
/// the new pane in its table, is still the pane's: the supervisor keeps it
/// for the pane being created, which takes it once it is in the table.
#[test]
fn a_hook_fired_while_its_pane_is_created_is_its_panes() {
    let d = Drover::new();
    d.serve();
    let stdin = file(
        &d.scratch(),
        "start.json",
        &fixture("claude-2.1.332/SessionStart.json"),
    );
    // Each pane is one chance at the race (it lost about half the time
    // here without the wait).
    for i in 0..10 {
        let name = format!("early{i}");
        let done = d.scratch().join(format!("{name}.done"));
        let script = format!(
            "{BIN} signal claude-hook --state-dir {} < {}; touch {}; exec sleep 600",
            d.state.display(),
            stdin.display(),
            done.display()
        );
        d.new_pane(&name, &[], &["sh", "-c", &script]);
        assert!(
            common::wait_until(LONG, || done.exists()),
            "the hook in {name} never returned"
        );
        let x: Value = serde_json::from_str(&d.ok(&["agent", "explain", &name, "--json"])).unwrap();
        assert_eq!(
            x["signals"][0]["signal"], "session_started",
            "{name}: {x:#}"
        );
        assert_eq!(x["signals"][0]["source"], "hook", "{name}: {x:#}");
    }
}
