//! The classifier: screen rules plus OSC 7501, the window title, process exit
//! and output quiescence, combined into one [`Observation`] (docs/agents.md).
//!
//! How signals combine, in order:
//! 1. `exited` wins over everything.
//! 2. The screen rules give the screen's verdict (first matching rule).
//! 3. OSC 7501 (Codex) and the title (a braille spinner means working; Claude's
//!    `✳ ` means "not working") are checked against it. When they disagree the
//!    state is `unknown` until they agree or the output has been quiet for
//!    [`SETTLE_MS`]. Once settled: a dialog on screen wins (a human is needed
//!    whatever the OSC says); otherwise OSC 7501 wins over the screen (Codex
//!    hides its `Working` row while reply text streams, and sends `blocked`
//!    ~0.8 s before it draws the dialog); the screen wins over the title (the
//!    title cannot tell idle, done and a permission wait apart).
//! 4. No screen verdict: OSC 7501, else a spinner title, else `starting` while
//!    `since_spawn_ms < STARTING_GRACE_MS`, else `unknown`.

use super::AgentError;
use super::limit;
use super::rules::{self, Rule, ScreenView};
use super::state::{AgentKind, BlockedKind, Observation, State};
use crate::statedir::StateDir;

/// Quiet time after which disagreeing signals are resolved (see module docs).
pub const SETTLE_MS: u64 = 1_000;
/// A shell pane whose output has been quiet this long is idle.
pub const SHELL_QUIET_MS: u64 = 500;
/// Until this long after spawn, a screen that matches nothing is `starting`.
pub const STARTING_GRACE_MS: u64 = 30_000;
/// How long a shell pane with nothing drawn reads `starting` however quiet
/// it is (a slow prompt is not idle); then it settles like any quiet pane.
pub const SHELL_EMPTY_MS: u64 = 3_000;

/// Everything the screen model knows at the end of an output burst.
#[derive(Debug, Clone, Copy)]
pub struct Signals<'a> {
    /// Visible rows, top to bottom, trailing spaces trimmed (as `tmux capture-pane -p`).
    pub rows: &'a [String],
    /// The pane's width in columns, which agents wrap their text to (0 when
    /// unknown: each row is a line).
    pub cols: u16,
    /// The last OSC 0/2 title.
    pub title: Option<&'a str>,
    /// Payload of the last OSC 7501, e.g. `state=working:app=codex`.
    pub osc7501: Option<&'a str>,
    /// `Some(code)` once the process exited (`None` code: killed by a signal).
    pub exited: Option<Option<i32>>,
    /// Milliseconds since the last output byte.
    pub quiet_ms: u64,
    /// Milliseconds since the process was spawned.
    pub since_spawn_ms: u64,
    /// Who holds the pane's terminal: `Some(true)` when a process group other
    /// than the pane leader's is in the foreground (a shell's command runs),
    /// `Some(false)` when the leader has it, `None` when unknown.
    pub foreground_job: Option<bool>,
    /// The pane leader is a shell running a command in its own foreground
    /// group, without job control: its startup file's, before its first
    /// prompt. A blank screen then is a shell still starting, not idle.
    pub shell_child: bool,
}

impl<'a> Signals<'a> {
    /// Signals of a saved screen: no title, no OSC, long settled.
    pub fn screen_only(rows: &'a [String]) -> Self {
        Signals {
            rows,
            cols: 0,
            title: None,
            osc7501: None,
            exited: None,
            quiet_ms: u64::MAX,
            since_spawn_ms: u64::MAX,
            foreground_job: None,
            shell_child: false,
        }
    }
}

/// Split a saved plain-text screen into rows (trailing spaces trimmed, the
/// final newline not counted as a row).
pub fn rows_from_text(text: &str) -> Vec<String> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n')
        .map(|r| {
            r.strip_suffix('\r')
                .unwrap_or(r)
                .trim_end_matches(' ')
                .to_string()
        })
        .collect()
}

/// Compiled screen rules.
#[derive(Debug, Clone)]
pub struct Classifier {
    rules: Vec<Rule>,
}

/// What one signal claims about the state.
#[derive(Debug, Clone, Copy)]
struct Claim {
    source: &'static str,
    /// The state the signal names, when it names one.
    state: Option<State>,
    kind: Option<BlockedKind>,
    /// The screen states this signal is consistent with.
    allows: &'static [State],
}

const READY: &[State] = &[State::Idle, State::Done];
const NOT_WORKING: &[State] = &[State::Idle, State::Done, State::Blocked];

/// Parse an OSC 7501 payload: `state=<s>:app=codex[:kind=<k>]` (`;` accepted too).
/// `clear` and unknown states give no claim.
fn osc_claim(payload: &str) -> Option<Claim> {
    let mut state = None;
    let mut kind = None;
    for field in payload.split([':', ';']) {
        let (k, v) = field.split_once('=').unwrap_or((field, ""));
        match k.trim() {
            "state" => state = Some(v.trim().to_ascii_lowercase()),
            "kind" => kind = v.trim().parse::<BlockedKind>().ok(),
            _ => {}
        }
    }
    let state = state?;
    let claim = |st: State, allows: &'static [State]| Claim {
        source: "osc7501",
        state: Some(st),
        kind: None,
        allows,
    };
    match state.as_str() {
        "working" => Some(claim(State::Working, &[State::Working])),
        "idle" => Some(claim(State::Idle, READY)),
        "done" => Some(claim(State::Done, READY)),
        s if s.starts_with("blocked") => {
            // `blocked`, or the kind glued on: `blocked_permission`, `blocked-question`.
            let glued = s
                .trim_start_matches("blocked")
                .trim_start_matches(['_', '-', '.']);
            let kind = kind
                .or_else(|| glued.parse().ok())
                .unwrap_or(BlockedKind::Permission);
            Some(Claim {
                kind: Some(kind),
                ..claim(State::Blocked, &[State::Blocked])
            })
        }
        _ => None,
    }
}

/// Claude Code 2.1.332's working title spinner (2.1.197 and Codex use braille).
const CIRCLE_SPINNER: [char; 4] = ['◐', '◓', '◑', '◒'];

/// Title claims: a spinner glyph first (braille, or Claude 2.1.332's `◐◓◑◒`)
/// means working; Claude's `✳ ` means ready or waiting (idle, done and a
/// permission wait look alike).
fn title_claim(title: &str, kind: AgentKind) -> Option<(Claim, &'static str)> {
    let first = title.trim_start().chars().next()?;
    if CIRCLE_SPINNER.contains(&first) && matches!(kind, AgentKind::Claude | AgentKind::Sim) {
        // Names `working` when the screen has no verdict, but never overrules
        // one: 2.1.332 redraws its title after the screen, and a disagreement
        // would make every finished turn read `unknown` for a moment.
        return Some((
            Claim {
                source: "title",
                state: Some(State::Working),
                kind: None,
                allows: &[State::Working, State::Idle, State::Done, State::Blocked],
            },
            "title:spinner",
        ));
    }
    if ('\u{2801}'..='\u{28ff}').contains(&first) {
        return Some((
            Claim {
                source: "title",
                state: Some(State::Working),
                kind: None,
                allows: &[State::Working],
            },
            "title:spinner",
        ));
    }
    if first == '✳' && matches!(kind, AgentKind::Claude | AgentKind::Sim) {
        return Some((
            Claim {
                source: "title",
                state: None,
                kind: None,
                allows: NOT_WORKING,
            },
            "title:ready",
        ));
    }
    None
}

impl Classifier {
    /// The rules embedded in the binary.
    pub fn builtin() -> Result<Self, AgentError> {
        Ok(Classifier {
            rules: rules::compile(rules::BUILTIN_RULES, "builtin")?,
        })
    }

    /// `<state_dir>/rules.toml` when present (a bad file is an error naming it),
    /// else the embedded rules.
    pub fn load(state_dir: &StateDir) -> Result<Self, AgentError> {
        Ok(Classifier {
            rules: rules::load(state_dir)?,
        })
    }

    /// Compile rules from a TOML document; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, AgentError> {
        Ok(Classifier {
            rules: rules::compile(text, origin)?,
        })
    }

    /// The compiled rules, in evaluation order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Classify the signals of one pane. A `blocked{usage_limit}` observation
    /// carries `resets_at` when the screen's limit line gives a time (read in
    /// the local zone when the line names none).
    pub fn classify(&self, kind: AgentKind, s: &Signals) -> Observation {
        let mut o = self.classify_state(kind, s);
        // Also while a disagreeing signal settles: the screen shows the limit.
        let limit_rule = o
            .evidence
            .iter()
            .any(|e| e.starts_with("rule:") && e.contains("usage_limit"));
        if o.kind == Some(BlockedKind::UsageLimit) || limit_rule {
            let view = ScreenView::new(s.rows, usize::from(s.cols));
            let text = view.bottom_rows(limit::LIMIT_ROWS).join(" ");
            if let Some(t) = limit::resets_at(&text, chrono::Utc::now(), &chrono::Local) {
                let t = t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                o.evidence.push(format!("resets_at:{t}"));
                o.resets_at = Some(t);
            }
        }
        o
    }

    fn classify_state(&self, kind: AgentKind, s: &Signals) -> Observation {
        if let Some(code) = s.exited {
            let ev = match code {
                Some(c) => format!("exit:{c}"),
                None => "exit:signal".to_string(),
            };
            return Observation {
                exit_code: code,
                ..Observation::new(State::Exited, vec![ev])
            };
        }
        if kind == AgentKind::Shell {
            return self.classify_shell(&ScreenView::rows(s.rows), s);
        }
        let view = ScreenView::new(s.rows, usize::from(s.cols));

        let mut evidence = Vec::new();
        let screen = view.first_match(&self.rules, kind);
        if let Some(r) = screen {
            evidence.push(format!("rule:{}", r.name));
        }
        let mut claims: Vec<Claim> = Vec::new();
        // Claude 2.1.332 sends one OSC 7501 query (`?`) at start: not a state.
        if let Some(p) = s.osc7501.filter(|p| p.trim() != "?") {
            match osc_claim(p) {
                Some(c) => {
                    evidence.push(format!("osc7501:{}", osc_label(&c)));
                    claims.push(c);
                }
                None => evidence.push("osc7501:none".to_string()),
            }
        }
        if let Some((c, label)) = s.title.and_then(|t| title_claim(t, kind)) {
            evidence.push(label.to_string());
            claims.push(c);
        }

        let Some(rule) = screen else {
            // No screen verdict: a signal that names a state decides, OSC first.
            if let Some(c) = claims.iter().find(|c| c.state.is_some()) {
                let mut o = Observation::new(c.state.unwrap_or(State::Unknown), evidence);
                o.kind = c.kind;
                return o;
            }
            let state = if s.since_spawn_ms < STARTING_GRACE_MS {
                evidence.push(format!("since_spawn:{}ms", s.since_spawn_ms));
                State::Starting
            } else {
                evidence.push("screen:nomatch".to_string());
                State::Unknown
            };
            return Observation::new(state, evidence);
        };

        let disagree: Vec<&Claim> = claims
            .iter()
            .filter(|c| !c.allows.contains(&rule.state))
            .collect();
        if disagree.is_empty() {
            let mut state = rule.state;
            // Both ready: a finished turn seen by either signal makes it done.
            if state == State::Idle && claims.iter().any(|c| c.state == Some(State::Done)) {
                state = State::Done;
            }
            let mut o = Observation::new(state, evidence);
            if state == State::Blocked {
                o.kind = rule.kind.or_else(|| claims.iter().find_map(|c| c.kind));
            }
            return o;
        }

        let what: Vec<String> = disagree
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c.source,
                    c.state.map(|s| s.as_str()).unwrap_or("not_working")
                )
            })
            .collect();
        evidence.push(format!("disagree:screen={},{}", rule.state, what.join(",")));
        // Codex hides its `Working` row while it streams reply text: a ready
        // screen with OSC 7501 saying `working` is a streaming turn, not a
        // disagreement to wait out (docs/agents.md). Only this direction: OSC
        // `blocked` runs ~0.8 s ahead of its dialog and must still settle.
        let osc_working = disagree
            .iter()
            .any(|c| c.source == "osc7501" && c.state == Some(State::Working));
        if osc_working && matches!(rule.state, State::Idle | State::Done) {
            evidence.push("osc7501:streaming".to_string());
            return Observation::new(State::Working, evidence);
        }
        if s.quiet_ms < SETTLE_MS {
            return Observation::new(State::Unknown, evidence);
        }
        evidence.push(format!("quiet:{}ms", s.quiet_ms.min(u64::from(u32::MAX))));
        let osc = disagree
            .iter()
            .find(|c| c.source == "osc7501" && c.state.is_some());
        match osc {
            Some(c) if rule.state != State::Blocked => {
                evidence.push("settled:osc7501".to_string());
                let mut o = Observation::new(c.state.unwrap_or(State::Unknown), evidence);
                o.kind = c.kind;
                o
            }
            _ => {
                evidence.push("settled:screen".to_string());
                let mut o = Observation::new(rule.state, evidence);
                o.kind = rule.kind;
                o
            }
        }
    }

    fn classify_shell(&self, view: &ScreenView, s: &Signals) -> Observation {
        // A command holds the terminal: working, however quiet it is and
        // whatever its output looks like.
        if s.foreground_job == Some(true) {
            return Observation::new(State::Working, vec!["fg:job".to_string()]);
        }
        if let Some(r) = view.first_match(&self.rules, AgentKind::Shell) {
            let mut o = Observation::new(r.state, vec![format!("rule:{}", r.name)]);
            o.kind = r.kind;
            return o;
        }
        let quiet = format!("quiet:{}ms", s.quiet_ms.min(u64::from(u32::MAX)));
        // Nothing drawn yet (a slow prompt): starting, however quiet, for
        // SHELL_EMPTY_MS, and for as long as the shell runs its startup
        // file's command; a program that never draws (`sleep`) then settles.
        if view.is_empty() && s.since_spawn_ms < SHELL_EMPTY_MS {
            Observation::new(State::Starting, vec![quiet, "screen:empty".to_string()])
        } else if view.is_empty() && s.shell_child {
            Observation::new(
                State::Starting,
                vec![
                    quiet,
                    "screen:empty".to_string(),
                    "fg:shell-child".to_string(),
                ],
            )
        } else if s.quiet_ms >= SHELL_QUIET_MS {
            let mut evidence = vec![quiet];
            if s.foreground_job == Some(false) {
                evidence.push("fg:shell".to_string());
            }
            Observation::new(State::Idle, evidence)
        } else {
            Observation::new(State::Working, vec![quiet])
        }
    }
}

fn osc_label(c: &Claim) -> String {
    match (c.state, c.kind) {
        (Some(State::Blocked), Some(k)) => format!("blocked:{k}"),
        (Some(s), _) => s.to_string(),
        (None, _) => "none".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| s.to_string()).collect()
    }

    fn sig<'a>(rows: &'a [String]) -> Signals<'a> {
        Signals {
            rows,
            cols: 0,
            title: None,
            osc7501: None,
            exited: None,
            quiet_ms: 0,
            since_spawn_ms: 60_000,
            foreground_job: None,
            shell_child: false,
        }
    }

    const RULE: &str = "────────────────────";

    fn claude_idle() -> Vec<String> {
        rows(&[
            "❯ hi",
            "",
            "● hello",
            "",
            RULE,
            "❯\u{a0}",
            RULE,
            "  ? for shortcuts",
        ])
    }

    fn codex_idle() -> Vec<String> {
        rows(&[
            "› hi",
            "",
            "• hello",
            "",
            "› Ask Codex to do anything",
            "",
            "  mock-model default · /w",
            "  ? for shortcuts",
        ])
    }

    fn codex_working() -> Vec<String> {
        rows(&[
            "› hi",
            "",
            "• Working (3s • esc to interrupt)",
            "",
            "› Ask Codex to do anything",
            "",
            "  mock-model default · /w",
            "  ? for shortcuts",
        ])
    }

    #[test]
    fn exited_wins_over_everything() {
        let c = Classifier::builtin().unwrap();
        let r = codex_working();
        let mut s = sig(&r);
        s.osc7501 = Some("state=working:app=codex");
        s.exited = Some(Some(3));
        let o = c.classify(AgentKind::Codex, &s);
        assert_eq!((o.state, o.exit_code), (State::Exited, Some(3)));
        assert_eq!(o.evidence, vec!["exit:3"]);
        s.exited = Some(None);
        assert_eq!(
            c.classify(AgentKind::Codex, &s).evidence,
            vec!["exit:signal"]
        );
    }

    #[test]
    fn codex_streaming_reply_is_working_at_once() {
        // While Codex streams reply text its Working row is hidden: the screen
        // looks ready and only OSC 7501 says working. That is working, now.
        let c = Classifier::builtin().unwrap();
        let r = codex_idle();
        let mut s = sig(&r);
        s.osc7501 = Some("state=working:app=codex");
        s.quiet_ms = 0;
        let o = c.classify(AgentKind::Codex, &s);
        assert_eq!(o.state, State::Working, "{:?}", o.evidence);
        assert!(o.evidence.contains(&"osc7501:streaming".to_string()));
        // The other way round still settles: OSC ready, screen working.
        let r = codex_working();
        let mut s = sig(&r);
        s.osc7501 = Some("state=idle:app=codex");
        s.quiet_ms = 0;
        assert_eq!(c.classify(AgentKind::Codex, &s).state, State::Unknown);
    }

    #[test]
    fn codex_early_blocked_osc_then_dialog() {
        let c = Classifier::builtin().unwrap();
        let r = codex_working();
        let mut s = sig(&r);
        s.osc7501 = Some("state=blocked:app=codex:kind=permission");
        assert_eq!(c.classify(AgentKind::Codex, &s).state, State::Unknown);
        s.quiet_ms = 5_000;
        let o = c.classify(AgentKind::Codex, &s);
        assert_eq!(
            (o.state, o.kind),
            (State::Blocked, Some(BlockedKind::Permission))
        );
    }

    #[test]
    fn agreeing_signals_are_immediate() {
        let c = Classifier::builtin().unwrap();
        let r = codex_working();
        let mut s = sig(&r);
        s.osc7501 = Some("state=working:app=codex");
        let o = c.classify(AgentKind::Codex, &s);
        assert_eq!(o.state, State::Working);
        assert_eq!(o.evidence, vec!["rule:codex.working", "osc7501:working"]);
        // OSC `done` with a screen that lost its `Worked for` line is still done.
        let r = codex_idle();
        let mut s = sig(&r);
        s.osc7501 = Some("state=done:app=codex");
        assert_eq!(c.classify(AgentKind::Codex, &s).state, State::Done);
    }

    #[test]
    fn claude_title_spinner_disagrees_with_idle_screen_until_settled() {
        let c = Classifier::builtin().unwrap();
        let r = claude_idle();
        let mut s = sig(&r);
        s.title = Some("⠂ Claude Code");
        assert_eq!(c.classify(AgentKind::Claude, &s).state, State::Unknown);
        s.quiet_ms = SETTLE_MS + 1;
        let o = c.classify(AgentKind::Claude, &s);
        assert_eq!(o.state, State::Idle);
        assert!(o.evidence.contains(&"settled:screen".to_string()));
        s.title = Some("✳ Claude Code");
        s.quiet_ms = 0;
        let o = c.classify(AgentKind::Claude, &s);
        assert_eq!(o.state, State::Idle);
        assert!(o.evidence.contains(&"title:ready".to_string()));
    }

    #[test]
    fn claude_2_1_332_circle_spinner_is_working_but_never_overrules_the_screen() {
        let c = Classifier::builtin().unwrap();
        let r = rows(&["loading"]);
        let mut s = sig(&r);
        s.title = Some("◐ Claude Code");
        let o = c.classify(AgentKind::Claude, &s);
        assert_eq!(o.state, State::Working, "{:?}", o.evidence);
        let r = claude_idle();
        let mut s = sig(&r);
        s.title = Some("◓ Claude Code");
        assert_eq!(c.classify(AgentKind::Claude, &s).state, State::Idle);
        // The OSC 7501 `?` query 2.1.332 sends at start is not a state.
        s.title = None;
        s.osc7501 = Some("?");
        let o = c.classify(AgentKind::Claude, &s);
        assert_eq!(o.state, State::Idle);
        assert!(
            !o.evidence.iter().any(|e| e.starts_with("osc7501")),
            "{:?}",
            o.evidence
        );
    }

    #[test]
    fn no_screen_match_starting_then_unknown() {
        let c = Classifier::builtin().unwrap();
        let r = rows(&["loading"]);
        let mut s = sig(&r);
        s.since_spawn_ms = 100;
        assert_eq!(c.classify(AgentKind::Claude, &s).state, State::Starting);
        s.since_spawn_ms = STARTING_GRACE_MS;
        assert_eq!(c.classify(AgentKind::Claude, &s).state, State::Unknown);
        s.osc7501 = Some("state=working:app=codex");
        assert_eq!(c.classify(AgentKind::Codex, &s).state, State::Working);
    }

    #[test]
    fn shell_idle_after_quiet_or_prompt() {
        let c = Classifier::builtin().unwrap();
        let r = rows(&["building...", "step 3"]);
        let mut s = sig(&r);
        assert_eq!(c.classify(AgentKind::Shell, &s).state, State::Working);
        s.quiet_ms = SHELL_QUIET_MS;
        assert_eq!(c.classify(AgentKind::Shell, &s).state, State::Idle);
        let r = rows(&["out", "user@host:~/src$"]);
        let s = sig(&r);
        let o = c.classify(AgentKind::Shell, &s);
        assert_eq!(o.state, State::Idle);
        assert_eq!(o.evidence, vec!["rule:shell.prompt"]);
        let r: Vec<String> = vec![];
        let mut s = sig(&r);
        s.since_spawn_ms = 10;
        assert_eq!(c.classify(AgentKind::Shell, &s).state, State::Starting);
    }

    /// Guards issue 28 item 5: `wait --until idle` fired on an empty screen
    /// (`quiet:524ms`, `fg:shell`) before a slow bash prompt was drawn.
    #[test]
    fn a_quiet_empty_shell_screen_is_starting_not_idle() {
        let c = Classifier::builtin().unwrap();
        let r: Vec<String> = vec![];
        let mut s = sig(&r);
        s.since_spawn_ms = 600;
        s.quiet_ms = 524;
        s.foreground_job = Some(false);
        let o = c.classify(AgentKind::Shell, &s);
        assert_eq!(
            (o.state, o.evidence),
            (
                State::Starting,
                vec!["quiet:524ms".into(), "screen:empty".into()]
            )
        );
        s.since_spawn_ms = SHELL_EMPTY_MS;
        assert_eq!(c.classify(AgentKind::Shell, &s).state, State::Idle);
    }

    /// Guards: a quiet command (`sleep 3`) read as `idle` because only output
    /// quiescence was looked at.
    #[test]
    fn shell_with_a_foreground_job_is_working_however_quiet() {
        let c = Classifier::builtin().unwrap();
        let r = rows(&["user@host:~/src$"]);
        let mut s = sig(&r);
        s.quiet_ms = 60_000;
        s.foreground_job = Some(true);
        let o = c.classify(AgentKind::Shell, &s);
        assert_eq!(
            (o.state, o.evidence),
            (State::Working, vec!["fg:job".into()])
        );
        s.foreground_job = Some(false);
        assert_eq!(c.classify(AgentKind::Shell, &s).state, State::Idle);
    }

    #[test]
    fn osc_payload_forms() {
        let k = |p: &str| osc_claim(p).and_then(|c| c.state.map(|s| (s, c.kind)));
        assert_eq!(k("state=idle:app=codex"), Some((State::Idle, None)));
        assert_eq!(
            k("state=blocked_question:app=codex"),
            Some((State::Blocked, Some(BlockedKind::Question)))
        );
        assert_eq!(
            k("state=blocked:app=codex"),
            Some((State::Blocked, Some(BlockedKind::Permission)))
        );
        assert_eq!(k("state=clear:app=codex"), None);
        assert_eq!(k("garbage"), None);
    }

    #[test]
    fn rows_from_text_keeps_nbsp_and_drops_final_newline() {
        let r = rows_from_text("a  \n❯\u{a0}\n\n");
        assert_eq!(
            r,
            vec!["a".to_string(), "❯\u{a0}".to_string(), String::new()]
        );
    }
}
