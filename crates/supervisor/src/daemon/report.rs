//! The `report` op: the supervisor writes a lane's report for the process
//! that asks, after establishing which lane that process is in from what
//! it cannot forge (LOOP.md, "How a lane's identity is established"):
//!
//! - on the socket, the connection's peer credentials (`SO_PEERCRED`: the
//!   caller's pid, and its uid, which must be ours), then the caller's
//!   ancestors in `/proc`, up to a pane leader this supervisor started;
//! - through a lane's drop box (a FIFO the supervisor made in the lane dir,
//!   for an agent whose sandbox forbids `connect`), a process of that pane's
//!   tree holding the FIFO open for writing.
//!
//! What the caller's env says (`DROVER_LANE_ID`, `DROVER_STATE_DIR`) comes
//! along only as claims: one that disagrees is refused.

use super::protocol::{ErrorBody, ErrorCode, Response};
use super::server::{Sup, lock};
use crate::proto::BadRequest;
use crate::proto::args::Report;
use crate::proto::reply::{ReportWritten, Reported};
use crate::report::{Bounds, ReportError, Said};
use std::path::PathBuf;
use std::sync::Arc;

/// How far up the process tree a caller may be from its pane's leader.
pub(super) const MAX_DEPTH: usize = 64;

/// A pane this supervisor runs: its name (the lane id), its leader, its cwd.
pub(super) struct PaneRoot {
    pub(super) name: String,
    pub(super) pid: u32,
    pub(super) cwd: Option<PathBuf>,
}

/// The live panes' leaders.
pub(super) fn pane_roots(sup: &Sup) -> Vec<PaneRoot> {
    let entries: Vec<_> = lock(&sup.panes).values().cloned().collect();
    entries
        .iter()
        .map(|e| e.pane.info())
        .filter(|i| i.exit.is_none() && i.pid > 1)
        .map(|i| PaneRoot {
            name: i.name,
            pid: i.pid,
            cwd: i.cwd,
        })
        .collect()
}

/// The pane whose process tree holds `pid` (the pid itself or an ancestor
/// is its leader).
pub(super) fn lane_of(sup: &Sup, pid: u32) -> Option<PaneRoot> {
    let roots = pane_roots(sup);
    crate::pane::procfs::lineage(pid, MAX_DEPTH)
        .into_iter()
        .find_map(|(p, _)| roots.iter().position(|r| r.pid == p))
        .map(|i| roots.into_iter().nth(i))?
}

fn err(e: &ReportError) -> Response {
    let code = match e.exit_code() {
        crate::exit::USAGE => ErrorCode::Usage,
        crate::exit::REFUSED => ErrorCode::Refused,
        _ => ErrorCode::Internal,
    };
    Response::err(0, code, e.to_string())
}

/// The `report` op on a socket connection with the peer's credentials.
/// Arguments that did not parse are refused by the caller's lane's own
/// supervisor like any other bad report.
pub(super) async fn report(
    sup: &Arc<Sup>,
    args: Result<Report, BadRequest>,
    peer: Option<tokio::net::unix::UCred>,
) -> Result<Reported, Response> {
    let me = nix::unistd::getuid().as_raw();
    let Some(pid) = peer
        .filter(|c| c.uid() == me)
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok())
    else {
        return Err(Response::err(
            0,
            ErrorCode::Refused,
            "the caller's credentials cannot be read or are another user's; nothing was written",
        ));
    };
    let Some(root) = lane_of(sup, pid) else {
        // Not one of this supervisor's lanes: the caller asks the next one.
        return Ok(Reported::Foreign { foreign: true });
    };
    let sup = sup.clone();
    let done = tokio::task::spawn_blocking(move || for_lane(&sup, &root, args.as_ref().ok()))
        .await
        .map_err(|e| Response::err(0, ErrorCode::Internal, format!("report task: {e}")))?;
    // The lane's own supervisor answers even a refusal as a result, so the
    // caller tells it from a supervisor that cannot take the request at all.
    Ok(done.unwrap_or_else(|r| refused(&r)))
}

/// A refusal by the lane's supervisor, as the `report` op's result.
pub(super) fn refused(r: &Response) -> Reported {
    let refused = r
        .error
        .clone()
        .unwrap_or_else(|| ErrorBody::new(ErrorCode::Internal, String::new()));
    Reported::Refused { refused }
}

/// Check the caller's claims against the lane established, then write the
/// report for that lane (blocking: git and a locked file write). `None`:
/// arguments that are no report.
pub(super) fn for_lane(
    sup: &Sup,
    root: &PaneRoot,
    args: Option<&Report>,
) -> Result<Reported, Response> {
    let state_dir = sup.state_dir();
    let no_report = || {
        Response::err(
            0,
            ErrorCode::Usage,
            "a report says done, failed or blocked; nothing was written",
        )
    };
    let args = args.ok_or_else(no_report)?;
    let mismatch = |what| {
        err(&ReportError::Claim {
            what,
            lane: root.name.clone(),
            state_dir: state_dir.to_path_buf(),
        })
    };
    if args
        .claims
        .lane_id
        .as_ref()
        .is_some_and(|l| *l != root.name)
    {
        return Err(mismatch(crate::statedir::env::LANE_ID));
    }
    if let Some(s) = &args.claims.state_dir {
        let same = s.canonicalize().is_ok_and(|c| c == state_dir.path());
        if !same {
            return Err(mismatch(crate::statedir::env::STATE_DIR));
        }
    }
    let said: Said = crate::report::request::said_of(args);
    let bounds = Bounds {
        pane_cwd: root.cwd.clone(),
    };
    let w = crate::report::write_for_lane(
        crate::statedir::StateDir::new(state_dir),
        &root.name,
        &bounds,
        &said,
    )
    .map_err(|e| err(&e))?;
    tracing::info!(lane = %root.name, job = %w.job_id, outcome = said.outcome(), "report written");
    Ok(Reported::Written(ReportWritten {
        lane: root.name.clone(),
        path: w.path,
        job_id: w.job_id,
        replaced: w.replaced,
        report: w.doc,
    }))
}

/// Start a lane's drop box when a job is dispatched to it (see
/// [`super::report_box`]).
pub(super) fn on_dispatch(sup: &Arc<Sup>, pane: &str, job_id: &str) {
    super::report_box::open(sup, pane, job_id);
}
