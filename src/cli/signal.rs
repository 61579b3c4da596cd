//! `drover signal claude-hook|claude-status|codex-notify`: what an agent's
//! hook, status line or notify program runs (docs/agents.md, "The agents'
//! own signals"). It reads what the agent hands it (stdin, or Codex's last
//! argument), parses it (`agent::signals::parse`: no body goes further)
//! and sends each note with the `signal` op to the supervisor whose pane
//! holds the caller, found as `drover report` finds it.
//!
//! It must never block, slow or fail the agent's turn: the whole call is
//! bounded by [`BUDGET`] (reading stdin included), after which it gives up
//! silently; it always exits 0, writes no file and prints nothing on stderr
//! unless `--debug`. `claude-status` prints one line for Claude's status
//! line: `drover · <pane>` when the pane's supervisor took it, else nothing.

use drover::agent::signals::SignalNote;
use drover::agent::signals::parse::{self, MAX_INPUT};
use drover::client::{Client, ClientError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The wall-clock bound of one call, from start to giving up.
pub const BUDGET: Duration = Duration::from_millis(300);

/// What handed the input in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum What {
    /// A Claude Code hook: its JSON on stdin.
    ClaudeHook,
    /// Claude Code's status line: its JSON on stdin; prints one line.
    ClaudeStatus,
    /// Codex's notify program: its JSON as the last argument.
    CodexNotify,
}

/// `drover signal`: for the agents' hooks, not for people.
#[derive(Debug, clap::Args)]
pub struct SignalArgs {
    /// Which channel the input comes from.
    #[arg(value_enum)]
    pub what: What,
    /// Print on stderr why a signal was not taken (never its content).
    #[arg(long)]
    pub debug: bool,
    /// codex-notify: the JSON Codex appends (only the last is read).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "JSON"
    )]
    pub rest: Vec<String>,
}

/// The outcome of one call, for `--debug` and the status line.
enum Outcome {
    Taken(String),
    Nothing(String),
}

/// Run from argv directly (`drover signal …` as the hook runs it), before
/// and without the CLI's parser: nothing a hook is given can make it fail.
pub fn main_direct(words: &[String]) -> ExitCode {
    let debug = words.iter().any(|w| w == "--debug");
    let what = match words.first().map(String::as_str) {
        Some("claude-hook") => Some(What::ClaudeHook),
        Some("claude-status") => Some(What::ClaudeStatus),
        Some("codex-notify") => Some(What::CodexNotify),
        _ => None,
    };
    let Some(what) = what else {
        if debug {
            say_debug("the first argument must be claude-hook, claude-status or codex-notify");
        }
        return ExitCode::SUCCESS;
    };
    // `--state-dir DIR` (the wiring names the pane's): whose supervisor
    // to ask first; only a hint, the supervisor checks who calls.
    let mut hint = None;
    let mut rest = Vec::new();
    let mut it = words[1..].iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "--debug" => {}
            "--state-dir" => hint = it.next().map(PathBuf::from),
            _ => rest.push(w.clone()),
        }
    }
    run(SignalArgs { what, debug, rest }, hint)
}

/// `drover signal`, always exit 0. `hint`: the state dir whose supervisor
/// is asked first (else `DROVER_STATE_DIR`'s).
pub fn run(a: SignalArgs, hint: Option<PathBuf>) -> ExitCode {
    let started = Instant::now();
    let deadline = started + BUDGET;
    let (tx, rx) = mpsc::channel();
    let what = a.what;
    let last_arg = a.rest.last().cloned();
    // The work runs beside the clock: a stdin never closed or a socket that
    // never answers is left behind when the budget is spent (the process
    // ends, and the thread with it).
    let spawned = std::thread::Builder::new()
        .name("signal".into())
        .spawn(move || {
            let _ = tx.send(work(what, last_arg, hint, deadline));
        });
    let outcome = match spawned {
        Ok(_) => rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| Outcome::Nothing(format!("gave up after {BUDGET:?}"))),
        Err(e) => Outcome::Nothing(format!("cannot start: {e}")),
    };
    if what == What::ClaudeStatus {
        let line = match &outcome {
            Outcome::Taken(pane) => format!("drover · {pane}\n"),
            Outcome::Nothing(_) => String::new(),
        };
        // A closed stdout is nobody's business but ours.
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    }
    if a.debug {
        let ms = started.elapsed().as_millis();
        match &outcome {
            Outcome::Taken(pane) => say_debug(&format!("taken for pane {pane} in {ms} ms")),
            Outcome::Nothing(why) => say_debug(&format!("not taken ({ms} ms): {why}")),
        }
    }
    ExitCode::SUCCESS
}

fn say_debug(msg: &str) {
    let _ = writeln!(std::io::stderr(), "drover signal: {msg}");
}

/// Read, parse, send.
fn work(what: What, last_arg: Option<String>, hint: Option<PathBuf>, deadline: Instant) -> Outcome {
    let input = match what {
        What::ClaudeHook | What::ClaudeStatus => {
            let mut buf = Vec::new();
            let limit = MAX_INPUT as u64 + 1;
            if let Err(e) = std::io::stdin().lock().take(limit).read_to_end(&mut buf) {
                return Outcome::Nothing(format!("cannot read stdin: {}", e.kind()));
            }
            buf
        }
        What::CodexNotify => match last_arg {
            Some(s) => s.into_bytes(),
            None => return Outcome::Nothing("no JSON argument".into()),
        },
    };
    let parsed = match what {
        What::ClaudeHook => parse::claude_hook(&input),
        What::ClaudeStatus => parse::claude_status(&input),
        What::CodexNotify => parse::codex_notify(&input),
    };
    let notes = match parsed {
        Ok(n) => n,
        Err(e) => return Outcome::Nothing(e.to_string()),
    };
    drop(input);
    if notes.is_empty() {
        return Outcome::Nothing("nothing drover reads in this input".into());
    }
    send(&notes, hint, deadline)
}

/// Send `notes` to the supervisor whose pane holds this process.
fn send(notes: &[SignalNote], hint: Option<PathBuf>, deadline: Instant) -> Outcome {
    let hint =
        hint.or_else(|| std::env::var_os(drover::statedir::env::STATE_DIR).map(PathBuf::from));
    let sockets = match drover::report::request::candidates(hint.as_deref()) {
        Ok(s) => s,
        Err(e) => return Outcome::Nothing(e.to_string()),
    };
    let mut reached = 0usize;
    for s in &sockets {
        if Instant::now() >= deadline {
            break;
        }
        match ask(s, notes, deadline) {
            Ok(Some(pane)) => return Outcome::Taken(pane),
            Ok(None) => reached += 1,
            // A stale socket (its supervisor gone) refuses at once.
            Err(_) => {}
        }
    }
    Outcome::Nothing(format!(
        "no supervisor's pane holds this process ({reached} of {} sockets answered)",
        sockets.len()
    ))
}

/// One supervisor: the pane it took the notes for, `None` when the caller
/// is in none of its panes.
fn ask(
    socket: &Path,
    notes: &[SignalNote],
    deadline: Instant,
) -> Result<Option<String>, ClientError> {
    let mut client = Client::connect(socket)?;
    let mut taken: Option<String> = None;
    for note in notes {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::Protocol("out of time".into()));
        }
        client.set_timeout(left)?;
        let pane = match client.call(drover::proto::args::Signal { note: note.clone() }) {
            Ok(t) => t.pane,
            // A supervisor that cannot take the op (another build) answers
            // with an error: none of its panes holds the caller.
            Err(ClientError::Remote { .. }) => None,
            Err(e) => return Err(e),
        };
        match pane {
            Some(p) => taken = Some(p),
            // Not this supervisor's pane: the next note would say the same.
            None if taken.is_none() => return Ok(None),
            None => {}
        }
    }
    Ok(taken)
}
