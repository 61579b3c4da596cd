//! The harness of the real-signal suites (`real_signals`): a capture
//! command as every Claude Code hook and status line or as Codex's notify
//! program, the agent started in a lane-like git worktree, and the calls read
//! back in order.

use crate::common;
use crate::real_agents::{Agent, Run};

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a signal may take to arrive after what causes it.
pub(crate) const SIGNAL_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a capture folder is re-read while waiting.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// Writes stdin (Codex's notify: the last argument) to `<dir>/<ns>-<pid>-<kind>.json`
/// and `$DROVER_PANE` beside it; never fails, prints a line for a status line.
const CAPTURE: &str = r#"#!/bin/sh
d=$1; k=$2; shift 2
f="$d/$(date +%s%N)-$$-$k"
if [ "$k" = notify ]; then
  last=""; for a in "$@"; do last=$a; done
  printf '%s' "$last" > "$f.tmp"
else
  cat > "$f.tmp"
fi
printf '%s' "${DROVER_PANE:-}" > "$f.pane"
mv "$f.tmp" "$f.json"
[ "$k" = status ] && echo captured
exit 0
"#;

/// The Claude Code hook events a lane listens to; the tool events take a matcher.
const CLAUDE_EVENTS: [(&str, bool); 15] = [
    ("SessionStart", true),
    ("UserPromptSubmit", false),
    ("PreToolUse", true),
    ("PermissionRequest", true),
    ("PostToolUse", true),
    ("PostToolUseFailure", true),
    ("PostToolBatch", false),
    ("Notification", true),
    ("Stop", false),
    ("StopFailure", true),
    ("SubagentStart", true),
    ("SubagentStop", true),
    ("PreCompact", true),
    ("SessionEnd", true),
    ("PermissionDenied", true),
];

/// A point in time, in nanoseconds since the epoch: calls after it count.
pub(crate) type Mark = u128;

/// One captured call.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// `hook`, `status` or `notify`.
    pub(crate) kind: String,
    pub(crate) json: Value,
    /// The pane the call came from: `DROVER_PANE`, `<name>:<generation>:<created>`.
    pub(crate) pane: String,
    /// When it was made (nanoseconds since the epoch, from its file name).
    pub(crate) at_ns: u128,
}

impl Call {
    /// Whether the call came from the pane named `name`.
    pub(crate) fn came_from(&self, name: &str) -> bool {
        self.pane.split(':').next() == Some(name)
    }

    /// A hook's event name, `status` or Codex's notify `type`.
    pub(crate) fn event(&self) -> String {
        match self.kind.as_str() {
            "hook" => self.json["hook_event_name"].as_str().unwrap_or("?").into(),
            "notify" => self.json["type"].as_str().unwrap_or("?").into(),
            k => k.into(),
        }
    }
}

/// A capture folder and the command that writes into it.
pub(crate) struct Capture {
    dir: PathBuf,
    script: PathBuf,
}

impl Capture {
    pub(crate) fn new(root: &Path) -> Capture {
        let dir = root.join("captured");
        std::fs::create_dir_all(&dir).expect("capture dir");
        let script = root.join("capture.sh");
        std::fs::write(&script, CAPTURE).expect("write capture script");
        let mut perm = std::fs::metadata(&script).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&script, perm).expect("chmod capture script");
        Capture { dir, script }
    }

    /// The shell command a hook runs for `kind`.
    fn command(&self, kind: &str) -> String {
        format!("{} {} {kind}", self.script.display(), self.dir.display())
    }

    /// Claude Code's `--settings`: every listened event and the status line
    /// run the capture command.
    pub(crate) fn claude_settings(&self, root: &Path) -> PathBuf {
        let hook = json!([{"type": "command", "command": self.command("hook"), "timeout": 5}]);
        let mut hooks = serde_json::Map::new();
        for (event, matcher) in CLAUDE_EVENTS {
            let entry = if matcher {
                json!([{"matcher": "", "hooks": hook}])
            } else {
                json!([{"hooks": hook}])
            };
            hooks.insert(event.into(), entry);
        }
        let settings = json!({"hooks": hooks,
            "statusLine": {"type": "command", "command": self.command("status")}});
        let path = root.join("settings.json");
        std::fs::write(&path, settings.to_string()).expect("write settings");
        path
    }

    /// Codex's `-c notify=[…]`.
    pub(crate) fn codex_notify(&self) -> String {
        let argv = [
            self.script.display().to_string(),
            self.dir.display().to_string(),
            "notify".into(),
        ];
        format!("notify={}", json!(argv))
    }

    /// Every call so far, in call order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            let mut parts = stem.splitn(3, '-');
            let (Some(ns), Some(_pid), Some(kind)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|err| panic!("{name} is not JSON ({err}): {text}"));
            let pane =
                std::fs::read_to_string(self.dir.join(format!("{stem}.pane"))).unwrap_or_default();
            out.push(Call {
                kind: kind.into(),
                json,
                pane,
                at_ns: ns.parse().unwrap_or(0),
            });
        }
        out.sort_by_key(|c| c.at_ns);
        out
    }

    /// The events of the hook (or notify) calls made after the mark `from`.
    pub(crate) fn events_from(&self, from: Mark) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.at_ns > from)
            .filter(|c| c.kind != "status")
            .map(|c| c.event())
            .collect()
    }

    /// Wait until `cond` holds for the calls made after the mark `from`; returns them.
    pub(crate) fn wait(&self, what: &str, from: Mark, cond: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        let deadline = Instant::now() + SIGNAL_TIMEOUT;
        loop {
            let calls: Vec<Call> = self
                .calls()
                .into_iter()
                .filter(|c| c.at_ns > from)
                .collect();
            if cond(&calls) {
                return calls;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {SIGNAL_TIMEOUT:?}; calls: {:?}",
                calls.iter().map(Call::event).collect::<Vec<_>>()
            );
            std::thread::sleep(POLL);
        }
    }

    /// Wait until a hook (or notify) call for `event` came after the mark `from`.
    pub(crate) fn wait_event(&self, from: Mark, event: &str) -> Vec<Call> {
        self.wait(event, from, |c| c.iter().any(|c| c.event() == event))
    }

    /// Now, as a mark: the calls made after it. By the time a call
    /// started, not the order its file appeared in (a status line begun
    /// before a hook may be written after it).
    pub(crate) fn mark(&self) -> Mark {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    }
}

/// A lane's cwd: a git worktree (on its own branch) of a new repository
/// under `root`; returns the `--cwd` arguments for `rehearse`.
pub(crate) fn lane_worktree(root: &Path) -> Vec<String> {
    let repo = root.join("repo");
    let lane = root.join("lane");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let repo_s = repo.display().to_string();
    git(&["init", "-q", &repo_s]);
    git(&["-C", &repo_s, "commit", "-q", "--allow-empty", "-m", "init"]);
    git(&[
        "-C",
        &repo_s,
        "worktree",
        "add",
        "-q",
        "-b",
        "lane",
        &lane.display().to_string(),
    ]);
    vec!["--cwd".into(), lane.display().to_string()]
}

/// Claude in a rehearsal with the capture command as every hook and its status line.
pub(crate) fn claude(v: &str, name: &str, extra: &[&str], script: &str) -> (Run, Capture) {
    let backend = common::backend();
    let mut cap = None;
    let r = Run::start_args(
        &backend,
        Agent::Claude,
        v,
        name,
        script,
        None,
        extra,
        |root| {
            let c = Capture::new(root);
            let settings = c.claude_settings(root);
            cap = Some(c);
            let mut args = lane_worktree(root);
            args.extend([
                "--".into(),
                "--settings".into(),
                settings.display().to_string(),
            ]);
            args
        },
    );
    (r, cap.expect("capture made"))
}

/// Codex in a rehearsal with the capture command as its notify program.
pub(crate) fn codex(v: &str, name: &str, script: &str) -> (Run, Capture) {
    let backend = common::backend();
    let mut cap = None;
    let r = Run::start_args(&backend, Agent::Codex, v, name, script, None, &[], |root| {
        let c = Capture::new(root);
        let notify = c.codex_notify();
        cap = Some(c);
        let mut args = lane_worktree(root);
        args.extend(["--".into(), "-c".into(), notify]);
        args
    });
    (r, cap.expect("capture made"))
}

/// The mock script of these tests, with `head` (a `[usage]` table) before its turns.
pub(crate) fn signals_script(head: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mock-scripts/signals.toml");
    let turns = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    format!("{head}\n{turns}")
}

/// Wait until Claude is idle and its SessionStart hook came; returns the
/// mark the turn's calls start from.
pub(crate) fn started(r: &mut Run, cap: &Capture) -> Mark {
    r.expect_state("idle");
    cap.wait_event(0, "SessionStart");
    cap.mark()
}

/// Events in order: `want` is a subsequence of `got`.
pub(crate) fn in_order(got: &[String], want: &[&str]) -> bool {
    let mut it = got.iter();
    want.iter().all(|w| it.any(|g| g == w))
}

/// Claude 2.1.197 puts an interrupted or denied prompt back into its composer.
pub(crate) fn clear_composer(r: &mut Run) {
    r.keys(&["C-u"]);
    r.wait_screen("an empty composer", |t| {
        t.lines()
            .any(|l| l.trim_end() == "❯" || l.trim_end() == "❯\u{a0}")
            .then_some(())
    });
}

/// A prompt through the supervisor's confirmed delivery (an Enter right
/// after an interrupt can be dropped).
pub(crate) fn deliver(r: &mut Run, text: &str) {
    let pane = r.pane.clone();
    r.client
        .call_raw("deliver", json!({"pane": pane, "text": text}))
        .expect("deliver");
}
