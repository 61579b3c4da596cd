//! The agent's side of `drover report`: one request to the supervisor that
//! runs the caller's lane, and its answer. Nothing here reads a state dir,
//! runs git or writes a file.
//!
//! Which supervisor: every socket in the user's private socket dir is a
//! candidate (the one named after `DROVER_STATE_DIR` is tried first, only
//! to find it sooner). Each establishes the caller's lane itself (peer
//! credentials → process tree → pane); one whose lanes do not hold the
//! caller answers `foreign` and the next is tried. The lane env the caller
//! has goes along only as claims the supervisor checks.

use super::{LaneEnv, ReportError, Said};
use crate::proto::args::{Claims, Outcome, Report};
use crate::proto::reply::{ReportWritten, Reported};
use crate::proto::{FrameKind, Framed, Op, Response, read_frame, write_frame};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The request's op.
pub const OP: &str = <Report as Op>::NAME;

/// How long one supervisor may take to answer (it runs git on the worktree).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// The request's arguments: what the agent said, and its env as claims.
pub fn args(said: &Said, claims: &LaneEnv) -> Report {
    let (outcome, summary, reason) = match said {
        Said::Done { summary } => (Outcome::Done, summary.clone(), None),
        Said::Failed { reason } => (Outcome::Failed, None, Some(reason.clone())),
        Said::Blocked { reason } => (Outcome::Blocked, None, Some(reason.clone())),
    };
    Report {
        outcome,
        summary,
        reason,
        claims: Claims {
            lane_id: claims.lane_id.clone(),
            state_dir: claims.state_dir.clone(),
        },
    }
}

/// What the agent said, from the request's arguments.
pub fn said_of(args: &Report) -> Said {
    match args.outcome {
        Outcome::Done => Said::Done {
            summary: args.summary.clone(),
        },
        Outcome::Failed => Said::Failed {
            reason: args.reason.clone().unwrap_or_default(),
        },
        Outcome::Blocked => Said::Blocked {
            reason: args.reason.clone().unwrap_or_default(),
        },
    }
}

/// The sockets to try, the hinted one first, each once (also the way
/// `drover signal` finds its supervisor).
pub fn candidates(hint: Option<&Path>) -> Result<Vec<PathBuf>, ReportError> {
    // Looked at, never created: a report makes nothing.
    let dir = crate::paths::socket_dir_path();
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let md = dir
            .symlink_metadata()
            .map_err(|e| ReportError::Unreachable {
                why: format!("no socket dir {}: {e}", dir.display()),
            })?;
        let me = nix::unistd::getuid().as_raw();
        if !md.is_dir() || md.uid() != me || md.permissions().mode() & 0o077 != 0 {
            return Err(ReportError::Unreachable {
                why: format!("the socket dir {} is not yours and private", dir.display()),
            });
        }
    }
    let mut out = Vec::new();
    if let Some(h) = hint {
        let h = h.canonicalize().unwrap_or_else(|_| h.to_path_buf());
        let name = format!(
            "{:016x}.sock",
            crate::paths::fnv1a64(h.as_os_str().as_encoded_bytes())
        );
        out.push(dir.join(name));
    }
    let rd = std::fs::read_dir(&dir).map_err(|e| ReportError::Unreachable {
        why: format!("cannot list {}: {e}", dir.display()),
    })?;
    let mut rest: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .filter(|p| !out.contains(p))
        .collect();
    rest.sort();
    out.extend(rest);
    Ok(out)
}

/// One supervisor's answer.
pub(super) enum Answer {
    /// It wrote the report.
    Written(ReportWritten),
    /// The caller is in none of its lanes.
    Foreign,
    /// It refused, with the exit code its error maps to.
    Refused(ReportError),
}

fn ask(socket: &Path, args: &Report) -> std::io::Result<Answer> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let req = args.clone().into_request();
    let payload = serde_json::to_vec(&Framed::new(1, &req)).map_err(std::io::Error::other)?;
    write_frame(&mut stream, FrameKind::Json, &payload)?;
    let frame = read_frame(&mut stream)
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .ok_or_else(|| std::io::Error::other("the supervisor closed the connection"))?;
    let resp: Response =
        serde_json::from_slice(&frame.payload).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(answer_of(resp))
}

/// What a response says. Only a result comes from the caller's own lane's
/// supervisor (a refusal included, as `refused`); an error response is a
/// supervisor that cannot take the request (another build, another user).
pub(super) fn answer_of(resp: Response) -> Answer {
    if !resp.ok {
        return Answer::Foreign;
    }
    let v = resp.result.unwrap_or(serde_json::Value::Null);
    match serde_json::from_value::<Reported>(v) {
        Ok(Reported::Written(w)) => Answer::Written(w),
        Ok(Reported::Refused { refused }) => Answer::Refused(ReportError::Remote {
            code: refused.code.exit_code(),
            message: refused.message,
        }),
        Ok(Reported::Foreign { .. }) | Err(_) => Answer::Foreign,
    }
}

/// Whether a connect failed because something (an agent's sandbox) forbids
/// it, not because nothing listens there.
fn forbidden(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EPERM) | Some(nix::libc::EACCES)
    )
}

/// Ask the supervisors for the caller's report; what the one that wrote it
/// answered.
pub fn send(said: &Said, claims: &LaneEnv) -> Result<ReportWritten, ReportError> {
    let args = args(said, claims);
    let sockets = candidates(claims.state_dir.as_deref())?;
    let mut reached = 0usize;
    let mut forbid: Option<std::io::Error> = None;
    for s in &sockets {
        match ask(s, &args) {
            Ok(Answer::Written(v)) => return Ok(v),
            Ok(Answer::Refused(e)) => return Err(e),
            Ok(Answer::Foreign) => reached += 1,
            Err(e) if forbidden(&e) => {
                forbid.get_or_insert(e);
            }
            // A stale socket (its supervisor gone) refuses at once.
            Err(e) => tracing::debug!(socket = %s.display(), error = %e, "no answer"),
        }
    }
    if reached > 0 {
        return Err(ReportError::NotInLane);
    }
    if let Some(e) = forbid {
        return super::drop_box::send(&args, claims, &e);
    }
    Err(ReportError::Unreachable {
        why: if sockets.is_empty() {
            "no supervisor is running for this user".into()
        } else {
            format!("none of the {} sockets of this user answers", sockets.len())
        },
    })
}
