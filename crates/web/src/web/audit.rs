//! Every action asked of `drover web` (allowed, refused or failed), one
//! JSON line in `<state>/web/audit.jsonl` through `store`: when, the
//! token's id, what, on what, how it ended and why. No bodies.

use crate::statedir::StateDir;
use serde::Serialize;

/// One audited action.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord<'a> {
    pub at: String,
    pub token_id: &'a str,
    /// `approve`, `deny`, `answer`, `pause`, `resume`, `close-out`, …
    pub action: &'a str,
    /// The pane or `loopN`.
    pub target: &'a str,
    /// `ok`, `accepted`, `refused`, `failed`.
    pub outcome: &'a str,
    pub reason: Option<&'a str>,
}

/// Append a record; a failure to write is logged, never fatal to the answer.
pub fn record(
    state_dir: &StateDir,
    token_id: &str,
    action: &str,
    target: &str,
    outcome: &str,
    reason: Option<&str>,
) {
    let rec = AuditRecord {
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        token_id,
        action,
        target,
        outcome,
        reason,
    };
    let path = state_dir.web_audit();
    if let Err(e) = crate::store::append_jsonl(&path, &rec, true) {
        tracing::warn!("web: audit: {e}");
    }
}
