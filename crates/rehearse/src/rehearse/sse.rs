//! Server-sent events as the mock streams them, and the request shape it logs.

use serde_json::Value;
use std::time::Duration;

/// One SSE event, sent after `delay`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub delay: Duration,
    pub name: String,
    pub data: Value,
}

impl Event {
    /// An event sent right away.
    pub fn now(name: &str, data: Value) -> Self {
        Event {
            delay: Duration::ZERO,
            name: name.to_string(),
            data,
        }
    }

    /// The same event, sent after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The wire form: `event: NAME\ndata: JSON\n\n`.
    pub fn render(&self) -> String {
        format!("event: {}\ndata: {}\n\n", self.name, self.data)
    }
}

/// What the mock logs about a request: its shape, never its body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    pub model: String,
    pub messages: usize,
    pub tools: usize,
    pub stream: bool,
    pub title: bool,
    pub prompts: usize,
    pub tool_results: usize,
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "model={} messages={} tools={} stream={} title={} prompts={} tool_results={}",
            self.model,
            self.messages,
            self.tools,
            self.stream,
            self.title,
            self.prompts,
            self.tool_results
        )
    }
}

/// Texts that an agent injects as user messages, not typed by the operator.
/// Claude Code 2.1.332 wraps a paste in `<pasted_content id="…">…</pasted_content …>`:
/// that is the operator's prompt.
pub fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('<') && !t.starts_with(PASTED)
}

const PASTED: &str = "<pasted_content";

/// The operator's text of a user block: a paste's content unwrapped.
pub fn prompt_text(text: &str) -> String {
    let t = text.trim();
    if !t.starts_with(PASTED) {
        return text.to_string();
    }
    let inner = t.split_once('>').map(|(_, rest)| rest).unwrap_or("");
    let inner = inner
        .rsplit_once("</pasted_content")
        .map_or(inner, |(body, _)| body);
    inner.trim_matches('\n').to_string()
}

#[cfg(test)]
mod paste_tests {
    use super::*;

    #[test]
    fn claude_2_1_332_paste_is_a_prompt() {
        let t = "\n\n<pasted_content id=\"cdd6\">\nwrite out.txt\n[drover] job=J1\n</pasted_content id=\"cdd6\">\n";
        assert!(!is_injected(t));
        assert_eq!(prompt_text(t), "write out.txt\n[drover] job=J1");
        assert!(is_injected("<system-reminder>x</system-reminder>"));
        assert_eq!(prompt_text("say hello"), "say hello");
    }
}
