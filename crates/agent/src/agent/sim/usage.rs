//! The sim's `usage` step: the session's running totals reported the way
//! Claude Code's status line reports them, through `drover signal
//! claude-status` (the sim is the drover binary) with a status-line
//! document holding only the figures. So a simulated lane's usage reaches
//! its supervisor by the real path.

use std::io::Write;
use std::process::{Command, Stdio};

/// The totals one `usage` step reports.
#[derive(Debug, Clone, PartialEq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Totals {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The session named (else `$DROVER_SESSION_ID`, else none).
    #[serde(default)]
    pub session: Option<String>,
}

/// The status-line document for `t` (what Claude Code hands its status
/// line command, the figures only).
pub fn status_line(t: &Totals) -> serde_json::Value {
    let mut doc = serde_json::json!({
        "cost": {"total_cost_usd": t.cost_usd},
        "context_window": {
            "total_input_tokens": t.input_tokens,
            "total_output_tokens": t.output_tokens,
        },
    });
    let session = t
        .session
        .clone()
        .or_else(|| std::env::var(crate::statedir::env::SESSION_ID).ok())
        .filter(|s| !s.is_empty());
    if let Some(s) = session {
        doc["session_id"] = s.into();
    }
    doc
}

/// Run `drover signal claude-status` with `t`'s document on stdin; whether
/// the pane's supervisor took it (the command prints `drover · <pane>`).
pub fn report(t: &Totals) -> bool {
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let child = Command::new(exe)
        .args(["signal", "claude-status"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(status_line(t).to_string().as_bytes());
    }
    child
        .wait_with_output()
        .is_ok_and(|o| o.stdout.starts_with("drover · ".as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_a_status_line_the_parser_reads_back() {
        let t = Totals {
            input_tokens: Some(1200),
            output_tokens: Some(300),
            cost_usd: Some(0.05),
            session: Some("sim-1".into()),
        };
        let doc = status_line(&t).to_string();
        let notes = crate::agent::signals::parse::claude_status(doc.as_bytes()).unwrap_or_default();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].session.as_deref(), Some("sim-1"));
        let crate::proto::signal::Signal::Usage(u) = notes[0].signal else {
            panic!("not usage: {:?}", notes[0]);
        };
        assert_eq!(u.input_tokens, Some(1200));
        assert_eq!(u.cost_usd, Some(0.05));
    }
}
