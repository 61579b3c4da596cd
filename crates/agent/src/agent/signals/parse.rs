//! From what an agent hands its hook, notify program or status line to
//! [`SignalNote`]s (docs/agents.md, "The agents' own signals").
//!
//! One function per channel, each pure: the bytes the agent gave in, the
//! notes drover acts on out. What is not understood is skipped (an unknown
//! event, a field of the wrong type): the agent's next version may add
//! either, and a hook must never fail its turn. Only input that is not a
//! JSON object at all, or is larger than [`MAX_INPUT`], is an error, and
//! that error says which, never what the input held.
//!
//! No body leaves this module: a prompt, a tool's input or a message is
//! dropped here; a turn's last message survives only as its sha256 (hex).
//! Every note returned passes [`SignalNote::check`]: a tool name is cut to
//! [`MAX_TOOL`] bytes, a session id that is not printable or too long is
//! dropped, and a window's percentage is clamped to 0–100.

use crate::proto::signal::{
    LimitWindow, Limits, MAX_SESSION, MAX_TOOL, Notice, Signal, SignalNote, Source, TurnError,
    Usage,
};
use serde_json::{Map, Value};

/// The largest input taken (1 MiB): a hook's JSON is a few KiB, a
/// status line's less; more is refused unread.
pub const MAX_INPUT: usize = 1 << 20;

/// Why an input gave no notes at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// More than [`MAX_INPUT`] bytes.
    #[error("the input is {len} bytes, more than the {MAX_INPUT} taken")]
    TooLarge { len: usize },
    /// Not one JSON object.
    #[error("the input is not a JSON object")]
    NotAnObject,
}

/// The JSON object in `bytes`, bounded.
fn object(bytes: &[u8]) -> Result<Map<String, Value>, ParseError> {
    if bytes.len() > MAX_INPUT {
        return Err(ParseError::TooLarge { len: bytes.len() });
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(ParseError::NotAnObject),
    }
}

/// The sha256 of `text`, 64 lowercase hex digits.
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `s` cut to at most `max` bytes on a character boundary, with control
/// characters dropped; `None` when nothing printable is left.
fn bounded(s: &str, max: usize) -> Option<String> {
    let mut out = String::new();
    for c in s.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    (!out.is_empty()).then_some(out)
}

/// A session id as given, or none: one that is not 1–[`MAX_SESSION`]
/// bytes of printable text is not cut (a cut id would name another
/// session) but dropped.
fn session(m: &Map<String, Value>, key: &str) -> Option<String> {
    let s = m.get(key)?.as_str()?;
    (!s.is_empty() && s.len() <= MAX_SESSION && !s.chars().any(char::is_control))
        .then(|| s.to_string())
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

fn obj_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    m.get(key).and_then(Value::as_object)
}

/// A tool's name, bounded; `?` when the agent gave none.
fn tool(m: &Map<String, Value>) -> String {
    str_of(m, "tool_name")
        .and_then(|t| bounded(t, MAX_TOOL))
        .unwrap_or_else(|| "?".into())
}

/// The notes that pass their bounds.
fn checked(notes: Vec<SignalNote>) -> Vec<SignalNote> {
    notes.into_iter().filter(|n| n.check().is_ok()).collect()
}

/// What a `Notification`'s `notification_type` names.
fn notice(kind: Option<&str>) -> Notice {
    match kind {
        // 2.1.332 in auto mode asks for a choice with this type, and
        // without a `PermissionRequest` (tests/fixtures/signals/README.md).
        Some("permission_prompt" | "agent_needs_input") => Notice::PermissionPrompt,
        Some("idle_prompt") => Notice::IdlePrompt,
        Some("elicitation_dialog") => Notice::ElicitationDialog,
        _ => Notice::Other,
    }
}

/// Why a turn failed, from Claude's `StopFailure` `error` (`error_type`
/// in some versions) or Codex's `codex_error_info`, matched on its words:
/// the set of types is the agent's and grows.
pub fn turn_error(kind: &str) -> TurnError {
    let k = kind.to_ascii_lowercase();
    let has = |w: &[&str]| w.iter().any(|w| k.contains(w));
    if has(&[
        "rate_limit",
        "rate-limit",
        "ratelimit",
        "usage_limit",
        "quota",
    ]) {
        TurnError::RateLimit
    } else if has(&["auth", "unauthorized", "login", "credential", "api_key"]) {
        TurnError::Auth
    } else if has(&["billing", "credit", "payment"]) {
        TurnError::Billing
    } else {
        TurnError::Other
    }
}

/// A Claude Code hook's stdin (every event of `hook_event_name`) as notes of
/// source `hook`. An event drover does not know gives none.
pub fn claude_hook(bytes: &[u8]) -> Result<Vec<SignalNote>, ParseError> {
    let m = object(bytes)?;
    let signal = match str_of(&m, "hook_event_name").unwrap_or_default() {
        "SessionStart" => Signal::SessionStarted,
        "UserPromptSubmit" => Signal::PromptSubmitted,
        "PreToolUse" => Signal::ToolStarted { tool: tool(&m) },
        "PermissionRequest" => Signal::PermissionAsked { tool: tool(&m) },
        "PostToolUse" => Signal::ToolFinished {
            tool: tool(&m),
            failed: false,
        },
        "PostToolUseFailure" => Signal::ToolFinished {
            tool: tool(&m),
            failed: true,
        },
        "Notification" => Signal::Notified {
            notice: notice(str_of(&m, "notification_type")),
        },
        "Stop" => Signal::TurnEnded {
            message_sha256: str_of(&m, "last_assistant_message").map(sha256_hex),
        },
        "StopFailure" => Signal::TurnFailed {
            error: turn_error(
                str_of(&m, "error_type")
                    .or_else(|| str_of(&m, "error"))
                    .unwrap_or_default(),
            ),
        },
        "SubagentStart" => Signal::SubagentStarted,
        "SubagentStop" => Signal::SubagentStopped,
        "PreCompact" => Signal::Compacting,
        "SessionEnd" => Signal::SessionEnded,
        _ => return Ok(Vec::new()),
    };
    Ok(checked(vec![SignalNote {
        source: Source::Hook,
        session: session(&m, "session_id"),
        signal,
    }]))
}

/// A number given as a JSON number or a numeric string.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|x: &f64| x.is_finite())
}

/// A count of tokens: a non-negative whole number.
fn count(m: &Map<String, Value>, key: &str) -> Option<u64> {
    let x = number(m.get(key)?)?;
    (x >= 0.0 && x <= u64::MAX as f64).then_some(x as u64)
}

/// A reset time given as Unix seconds (a number or a numeric string) or an
/// RFC 3339 string, in Unix seconds.
pub fn resets_at(v: &Value) -> Option<i64> {
    if let Some(x) = number(v) {
        // Milliseconds, by their size (a year past 5138 in seconds).
        let secs = if x.abs() >= 1e11 { x / 1000.0 } else { x };
        return (secs.abs() < i64::MAX as f64).then_some(secs as i64);
    }
    let s = v.as_str()?;
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .ok()
        .map(|t| t.timestamp())
}

/// One usage window from `w`'s percentage under `pct` (clamped to 0–100),
/// its reset and its length in minutes.
fn window(w: &Map<String, Value>, pct: &str) -> Option<LimitWindow> {
    let used = number(w.get(pct)?)?.clamp(0.0, 100.0);
    Some(LimitWindow {
        used_percent: used,
        resets_at: w.get("resets_at").and_then(resets_at),
        window_minutes: w
            .get("window_minutes")
            .and_then(number)
            .filter(|m| *m >= 0.0 && *m <= u32::MAX as f64)
            .map(|m| m as u32),
    })
}

/// The limits of a `rate_limits` object: its `short` and `long` windows
/// under the two keys given; none when neither window is there.
fn limits(rl: &Map<String, Value>, short: &str, long: &str, pct: &str) -> Option<Limits> {
    let w = |k: &str| obj_of(rl, k).and_then(|w| window(w, pct));
    let l = Limits {
        short: w(short),
        long: w(long),
    };
    (l.short.is_some() || l.long.is_some()).then_some(l)
}

/// Claude Code's status line stdin as notes of source `status`: the
/// account's five-hour and seven-day windows as `limits`, the session's
/// cost and token totals as `usage` (each only when given).
pub fn claude_status(bytes: &[u8]) -> Result<Vec<SignalNote>, ParseError> {
    let m = object(bytes)?;
    let sess = session(&m, "session_id");
    let mut notes = Vec::new();
    if let Some(l) = obj_of(&m, "rate_limits")
        .and_then(|rl| limits(rl, "five_hour", "seven_day", "used_percentage"))
    {
        notes.push(SignalNote {
            source: Source::Status,
            session: sess.clone(),
            signal: Signal::Limits(l),
        });
    }
    let ctx = obj_of(&m, "context_window");
    let tokens = |k: &str| ctx.and_then(|c| count(c, k));
    let usage = Usage {
        input_tokens: tokens("total_input_tokens"),
        output_tokens: tokens("total_output_tokens"),
        cached_tokens: None,
        cost_usd: obj_of(&m, "cost")
            .and_then(|c| c.get("total_cost_usd"))
            .and_then(number)
            .filter(|c| *c >= 0.0),
    };
    if usage != Usage::default() {
        notes.push(SignalNote {
            source: Source::Status,
            session: sess,
            signal: Signal::Usage(usage),
        });
    }
    Ok(checked(notes))
}

/// The first words of the instructions of Codex's hidden side turn that
/// names a new thread (0.171.0): its notify call is no turn of the user's.
const TITLE_TURN: &str = "Generate a concise, single-line task title";

/// Whether a notify call is Codex's thread-title turn (another thread id,
/// fired beside the first real turn's end): only its input says so, and
/// only this parser sees the input.
fn title_turn(m: &Map<String, Value>) -> bool {
    m.get("input-messages")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .is_some_and(|s| s.starts_with(TITLE_TURN))
}

/// Codex's `notify` argument (the last argv) as notes of source `notify`:
/// `agent-turn-complete` is a turn's end (except Codex's thread-title side
/// turn); other types give none.
pub fn codex_notify(bytes: &[u8]) -> Result<Vec<SignalNote>, ParseError> {
    let m = object(bytes)?;
    if str_of(&m, "type") != Some("agent-turn-complete") || title_turn(&m) {
        return Ok(Vec::new());
    }
    Ok(checked(vec![SignalNote {
        source: Source::Notify,
        session: session(&m, "thread-id"),
        signal: Signal::TurnEnded {
            message_sha256: str_of(&m, "last-assistant-message").map(sha256_hex),
        },
    }]))
}

/// One line of a Codex rollout file as notes of source `transcript`: its
/// `event_msg` lines `task_started`, `task_complete` (a turn's end, or its
/// failure when it carries an `error`), `turn_aborted` and
/// `token_count` (usage and, when given, the account's limits); every
/// other line gives none.
pub fn codex_rollout_line(bytes: &[u8]) -> Result<Vec<SignalNote>, ParseError> {
    let m = object(bytes)?;
    if str_of(&m, "type") != Some("event_msg") {
        return Ok(Vec::new());
    }
    let Some(p) = obj_of(&m, "payload") else {
        return Ok(Vec::new());
    };
    let note = |signal| SignalNote {
        source: Source::Transcript,
        session: None,
        signal,
    };
    let notes = match str_of(p, "type").unwrap_or_default() {
        "task_started" => vec![note(Signal::PromptSubmitted)],
        // A turn that ended on an error (a usage limit) carries `error`
        // with its `codex_error_info` and no message.
        "task_complete" => match obj_of(p, "error") {
            Some(e) => vec![note(Signal::TurnFailed {
                error: turn_error(str_of(e, "codex_error_info").unwrap_or_default()),
            })],
            None => vec![note(Signal::TurnEnded {
                message_sha256: str_of(p, "last_agent_message").map(sha256_hex),
            })],
        },
        "turn_aborted" => vec![note(Signal::TurnAborted)],
        "token_count" => {
            let mut v = Vec::new();
            let total = obj_of(p, "info").and_then(|i| obj_of(i, "total_token_usage"));
            if let Some(t) = total {
                let u = Usage {
                    input_tokens: count(t, "input_tokens"),
                    output_tokens: count(t, "output_tokens"),
                    cached_tokens: count(t, "cached_input_tokens"),
                    cost_usd: None,
                };
                if u != Usage::default() {
                    v.push(note(Signal::Usage(u)));
                }
            }
            if let Some(l) = obj_of(p, "rate_limits")
                .and_then(|rl| limits(rl, "primary", "secondary", "used_percent"))
            {
                v.push(note(Signal::Limits(l)));
            }
            v
        }
        _ => Vec::new(),
    };
    Ok(checked(notes))
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
