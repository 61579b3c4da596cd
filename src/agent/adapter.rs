//! Per-kind launch builders, readiness, and prompt delivery plans.
use super::state::{AgentKind, Observation, State};

/// One write to the pane's PTY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Milliseconds to wait before this write.
    pub delay_ms: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// The writes that deliver `text` to an agent of `kind`.
pub fn delivery_plan(_kind: AgentKind, text: &str, bracketed_paste_enabled: bool) -> Vec<Write> {
    let mut body = Vec::new();
    if bracketed_paste_enabled {
        body.extend_from_slice(b"\x1b[200~");
        body.extend_from_slice(text.as_bytes());
        body.extend_from_slice(b"\x1b[201~");
    } else {
        body.extend_from_slice(text.as_bytes());
    }
    vec![
        Write {
            delay_ms: 0,
            bytes: body,
        },
        Write {
            delay_ms: 0,
            bytes: b"\r".to_vec(),
        },
    ]
}

/// True when an agent in this observation accepts a prompt.
pub fn is_ready(_kind: AgentKind, o: &Observation) -> bool {
    matches!(o.state, State::Idle | State::Done)
}
