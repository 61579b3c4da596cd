//! The agent's side of a lane's drop box (the supervisor's side, and why:
//! `daemon::report_box`): used only when `connect` to the supervisor's
//! socket is not permitted here (an agent's sandbox). The lane dir comes
//! from `DROVER_LANE_DIR`; whatever it names, the request is only ever
//! written to a FIFO (checked with `fstat` on the open file, never a
//! regular file), and the supervisor attributes it to the lane whose
//! process tree holds it open, never by what it says.

use super::{LaneEnv, ReportError};
use crate::proto::args::Report;
use crate::proto::reply::ReportWritten;
use crate::proto::{ErrorCode, Response};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// The request FIFO's name in a lane dir.
pub const REQUEST: &str = ".drover-report.fifo";
/// The answer FIFO's name in a lane dir.
pub const ANSWER: &str = ".drover-answer.fifo";

/// How long the drop box may take to appear (it is made when the job's
/// watch starts, just after the prompt was delivered).
const APPEAR: Duration = Duration::from_secs(10);
/// How long the supervisor may take to answer (it runs git on the worktree).
const ANSWER_WAIT: Duration = Duration::from_secs(120);

fn open_fifo(path: &Path, write: bool) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)?;
    if !f.metadata()?.file_type().is_fifo() {
        return Err(std::io::Error::other(format!(
            "{} is not drover's drop box (not a FIFO)",
            path.display()
        )));
    }
    Ok(f)
}

/// Send the request through the lane's drop box; the supervisor's answer.
pub fn send(
    args: &Report,
    claims: &LaneEnv,
    why: &std::io::Error,
) -> Result<ReportWritten, ReportError> {
    let unreachable = |m: String| ReportError::Unreachable {
        why: format!("connecting to its socket is not permitted here ({why}), and {m}"),
    };
    let Some(dir) = claims.lane_dir.as_deref() else {
        return Err(unreachable("DROVER_LANE_DIR names no lane dir".into()));
    };
    let req = dir.join(REQUEST);
    let deadline = Instant::now() + APPEAR;
    while !req
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_fifo())
    {
        if Instant::now() >= deadline {
            return Err(unreachable(format!("{} has no drop box", dir.display())));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let fail = |e: std::io::Error| unreachable(format!("the drop box in {}: {e}", dir.display()));
    // The answer's read end first, so the supervisor's answer has a reader.
    let mut ans = open_fifo(&dir.join(ANSWER), false).map_err(fail)?;
    let mut w = open_fifo(&req, true).map_err(fail)?;
    let mut line = serde_json::to_vec(args).map_err(|e| fail(std::io::Error::other(e)))?;
    line.push(b'\n');
    w.write_all(&line).map_err(fail)?;
    // `w` stays open until the answer: the supervisor finds the writer by it.
    let mut buf = Vec::new();
    let deadline = Instant::now() + ANSWER_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(unreachable("the supervisor did not answer in time".into()));
        }
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(&ans),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, ms) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(fail(e.into())),
        }
        let mut chunk = [0u8; 8192];
        match ans.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.ends_with(b"\n") {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(fail(e)),
        }
    }
    drop(w);
    let resp: Response = serde_json::from_slice(&buf)
        .map_err(|e| unreachable(format!("the drop box answered no response: {e}")))?;
    if !resp.ok {
        let (code, message) = resp.error.map_or(
            (ErrorCode::Internal, "error without a message".into()),
            |e| (e.code, e.message),
        );
        return Err(ReportError::Remote {
            code: code.exit_code(),
            message,
        });
    }
    match super::request::answer_of(resp) {
        super::request::Answer::Written(v) => Ok(v),
        super::request::Answer::Refused(e) => Err(e),
        super::request::Answer::Foreign => Err(ReportError::NotInLane),
    }
}
