//! The sim agent's state machine: keys and time in, transcript and mode out.
//! No I/O except the script's own file writes; time is passed in.

use super::Profile;
use super::input::Key;
use super::script::{Script, Step, Turn};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the sim is showing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Not drawn yet (script `startup_ms`).
    Starting { until: Instant },
    /// The composer accepts input.
    Idle,
    /// Spinner until `until`.
    Working { since: Instant, until: Instant },
    /// Waiting for an answer to a permission prompt for `cmd`.
    Permission { cmd: String },
    /// Claude's usage-limit menu, its rows in this order (cursor on the first).
    LimitMenu { labels: Vec<String> },
}

/// The limit menu's one safe row (Claude's).
pub const WAIT_ROW: &str = "Stop and wait for limit to reset";
/// The safe row of Codex's popup at a limit (the first, "Switch to …",
/// changes the model).
pub const KEEP_ROW: &str = "Keep current model";

/// The OSC 7501 state the Codex profile reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Osc {
    Idle,
    Working,
    Done,
    BlockedPermission,
}

impl Osc {
    /// The OSC 7501 payload.
    pub fn payload(self) -> &'static str {
        match self {
            Osc::Idle => "state=idle:app=codex",
            Osc::Working => "state=working:app=codex",
            Osc::Done => "state=done:app=codex",
            Osc::BlockedPermission => "state=blocked:app=codex:kind=permission",
        }
    }
}

struct TurnRun {
    steps: Vec<Step>,
    next: usize,
    started: Instant,
    tokens: Vec<(String, String)>,
    files: Vec<String>,
}

/// The sim's whole state.
pub struct Model {
    pub profile: Profile,
    script: Script,
    cwd: PathBuf,
    pub transcript: Vec<String>,
    pub composer: String,
    pub mode: Mode,
    pub osc: Osc,
    prompts: usize,
    turn: Option<TurnRun>,
    /// A permission prompt announced by OSC but not drawn yet.
    pending_ask: Option<String>,
    /// Set when the sim should exit with this code.
    pub exit: Option<u8>,
    /// A usage limit line is shown until then.
    limit_until: Option<Instant>,
}

/// Text every simulated limit line holds (Claude's and Codex's wording).
const LIMIT_MARK: &str = "hit your ";
/// Codex's limit message, as the real one wraps it at 120 columns: the first
/// row, then the second up to the reset time.
const CODEX_LIMIT: [&str; 2] = [
    "■ You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/",
    "usage to purchase more credits or try again at",
];

/// Largest composer kept; more pasted text is dropped.
const MAX_COMPOSER: usize = 1 << 20;

impl Model {
    /// A fresh sim started at `now` in `cwd`.
    pub fn new(profile: Profile, script: Script, cwd: PathBuf, now: Instant) -> Self {
        let mode = if script.startup_ms > 0 {
            Mode::Starting {
                until: now + Duration::from_millis(script.startup_ms),
            }
        } else {
            Mode::Idle
        };
        Model {
            profile,
            script,
            cwd,
            transcript: Vec::new(),
            composer: String::new(),
            mode,
            osc: Osc::Idle,
            prompts: 0,
            turn: None,
            pending_ask: None,
            exit: None,
            limit_until: None,
        }
    }

    /// The next instant at which [`Model::tick`] has work to do.
    pub fn deadline(&self) -> Option<Instant> {
        match self.mode {
            Mode::Starting { until } | Mode::Working { until, .. } => Some(until),
            _ => self.limit_until,
        }
    }

    /// Advance timers. Returns true when something changed.
    pub fn tick(&mut self, now: Instant) -> bool {
        if self.limit_until.is_some_and(|t| now >= t) {
            // The limit reset: its line goes.
            self.limit_until = None;
            self.transcript
                .retain(|l| !l.contains(LIMIT_MARK) && !l.starts_with(CODEX_LIMIT[1]));
            return true;
        }
        match self.mode {
            Mode::Starting { until } if now >= until => {
                self.mode = Mode::Idle;
                true
            }
            Mode::Working { until, .. } if now >= until => {
                self.advance(now);
                true
            }
            _ => false,
        }
    }

    /// React to a key. Returns true when something changed.
    pub fn key(&mut self, k: Key, now: Instant) -> bool {
        match (&self.mode, k) {
            (Mode::Starting { .. }, _) => false,
            (Mode::Idle, Key::Char(c)) => {
                self.typed();
                if self.composer.len() < MAX_COMPOSER {
                    self.composer.push(c);
                }
                true
            }
            (Mode::Idle, Key::Paste(p)) => {
                self.typed();
                let room = MAX_COMPOSER.saturating_sub(self.composer.len());
                let cut = floor_char_boundary(&p, room);
                self.composer.push_str(&p[..cut]);
                true
            }
            (Mode::Idle, Key::Backspace) => self.composer.pop().is_some(),
            (Mode::Idle, Key::Enter) => {
                if self.composer.trim().is_empty() {
                    return false;
                }
                let prompt = std::mem::take(&mut self.composer);
                self.submit(prompt, now);
                true
            }
            (Mode::Idle, Key::CtrlC) if !self.composer.is_empty() => {
                self.composer.clear();
                true
            }
            (Mode::Idle, Key::CtrlC | Key::CtrlD) => {
                self.exit = Some(0);
                true
            }
            (Mode::Idle, Key::Esc) => false,
            (Mode::Working { .. }, Key::Esc | Key::CtrlC) => {
                self.interrupt();
                true
            }
            (Mode::Working { .. }, _) => false,
            (Mode::Permission { .. }, Key::Enter | Key::Char('1' | 'y' | '2' | 'p')) => {
                self.answer(true, now);
                true
            }
            (Mode::Permission { .. }, Key::Esc | Key::CtrlC | Key::Char('3' | 'n')) => {
                self.answer(false, now);
                true
            }
            (Mode::Permission { .. }, _) => false,
            (Mode::LimitMenu { labels }, Key::Char(c)) => {
                let i = c.to_digit(10).and_then(|d| usize::try_from(d).ok());
                match i.and_then(|d| d.checked_sub(1)).and_then(|d| labels.get(d)) {
                    Some(l) => {
                        let l = l.clone();
                        self.choose_limit_row(&l);
                        true
                    }
                    None => false,
                }
            }
            (Mode::LimitMenu { labels }, Key::Enter) => {
                let l = labels.first().cloned().unwrap_or_default();
                self.choose_limit_row(&l);
                true
            }
            (Mode::LimitMenu { .. }, Key::Esc) => {
                self.mode = Mode::Idle;
                true
            }
            (Mode::LimitMenu { .. }, _) => false,
        }
    }

    /// A row of the limit menu was chosen: waiting goes back to the prompt;
    /// any other row (funds, an upgrade) ends the sim with code 3.
    fn choose_limit_row(&mut self, label: &str) {
        self.detail(&format!("Chose: {label}"));
        self.mode = Mode::Idle;
        if label != WAIT_ROW && !label.starts_with(KEEP_ROW) {
            self.exit = Some(3);
        }
    }

    /// Typing after a finished turn moves Codex's OSC from done to idle.
    fn typed(&mut self) {
        if self.osc == Osc::Done {
            self.osc = Osc::Idle;
        }
    }

    fn claude(&self) -> bool {
        self.profile == Profile::Claude
    }

    fn submit(&mut self, prompt: String, now: Instant) {
        let lines: Vec<&str> = prompt.lines().filter(|l| !l.trim().is_empty()).collect();
        let mark = if self.claude() { "❯" } else { "›" };
        self.blank();
        for (i, l) in lines.iter().take(3).enumerate() {
            let l = l.replace('\t', " ");
            if i == 0 {
                self.transcript.push(format!("{mark} {l}"));
            } else {
                self.transcript.push(format!("  {l}"));
            }
        }
        if lines.len() > 3 {
            self.transcript
                .push(format!("  … +{} lines", lines.len() - 3));
        }
        let Turn { steps, .. } = self.script.turn_for(self.prompts, &prompt);
        self.prompts += 1;
        self.turn = Some(TurnRun {
            steps,
            next: 0,
            started: now,
            tokens: tokens(&prompt),
            files: Vec::new(),
        });
        self.osc = Osc::Working;
        self.advance(now);
    }

    fn blank(&mut self) {
        if self.transcript.last().is_some_and(|l| !l.is_empty()) {
            self.transcript.push(String::new());
        }
    }

    fn say(&mut self, text: &str) {
        let bullet = if self.claude() { "●" } else { "•" };
        self.blank();
        for (i, l) in text.lines().enumerate() {
            if i == 0 {
                self.transcript.push(format!("{bullet} {l}"));
            } else {
                self.transcript.push(format!("  {l}"));
            }
        }
    }

    fn detail(&mut self, text: &str) {
        let t = if self.claude() {
            format!("  ⎿  {text}")
        } else {
            format!("  └ {text}")
        };
        self.transcript.push(t);
    }

    /// Run steps until one has to wait (work, ask) or the turn ends.
    fn show_ask(&mut self, cmd: String) {
        if self.claude() {
            self.say(&format!("Bash({cmd})"));
            self.detail("Waiting…");
        } else {
            self.say("Running a command.");
        }
        self.osc = Osc::BlockedPermission;
        self.mode = Mode::Permission { cmd };
    }

    fn advance(&mut self, now: Instant) {
        if let Some(cmd) = self.pending_ask.take() {
            self.show_ask(cmd);
            return;
        }
        loop {
            let Some(run) = self.turn.as_mut() else {
                self.mode = Mode::Idle;
                return;
            };
            let Some(step) = run.steps.get(run.next).cloned() else {
                self.finish(now);
                return;
            };
            run.next += 1;
            let since = match self.mode {
                Mode::Working { since, .. } => since,
                _ => now,
            };
            match step {
                Step::Work(ms) => {
                    self.osc = Osc::Working;
                    self.mode = Mode::Working {
                        since,
                        until: now + Duration::from_millis(ms),
                    };
                    return;
                }
                Step::Ask(cmd) => {
                    let lead = self.script.osc_blocked_lead_ms;
                    if !self.claude() && lead > 0 {
                        // Like real Codex: OSC `blocked` first, the dialog later.
                        self.osc = Osc::BlockedPermission;
                        self.pending_ask = Some(cmd);
                        self.mode = Mode::Working {
                            since,
                            until: now + Duration::from_millis(lead),
                        };
                    } else {
                        self.show_ask(cmd);
                    }
                    return;
                }
                Step::Write {
                    path,
                    content,
                    append,
                } => {
                    let (path, content) = (self.expand(&path), self.expand(&content));
                    let target = self.cwd.join(&path);
                    // A new file may be in a new directory (`notes/TASK-1.md`).
                    let r = target
                        .parent()
                        .map_or(Ok(()), std::fs::create_dir_all)
                        .and_then(|()| write_or_append(&target, &content, append));
                    self.wrote(&path, r.map(|_| content.lines().count()));
                }
                Step::Resolve { path, keep } => {
                    let path = self.expand(&path);
                    let target = self.cwd.join(&path);
                    let r = std::fs::read(&target).and_then(|t| {
                        let out = crate::agent::sim::resolve(&t, keep);
                        std::fs::write(&target, &out).map(|()| out.split(|b| *b == b'\n').count())
                    });
                    self.wrote(&path, r);
                }
                Step::Report {
                    path,
                    state,
                    fields,
                } => {
                    let path = self.expand(&path);
                    let doc = self.report(state.as_str(), fields);
                    let target = self.cwd.join(&path);
                    let r = serde_json::to_vec_pretty(&doc)
                        .map_err(std::io::Error::other)
                        .and_then(|b| write_atomic(&target, &b));
                    match r {
                        Ok(()) => self.say(&format!("Report written to {path}")),
                        Err(e) => self.say(&format!("Error: cannot write {path}: {e}")),
                    }
                }
                Step::Say(text) => self.say(&text),
                Step::Heartbeat { status, session } => self.heartbeat(&status, session),
                Step::Usage(t) => {
                    let taken = super::usage::report(&t);
                    self.detail(if taken {
                        "Usage reported"
                    } else {
                        "Usage not taken"
                    });
                }
                Step::Limit { ms, resets, menu } => {
                    let at = resets.unwrap_or_else(|| "3am (UTC)".into());
                    let line = if self.claude() {
                        format!("  ⎿  You've hit your limit · resets {at}")
                    } else {
                        CODEX_LIMIT[0].to_string()
                    };
                    if self.claude() {
                        // Claude answers a prompt at its limit right under the
                        // prompt's first row (a pasted prompt shows as one row).
                        let at = self.transcript.iter().rposition(|l| l.starts_with("❯ "));
                        let at = at.map_or(self.transcript.len(), |i| i + 1);
                        self.transcript.truncate(at);
                        self.transcript.push(line);
                    } else {
                        self.transcript.push(line);
                        self.transcript.push(format!("{} {at}.", CODEX_LIMIT[1]));
                    }
                    self.turn = None;
                    self.osc = Osc::Idle;
                    self.mode = if !menu.is_empty() {
                        Mode::LimitMenu { labels: menu }
                    } else {
                        Mode::Idle
                    };
                    self.limit_until = Some(now + Duration::from_millis(ms));
                    return;
                }
                Step::Finish => {
                    self.finish(now);
                    return;
                }
                Step::Exit(code) => {
                    self.exit = Some(u8::try_from(code.clamp(0, 255)).unwrap_or(255));
                    return;
                }
            }
        }
    }

    /// `{name}` in a script string replaced by the prompt's `name=value` token.
    fn expand(&self, s: &str) -> String {
        let mut out = s.to_string();
        if let Some(run) = self.turn.as_ref() {
            for (k, v) in &run.tokens {
                out = out.replace(&format!("{{{k}}}"), v);
            }
        }
        out
    }

    /// Run `drover session-heartbeat` for the prompt's task (synchronously: it
    /// is one short registry write).
    fn heartbeat(&mut self, status: &str, session: Option<String>) {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let task = self
            .turn
            .as_ref()
            .and_then(|r| r.tokens.iter().find(|(k, _)| k == "task"))
            .map(|(_, v)| v.clone());
        let session = session.or_else(|| env(crate::statedir::env::SESSION_ID));
        let agent =
            env(crate::statedir::env::AGENT).unwrap_or_else(|| self.profile.as_str().to_string());
        let (Some(task), Some(session), Ok(exe)) = (task, session, std::env::current_exe()) else {
            self.say("Error: heartbeat needs a task= token, a session and the drover binary");
            return;
        };
        self.say(&format!("Bash(drover session-heartbeat --status {status})"));
        let out = std::process::Command::new(exe)
            .args([
                "session-heartbeat",
                "--session-id",
                &session,
                "--agent",
                &agent,
            ])
            .args(["--task", &task, "--status", status])
            .stdin(std::process::Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => self.detail(&format!("Heartbeat {status} for {task}")),
            Ok(o) => self.detail(&format!(
                "Error: heartbeat exited {}",
                o.status.code().unwrap_or(-1)
            )),
            Err(e) => self.detail(&format!("Error: heartbeat: {e}")),
        }
    }

    fn wrote(&mut self, path: &str, r: std::io::Result<usize>) {
        if self.claude() {
            self.say(&format!("Write({path})"));
        } else {
            self.say(&format!("Ran cat > {path}"));
        }
        match r {
            Ok(n) => {
                self.detail(&format!("Wrote {n} lines to {path}"));
                if let Some(t) = self.turn.as_mut() {
                    t.files.push(path.to_string());
                }
            }
            Err(e) => self.detail(&format!("Error: {e}")),
        }
    }

    fn report(
        &self,
        state: &str,
        fields: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> serde_json::Value {
        let run = self.turn.as_ref();
        let tok = |k: &str| {
            run.and_then(|r| r.tokens.iter().find(|(n, _)| n == k))
                .map(|(_, v)| v.clone())
        };
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let attempt = tok("attempt").or_else(|| env(crate::statedir::env::ATTEMPT_ID));
        let mut doc = serde_json::json!({
            "attempt_id": attempt,
            "session_id": env(crate::statedir::env::SESSION_ID),
            "nonce": tok("nonce"),
            "state": state,
            "side_effects": run.map(|r| r.files.iter().map(|f| serde_json::json!({"kind": "file", "path": f})).collect::<Vec<_>>()).unwrap_or_default(),
            "at": crate::paths::now_rfc3339(),
        });
        if let (Some(obj), Some(e)) = (doc.as_object_mut(), &self.script.effort) {
            obj.insert("effort".into(), e.as_str().into());
        }
        if let (Some(obj), Some(extra)) = (doc.as_object_mut(), fields) {
            obj.extend(extra);
        }
        doc
    }

    fn answer(&mut self, approve: bool, now: Instant) {
        let Mode::Permission { cmd } = &self.mode else {
            return;
        };
        let cmd = cmd.clone();
        if approve {
            if self.claude() {
                // Replace the "Waiting…" detail with the outcome.
                self.drop_waiting_line();
                self.detail("Approved");
            } else {
                self.blank();
                self.transcript
                    .push(format!("✔ You approved codex to run {cmd} this time"));
            }
            self.osc = Osc::Working;
            self.mode = Mode::Working {
                since: now,
                until: now,
            };
            self.advance(now);
        } else {
            if !self.claude() {
                self.blank();
                self.transcript
                    .push(format!("✗ You did not approve codex to run {cmd}"));
            }
            self.interrupt();
        }
    }

    /// Remove Claude's "Waiting…" detail line when it is the last one.
    fn drop_waiting_line(&mut self) {
        if self
            .transcript
            .last()
            .is_some_and(|l| l.ends_with("Waiting…"))
        {
            self.transcript.pop();
        }
    }

    fn interrupt(&mut self) {
        self.pending_ask = None;
        if self.claude() {
            self.drop_waiting_line();
            self.detail("Interrupted · What should Claude do instead?");
        } else {
            self.blank();
            self.transcript.push(
                "■ Conversation interrupted - tell the model what to do differently.".to_string(),
            );
        }
        self.turn = None;
        self.osc = Osc::Idle;
        self.mode = Mode::Idle;
    }

    fn finish(&mut self, now: Instant) {
        let started = self.turn.take().map_or(now, |t| t.started);
        let secs = now.saturating_duration_since(started).as_secs();
        self.blank();
        if self.claude() {
            self.transcript.push(format!("✻ Worked for {secs}s"));
        } else {
            let hhmm = chrono::Local::now().format("%H:%M");
            self.transcript
                .push(format!("  Worked for {secs}s • {hhmm}"));
        }
        self.osc = Osc::Done;
        self.mode = Mode::Idle;
    }

    /// The working spinner's elapsed seconds.
    /// A usage limit shows (until it resets).
    pub fn limited(&self) -> bool {
        self.limit_until.is_some()
    }

    pub fn working_secs(&self, now: Instant) -> u64 {
        match self.mode {
            Mode::Working { since, .. } => now.saturating_duration_since(since).as_secs(),
            _ => 0,
        }
    }

    /// The sim's working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The agent state the current screen shows, as the classifier should name
    /// it (`starting`, `idle`, `working`, `blocked`, `done`).
    pub fn shown_state(&self) -> &'static str {
        match self.mode {
            Mode::Starting { .. } => "starting",
            Mode::Idle if self.osc == Osc::Done => "done",
            Mode::Idle => "idle",
            Mode::Working { .. } => "working",
            Mode::Permission { .. } | Mode::LimitMenu { .. } => "blocked",
        }
    }
}

/// `key=value` tokens of a prompt (`attempt=A1 nonce=N7`), for the report.
fn tokens(prompt: &str) -> Vec<(String, String)> {
    prompt
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .map(|(k, v)| {
            (
                k.to_string(),
                v.trim_end_matches([',', '.', ';']).to_string(),
            )
        })
        .collect()
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::store::write_bytes_atomic(path, bytes).map_err(std::io::Error::other)
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

/// Write `content` to `target`, or with `append` add it at the end of what
/// the file holds (on a line of its own).
fn write_or_append(target: &std::path::Path, content: &str, append: bool) -> std::io::Result<()> {
    if !append {
        return std::fs::write(target, content.as_bytes());
    }
    let mut text = match std::fs::read(target) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    text.extend_from_slice(content.as_bytes());
    std::fs::write(target, text)
}
