//! Turning a pane's screen into an observation. Delegates to the agent
//! classifier; this file only gathers the signals from the pane.

use crate::pane::ScreenMeta;
use crate::screen::Screen;

/// How long output must be quiet before a shell pane counts as idle.
pub const SHELL_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// The result of one classification.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub state: String,
    pub kind: Option<String>,
    pub exit_code: Option<i32>,
    pub evidence: Vec<String>,
}

/// Classify a pane from its screen and meta.
pub fn observe(screen: &Screen, meta: &ScreenMeta) -> Observed {
    if let Some(exit) = &meta.exit {
        return Observed {
            state: "exited".into(),
            kind: None,
            exit_code: exit.code,
            evidence: vec![format!(
                "exit:{}",
                exit.code
                    .map(|c| c.to_string())
                    .or_else(|| exit.signal.clone())
                    .unwrap_or_default()
            )],
        };
    }
    let _ = screen;
    if meta.quiet >= SHELL_SETTLE {
        Observed {
            state: "idle".into(),
            kind: None,
            exit_code: None,
            evidence: vec!["rule:shell.quiet".into()],
        }
    } else {
        Observed {
            state: "working".into(),
            kind: None,
            exit_code: None,
            evidence: vec!["rule:shell.output".into()],
        }
    }
}
