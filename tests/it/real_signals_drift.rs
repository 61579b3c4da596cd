//! A simulated drift on the real TUIs: the agent wired as a lane's pane is
//! (`agent::signal_wire`), its supervisor started on a state dir whose
//! `rules.toml` is the builtin rules minus the screen rules a new agent
//! version could break (the operator's override, docs/agents.md "Rules
//! file"). The screen then misreads the agent; the fused state must still
//! be right from the agent's own signals, and the disagreement must be a
//! `signal.disagree` event (docs/agents.md, "Fusing the screen with the
//! agents' signals"). With the full rules the same turns give none: the
//! canary stays quiet when nothing drifted.
//!
//! Every test runs on each supported version of its agent against the mock
//! model (`signals.toml`'s `wait a little`: the agent works for 8 s before
//! any reply text, past the 3 s bound); ignored by plain `cargo test`.

use crate::common;
use crate::real_agents::{Agent, Run};
use crate::real_signals_common::{SIGNAL_TIMEOUT, deliver, lane_worktree, signals_script};

use drover::agent::AgentKind;
use drover::agent::rules::{BUILTIN_RULES, ScreenView, compile};
use serde_json::Value;
use std::os::unix::fs::DirBuilderExt;
use std::time::Instant;

/// The prompt whose reply holds the turn open (`signals.toml`).
const SLOW: &str = "wait a little";
/// Claude's spinner rules: with them off a working Claude reads idle.
const CLAUDE_WORKING: [&str; 2] = ["claude.working.footer", "claude.working.status"];
/// Claude's permission dialog rule.
const CLAUDE_PERMISSION: &str = "claude.permission";
/// Codex's `• Working (… esc to interrupt)` rule.
const CODEX_WORKING: &str = "codex.working";

/// The builtin rules without the rules named in `off`, checked: it compiles
/// and holds every other rule.
fn drifted(off: &[&str]) -> String {
    let mut out = String::new();
    let mut dropped = 0;
    for (i, chunk) in BUILTIN_RULES.split("[[rule]]\n").enumerate() {
        let name = chunk
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'));
        if i > 0 && name.is_some_and(|n| off.contains(&n)) {
            dropped += 1;
            continue;
        }
        if i > 0 {
            out.push_str("[[rule]]\n");
        }
        out.push_str(chunk);
    }
    assert_eq!(dropped, off.len(), "a rule of {off:?} is not builtin");
    let all = compile(BUILTIN_RULES, "builtin").expect("builtin rules");
    let left = compile(&out, "drifted").expect("drifted rules compile");
    assert_eq!(left.len(), all.len() - off.len());
    assert!(left.iter().all(|r| !off.contains(&r.name.as_str())));
    out
}

/// `agent` in a rehearsal, wired as a lane's pane, in a lane worktree; its
/// supervisor starts on a state dir holding the builtin rules minus `off`
/// (the full builtin rules when `off` is empty: no file).
fn start(agent: Agent, v: &str, name: &str, off: &[&str]) -> Run {
    let script = signals_script("");
    let backend = common::backend();
    Run::start_args(&backend, agent, v, name, &script, None, &[], |root| {
        let state = root.join("state");
        if !off.is_empty() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&state)
                .expect("create the state dir");
            std::fs::write(state.join("rules.toml"), drifted(off)).expect("write rules.toml");
        }
        let mut args = lane_worktree(root);
        // Wired as a lane's agent is: the flags right after the program.
        args.push("--signals".into());
        args
    })
}

/// The run's pane's events on its supervisor's feed, from the first it holds.
struct Feed {
    follow: common::EventFollow,
    seen: Vec<Value>,
    /// Where the current step's events start in `seen`.
    from: usize,
}

impl Feed {
    fn follow(r: &Run) -> Feed {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_drover"));
        cmd.arg("--state-dir").arg(&r.state).args([
            "events", "--follow", "--jsonl", "--since", "0", "--pane", &r.pane,
        ]);
        Feed {
            follow: common::EventFollow::start(cmd),
            seen: Vec::new(),
            from: 0,
        }
    }

    /// Wait until an event of this step satisfies `want`; returns it.
    fn until(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + SIGNAL_TIMEOUT;
        loop {
            if let Some(v) = self.seen[self.from..].iter().find(|v| want(v)) {
                return v.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.follow.next_line(left) {
                Some(line) => self.seen.extend(serde_json::from_str::<Value>(&line).ok()),
                None => panic!(
                    "no {what} within {SIGNAL_TIMEOUT:?}; seen: {:?}",
                    self.kinds()
                ),
            }
        }
    }

    /// Wait until the pane's `signal` came from `source`.
    fn signal(&mut self, signal: &str, source: &str) -> Value {
        self.until(&format!("pane.signal {signal} from {source}"), |v| {
            v["kind"] == "pane.signal" && v["signal"] == signal && v["source"] == source
        })
    }

    /// Wait until the pane's `signal.disagree` of this step.
    fn disagree(&mut self) -> Value {
        self.until("signal.disagree", |v| v["kind"] == "signal.disagree")
    }

    /// The next step's events start after those read so far.
    fn next_step(&mut self) {
        for line in self.follow.ready_lines() {
            self.seen.extend(serde_json::from_str::<Value>(&line).ok());
        }
        self.from = self.seen.len();
    }

    /// Every `signal.disagree` seen, of any step.
    fn disagreements(&self) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|v| v["kind"] == "signal.disagree")
            .collect()
    }

    /// `kind[:signal|state]` of every event seen.
    fn kinds(&self) -> Vec<String> {
        self.seen
            .iter()
            .map(|v| {
                let k = v["kind"].as_str().unwrap_or("?");
                match v["signal"].as_str().or(v["state"].as_str()) {
                    Some(s) => format!("{k}:{s}"),
                    None => k.to_string(),
                }
            })
            .collect()
    }
}

/// `drover agent explain PANE --json`, until `cond` holds (a signal's
/// re-fusion lands just after its event is published).
fn explain_until(r: &Run, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let ok = common::wait_until(SIGNAL_TIMEOUT, || {
        last = serde_json::from_str(&r.drover(&["agent", "explain", &r.pane, "--json"]))
            .expect("agent explain --json");
        cond(&last)
    });
    assert!(ok, "{} {}: never {what}: {last:#}", r.pane, r.version);
    last
}

/// The screen's own verdict, as labelled (`idle`, `blocked:permission`).
fn screen_label(x: &Value) -> String {
    let s = x["screen"]["state"].as_str().unwrap_or("?");
    match x["screen"]["kind"].as_str() {
        Some(k) => format!("{s}:{k}"),
        None => s.to_string(),
    }
}

/// Whether the screen's evidence names a rule starting with `prefix`.
fn screen_rule(x: &Value, prefix: &str) -> bool {
    x["screen"]["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|e| e.starts_with(&format!("rule:{prefix}")))
}

/// A `signal.disagree` of the pane past the bound, naming the screen's
/// verdict, what the signals say and the screen's hash.
fn assert_disagree(ev: &Value, r: &Run, signals: &str, fused: &str, rule: &str) {
    let at = format!("{} {}: {ev}", r.pane, r.version);
    eprintln!("{at}");
    assert_eq!(ev["pane"], r.pane.as_str(), "{at}");
    assert_eq!(ev["signals"], signals, "{at}");
    assert_eq!(
        (ev["fused"].as_str(), ev["rule"].as_str()),
        (Some(fused), Some(rule)),
        "{at}"
    );
    assert_ne!(ev["screen"], signals, "{at}");
    assert!(ev["for_ms"].as_u64().is_some_and(|ms| ms >= 3_000), "{at}");
    let hash = ev["screen_hash"].as_str().unwrap_or_default();
    assert!(
        hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{at}"
    );
}

/// The builtin rule that reads the screen `text` of an agent of `kind`.
fn builtin_verdict(text: &str, kind: AgentKind) -> Option<String> {
    let rules = compile(BUILTIN_RULES, "builtin").expect("builtin rules");
    let rows = drover::agent::classify::rows_from_text(text);
    ScreenView::new(&rows, 120)
        .first_match(&rules, kind)
        .map(|r| r.name.clone())
}

/// What a screen blind to the agent's work reads: ready by the rules
/// left, or `unknown` while a spinner title contradicts them and the
/// spinner keeps the output from settling (Claude 2.1.197).
fn blind(label: &str) -> bool {
    matches!(label, "idle" | "done" | "unknown")
}

/// Claude's slow turn over a screen that cannot see it work: the pane is
/// `working` by `UserPromptSubmit` while the screen does not read working
/// (the builtin rules would, on the same frame), a `signal.disagree` says
/// so, and `Stop` makes it `done`.
fn claude_slow_turn(r: &mut Run, feed: &mut Feed, off: &[&str]) {
    let who = format!("{} {}", r.pane, r.version);
    feed.next_step();
    r.prompt(SLOW);
    let ev = feed.disagree();
    assert_disagree(&ev, r, "working", "working", "turn_open");
    assert!(blind(ev["screen"].as_str().unwrap_or("?")), "{who}: {ev}");
    let x = drift_is_real(r, AgentKind::Claude, off);
    assert!(x["view"]["turn_open"].is_object(), "{who}: {x:#}");
    assert_eq!(x["fused"]["state"], "working", "{who}: {x:#}");
    assert_eq!(x["fused"]["source"], "hook", "{who}: {x:#}");
    assert!(
        blind(&screen_label(&x)),
        "{who}: the screen alone should not read working: {x:#}"
    );
    assert!(!screen_rule(&x, "claude.working"), "{who}: {x:#}");
    assert_eq!(x["disagreement"]["signals"], "working", "{who}: {x:#}");
    assert_eq!(x["disagreement_reported"], true, "{who}: {x:#}");
    r.expect_state("done");
    let x = explain_until(r, "done by Stop", |x| x["rule"] == "turn_ended");
    assert_eq!(x["fused"]["state"], "done", "{who}: {x:#}");
    assert_eq!(x["fused"]["source"], "hook", "{who}: {x:#}");
}

/// Wait until the builtin rules read the pane's screen with one of the
/// rules switched off in `off` (the agent draws what they would see); then
/// `agent explain`, still in the open turn: returns it.
fn drift_is_real(r: &mut Run, kind: AgentKind, off: &[&str]) -> Value {
    let mut seen = (None, String::new());
    let drawn = common::wait_until(SIGNAL_TIMEOUT, || {
        let text = r.read()["text"].as_str().unwrap_or_default().to_string();
        seen = (builtin_verdict(&text, kind), text);
        seen.0.as_deref().is_some_and(|n| off.contains(&n))
    });
    assert!(
        drawn,
        "{} {}: the builtin rules never read a rule switched off ({:?}):\n{}",
        r.pane, r.version, seen.0, seen.1
    );
    explain_until(r, "the turn still open", |x| x["rule"] == "turn_open")
}

/// Claude with its spinner and permission rules off: a slow turn is
/// `working` from `UserPromptSubmit` over a screen that reads ready, and
/// `done` from `Stop`; a Bash call's permission is `blocked:permission`
/// from `PermissionRequest` over a screen that sees no dialog. Each
/// disagreement is a `signal.disagree`. The dialog, which the drifted rules
/// do not see, is answered with its key; the latch clears on the tool's
/// `PostToolUse`. A second one is answered with `drover approve`.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_drifted_rules_fused_state_stays_right() {
    let mut off = CLAUDE_WORKING.to_vec();
    off.push(CLAUDE_PERMISSION);
    for v in Agent::Claude.versions() {
        let mut r = start(Agent::Claude, &v, "drift", &off);
        let mut feed = Feed::follow(&r);
        r.expect_state("idle");
        feed.signal("session_started", "hook");
        claude_slow_turn(&mut r, &mut feed, &off);

        feed.next_step();
        r.prompt("run the command");
        r.expect_state("blocked:permission");
        r.expect_text("Do you want to");
        let ev = feed.disagree();
        assert_disagree(
            &ev,
            &r,
            "blocked:permission",
            "blocked:permission",
            "permission_latch",
        );
        let x = explain_until(&r, "blocked by the latch", |x| {
            x["rule"] == "permission_latch"
        });
        assert_eq!(x["view"]["latch"]["tool"], "Bash", "claude {v}: {x:#}");
        assert_eq!(x["fused"]["source"], "hook", "claude {v}: {x:#}");
        // No rule matches the dialog: `unknown`, not `starting` again.
        assert_eq!(ev["screen"], "unknown", "claude {v}: {ev}");
        assert_eq!(screen_label(&x), "unknown", "claude {v}: {x:#}");
        assert!(!screen_rule(&x, CLAUDE_PERMISSION), "claude {v}: {x:#}");
        // `1. Yes`, as `drover approve` would pick it on a dialog it sees.
        r.keys(&["1"]);
        feed.signal("tool_finished", "hook");
        explain_until(&r, "the latch cleared by PostToolUse", |x| {
            x["view"]["latch"].is_null() && x["fused"]["state"] != "blocked"
        });
        r.expect_state("done");
        let x = explain_until(&r, "done by Stop", |x| x["rule"] == "turn_ended");
        assert_eq!(x["fused"]["source"], "hook", "claude {v}: {x:#}");
        assert!(
            r.file("bashed.txt").is_file(),
            "claude {v}: the Bash did not run"
        );

        // `drover approve` reads the dialog itself (`agent::dialog`), not
        // through the screen rules: a dialog whose rule is off is answered.
        // (Delivered and confirmed: an Enter typed right after a turn's end
        // can be dropped.)
        feed.next_step();
        deliver(&mut r, "run the command");
        r.expect_state("blocked:permission");
        feed.signal("permission_asked", "hook");
        r.answer(&["approve"]);
        feed.signal("tool_finished", "hook");
        r.expect_state("done");
    }
}

/// Codex with `codex.working` off: during a slow turn the rules left read
/// its `• Working` screen as idle (`rule:codex.idle`) where the builtin
/// rules read `codex.working`; the fused state is `working` by the
/// rollout's `task_started` (`prompt_submitted` from `transcript`), and
/// `task_complete` ends the turn. No `signal.disagree` is due: Codex's own
/// OSC 7501 says `working`, which the classifier takes over a ready screen
/// (docs/agents.md, "Order of decision"), so the screen's observation is
/// still right and agrees with the signals.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn codex_drifted_rules_fused_state_stays_right() {
    for v in Agent::Codex.versions() {
        let mut r = start(Agent::Codex, &v, "drift", &[CODEX_WORKING]);
        let mut feed = Feed::follow(&r);
        r.expect_state("idle");
        feed.next_step();
        r.prompt(SLOW);
        feed.signal("prompt_submitted", "transcript");
        let x = drift_is_real(&mut r, AgentKind::Codex, &[CODEX_WORKING]);
        assert!(screen_rule(&x, "codex.idle"), "codex {v}: {x:#}");
        assert_eq!(x["fused"]["state"], "working", "codex {v}: {x:#}");
        assert_eq!(x["fused"]["source"], "transcript", "codex {v}: {x:#}");
        assert_eq!(screen_label(&x), "working", "codex {v}: {x:#}");
        let osc = x["screen"]["evidence"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e == "osc7501:working");
        assert!(osc, "codex {v}: {x:#}");
        r.expect_state("done");
        let x = explain_until(&r, "done by the turn's end", |x| x["rule"] == "turn_ended");
        let by = x["fused"]["source"].as_str().unwrap_or("?");
        assert!(matches!(by, "transcript" | "notify"), "codex {v}: {x:#}");
        feed.until("the turn's pane.state done", |e| {
            e["kind"] == "pane.state" && e["state"] == "done"
        });
        assert!(
            feed.disagreements().is_empty(),
            "codex {v}: {:?}",
            feed.disagreements()
        );
    }
}

/// The same turns with the full rules: the screen and the signals agree
/// throughout, so no `signal.disagree` is published (a disagreement past
/// the bound would come before the turn's end, whose `pane.state` is read).
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn full_rules_give_no_disagreement() {
    for agent in [Agent::Claude, Agent::Codex] {
        for v in agent.versions() {
            let mut r = start(agent, &v, "canary", &[]);
            let mut feed = Feed::follow(&r);
            r.expect_state("idle");
            feed.next_step();
            r.prompt(SLOW);
            r.expect_state("working");
            explain_until(&r, "the screen reading working in the open turn", |x| {
                x["view"]["turn_open"].is_object() && screen_label(x) == "working"
            });
            r.expect_state("done");
            feed.until("the turn's pane.state done", |e| {
                e["kind"] == "pane.state" && e["state"] == "done"
            });
            if agent == Agent::Claude {
                feed.next_step();
                r.prompt("run the command");
                r.expect_state("blocked:permission");
                feed.signal("permission_asked", "hook");
                r.answer(&["approve"]);
                r.expect_state("done");
                feed.until("the turn's pane.state done", |e| {
                    e["kind"] == "pane.state" && e["state"] == "done"
                });
            }
            assert!(
                feed.disagreements().is_empty(),
                "{} {v}: {:?}",
                r.pane,
                feed.disagreements()
            );
        }
    }
}
