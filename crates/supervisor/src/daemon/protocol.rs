//! The supervisor's protocol as the daemon uses it: the typed protocol of
//! [`crate::proto`] (re-exported here, so `daemon::protocol::…` paths keep
//! working), and the checks of requests whose fields the supervisor must
//! trust, with the same rules as the CLI: a raw socket client gets the same
//! usage error a `drover` command would, never a silent default.

pub use crate::proto::{
    ErrorBody, ErrorCode, Frame, FrameError, FrameKind, MAX_FRAME, PROTOCOL_VERSION, Request,
    Response, check_len, encode, encode_json, read_frame, split, write_frame,
};

/// Argument checks that need drover's own rules (agent kinds, job ids, pane
/// names), beyond what the typed arguments hold.
pub mod args {
    use super::{ErrorCode, Response};
    use crate::agent::AgentKind;
    use crate::proto::args::EvidenceWatch;

    pub use crate::proto::args::{DEFAULT_WAIT_TIMEOUT_MS, WaitMode};

    fn usage(op: &str, m: impl std::fmt::Display) -> Response {
        Response::err(0, ErrorCode::Usage, format!("{op}: {m}"))
    }

    /// `evidence.watch`'s ids name files, so they follow the job-id rule (no
    /// `/`, no `..`), the session-id rule and the pane-name rule.
    pub fn check_evidence_watch(w: &EvidenceWatch) -> Result<(), Response> {
        let op = "evidence.watch";
        crate::engine::record::validate_job_id(&w.job_id).map_err(|e| usage(op, e))?;
        crate::engine::record::validate_name("attempt id", &w.attempt_id)
            .map_err(|e| usage(op, e))?;
        crate::engine::record::validate_name("session id", &w.session_id)
            .map_err(|e| usage(op, e))?;
        crate::pane::validate_pane_name(&w.pane).map_err(|e| usage(op, e))?;
        Ok(())
    }

    /// The agent kind of a `pane.new` spec: one the classifier knows.
    pub fn check_agent(agent: &str) -> Result<AgentKind, Response> {
        agent
            .parse::<AgentKind>()
            .map_err(|e| usage("pane.new", format!("spec.agent: {e}")))
    }
}
