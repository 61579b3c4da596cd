//! The screen fused with the agents' own signals, against a real supervisor:
//! signals sent from inside a shell pane the way a wired Claude Code sends
//! them (`drover signal claude-hook` with its captured payloads), the
//! screen read as always (docs/agents.md, "Fusing the screen with the
//! agents' signals").

use crate::common;

use common::{Drover, wait_until};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(30);

/// A shell pane `name` on a served state dir.
struct Lane {
    d: Drover,
    name: &'static str,
}

impl Lane {
    fn start(name: &'static str) -> Lane {
        let d = Drover::new();
        d.serve();
        d.new_pane(name, &[], &["sh"]);
        assert_eq!(d.wait_state(&[name], "idle", 20_000).status.code(), Some(0));
        Lane { d, name }
    }

    /// The shell command that runs, inside the pane, what a wired Claude
    /// Code runs for its hook `event`: `drover signal claude-hook` with the
    /// payload Claude Code 2.1.332 sent (tests/fixtures/signals).
    fn send_cmd(&self, event: &str) -> String {
        let payload = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/signals/claude-2.1.332")
            .join(format!("{event}.json"));
        format!(
            "{} signal claude-hook --state-dir {} < {}",
            common::BIN,
            self.d.state.display(),
            payload.display()
        )
    }

    fn explain(&self) -> Value {
        let out = self.d.ok(&["agent", "explain", self.name, "--json"]);
        serde_json::from_str(&out).unwrap()
    }

    /// Wait until `agent explain` satisfies `cond`; returns the last answer.
    fn explain_until(&self, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        let ok = wait_until(LONG, || {
            last = self.explain();
            cond(&last)
        });
        assert!(ok, "never {what}: {last:#}");
        last
    }
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

/// `wait --until done` is answered by the agent's `Stop` (a `turn_ended`
/// note) while the screen still says working: a command holds the shell's
/// terminal, so the screen reads `working` (`fg:job`) throughout.
#[test]
fn a_stop_answers_wait_done_while_the_screen_still_says_working() {
    let l = Lane::start("w");
    let go = l.d.scratch().join("go");
    mkfifo(&go);
    let cmd = format!(
        "{} && cat {} >/dev/null && {} && sleep 600",
        l.send_cmd("UserPromptSubmit"),
        go.display(),
        l.send_cmd("Stop"),
    );
    l.d.ok(&["pane", "send", "w", &cmd]);
    // The screen reads working (a job holds the terminal) and the turn is open.
    l.explain_until("working on screen with a turn open", |x| {
        x["screen"]["state"] == "working" && x["view"]["turn_open"].is_object()
    });
    let waiter =
        l.d.cmd()
            .args([
                "wait",
                "w",
                "--until",
                "done",
                "--timeout-ms",
                "20000",
                "--json",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&go)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "wait --until done: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let x = l.explain();
    assert_eq!(x["screen"]["state"], "working", "{x:#}");
    assert_eq!(x["fused"]["state"], "done", "{x:#}");
    assert_eq!(x["fused"]["source"], "hook", "{x:#}");
    assert_eq!(x["rule"], "turn_ended", "{x:#}");
    let snap = l.d.pane("w").unwrap()["observation"].clone();
    assert_eq!(
        (snap["state"].as_str(), snap["source"].as_str()),
        (Some("done"), Some("hook"))
    );
    assert_eq!(snap["evidence"][0], "fuse:turn_ended", "{snap:#}");
}

struct Follow(common::EventFollow);

impl Follow {
    fn start(d: &Drover) -> Follow {
        Follow(common::EventFollow::of(d, &["--since", "0"]))
    }

    /// The first event satisfying `want`, and every event before it.
    fn until(&self, want: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut seen = Vec::new();
        loop {
            let line = self
                .0
                .next_line(LONG)
                .unwrap_or_else(|| panic!("stream ended or stalled after {seen:#?}"));
            let v: Value = serde_json::from_str(&line).unwrap();
            if want(&v) {
                return (v, seen);
            }
            seen.push(v);
        }
    }
}

/// A turn opened over a shell back at its prompt: the pane follows the
/// signals (working), the screen says idle, and past the bound a
/// `signal.disagree` records both with the screen's hash, once; `agent
/// explain` shows both sources and the rule.
#[test]
fn a_turn_open_over_an_idle_screen_is_working_and_disagrees_past_the_bound() {
    let l = Lane::start("d");
    let feed = Follow::start(&l.d);
    let sent = Instant::now();
    l.d.ok(&["pane", "send", "d", &l.send_cmd("UserPromptSubmit")]);
    let (ev, before) = feed.until(|v| v["kind"] == "signal.disagree");
    let waited = sent.elapsed();
    assert!(
        before
            .iter()
            .any(|e| e["kind"] == "pane.signal" && e["signal"] == "prompt_submitted"),
        "{before:#?}"
    );
    assert_eq!(ev["pane"], "d");
    assert_eq!(
        (ev["screen"].as_str(), ev["signals"].as_str()),
        (Some("idle"), Some("working"))
    );
    assert_eq!(
        (ev["fused"].as_str(), ev["rule"].as_str()),
        (Some("working"), Some("turn_open"))
    );
    assert!(ev["for_ms"].as_u64().unwrap() >= 3_000, "{ev:#}");
    assert!(waited >= Duration::from_secs(3), "{waited:?}");
    assert_eq!(ev["screen_hash"].as_str().map(str::len), Some(16), "{ev:#}");
    let x = l.explain();
    assert_eq!(x["screen"]["state"], "idle", "{x:#}");
    assert_eq!(x["fused"]["state"], "working", "{x:#}");
    assert_eq!(x["rule"], "turn_open");
    assert_eq!(x["screen_hash"], ev["screen_hash"]);
    assert_eq!(x["signals"][0]["source"], "hook");
    assert_eq!(x["signals"][0]["signal"], "prompt_submitted");
    assert_eq!(x["disagreement"]["signals"], "working");
    assert_eq!(x["disagreement_reported"], true);
    // The text form says for how long, not an epoch time.
    let text = l.d.ok(&["agent", "explain", "d"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("disagree\t"))
        .unwrap_or_else(|| panic!("{text}"));
    let ms: u64 = line
        .strip_prefix("disagree\tscreen idle vs signals working for ")
        .and_then(|r| r.strip_suffix(" ms, reported"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((3_000..600_000).contains(&ms), "{line}");
    assert_eq!(l.d.pane("d").unwrap()["observation"]["state"], "working");
    // Once per episode: a later event for this pane is another kind.
    l.d.ok(&["pane", "send", "d", &l.send_cmd("Stop")]);
    let (done, between) = feed.until(|v| v["kind"] == "pane.state" && v["state"] == "done");
    assert!(
        !between.iter().any(|e| e["kind"] == "signal.disagree"),
        "{between:#?}"
    );
    assert_eq!(done["pane"], "d");
}

/// A permission latch with no dialog on screen is `blocked:permission`
/// (reached by a barrier at once), and a tool's result clears it.
#[test]
fn a_permission_latch_blocks_until_the_tools_result() {
    let l = Lane::start("p");
    let cmd = format!(
        "{} && {}",
        l.send_cmd("UserPromptSubmit"),
        l.send_cmd("PermissionRequest"),
    );
    l.d.ok(&["pane", "send", "p", &cmd]);
    let out = l.d.wait_state(&["p"], "blocked:permission", 20_000);
    assert_eq!(out.status.code(), Some(0), "{}", common::stdout(&out));
    let x = l.explain();
    assert_eq!(x["rule"], "permission_latch", "{x:#}");
    assert_eq!(x["view"]["latch"]["tool"], "Bash", "{x:#}");
    l.d.ok(&["pane", "send", "p", &l.send_cmd("PostToolUse")]);
    let out = l.d.wait_state(&["p"], "working", 20_000);
    assert_eq!(out.status.code(), Some(0), "{}", common::stdout(&out));
    assert_eq!(l.explain()["rule"], "turn_open");
    // A pane that is not there: one sentence, exit 5 (not_found).
    let out = l.d.run(&["agent", "explain", "nosuch", "--json"]);
    assert_eq!(out.status.code(), Some(5));
    let err = common::stderr(&out);
    assert!(err.contains("no pane named nosuch"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// The agent's own turn end reaches the shadow policy as evidence: a job
/// dispatched to a pane whose "agent" (a script run by its shell) takes the
/// prompt, signals `UserPromptSubmit`, writes its finalized report and
/// signals `Stop` the way a wired Claude Code does. The evidence holds a
/// `turn_end` (hook, ended, the message's sha256 and never its text) and the
/// policy's `complete` names it, while the screen still says working.
#[test]
fn a_stop_is_turn_end_evidence_the_policy_names() {
    let l = Lane::start("t");
    let agent = l.d.scratch().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            r#"while IFS= read -r line; do
  case "$line" in
    *"[drover] job="*)
      for w in $line; do
        case "$w" in attempt=*) a=${{w#attempt=}};; report=*) r=${{w#report=}};; esac
      done
      {open}
      printf '{{"attempt_id":"%s","session_id":"implementer","state":"finalized","side_effects":[]}}' "$a" > "$r.tmp"
      mv "$r.tmp" "$r"
      {stop}
      exec sleep 600;;
  esac
done
"#,
            open = l.send_cmd("UserPromptSubmit"),
            stop = l.send_cmd("Stop"),
        ),
    )
    .unwrap();
    l.d.ok(&["job", "create", "J1"]);
    let report = l.d.scratch().join("report.json");
    // The prompt's first line starts the script; the trailer's lines are
    // what it reads.
    let prompt = format!("sh {}", agent.display());
    let out = l.d.ok(&[
        "dispatch",
        "J1",
        "--pane",
        "t",
        "--session",
        "implementer",
        "--prompt",
        &prompt,
        "--report",
        &report.display().to_string(),
        "--json",
    ]);
    let attempt = serde_json::from_str::<Value>(&out).unwrap()["attempt_id"]
        .as_str()
        .unwrap()
        .to_string();
    let decisions = l.d.state.join("shadow").join("decisions.jsonl");
    let mut last = Value::Null;
    let decided = wait_until(LONG, || {
        last = std::fs::read_to_string(&decisions)
            .unwrap_or_default()
            .lines()
            .filter_map(|x| serde_json::from_str::<Value>(x).ok())
            .rfind(|d| d["job_id"] == "J1")
            .unwrap_or(Value::Null);
        last["decision"] == "complete"
            && last["reason"]
                .as_str()
                .is_some_and(|r| r.contains("the agent's own turn end: ended by hook"))
    });
    assert!(
        decided,
        "no complete decision naming the turn end: {last:#}"
    );
    assert_eq!(last["summary"]["turn_end"], "ended by hook", "{last:#}");
    let evidence = std::fs::read_to_string(l.d.state.join("evidence").join("J1.jsonl")).unwrap();
    let ends: Vec<Value> = evidence
        .lines()
        .filter_map(|x| serde_json::from_str::<Value>(x).ok())
        .filter(|e| e["kind"] == "turn_end")
        .collect();
    assert_eq!(ends.len(), 1, "one turn end, recorded once: {evidence}");
    let e = &ends[0];
    assert_eq!(
        (e["how"].as_str(), e["source"].as_str()),
        (Some("ended"), Some("hook"))
    );
    assert_eq!(e["session_id"], "implementer");
    let sha = e["message_sha256"].as_str().unwrap_or_default();
    assert!(
        sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
        "{e}"
    );
    // The Stop payload's message text is nowhere in the evidence.
    let stop: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/signals/claude-2.1.332/Stop.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let body = stop["last_assistant_message"].as_str().unwrap_or_default();
    assert!(!body.is_empty() && !evidence.contains(body), "{evidence}");
    assert!(report.exists() && !attempt.is_empty());
}
