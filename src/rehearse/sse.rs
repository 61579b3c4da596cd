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
pub fn is_injected(text: &str) -> bool {
    text.trim_start().starts_with('<')
}
