//! A reviewer's stated verdict (LOOP.md, "The stated verdict"): a read-only
//! reviewer cannot run `drover session-heartbeat` (it writes the state dir)
//! nor write its report, so its last reply ends with one line, `VERDICT:
//! pass` or `VERDICT: fail: <reason>`, and drover reads it once the turn is
//! over from the agent's own transcript: Claude Code's JSONL under
//! `<config dir>/projects/`, Codex's rollout JSONL under
//! `<CODEX_HOME>/sessions/`.
//!
//! The verdict is bound to one dispatch: only the final reply of the turn
//! that answers the prompt carrying this attempt's `attempt=<id>` counts, so
//! a `VERDICT:` line in the brief, in tool output or in an earlier round's
//! reply never does. A turn that ended without one is [`Reading::NoVerdict`]
//! (held, never passed).

use crate::registry::Agent;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The word a verdict line starts with.
pub const VERDICT_WORD: &str = "VERDICT:";
/// A transcript larger than this is not read (a reviewer's is far smaller).
pub const MAX_TRANSCRIPT_BYTES: u64 = 64 * 1024 * 1024;
/// How much older than the dispatch a transcript file's last write may be and
/// still be read (clocks of file systems are coarse).
pub const MTIME_SLACK: std::time::Duration = std::time::Duration::from_secs(5);
/// How Claude Code records a pasted prompt (a dispatch is pasted).
const PASTED: &str = "<pasted_content";
/// The most Codex day dirs looked at first (a review lasting days is
/// looked for everywhere).
const MAX_DAY_DIRS: usize = 8;
/// The longest reason kept from a `VERDICT: fail: <reason>` line.
pub const MAX_REASON_CHARS: usize = 200;

/// What a verdict line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stated {
    Pass,
    /// With the line's one-line reason (maybe empty).
    Fail(String),
}

impl Stated {
    /// The heartbeat status it stands for.
    pub fn status(&self) -> &'static str {
        match self {
            Stated::Pass => "pass",
            Stated::Fail(_) => "fail",
        }
    }
}

/// What the transcript says of the turn answering one dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// No transcript holds the prompt yet, or its turn is not over.
    Pending,
    /// The turn is over and its final reply ends with a verdict line;
    /// `findings` is the reply above that line.
    Stated { verdict: Stated, findings: String },
    /// The turn is over and its final reply does not end with one.
    NoVerdict,
}

/// One transcript entry, as far as a verdict cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A user prompt (not a tool result, not a `<…>` context block).
    Prompt(String),
    /// Text of the agent's reply.
    Text(String),
    ToolCall,
    ToolResult,
    /// The agent's turn is over.
    TurnEnd,
}

/// A verdict line: `VERDICT: pass`, `VERDICT: fail` or `VERDICT: fail:
/// <reason>` (any case; markdown emphasis or code marks around it allowed).
pub fn parse_line(line: &str) -> Option<Stated> {
    let t = unwrap_emphasis(line.trim());
    let head = t.get(..VERDICT_WORD.len())?;
    if !head.eq_ignore_ascii_case(VERDICT_WORD) {
        return None;
    }
    let rest = t[VERDICT_WORD.len()..].trim();
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let after = rest[word.len()..].trim();
    match word.to_ascii_lowercase().as_str() {
        "pass" if after.is_empty() || after == "." => Some(Stated::Pass),
        "fail" => {
            let reason = after
                .trim_start_matches([':', '-', '—'])
                .trim()
                .chars()
                .take(MAX_REASON_CHARS)
                .collect();
            Some(Stated::Fail(reason))
        }
        _ => None,
    }
}

/// Emphasis or code marks that wrap the whole line, removed pair by pair
/// from the outside in (`**`, `__`, `*`, `_`, `` ` ``): a mark at one end
/// only belongs to the reason (`` …the line `reviewed: yes` ``,
/// `…__init__`) and stays. A single backtick wraps only a line holding no
/// other backtick, so the code spans of a reason are never cut.
fn unwrap_emphasis(line: &str) -> &str {
    let mut t = line;
    'peel: loop {
        for mark in ["**", "__", "*", "_", "`"] {
            let Some(inner) = t.strip_prefix(mark).and_then(|r| r.strip_suffix(mark)) else {
                continue;
            };
            if mark == "`" && inner.contains('`') {
                continue;
            }
            t = inner.trim();
            continue 'peel;
        }
        return t;
    }
}

/// The reading of the turn that answers the prompt holding the token
/// `marker` (a whole whitespace-separated word, e.g. `attempt=<id>`): the
/// last such prompt, the entries up to the next prompt, the first turn end
/// among them, and the reply text before it with no tool call after.
pub fn read(entries: &[Entry], marker: &str) -> Reading {
    let holds = |p: &str| p.split_whitespace().any(|w| w == marker);
    let Some(at) = entries
        .iter()
        .rposition(|e| matches!(e, Entry::Prompt(p) if holds(p)))
    else {
        return Reading::Pending;
    };
    let rest = &entries[at + 1..];
    let turn = match rest.iter().position(|e| matches!(e, Entry::Prompt(_))) {
        Some(n) => &rest[..n],
        None => rest,
    };
    let Some(end) = turn.iter().position(|e| *e == Entry::TurnEnd) else {
        return Reading::Pending;
    };
    let turn = &turn[..end];
    // The final reply: the text after the last tool call or result.
    let from = turn
        .iter()
        .rposition(|e| matches!(e, Entry::ToolCall | Entry::ToolResult))
        .map_or(0, |i| i + 1);
    let reply: Vec<&str> = turn[from..]
        .iter()
        .filter_map(|e| match e {
            Entry::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let reply = reply.join("\n");
    let mut lines: Vec<&str> = reply.lines().collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let Some(verdict) = lines.last().and_then(|l| parse_line(l)) else {
        return Reading::NoVerdict;
    };
    lines.pop();
    Reading::Stated {
        verdict,
        findings: lines.join("\n").trim().to_string(),
    }
}

fn text_of(content: &Value, kinds: &[&str]) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter(|b| b["type"].as_str().is_some_and(|t| kinds.contains(&t)))
            .filter_map(|b| b["text"].as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// The entries of a Claude Code transcript (one JSON object a line; lines
/// that do not parse, such as a half-written last one, are skipped).
pub fn claude_entries(jsonl: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for v in jsonl
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if v["isSidechain"].as_bool() == Some(true) {
            continue;
        }
        let content = &v["message"]["content"];
        match v["type"].as_str() {
            Some("user") if v["isMeta"].as_bool() != Some(true) => {
                let blocks = content.as_array().map(Vec::as_slice).unwrap_or_default();
                if blocks.iter().any(|b| b["type"] == "tool_result") {
                    out.push(Entry::ToolResult);
                } else {
                    // A pasted prompt comes wrapped in `<pasted_content …>`;
                    // other `<…>` blocks are context, not prompts.
                    let t = text_of(content, &["text"]).join("\n");
                    let t0 = t.trim_start();
                    if !t0.starts_with('<') || t0.starts_with(PASTED) {
                        out.push(Entry::Prompt(t));
                    }
                }
            }
            Some("assistant") => {
                for b in content.as_array().into_iter().flatten() {
                    match b["type"].as_str() {
                        Some("text") => {
                            out.push(Entry::Text(b["text"].as_str().unwrap_or("").into()))
                        }
                        Some("tool_use" | "server_tool_use") => out.push(Entry::ToolCall),
                        _ => {}
                    }
                }
                if v["message"]["stop_reason"] == "end_turn" {
                    out.push(Entry::TurnEnd);
                }
            }
            Some("system") if v["subtype"] == "turn_duration" => out.push(Entry::TurnEnd),
            _ => {}
        }
    }
    out
}

/// The entries of a Codex rollout (one JSON object a line).
pub fn codex_entries(jsonl: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for v in jsonl
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let p = &v["payload"];
        let ty = p["type"].as_str().unwrap_or("");
        match v["type"].as_str() {
            Some("response_item") => match (ty, p["role"].as_str()) {
                ("message", Some("user")) => {
                    let t = text_of(&p["content"], &["input_text"]).join("\n");
                    if !t.trim_start().starts_with('<') {
                        out.push(Entry::Prompt(t));
                    }
                }
                ("message", Some("assistant")) => {
                    out.extend(
                        text_of(&p["content"], &["output_text"])
                            .into_iter()
                            .map(Entry::Text),
                    );
                }
                _ if ty.ends_with("_output") => out.push(Entry::ToolResult),
                _ if ty.ends_with("_call") => out.push(Entry::ToolCall),
                _ => {}
            },
            Some("event_msg") if ty == "task_complete" || ty == "turn_aborted" => {
                out.push(Entry::TurnEnd)
            }
            _ => {}
        }
    }
    out
}

/// Where an agent keeps its transcripts, from its environment
/// (`CLAUDE_CONFIG_DIR` or `$HOME/.claude`; `CODEX_HOME` or `$HOME/.codex`).
pub fn transcript_root(agent: Agent, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let (own, dot) = match agent {
        Agent::Claude => ("CLAUDE_CONFIG_DIR", ".claude"),
        Agent::Codex => ("CODEX_HOME", ".codex"),
    };
    env(own)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(dot)))
}

/// The three variables [`transcript_root`] reads, from a running process's
/// environment (`/proc/<pid>/environ`; none where that cannot be read). No
/// other value is kept.
pub fn process_env(pid: u32) -> Vec<(String, String)> {
    crate::pane::env_values(pid, &["HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"])
}

/// Claude Code's project dir name for a working directory: every character
/// but ASCII letters and digits becomes `-`.
pub fn claude_project(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Where to look first: Claude's project dir for `cwd`; Codex's day dirs
/// (`YYYY/MM/DD`, local time) from the day before `since` to tomorrow. `None`
/// when none exists (then everything under the root is looked at).
fn narrowed(
    agent: Agent,
    root: &Path,
    since: SystemTime,
    cwd: Option<&Path>,
) -> Option<Vec<PathBuf>> {
    let dirs: Vec<PathBuf> = match agent {
        Agent::Claude => vec![root.join("projects").join(claude_project(cwd?))],
        Agent::Codex => {
            let from = chrono::DateTime::<chrono::Local>::from(since)
                .date_naive()
                .pred_opt()?;
            let to = chrono::Local::now().date_naive().succ_opt()?;
            from.iter_days()
                .take_while(|d| *d <= to)
                .take(MAX_DAY_DIRS)
                .map(|d| root.join("sessions").join(d.format("%Y/%m/%d").to_string()))
                .collect()
        }
    };
    let dirs: Vec<PathBuf> = dirs.into_iter().filter(|d| d.is_dir()).collect();
    (!dirs.is_empty()).then_some(dirs)
}

/// The transcript files of `agent` under `root` written since `since` (in
/// the project or day dirs where they are expected first, when those exist).
pub fn transcripts(
    agent: Agent,
    root: &Path,
    since: SystemTime,
    cwd: Option<&Path>,
) -> Vec<PathBuf> {
    let cutoff = since.checked_sub(MTIME_SLACK).unwrap_or(since);
    let (mut level, depth) = match narrowed(agent, root, since, cwd) {
        Some(dirs) => (dirs, 1),
        None => match agent {
            Agent::Claude => (vec![root.join("projects")], 2),
            Agent::Codex => (vec![root.join("sessions")], 4),
        },
    };
    for _ in 0..depth {
        level = level
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
    }
    level
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter(|p| {
            std::fs::metadata(p).is_ok_and(|m| {
                m.is_file()
                    && m.len() <= MAX_TRANSCRIPT_BYTES
                    && m.modified().is_ok_and(|t| t >= cutoff)
            })
        })
        .collect()
}

/// The reading for the dispatch whose prompt holds `marker`, from the
/// transcripts of `agent` under `root` written since `since` by an agent
/// working in `cwd`: the first file
/// that holds the prompt decides; none is [`Reading::Pending`].
pub fn find(
    agent: Agent,
    root: &Path,
    marker: &str,
    since: SystemTime,
    cwd: Option<&Path>,
) -> Reading {
    for path in transcripts(agent, root, since, cwd) {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        if !text.contains(marker) {
            continue;
        }
        let entries = match agent {
            Agent::Claude => claude_entries(&text),
            Agent::Codex => codex_entries(&text),
        };
        let r = read(&entries, marker);
        if r != Reading::Pending {
            return r;
        }
    }
    Reading::Pending
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
