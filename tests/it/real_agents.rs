//! The real Claude Code and Codex TUIs in drover panes against drover's mock
//! model server (docs/rehearsal.md). Ignored by plain `cargo test` (they need
//! the agents from `scripts/install-agents.sh`); run them with
//! `cargo test --test real_agents -- --ignored`.
//! Each test runs once per supported version of its agent
//! (`scripts/agent-versions`, or `DROVER_AGENT_VERSIONS`), installed side by side
//! by `scripts/install-agents.sh`.
//! With `DROVER_RECORD=<dir>` each run also writes its raw PTY bytes and labels
//! there (`tests/fixtures/recordings/` in the repository).
//!
//! Every check goes through [`Run::expect_state`]. Until the agent classifier
//! lands it reads the screen for the markers of docs/agents.md's table; set
//! [`USE_BARRIER`] to ask the supervisor's `wait` barrier instead.

use crate::common;
use crate::herdr_common::{self, Server as _};

use drover::daemon::Client;
use drover::dispatch::{DispatchSpec, dispatch};
use drover::rehearse::discover;
use drover::rehearse::recording::{Checkpoint, Labels, failed_markers, strip_typescript};
use drover::screen::Screen;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Flip to `true` when the classifier is merged: `expect_state` then waits on
/// `wait --until <state>` instead of screen markers.
const USE_BARRIER: bool = true;
/// The longest any one step may take (startup ≤ 2 s, a turn ≈ 1 s here).
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// A screen check re-reads at least this often, even when no observation changes.
const REREAD_MS: u64 = 250;
/// How long a recording may lag the screen before a checkpoint is given up.
const RECORD_LAG: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Agent {
    Claude,
    Codex,
}

impl Agent {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }

    fn lib(self) -> drover::rehearse::Agent {
        match self {
            Agent::Claude => drover::rehearse::Agent::Claude,
            Agent::Codex => drover::rehearse::Agent::Codex,
        }
    }

    /// The versions under test, each one run in turn.
    pub(crate) fn versions(self) -> Vec<String> {
        let v = discover::versions(self.lib());
        assert!(!v.is_empty(), "no {} version listed", self.name());
        v
    }
}

/// `a.b.c` ≥ `x.y.z`, numerically.
fn at_least(version: &str, min: &str) -> bool {
    let n = |s: &str| -> Vec<u64> { s.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    n(version) >= n(min)
}

/// What the screen shows in a state (docs/agents.md's table): all of `all`, none of
/// `none`, at least one of `any` (when given), and `after` below the last prompt.
struct Look {
    all: &'static [&'static str],
    none: &'static [&'static str],
    any: &'static [&'static str],
    after: &'static [&'static str],
}

fn look(agent: Agent, state: &str) -> Look {
    let l = |all, none, any, after| Look {
        all,
        none,
        any,
        after,
    };
    match (agent, state) {
        (Agent::Claude, "idle") => l(
            &["? for shortcuts"],
            &["esc to interrupt", "Do you want to"],
            &[],
            &[],
        ),
        (Agent::Claude, "working") => l(&["esc to interrupt"], &[], &[], &[]),
        (Agent::Claude, "done") => l(&["? for shortcuts"], &["esc to interrupt"], &[], &["✻"]),
        (Agent::Claude, "blocked:permission") => {
            l(&["Do you want to", "Esc to cancel"], &[], &[], &[])
        }
        (Agent::Claude, "blocked:question") => {
            l(&["☐", "Enter to select", "Esc to cancel"], &[], &[], &[])
        }
        (Agent::Claude, "blocked:setup") => l(
            &[],
            &[],
            &["Detected a custom API key", "Accessing workspace:"],
            &[],
        ),
        (Agent::Codex, "idle") => l(
            &["? for shortcuts"],
            &["esc to interrupt", "Would you like to"],
            &[],
            &[],
        ),
        (Agent::Codex, "working") => l(&["esc to interrupt"], &[], &[], &[]),
        (Agent::Codex, "done") => l(
            &["? for shortcuts"],
            &["esc to interrupt"],
            &[],
            &["Worked for"],
        ),
        (Agent::Codex, "blocked:permission") => l(
            &[
                "Would you like to",
                "Press enter to confirm or esc to cancel",
            ],
            &[],
            &[],
            &[],
        ),
        (Agent::Codex, "blocked:setup") => l(
            &[],
            &[],
            &["Sign in with ChatGPT", "Trust this folder", "Meet GPT-"],
            &[],
        ),
        (a, s) => panic!("no screen look for {a:?} in state {s}"),
    }
}

/// The line index of the last submitted (or typed) `prompt` on screen.
fn prompt_line(text: &str, prompt: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().rposition(|l| {
        let t = l.trim_start();
        let rest = t.strip_prefix('❯').or_else(|| t.strip_prefix('›'));
        rest.is_some_and(|r| r.trim() == prompt)
    })
}

impl Look {
    /// The markers this screen satisfies, or None.
    fn matches(&self, text: &str, last_prompt: Option<&str>) -> Option<Vec<String>> {
        let mut markers: Vec<String> = self.all.iter().map(|m| m.to_string()).collect();
        markers.extend(self.none.iter().map(|m| format!("!{m}")));
        if !failed_markers(text, &markers).is_empty() {
            return None;
        }
        if !self.any.is_empty() {
            markers.push(self.any.iter().find(|m| text.contains(*m))?.to_string());
        }
        if !self.after.is_empty() {
            let from = last_prompt.and_then(|p| prompt_line(text, p))?;
            let below: String = text.lines().skip(from + 1).collect::<Vec<_>>().join("\n");
            if self.after.iter().any(|m| !below.contains(m)) {
                return None;
            }
            markers.extend(self.after.iter().map(|m| m.to_string()));
        }
        Some(markers)
    }
}

struct Rec {
    name: String,
    raw: PathBuf,
    out: PathBuf,
    checkpoints: Vec<Checkpoint>,
}

/// One rehearsal: a supervisor of its own, the mock model pane and the agent pane.
pub(crate) struct Run {
    agent: Agent,
    /// The agent's version under test.
    pub(crate) version: String,
    pub(crate) root: tempfile::TempDir,
    pub(crate) pane: String,
    pub(crate) cwd: PathBuf,
    /// The supervisor's state dir (jobs, evidence, shadow decisions).
    pub(crate) state: PathBuf,
    pub(crate) client: Client,
    last_prompt: Option<String>,
    /// The next barrier counts only observations made after it starts: the
    /// `done` of the previous turn must not answer the one just prompted.
    fresh_next: bool,
    rec: Option<Rec>,
    size: (u16, u16),
    /// The herdr server the panes live in on the herdr backend (stopped
    /// after the supervisor, when the run is dropped).
    herdr: Option<herdr_common::Real>,
}

impl Run {
    fn start(agent: Agent, version: &str, name: &str, script: &str, fault: Option<&str>) -> Run {
        Run::start_with(agent, version, name, script, fault, &[])
    }

    /// `rehearse` with extra options (`--subscription`, `--tz Z`, `--permission-mode M`).
    pub(crate) fn start_with(
        agent: Agent,
        version: &str,
        name: &str,
        script: &str,
        fault: Option<&str>,
        extra: &[&str],
    ) -> Run {
        let backend = common::backend();
        Run::start_on(&backend, agent, version, name, script, fault, extra)
    }

    /// `rehearse` with the agent's and the mock's panes on `backend`.
    fn start_on(
        backend: &str,
        agent: Agent,
        version: &str,
        name: &str,
        script: &str,
        fault: Option<&str>,
        extra: &[&str],
    ) -> Run {
        Run::start_args(backend, agent, version, name, script, fault, extra, |_| {
            Vec::new()
        })
    }

    /// [`Run::start_on`] with more `rehearse` arguments, last, made from the
    /// run's temporary root (a `--cwd` or a settings file made there; the
    /// agent's own after `--`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_args(
        backend: &str,
        agent: Agent,
        version: &str,
        name: &str,
        script: &str,
        fault: Option<&str>,
        extra: &[&str],
        more_args: impl FnOnce(&Path) -> Vec<String>,
    ) -> Run {
        let name = &format!("{name}-{}", version.replace('.', "_"));
        // Not under /tmp: Codex warns about helper binaries in temporary dirs.
        let root = tempfile::Builder::new()
            .prefix("rh")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("tempdir");
        let state = root.path().join("state");
        let script_path = root.path().join("script.toml");
        std::fs::write(&script_path, script).expect("write script");
        let rec = std::env::var_os("DROVER_RECORD").map(|out| Rec {
            name: name.to_string(),
            raw: root.path().join("typescript"),
            out: PathBuf::from(out),
            checkpoints: Vec::new(),
        });
        let herdr = herdr_common::server_for(backend);
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_drover"));
        cmd.env("DROVER_BACKEND", backend);
        cmd.envs(herdr.iter().flat_map(|h| h.env()));
        cmd.arg("--state-dir")
            .arg(&state)
            .args([
                "rehearse",
                "--json",
                "--agent",
                agent.name(),
                "--name",
                name,
            ])
            .arg("--script")
            .arg(&script_path);
        let bin = discover::cached_version(agent.lib(), version).unwrap_or_else(|| {
            panic!(
                "{} {version} is not installed in {}: run scripts/install-agents.sh",
                agent.name(),
                discover::cache_root().display()
            )
        });
        cmd.arg(format!("--{}-bin", agent.name())).arg(bin);
        cmd.args(extra);
        if let Some(f) = fault {
            cmd.args(["--wrong-setup", f]);
        }
        if let Some(r) = &rec {
            cmd.arg("--record").arg(&r.raw);
        }
        cmd.args(more_args(root.path()));
        let out = cmd.output().expect("run drover rehearse");
        assert!(
            out.status.success(),
            "drover rehearse failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info: Value = serde_json::from_slice(&out.stdout).expect("rehearse --json");
        let state = drover::paths::resolve_state_dir(Some(&state)).expect("state dir");
        let socket = drover::paths::socket_path(drover::statedir::StateDir::new(&state))
            .expect("socket path");
        let mut client = Client::connect(&socket).expect("connect to the supervisor");
        assert_on_backend(&mut client, name, backend);
        Run {
            agent,
            version: version.to_string(),
            pane: name.to_string(),
            cwd: PathBuf::from(info["cwd"].as_str().expect("cwd")),
            state,
            root,
            client,
            last_prompt: None,
            fresh_next: false,
            rec,
            size: (120, 40),
            herdr,
        }
    }

    /// A `drover --state-dir <state>` command, with the herdr server's env
    /// on the herdr backend (a command may start the supervisor again).
    fn command(&self) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_drover"));
        c.envs(self.herdr.iter().flat_map(|h| h.env()));
        c.arg("--state-dir").arg(&self.state);
        c
    }

    /// Run `drover --state-dir <state> ARGS` and return its stdout.
    pub(crate) fn drover(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("run drover");
        assert!(
            out.status.success(),
            "drover {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run `drover --state-dir <state> ARGS`: its exit code and stdout.
    fn drover_status(&self, args: &[&str]) -> (i32, String) {
        let out = self.command().args(args).output().expect("run drover");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// `drover approve|deny PANE` or `drover answer PANE CHOICE`, which must
    /// confirm that the pane left the dialog; returns its JSON.
    pub(crate) fn answer(&self, args: &[&str]) -> Value {
        let mut a: Vec<&str> = vec![args[0], &self.pane];
        a.extend(&args[1..]);
        a.push("--json");
        let (code, out) = self.drover_status(&a);
        assert_eq!(
            code,
            0,
            "{} {}: drover {a:?}: {out}",
            self.agent.name(),
            self.version
        );
        serde_json::from_str(&out).expect("answer --json")
    }

    /// The pane's observation evidence.
    fn evidence(&mut self) -> Vec<String> {
        self.read()["observation"]["evidence"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The job's status (`drover job show`).
    fn job_status(&self, job: &str) -> String {
        let v: Value =
            serde_json::from_str(&self.drover(&["job", "show", job, "--json"])).expect("job json");
        v["status"].as_str().unwrap_or_default().to_string()
    }

    /// The shadow runner's decisions about `job`, oldest first.
    fn decisions(&self, job: &str) -> Vec<Value> {
        std::fs::read_to_string(self.state.join("shadow").join("decisions.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|d| d["job_id"] == job)
            .collect()
    }

    /// Wait until `cond` holds, re-checking whenever the pane's observation
    /// changes and at least every REREAD_MS (the supervisor's barrier paces
    /// the loop; there is no fixed sleep).
    fn wait_until(&mut self, what: &str, mut cond: impl FnMut(&Run) -> bool) {
        let deadline = Instant::now() + STEP_TIMEOUT;
        while !cond(self) {
            let state = self.read()["observation"]["state"]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert!(
                Instant::now() < deadline,
                "{}: no {what} within {STEP_TIMEOUT:?} (pane {state}); decisions: {:?}",
                self.agent.name(),
                self.decisions("J1")
            );
            let other = if state == "working" {
                "idle"
            } else {
                "working"
            };
            self.client
                .call_raw(
                    "wait",
                    json!({"panes": [self.pane], "until": [other, "exited"], "mode": "any",
                           "timeout_ms": REREAD_MS}),
                )
                .expect("wait");
        }
    }

    pub(crate) fn read(&mut self) -> Value {
        self.client
            .call_raw("pane.read", json!({"pane": self.pane}))
            .expect("pane.read")
    }

    /// Wait until `pred` holds for the screen text; re-read whenever the pane's
    /// observation changes (output starts or a burst ends), at least every REREAD_MS.
    pub(crate) fn wait_screen<T>(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let v = self.read();
            let text = v["text"].as_str().unwrap_or_default().to_string();
            if let Some(t) = pred(&text) {
                return t;
            }
            let state = v["observation"]["state"].as_str().unwrap_or("").to_string();
            assert!(
                state != "exited" && Instant::now() < deadline,
                "{}: no {what} within {STEP_TIMEOUT:?} (pane {state}); screen:\n{text}",
                self.agent.name()
            );
            let other = if state == "working" {
                "idle"
            } else {
                "working"
            };
            self.client
                .call_raw(
                    "wait",
                    json!({"panes": [self.pane], "until": [other, "exited"], "mode": "any",
                           "timeout_ms": REREAD_MS}),
                )
                .expect("wait");
        }
    }

    /// Wait until the agent is in `state` (`idle`, `working`, `done`,
    /// `blocked:permission`, `blocked:setup`); returns the screen.
    pub(crate) fn expect_state(&mut self, state: &str) -> String {
        let markers = if USE_BARRIER {
            let v = self
                .client
                .call_raw(
                    "wait",
                    json!({"panes": [self.pane], "until": [state], "mode": "all",
                           "fresh": std::mem::take(&mut self.fresh_next),
                           "timeout_ms": STEP_TIMEOUT.as_millis() as u64}),
                )
                .expect("wait");
            if v["matched"] != true {
                let screen = self.read()["text"].as_str().unwrap_or_default().to_string();
                panic!(
                    "{} {}: not {state} within {STEP_TIMEOUT:?}: {v}\n{screen}",
                    self.agent.name(),
                    self.version
                );
            }
            Vec::new()
        } else {
            let l = look(self.agent, state);
            let prompt = self.last_prompt.clone();
            self.wait_screen(state, |t| l.matches(t, prompt.as_deref()))
        };
        self.checkpoint(state, markers);
        self.read()["text"].as_str().unwrap_or_default().to_string()
    }

    /// Remember where the recording is when `state` was seen, checking that
    /// the recorded bytes replay to a screen with the same markers.
    fn checkpoint(&mut self, state: &str, markers: Vec<String>) {
        let size = self.size;
        let Some(rec) = &mut self.rec else { return };
        let deadline = Instant::now() + RECORD_LAG;
        loop {
            let raw = std::fs::read(&rec.raw).unwrap_or_default();
            let mut screen = Screen::new(size.0, size.1);
            screen.process(strip_typescript(&raw));
            if failed_markers(&screen.text(), &markers).is_empty() {
                rec.checkpoints.push(Checkpoint {
                    bytes: raw.len(),
                    state: state.parse().expect("a state wait --until names"),
                    markers,
                });
                return;
            }
            assert!(
                Instant::now() < deadline,
                "recording {} lags the screen at {state}",
                rec.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Type `text` as a paste, wait until the composer shows it, then press Enter.
    pub(crate) fn prompt(&mut self, text: &str) {
        self.client
            .call_raw(
                "pane.send",
                json!({"pane": self.pane, "text": text, "enter": false}),
            )
            .expect("pane.send");
        self.wait_screen("the typed prompt", |t| prompt_line(t, text).map(|_| ()));
        self.last_prompt = Some(text.to_string());
        self.fresh_next = true;
        self.keys(&["Enter"]);
    }

    /// Wait until `text` is on screen.
    pub(crate) fn expect_text(&mut self, text: &str) {
        self.wait_screen(text, |t| t.contains(text).then_some(()));
    }

    pub(crate) fn keys(&mut self, keys: &[&str]) {
        self.client
            .call_raw("pane.keys", json!({"pane": self.pane, "keys": keys}))
            .expect("pane.keys");
    }

    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.cwd.join(name)
    }

    /// Write the recording (cut at the last checkpoint, the temp root's path
    /// replaced by a neutral one of the same length, so the layout is unchanged)
    /// and its labels.
    fn save_recording(&mut self) {
        let Some(rec) = self.rec.take() else { return };
        let Some(last) = rec.checkpoints.last() else {
            return;
        };
        let raw = std::fs::read(&rec.raw).expect("read recording");
        let header = raw.len() - strip_typescript(&raw[..last.bytes]).len();
        let mut body = raw[header..last.bytes].to_vec();
        let prefix = self.root.path().to_string_lossy().into_owned();
        let neutral = format!("{:_<w$}", "/rehearsal", w = prefix.len());
        if neutral.len() == prefix.len() {
            replace_all(&mut body, prefix.as_bytes(), neutral.as_bytes());
        }
        let labels = Labels {
            agent: self.agent.name().to_string(),
            cols: self.size.0,
            rows: self.size.1,
            checkpoints: rec
                .checkpoints
                .iter()
                .map(|c| Checkpoint {
                    bytes: c.bytes - header,
                    ..c.clone()
                })
                .collect(),
        };
        std::fs::create_dir_all(&rec.out).expect("create recordings dir");
        std::fs::write(rec.out.join(format!("{}.bin", rec.name)), &body).expect("write recording");
        std::fs::write(
            rec.out.join(format!("{}.labels.tsv", rec.name)),
            labels.render(),
        )
        .expect("write labels");
    }
}

fn replace_all(buf: &mut [u8], from: &[u8], to: &[u8]) {
    let mut i = 0;
    while i + from.len() <= buf.len() {
        if &buf[i..i + from.len()] == from {
            buf[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.save_recording();
        }
        let _ = self.client.call_raw("shutdown", json!({}));
        // herdr panes outlive a supervisor too: stop this run's herdr
        // server (and so its panes) before the temp dirs go.
        if let Some(mut h) = self.herdr.take() {
            h.stop();
        }
        // tmux panes outlive a supervisor: never leave this run's tmux
        // server behind, even when the test failed with no supervisor up.
        let _ = std::process::Command::new("tmux")
            .args([
                "-L",
                &drover::pane::tmux::socket_name(drover::statedir::StateDir::new(&self.state)),
                "kill-server",
            ])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// The agent's pane runs on the backend the suite runs on (never silently native).
fn assert_on_backend(client: &mut Client, pane: &str, backend: &str) {
    let list = client.call_raw("pane.ls", json!({})).expect("pane.ls");
    let p = list
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == pane)
        .unwrap_or_else(|| panic!("no pane {pane} in {list}"));
    assert_eq!(p["backend"], backend, "{p}");
}

/// A script from `tests/fixtures/mock-scripts/`.
fn script(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mock-scripts")
        .join(format!("{name}.toml"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The version the pane started is in its observations' evidence. Not
/// while recording (`DROVER_RECORD`): the pane's process is then `script(1)`
/// running the agent, whose version drover does not ask.
fn assert_version_recorded(r: &mut Run) {
    if r.rec.is_some() {
        return;
    }
    let want = format!("agent_version:{}", r.version);
    let ev = r.evidence();
    assert!(
        ev.contains(&want),
        "{} {}: {ev:?}",
        r.agent.name(),
        r.version
    );
}

/// start → idle; prompt → working → done; a Write approved and a Bash denied
/// then approved with `drover approve|deny`; a question answered with `drover
/// answer`; Esc → idle. Claude asks before every Write and Bash in the default
/// permission mode `rehearse` starts it in.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_turns_tools_approval_and_interrupt() {
    for v in Agent::Claude.versions() {
        let t = Instant::now();
        claude_turns(&v);
        eprintln!("claude {v}: turns in {:?}", t.elapsed());
    }
}

fn claude_turns(v: &str) {
    let mut r = Run::start(
        Agent::Claude,
        v,
        "claude-turns",
        &script("claude-suite"),
        None,
    );
    r.expect_state("idle");
    assert_version_recorded(&mut r);
    let (code, out) = r.drover_status(&["approve", &r.pane.clone()]);
    assert_eq!(code, 3, "approve on an idle pane is refused: {out}");

    r.prompt("say hello");
    r.expect_state("working");
    let screen = r.expect_state("done");
    assert!(screen.contains("Hello from the mock model."), "{screen}");

    r.prompt("create the file");
    let screen = r.expect_state("blocked:permission");
    assert!(
        screen.contains("Do you want to create hello.txt?"),
        "{screen}"
    );
    let a = r.answer(&["approve"]);
    assert!(a["attempts"].as_u64().unwrap_or(9) <= 2, "{a}");
    // The reply said "now blocked" about the dialog it had just answered.
    assert_ne!(a["state"], "blocked", "{a}");
    r.expect_state("done");
    assert!(
        r.file("hello.txt").is_file(),
        "Write did not create hello.txt"
    );

    r.prompt("run the command");
    let screen = r.expect_state("blocked:permission");
    assert!(screen.contains("Do you want to proceed?"), "{screen}");
    r.answer(&["deny"]);
    r.expect_state("idle");
    assert!(!r.file("bashed.txt").exists(), "a denied Bash ran");
    // 2.1.197 puts the interrupted prompt back into its composer: clear it.
    r.keys(&["C-u"]);
    r.wait_screen("an empty composer", |t| {
        t.lines()
            .any(|l| l.trim_end() == "❯" || l.trim_end() == "❯\u{a0}")
            .then_some(())
    });

    // Confirmed delivery: an Enter right after an interrupt can be dropped.
    let pane = r.pane.clone();
    r.client
        .call_raw("deliver", json!({"pane": pane, "text": "run the command"}))
        .expect("deliver after a denial");
    r.expect_state("blocked:permission");
    r.answer(&["approve"]);
    r.expect_state("done");
    assert!(r.file("bashed.txt").is_file(), "Bash did not run");

    r.prompt("ask me");
    let screen = r.expect_state("blocked:question");
    assert!(
        screen.contains("Which colour should the file be?"),
        "{screen}"
    );
    let (code, out) = r.drover_status(&["approve", &r.pane.clone()]);
    assert_eq!(code, 3, "approve does not answer a question: {out}");
    r.answer(&["answer", "Blue"]);
    let screen = r.expect_state("done");
    assert!(screen.contains("Thanks for the answer."), "{screen}");
    assert!(screen.contains("Blue"), "{screen}");

    // Interrupted before any reply, Claude puts the prompt back into its
    // composer; interrupt once some reply is shown, as an operator would.
    r.prompt("take your time");
    r.expect_state("working");
    r.expect_text("This reply");
    r.keys(&["Esc"]);
    // The barrier answers with the current state: wait for the interrupt to
    // land before asking for idle, or a frame from before Esc could answer.
    r.expect_text("Interrupted");
    let screen = r.expect_state("idle");
    assert!(screen.contains("Interrupted"), "{screen}");
}

/// Claude Code 2.1.332's auto mode against a mock (no server-side safety
/// check): a risky command shows the auto-mode dialog, then the unnumbered
/// `❯ No / Yes` approval; `drover approve` answers both, `drover deny` the next.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_auto_mode_dialog_and_unnumbered_approval() {
    for v in Agent::Claude.versions() {
        if !at_least(&v, "2.1.300") {
            eprintln!("claude {v}: no auto mode, skipped");
            continue;
        }
        let mut r = Run::start_with(
            Agent::Claude,
            &v,
            "claude-auto",
            &script("claude-auto"),
            None,
            &["--permission-mode", "auto"],
        );
        r.expect_state("idle");
        r.prompt("risky");
        r.expect_state("blocked:permission");
        let a = r.answer(&["approve"]);
        assert_eq!(a["dialog"], "auto_mode", "{a}");
        r.expect_state("done");
        r.prompt("risky");
        let screen = r.expect_state("blocked:permission");
        assert!(screen.contains("❯ No"), "the unnumbered form: {screen}");
        r.answer(&["deny"]);
        r.expect_state("idle");
    }
}

/// The APIs' usage-limit answers (HTTP 429) make the real TUIs show their
/// limit screens: `blocked{usage_limit}` with the reset time read from the
/// screen; Claude's limit menu is answered by label.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_usage_limit_has_resets_at_and_menu() {
    for v in Agent::Claude.versions() {
        let mut r = Run::start_with(
            Agent::Claude,
            &v,
            "claude-limit",
            &script("limits"),
            None,
            &["--subscription", "--tz", "America/Los_Angeles"],
        );
        r.expect_state("idle");
        let t0 = chrono::Utc::now();
        r.prompt("hit the weekly limit");
        r.expect_state("blocked:usage_limit");
        assert_resets_at(&mut r, t0, LIMIT_RESETS_IN_S);
        // 2.1.197 draws the limit line first and opens its menu a moment later.
        r.expect_text("What do you want to do?");
        let a = r.answer(&["answer", "Stop and wait for limit to reset"]);
        assert_eq!(a["dialog"], "limit_menu", "{a}");
        r.expect_state("blocked:usage_limit");
        assert_resets_at(&mut r, t0, LIMIT_RESETS_IN_S);
        after_the_limit(&mut r);
    }
}

/// The next prompt once the limit is over is answered, and the screen with
/// the old limit message above it reads done, not the limit again (a
/// resumed lane would be parked again, every time).
fn after_the_limit(r: &mut Run) {
    r.prompt("the limit is over, carry on");
    r.expect_text("Back at work after the limit.");
    r.expect_state("done");
}

/// The same for Codex: `■ You've hit your usage limit … try again at …`, and
/// the model-switch popup under it answered by label.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_usage_limit_has_resets_at() {
    for v in Agent::Codex.versions() {
        let mut r = Run::start(Agent::Codex, &v, "codex-limit", &script("limits"), None);
        r.expect_state("idle");
        let t0 = chrono::Utc::now();
        r.prompt("hit the weekly limit");
        r.expect_state("blocked:usage_limit");
        assert_resets_at(&mut r, t0, LIMIT_RESETS_IN_S);
        if r.read()["text"]
            .as_str()
            .unwrap_or("")
            .contains("enter select")
        {
            r.answer(&["answer", "Keep current model"]);
        }
        r.expect_state("blocked:usage_limit");
        assert_resets_at(&mut r, t0, LIMIT_RESETS_IN_S);
        after_the_limit(&mut r);
    }
}

/// `resets_in_s` of `tests/fixtures/mock-scripts/limits.toml`.
const LIMIT_RESETS_IN_S: i64 = 200_000;

fn assert_resets_at(r: &mut Run, t0: chrono::DateTime<chrono::Utc>, resets_in_s: i64) {
    let ev = r.evidence();
    let at = ev
        .iter()
        .find_map(|e| e.strip_prefix("resets_at:"))
        .unwrap_or_else(|| panic!("{} {}: no resets_at in {ev:?}", r.agent.name(), r.version));
    let at = chrono::DateTime::parse_from_rfc3339(at).expect("resets_at is RFC 3339");
    let want = t0 + chrono::Duration::seconds(resets_in_s);
    let off = (at.with_timezone(&chrono::Utc) - want).num_seconds().abs();
    // The screens show minutes; allow for that and the test's own pace.
    assert!(
        off <= 180,
        "{} {}: resets_at {at}, want ≈ {want}",
        r.agent.name(),
        r.version
    );
}

/// The same for Codex: a plain `exec_command` runs in the workspace sandbox
/// without asking; `require_escalated` asks: denied with `drover deny`, then
/// approved with `drover approve`.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_turns_tools_approval_and_interrupt() {
    for v in Agent::Codex.versions() {
        let t = Instant::now();
        codex_turns(&v);
        eprintln!("codex {v}: turns in {:?}", t.elapsed());
    }
}

fn codex_turns(v: &str) {
    let mut r = Run::start(Agent::Codex, v, "codex-turns", &script("codex-suite"), None);
    r.expect_state("idle");
    assert_version_recorded(&mut r);

    r.prompt("say hello");
    r.expect_state("working");
    let screen = r.expect_state("done");
    assert!(screen.contains("Hello from the mock model."), "{screen}");

    r.prompt("create the file");
    r.expect_state("done");
    assert!(
        r.file("hello.txt").is_file(),
        "exec_command did not write hello.txt"
    );

    r.prompt("run the command");
    let screen = r.expect_state("blocked:permission");
    assert!(screen.contains("touch escalated.txt"), "{screen}");
    r.answer(&["deny"]);
    r.expect_state("idle");
    assert!(!r.file("escalated.txt").exists(), "a denied command ran");

    r.prompt("run the command");
    r.expect_state("blocked:permission");
    r.answer(&["approve"]);
    r.expect_state("done");
    assert!(
        r.file("escalated.txt").is_file(),
        "the approved command did not run"
    );

    // Codex says it is working (its OSC 7501) before its status row takes
    // Esc as an interrupt: an Esc in that gap only arms the composer's "esc
    // again to edit previous message" and the turn runs to its end (seen
    // under four test threads). Interrupt once some reply is shown, as an
    // operator would, and wait for the interrupt to land before asking for idle.
    r.prompt("take your time");
    r.expect_state("working");
    r.expect_text("This reply");
    r.keys(&["Esc"]);
    // The denied command's turn above already says "Conversation
    // interrupted": only one after this prompt counts.
    let after_prompt = |t: &str| {
        t.rfind("take your time")
            .is_some_and(|at| t[at..].contains("Conversation interrupted"))
    };
    r.wait_screen("interrupted after the prompt", |t| {
        after_prompt(t).then_some(())
    });
    let screen = r.expect_state("idle");
    assert!(after_prompt(&screen), "{screen}");
}

/// A wrong setup shows a setup dialog, which no prompt can answer.
fn wrong_setup(agent: Agent, fault: &str, marker: &str) {
    for v in agent.versions() {
        let name = format!("{}-{fault}", agent.name());
        let mut r = Run::start(agent, &v, &name, "", Some(fault));
        let screen = r.expect_state("blocked:setup");
        assert!(screen.contains(marker), "{} {v}: {screen}", agent.name());
        let (code, out) = r.drover_status(&["approve", &r.pane.clone()]);
        assert_eq!(code, 3, "approve does not answer a setup dialog: {out}");
    }
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_wrong_setup_is_a_setup_dialog() {
    wrong_setup(Agent::Claude, "untrusted", "Accessing workspace:");
    wrong_setup(Agent::Claude, "unapproved-key", "Detected a custom API key");
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_wrong_setup_is_a_setup_dialog() {
    wrong_setup(Agent::Codex, "untrusted", "Trust this folder");
    wrong_setup(Agent::Codex, "no-provider", "Sign in with ChatGPT");
}

/// `drover send` (the supervisor's confirmed delivery, the path the loop
/// uses) against the real TUIs: the prompt is taken, confirmed as working,
/// and never submitted twice — twice in a row, from idle and from done.
fn confirmed_delivery(agent: Agent, name: &str, suite: &str) {
    for v in agent.versions() {
        confirmed_delivery_of(agent, &v, name, suite);
    }
}

fn confirmed_delivery_of(agent: Agent, v: &str, name: &str, suite: &str) {
    let mut r = Run::start(agent, v, name, &script(suite), None);
    r.expect_state("idle");
    for round in 0..2 {
        let v = r
            .client
            .call_raw("deliver", json!({"pane": r.pane, "text": "say hello"}))
            .unwrap_or_else(|e| panic!("{}: round {round}: not delivered: {e}", agent.name()));
        assert_eq!(v["delivered"], true, "{v}");
        assert!(v["attempts"].as_u64().unwrap_or(0) <= 2, "{v}");
        let screen = r.expect_state("done");
        let replies = screen.matches("Hello from the mock model.").count();
        assert!(replies > round, "{}: round {round}: {screen}", agent.name());
    }
    // Exactly two turns were submitted: one reply per delivery, never a double.
    let screen = r.read()["text"].as_str().unwrap_or_default().to_string();
    assert!(
        screen.matches("Hello from the mock model.").count() <= 2,
        "{}: a prompt was submitted twice: {screen}",
        agent.name()
    );
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_confirmed_delivery() {
    confirmed_delivery(Agent::Claude, "claude-send", "claude-suite");
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_confirmed_delivery() {
    confirmed_delivery(Agent::Codex, "codex-send", "codex-suite");
}

/// `drover dispatch` (the library call the CLI makes) to a real agent: the
/// mock answers the trailer by writing `out.txt` and then the report naming
/// `prompt`'s attempt; the supervisor's evidence watcher and shadow runner
/// decide. Claude asks before each `Write` and is approved; Codex writes in its
/// sandbox without asking. Returns the run and the dispatch's attempt.
fn dispatched(agent: Agent, v: &str, name: &str, prompt: &str) -> (Run, String) {
    let suite = format!("dispatch-{}", agent.name());
    let mut r = Run::start(agent, v, name, &script(&suite), None);
    r.expect_state("idle");
    r.drover(&["job", "create", "J1"]);
    let spec = DispatchSpec {
        job_id: "J1".into(),
        pane: r.pane.clone(),
        session_id: "implementer".into(),
        prompt: prompt.into(),
        report_path: Some(r.cwd.join("report.json")),
        worktree: Some(r.cwd.clone()),
        autocomplete: true,
        ready_timeout_ms: None,
        report_by: Default::default(),
    };
    let state = r.state.clone();
    let t = Instant::now();
    let d = dispatch(
        drover::statedir::StateDir::new(&state),
        &mut r.client,
        &spec,
    )
    .unwrap_or_else(|e| panic!("{}: dispatch: {e}", agent.name()));
    // The first write is confirmed; a retry would come after the supervisor's
    // 10 s confirmation timeout.
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "{}: delivery needed a retry ({:?})",
        agent.name(),
        t.elapsed()
    );
    assert_eq!(r.job_status("J1"), "running");
    if agent == Agent::Claude {
        for file in ["out.txt", "report.json"] {
            let ask = format!("Do you want to create {file}?");
            r.wait_screen(&ask, |t| t.contains(&ask).then_some(()));
            r.answer(&["approve"]);
        }
    }
    (r, d.attempt_id)
}

/// A loop-sized prompt: a first line, then a dozen lines of context (Claude
/// shows a paste this long as `[Pasted text #1 +N lines]`).
fn long_prompt(first: &str) -> String {
    let mut p = format!("{first}\n\nContext for the lane:\n");
    for i in 1..=12 {
        p.push_str(&format!(
            "- note {i}: keep the change small, tested and in its own commit.\n"
        ));
    }
    p
}

fn dispatch_completes(agent: Agent, name: &str) {
    for v in agent.versions() {
        dispatch_completes_on(agent, &v, name);
    }
}

fn dispatch_completes_on(agent: Agent, v: &str, name: &str) {
    let (mut r, attempt) = dispatched(agent, v, name, &long_prompt("write out.txt for this job"));
    r.wait_until("completed job", |r| r.job_status("J1") == "completed");
    assert!(r.file("out.txt").is_file(), "the agent wrote no out.txt");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(r.file("report.json")).expect("report"))
            .expect("report is JSON");
    assert_eq!(report["attempt_id"], attempt.as_str());
    // The decision that completed the job names the attempt. (A decision the
    // runner appends after it, from a list of running jobs read just before,
    // is not the one that completed it.)
    // The runner appends its decision after the engine has moved the job.
    r.wait_until("the completing decision", |r| {
        r.decisions("J1").iter().any(|d| d["action"] == "completed")
    });
    let all = r.decisions("J1");
    let done: Vec<&Value> = all.iter().filter(|d| d["action"] == "completed").collect();
    assert_eq!(
        done.len(),
        1,
        "exactly one decision completed the job: {all:?}"
    );
    assert_eq!(done[0]["decision"], "complete", "{all:?}");
    assert_eq!(done[0]["attempt_id"], attempt.as_str(), "{all:?}");
}

fn dispatch_misattributed_is_held(agent: Agent, name: &str) {
    for v in agent.versions() {
        dispatch_misattributed_on(agent, &v, name);
    }
}

fn dispatch_misattributed_on(agent: Agent, v: &str, name: &str) {
    let (mut r, _) = dispatched(
        agent,
        v,
        name,
        &long_prompt("write out.txt and report as someone else"),
    );
    r.wait_until("hold_unattributed decision", |r| {
        r.decisions("J1")
            .last()
            .is_some_and(|d| d["decision"] == "hold_unattributed")
    });
    assert!(r.file("out.txt").is_file(), "the agent wrote no out.txt");
    assert_eq!(r.job_status("J1"), "running");
    assert!(
        r.decisions("J1")
            .iter()
            .all(|d| d["decision"] != "complete"),
        "{:?}",
        r.decisions("J1")
    );
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_dispatch_completes() {
    dispatch_completes(Agent::Claude, "claude-dispatch");
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_dispatch_completes() {
    dispatch_completes(Agent::Codex, "codex-dispatch");
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_dispatch_misattributed_report_is_held() {
    dispatch_misattributed_is_held(Agent::Claude, "claude-unattributed");
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_dispatch_misattributed_report_is_held() {
    dispatch_misattributed_is_held(Agent::Codex, "codex-unattributed");
}

/// An operator's terminal running `drover attach` (a PTY of the test's own,
/// whose output feeds a terminal model and a raw log).
struct AttachedTerminal {
    _pair: portable_pty::PtyPair,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn std::io::Write + Send>,
    screen: std::sync::Arc<std::sync::Mutex<vt100::Parser>>,
    log: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl AttachedTerminal {
    fn open(r: &Run) -> AttachedTerminal {
        use portable_pty::{CommandBuilder, PtySize, native_pty_system};
        let (cols, rows) = r.size;
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_drover"));
        cmd.arg("--state-dir");
        cmd.arg(&r.state);
        cmd.args(["attach", r.pane.as_str()]);
        cmd.env("TERM", "xterm-256color");
        let child = pair.slave.spawn_command(cmd).expect("spawn attach");
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let nz = |v: u16| std::num::NonZeroU16::new(v).expect("size");
        let screen = std::sync::Arc::new(std::sync::Mutex::new(vt100::Parser::new(
            nz(rows),
            nz(cols),
            0,
        )));
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s2, l2) = (screen.clone(), log.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = std::io::Read::read(&mut reader, &mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = s2.lock() {
                    s.process(&buf[..n]);
                }
                if let Ok(mut l) = l2.lock() {
                    l.extend_from_slice(&buf[..n]);
                }
            }
        });
        AttachedTerminal {
            _pair: pair,
            child,
            writer,
            screen,
            log,
        }
    }

    fn text(&self) -> String {
        self.screen
            .lock()
            .map(|s| s.screen().contents())
            .unwrap_or_default()
    }

    fn wait_text(&self, what: &str) {
        let deadline = Instant::now() + STEP_TIMEOUT;
        while !self.text().contains(what) {
            assert!(
                Instant::now() < deadline,
                "the attached terminal never showed {what:?}:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn type_(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("type");
        self.writer.flush().expect("flush");
    }
}

/// Guards: attach draws from the screen model and still shows a real agent
/// and takes its input: the TUI renders on the operator's terminal, a prompt
/// typed there gets its answer, and none of the agent's own escape traffic
/// (titles, queries) reaches the terminal.
fn attach_renders_and_takes_input(agent: Agent, name: &str, suite: &str) {
    for v in agent.versions() {
        attach_renders_and_takes_input_of(agent, &v, name, suite);
    }
}

fn attach_renders_and_takes_input_of(agent: Agent, v: &str, name: &str, suite: &str) {
    let mut r = Run::start(agent, v, name, &script(suite), None);
    r.expect_state("idle");
    let mut term = AttachedTerminal::open(&r);
    // The agent's screen, as the pane has it, is on the operator's terminal.
    let shown = r.read()["lines"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .find(|l| l.len() > 12)
                .map(str::to_string)
        })
        .expect("a non-blank line on the agent's screen");
    term.wait_text(&shown);
    term.type_(b"say hello");
    term.wait_text("say hello");
    term.type_(b"\r");
    r.expect_state("working");
    let screen = r.expect_state("done");
    assert!(screen.contains("Hello from the mock model."), "{screen}");
    term.wait_text("Hello from the mock model.");
    term.type_(b"\x1c");
    let deadline = Instant::now() + STEP_TIMEOUT;
    let status = loop {
        if let Some(s) = term.child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "attach did not detach");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.exit_code(), 0);
    let log = term.log.lock().map(|l| l.clone()).unwrap_or_default();
    for seq in [&b"\x1b]"[..], b"\x1bP", b"\x1b[21t"] {
        assert!(
            !log.windows(seq.len()).any(|w| w == seq),
            "{}: {:?} reached the operator's terminal",
            agent.name(),
            String::from_utf8_lossy(seq)
        );
    }
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_attach_renders_and_takes_input() {
    attach_renders_and_takes_input(Agent::Claude, "claude-attach", "claude-suite");
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_attach_renders_and_takes_input() {
    attach_renders_and_takes_input(Agent::Codex, "codex-attach", "codex-suite");
}

/// The argv and environment of a process, from `/proc`.
fn proc_argv_env(pid: u64) -> (Vec<String>, Vec<(String, String)>) {
    let split = |raw: Vec<u8>| -> Vec<String> {
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    };
    let argv = split(std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline"));
    // Without drover's own pane marker and herdr's pane vars: the new pane
    // gets its own.
    let env = split(std::fs::read(format!("/proc/{pid}/environ")).expect("environ"))
        .into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .filter(|(k, _)| {
            k != "DROVER_PANE" && !drover::pane::herdr::HERDR_OWN_ENV.contains(&k.as_str())
        })
        .collect();
    (argv, env)
}

/// A lane restarted after its agent was gone resumes the conversation in
/// the same worktree: the lane's resuming command (`docs/lanes.md`: `claude
/// --continue …`, `codex resume --last …`, the permission flags kept) shows
/// the earlier turn again.
fn resumes_the_conversation(agent: Agent, v: &str) {
    let mut r = Run::start(
        agent,
        v,
        &format!("{}-resume", agent.name()),
        &script(&format!("{}-suite", agent.name())),
        None,
    );
    r.expect_state("idle");
    r.prompt("say hello");
    r.expect_state("done");
    let list = r.client.call_raw("pane.ls", json!({})).expect("pane.ls");
    let pid = list
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == r.pane.as_str())
        .and_then(|p| p["pid"].as_u64())
        .expect("the agent's pid");
    let (mut argv, env) = proc_argv_env(pid);
    // A herdr pane's process is drover's wrapper, `/bin/sh -c SCRIPT STATUS
    // CMD ARG…` (docs/herdr.md): the agent's argv follows its status file.
    if common::backend() == "herdr" && argv.get(1).is_some_and(|a| a == "-c") {
        argv.drain(..4);
    }
    // The lane's resume form: the agent, its resume words, then its flags.
    // (A Node launcher shows as `node <script> …`: the program is both.)
    let prog = if argv[0].ends_with("node") { 2 } else { 1 };
    let mut resumed = argv[..prog].to_vec();
    match agent {
        Agent::Claude => resumed.push("--continue".into()),
        Agent::Codex => resumed.extend(["resume".to_string(), "--last".to_string()]),
    }
    resumed.extend(argv[prog..].iter().cloned());
    r.client
        .call_raw("pane.kill", json!({"pane": r.pane}))
        .expect("pane.kill");
    r.client
        .call_raw(
            "pane.new",
            json!({"spec": {"name": r.pane, "argv": resumed, "env": env, "cwd": r.cwd,
                "cols": r.size.0, "rows": r.size.1, "agent": agent.name()},
                "backend": common::backend()}),
        )
        .expect("pane.new resuming");
    assert_on_backend(&mut r.client, &r.pane, &common::backend());
    r.last_prompt = None;
    r.expect_text("say hello");
    r.expect_text("Hello from the mock model.");
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_lane_resumes_with_continue() {
    for v in Agent::Claude.versions() {
        resumes_the_conversation(Agent::Claude, &v);
    }
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_lane_resumes_with_resume_last() {
    for v in Agent::Codex.versions() {
        resumes_the_conversation(Agent::Codex, &v);
    }
}

/// Guards the lanes' permission modes on the real agents: `lane up` of the
/// four-role Implementer and Reviewer with Claude and Codex (against the mock
/// model server, configured as a rehearsal is, through `--env`) starts the
/// writer with `acceptEdits` / `workspace-write` and the reviewer with `plan`
/// / `read-only`, as the argv of the real, ready processes shows.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn lane_up_starts_reviewers_read_only_and_the_writer_writing() {
    use drover::agent::adapter::{self, Access, LaunchOptions, Rehearsal};
    use drover::agent::state::AgentKind;
    let tmp = tempfile::Builder::new()
        .prefix("rl")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    let root = tmp.path().canonicalize().expect("canonical");
    let bin = root.join("bin");
    let home = root.join("home");
    let repo = root.join("repo");
    let state = root.join("state");
    for d in [&bin, &home, &repo, &state] {
        std::fs::create_dir_all(d).expect("dir");
    }
    for a in [Agent::Claude, Agent::Codex] {
        let v = a.versions().pop().expect("a version");
        let real = discover::cached_version(a.lib(), &v).expect("installed");
        std::os::unix::fs::symlink(real, bin.join(a.name())).expect("symlink");
    }
    let drover = env!("CARGO_BIN_EXE_drover");
    let port_file = root.join("port");
    let mut mock = std::process::Command::new(drover)
        .args(["mock-model", "--port", "0", "--port-file"])
        .arg(&port_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mock-model");
    let t = Instant::now();
    while !port_file.exists() && t.elapsed() < STEP_TIMEOUT {
        std::thread::sleep(Duration::from_millis(50));
    }
    let port = std::fs::read_to_string(&port_file).expect("port file");
    let base_url = format!("http://127.0.0.1:{}", port.trim());
    // One HOME for every lane: each agent's config trusts both of its worktrees.
    let mut env: Vec<(String, String)> = Vec::new();
    let mut claude_projects = serde_json::Map::new();
    let mut codex_config = String::new();
    for (kind, agent) in [(AgentKind::Claude, "claude"), (AgentKind::Codex, "codex")] {
        for session in ["implementer", "reviewer"] {
            let cwd = state.join("worktrees").join(format!("{session}-{agent}"));
            let r = Rehearsal {
                home: home.clone(),
                cwd: cwd.clone(),
                base_url: base_url.clone(),
                api_key: "sk-mock-lane-permissions-0000000000".into(),
            };
            let spec = adapter::rehearsal(kind, &r, &LaunchOptions::new(Access::ReadOnly))
                .expect("rehearsal");
            for kv in spec.env {
                if !env.contains(&kv) {
                    env.push(kv);
                }
            }
            for f in spec.files {
                if kind == AgentKind::Claude {
                    let mut doc: serde_json::Map<String, Value> =
                        serde_json::from_str(&f.contents).expect("claude.json");
                    if let Some(Value::Object(p)) = doc.remove("projects") {
                        claude_projects.extend(p);
                    }
                    doc.insert("projects".into(), Value::Object(claude_projects.clone()));
                    std::fs::write(&f.path, serde_json::to_string_pretty(&doc).unwrap())
                        .expect("write claude.json");
                } else if codex_config.is_empty() {
                    codex_config = f.contents.replace("sandbox_mode = \"read-only\"\n", "");
                } else {
                    let proj = f.contents.split("[projects.").nth(1).unwrap_or_default();
                    let proj = proj.split("\n\n").next().unwrap_or_default();
                    codex_config.push_str(&format!("\n[projects.{proj}\n"));
                }
                if kind == AgentKind::Codex {
                    std::fs::create_dir_all(f.path.parent().unwrap()).expect("codex home");
                    std::fs::write(&f.path, &codex_config).expect("write codex config");
                }
            }
        }
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let backend = common::backend();
    // On herdr the lanes' panes live in a herdr server of this test's own.
    let herdr = herdr_common::server_for(&backend);
    let herdr_env: Vec<_> = herdr.iter().flat_map(|h| h.env()).collect();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .current_dir(&repo)
            .env("PATH", &path)
            .envs(herdr_env.iter().cloned())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let st = state.display().to_string();
    run(&["git", "init", "-q", "-b", "main"]);
    run(&[
        "git",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t.invalid",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "initial",
    ]);
    let env_args: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut up = vec![
        drover,
        "--state-dir",
        &st,
        "lane",
        "up",
        "--topology",
        "four-role",
        "--repo",
        ".",
        "--sessions",
        "implementer,reviewer",
        "--timeout-ms",
        "60000",
        "--backend",
        &backend,
    ];
    for e in &env_args {
        up.extend(["--env", e.as_str()]);
    }
    let (code, _, err) = run(&up);
    let (_, ls, _) = run(&[drover, "--state-dir", &st, "pane", "ls", "--json"]);
    let mut failure = None;
    if code != Some(0) {
        failure = Some(format!("lane up: {err}"));
    }
    let panes: Value = serde_json::from_str(&ls).unwrap_or(Value::Null);
    for (lane, flag, mode) in [
        ("implementer-claude", "--permission-mode", "acceptEdits"),
        ("reviewer-claude", "--permission-mode", "plan"),
        ("implementer-codex", "-s", "workspace-write"),
        ("reviewer-codex", "-s", "read-only"),
    ] {
        if failure.is_some() {
            break;
        }
        let pane = panes
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == lane);
        if let Some(p) = pane.filter(|p| p["backend"] != backend.as_str()) {
            failure = Some(format!("{lane}: not on {backend}: {p}"));
            break;
        }
        let pid = pane.and_then(|p| p["pid"].as_u64());
        let argv = pid
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
            .map(|p| proc_argv_env(p).0);
        match argv {
            Some(a) if a.windows(2).any(|w| w[0] == flag && w[1] == mode) => {}
            other => {
                let (_, screen, _) = run(&[drover, "--state-dir", &st, "pane", "read", lane]);
                failure = Some(format!("{lane}: argv {other:?}; screen:\n{screen}"));
            }
        }
    }
    run(&[drover, "--state-dir", &st, "lane", "down", "--all"]);
    run(&[drover, "--state-dir", &st, "kill-server"]);
    drop(herdr);
    let _ = mock.kill();
    let _ = mock.wait();
    if let Some(f) = failure {
        panic!("{f}");
    }
}

/// Guards: a real agent in a tmux pane outlives a `kill -9` of its
/// supervisor and keeps being observed: the next supervisor re-adopts it
/// and its mock (same pids and generations, not lost), a multi-line prompt
/// delivered afterwards is confirmed working (a state change the new
/// supervisor saw) and its turn ends in `done`, as `drover wait` reports.
fn tmux_pane_outlives_the_supervisor(agent: Agent) {
    for v in agent.versions() {
        tmux_pane_outlives_the_supervisor_on(agent, &v);
    }
}

fn tmux_pane_outlives_the_supervisor_on(agent: Agent, v: &str) {
    let suite = script(&format!("{}-suite", agent.name()));
    let name = format!("{}-restart", agent.name());
    let mut r = Run::start_on("tmux", agent, v, &name, &suite, None, &[]);
    r.expect_state("idle");
    r.prompt("say hello");
    r.expect_state("done");
    let mock = format!("{}-mock", r.pane);
    let panes = |r: &mut Run| -> Vec<Value> {
        let list = r.client.call_raw("pane.ls", json!({})).expect("pane.ls");
        [r.pane.as_str(), mock.as_str()]
            .iter()
            .map(|n| {
                list.as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["name"] == *n)
                    .cloned()
                    .unwrap_or_else(|| panic!("no pane {n} in {list}"))
            })
            .collect()
    };
    let before = panes(&mut r);
    // Claude redraws its title after the screen (2.1.337 a moment later
    // than 2.1.332): the title to re-seed is the settled one, not working.
    let title = if agent == Agent::Claude {
        let mut t = Value::Null;
        let settled = common::wait_until(STEP_TIMEOUT, || {
            t = r.read()["title"].clone();
            t.as_str().is_some_and(|s| s.starts_with('✳'))
        });
        assert!(
            settled,
            "{v}: Claude's title never settled after the turn: {t}"
        );
        t
    } else {
        r.read()["title"].clone()
    };
    let sup: i32 = std::fs::read_to_string(r.state.join("supervisor.lock"))
        .expect("supervisor.lock")
        .trim()
        .parse()
        .expect("the supervisor's pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sup),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 the supervisor");
    assert!(common::wait_until(STEP_TIMEOUT, || {
        common::all_threads_gone(sup)
    }));
    for p in &before {
        assert!(
            common::pid_alive(common::pid_of(p)),
            "{} {v}: a tmux pane died with its supervisor: {p}",
            agent.name()
        );
    }

    r.drover(&["serve", "--daemon"]);
    let socket =
        drover::paths::socket_path(drover::statedir::StateDir::new(&r.state)).expect("socket path");
    r.client = Client::connect(&socket).expect("connect to the new supervisor");
    let after = panes(&mut r);
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(b["pid"], a["pid"], "re-adopted, not respawned: {b}");
        assert_eq!(b["generation"], a["generation"], "{b}");
        assert_eq!(b["backend"], "tmux", "{b}");
        assert!(b["lost"].is_null(), "a re-adopted pane is lost: {b}");
    }
    r.expect_text("Hello from the mock model.");
    if agent == Agent::Claude {
        // Claude's title is one of its state signals; it sets it rarely.
        assert_eq!(r.read()["title"], title, "the title was not re-seeded");
    }

    // Still observed: a loop-sized prompt is delivered (confirmed working
    // by the new supervisor), and the turn's end is seen.
    let v2 = r
        .client
        .call_raw(
            "deliver",
            json!({"pane": r.pane, "text": long_prompt("say hello again")}),
        )
        .unwrap_or_else(|e| panic!("{} {v}: not delivered after re-adoption: {e}", agent.name()));
    assert_eq!(v2["delivered"], true, "{v2}");
    let (code, out) = r.drover_status(&[
        "wait",
        &r.pane.clone(),
        "--until",
        "done",
        "--timeout-ms",
        "30000",
    ]);
    let seen = r.read();
    let screen = seen["text"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        code,
        0,
        "{} {v}: {out}\n{}\n{screen}",
        agent.name(),
        seen["observation"]
    );
    assert!(
        screen.matches("Hello from the mock model.").count() >= 2,
        "{} {v}: no reply to the prompt after re-adoption: {screen}",
        agent.name()
    );
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn claude_in_tmux_outlives_the_supervisor() {
    tmux_pane_outlives_the_supervisor(Agent::Claude);
}

#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn codex_in_tmux_outlives_the_supervisor() {
    tmux_pane_outlives_the_supervisor(Agent::Codex);
}
