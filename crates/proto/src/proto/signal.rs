//! The agents' own signals (docs/agents.md, "The agents' own signals"), typed: what a
//! Claude Code hook or status line, a Codex notify call or rollout line
//! says about a pane's agent, reduced to what drover acts on, with the
//! [`Source`] it came from.
//!
//! A [`SignalNote`] carries no body: a prompt, an assistant message or a
//! tool's input never leaves the `drover signal` process that parsed the
//! hook's JSON; a turn's last message is kept only as its sha256. What an
//! agent sends is input like any other: [`SignalNote::check`] bounds every
//! field before the supervisor takes it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where an observation of a pane's agent came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The rendered screen (the classifier's rules).
    #[default]
    Screen,
    /// The terminal title the agent set.
    Title,
    /// An OSC sequence the agent printed (`osc7501`).
    Osc,
    /// A Claude Code hook (`--settings`).
    Hook,
    /// Codex's `notify` program.
    Notify,
    /// A transcript or rollout file the agent writes.
    Transcript,
    /// Claude Code's status line command.
    Status,
}

impl Source {
    /// Every source, in declaration order.
    pub const ALL: [Source; 7] = [
        Source::Screen,
        Source::Title,
        Source::Osc,
        Source::Hook,
        Source::Notify,
        Source::Transcript,
        Source::Status,
    ];

    /// The snake_case name used in JSON and on the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Screen => "screen",
            Source::Title => "title",
            Source::Osc => "osc",
            Source::Hook => "hook",
            Source::Notify => "notify",
            Source::Transcript => "transcript",
            Source::Status => "status",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a Claude Code `Notification` hook announced (`notification_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notice {
    /// `permission_prompt`: a tool call waits for approval.
    PermissionPrompt,
    /// `idle_prompt`: the agent has waited for input for a while.
    IdlePrompt,
    /// `elicitation_dialog`: a question with options (an MCP elicitation).
    ElicitationDialog,
    /// Any other type (kept as a kind only).
    Other,
}

/// Why a turn failed (`StopFailure`'s `error_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnError {
    /// The account's usage or rate limit.
    RateLimit,
    /// Authentication failed.
    Auth,
    /// Billing (no credit).
    Billing,
    /// Anything else.
    Other,
}

/// One usage window's figures, as the agent reports them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitWindow {
    /// How much of the window is used, 0–100.
    pub used_percent: f64,
    /// When the window resets, in Unix seconds, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<i64>,
    /// The window's length in minutes, when given (Codex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_minutes: Option<u32>,
}

/// The account's usage limits: Claude's five-hour and seven-day windows,
/// Codex's primary and secondary ones (in that order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<LimitWindow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long: Option<LimitWindow>,
}

/// What a session has used so far, as the agent totals it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Cached input tokens (part of `input_tokens` where the agent counts so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// The session's cost in US dollars (Claude's `cost.total_cost_usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// What an agent said happened, without bodies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "signal", rename_all = "snake_case")]
pub enum Signal {
    /// `SessionStart` (a new, resumed, cleared or compacted session).
    SessionStarted,
    /// `UserPromptSubmit`, Codex's `task_started`: a turn began.
    PromptSubmitted,
    /// `PreToolUse`: a tool call is about to run (or to ask).
    ToolStarted { tool: String },
    /// `PermissionRequest`: a tool call waits for approval.
    PermissionAsked { tool: String },
    /// `PostToolUse` / `PostToolUseFailure`: a tool call finished.
    ToolFinished { tool: String, failed: bool },
    /// `Notification`.
    Notified { notice: Notice },
    /// `Stop`, Codex's `agent-turn-complete` / `task_complete`: the turn
    /// ended; the last assistant message's sha256 (hex), when there was one.
    TurnEnded {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_sha256: Option<String>,
    },
    /// `StopFailure`: the turn ended on an error.
    TurnFailed { error: TurnError },
    /// Codex's `turn_aborted`: the turn was interrupted.
    TurnAborted,
    /// `SubagentStart`.
    SubagentStarted,
    /// `SubagentStop`.
    SubagentStopped,
    /// `PreCompact`.
    Compacting,
    /// `SessionEnd`.
    SessionEnded,
    /// The status line's or a rollout's `rate_limits`.
    Limits(Limits),
    /// The status line's cost or a rollout's `token_count`.
    Usage(Usage),
}

impl Signal {
    /// The signal's kind, as JSON tags it (for events and `agent explain`).
    pub fn kind(&self) -> &'static str {
        match self {
            Signal::SessionStarted => "session_started",
            Signal::PromptSubmitted => "prompt_submitted",
            Signal::ToolStarted { .. } => "tool_started",
            Signal::PermissionAsked { .. } => "permission_asked",
            Signal::ToolFinished { .. } => "tool_finished",
            Signal::Notified { .. } => "notified",
            Signal::TurnEnded { .. } => "turn_ended",
            Signal::TurnFailed { .. } => "turn_failed",
            Signal::TurnAborted => "turn_aborted",
            Signal::SubagentStarted => "subagent_started",
            Signal::SubagentStopped => "subagent_stopped",
            Signal::Compacting => "compacting",
            Signal::SessionEnded => "session_ended",
            Signal::Limits(_) => "limits",
            Signal::Usage(_) => "usage",
        }
    }
}

/// The longest tool name taken.
pub const MAX_TOOL: usize = 128;
/// The longest session id taken.
pub const MAX_SESSION: usize = 128;

/// One signal as an agent's hook (or notify, status line, rollout) gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignalNote {
    /// Which channel it came through.
    pub source: Source,
    /// The agent's session (Claude's `session_id`, Codex's `thread-id`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What it said.
    #[serde(flatten)]
    pub signal: Signal,
}

impl SignalNote {
    /// Whether every field is within its bounds: names printable and short,
    /// a sha256 64 hex digits, percentages within 0–100, counts finite.
    pub fn check(&self) -> Result<(), String> {
        let name = |what: &str, s: &str, max: usize| -> Result<(), String> {
            if s.is_empty() || s.len() > max || s.chars().any(|c| c.is_control()) {
                return Err(format!("{what} must be 1–{max} bytes of printable text"));
            }
            Ok(())
        };
        if let Some(s) = &self.session {
            name("session", s, MAX_SESSION)?;
        }
        let window = |w: &Option<LimitWindow>| -> Result<(), String> {
            match w {
                Some(w) if !(0.0..=100.0).contains(&w.used_percent) => {
                    Err("used_percent must be within 0–100".into())
                }
                _ => Ok(()),
            }
        };
        match &self.signal {
            Signal::ToolStarted { tool }
            | Signal::PermissionAsked { tool }
            | Signal::ToolFinished { tool, .. } => name("tool", tool, MAX_TOOL),
            Signal::TurnEnded {
                message_sha256: Some(h),
            } if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Err("message_sha256 must be 64 hex digits".into())
            }
            Signal::Limits(l) => {
                window(&l.short)?;
                window(&l.long)
            }
            Signal::Usage(u) => match u.cost_usd {
                Some(c) if !c.is_finite() || c < 0.0 => {
                    Err("cost_usd must be a finite, non-negative number".into())
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_flat_json_tagged_by_its_signal() {
        let n = SignalNote {
            source: Source::Hook,
            session: Some("s1".into()),
            signal: Signal::ToolStarted {
                tool: "Bash".into(),
            },
        };
        let j = serde_json::to_value(&n).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"source":"hook","session":"s1","signal":"tool_started","tool":"Bash"})
        );
        assert_eq!(serde_json::from_value::<SignalNote>(j).unwrap(), n);
        for s in Source::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
    }

    #[test]
    fn out_of_bounds_fields_are_refused() {
        let tool = |t: &str| SignalNote {
            source: Source::Hook,
            session: None,
            signal: Signal::ToolStarted { tool: t.into() },
        };
        assert!(tool("Bash").check().is_ok());
        assert!(tool("").check().is_err());
        assert!(tool(&"x".repeat(MAX_TOOL + 1)).check().is_err());
        assert!(tool("a\u{1b}[2J").check().is_err());
        let end = |h: &str| SignalNote {
            source: Source::Hook,
            session: None,
            signal: Signal::TurnEnded {
                message_sha256: Some(h.into()),
            },
        };
        assert!(end(&"a".repeat(64)).check().is_ok());
        assert!(end("abc").check().is_err());
        let lim = SignalNote {
            source: Source::Status,
            session: None,
            signal: Signal::Limits(Limits {
                short: Some(LimitWindow {
                    used_percent: 140.0,
                    resets_at: None,
                    window_minutes: None,
                }),
                long: None,
            }),
        };
        assert!(lim.check().is_err());
    }
}
