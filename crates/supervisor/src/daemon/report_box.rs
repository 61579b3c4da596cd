//! A lane's drop box: how `drover report` reaches the supervisor from an
//! agent whose sandbox forbids `connect` on a Unix socket (Codex's
//! `workspace-write` sandbox on Linux answers `EPERM`).
//!
//! When a job is dispatched to a lane, the supervisor makes two FIFOs in the
//! lane dir (the report's directory, inside the state dir, which the lane
//! was given as its one writable place besides its worktree):
//! [`REQUEST`] and [`ANSWER`]. One thread per lane dir waits in a blocking
//! `open` of the request FIFO — no polling: an idle lane costs a parked
//! thread. A request is one JSON line; it counts only when a process of
//! that lane's pane tree holds the request FIFO open for writing (its
//! `/proc/<pid>/fd`), so the line is attributed to the lane by where its
//! writer runs, not by what it says. The answer is one JSON line (a
//! protocol response) written to the answer FIFO.

use super::protocol::{ErrorCode, Response};
use super::server::{Sup, lock};
use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The request FIFO's name in a lane dir.
pub const REQUEST: &str = crate::report::drop_box::REQUEST;
/// The answer FIFO's name in a lane dir.
pub const ANSWER: &str = crate::report::drop_box::ANSWER;

/// The longest request line read.
const MAX_LINE: u64 = 64 * 1024;

/// Lane dirs with a reader now.
static OPEN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// The lane dir of `job_id`'s dispatch (its report's directory), when it
/// lies inside the state dir.
fn lane_dir(state_dir: &crate::statedir::StateDir, job_id: &str) -> Option<PathBuf> {
    let events = crate::evidence::EvidenceStore::new(state_dir)
        .read(job_id)
        .ok()?;
    let Some(crate::evidence::Evidence::Dispatch { report_path, .. }) =
        crate::evidence::latest_dispatch(&events)
    else {
        return None;
    };
    let dir = Path::new(report_path.as_deref()?)
        .parent()?
        .canonicalize()
        .ok()?;
    let state = state_dir.canonicalize().ok()?;
    (dir.starts_with(&state) && dir != state).then_some(dir)
}

/// A FIFO at `path`, made 0600 (whatever else is there is removed first).
fn make_fifo(path: &Path) -> std::io::Result<()> {
    match path.symlink_metadata() {
        Ok(m) if m.file_type().is_fifo() => return Ok(()),
        Ok(m) if m.is_dir() => return Err(std::io::Error::other("a directory is in the way")),
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .map_err(std::io::Error::from)
}

/// Open the drop box of the lane that runs `pane` for `job_id`'s dispatch
/// (once per lane dir).
pub(super) fn open(sup: &Arc<Sup>, pane: &str, job_id: &str) {
    let Some(dir) = lane_dir(sup.state_dir(), job_id) else {
        return;
    };
    {
        let mut g = lock(&OPEN);
        if !g.get_or_insert_with(HashSet::new).insert(dir.clone()) {
            return;
        }
    }
    let forget = |dir: &Path| {
        if let Some(s) = lock(&OPEN).as_mut() {
            s.remove(dir);
        }
    };
    if let Err(e) = make_fifo(&dir.join(REQUEST)).and_then(|()| make_fifo(&dir.join(ANSWER))) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot make the lane's report drop box");
        forget(&dir);
        return;
    }
    let (sup, pane) = (sup.clone(), pane.to_string());
    let spawned = std::thread::Builder::new()
        .name(format!("report-box-{pane}"))
        .spawn(move || {
            serve_box(&sup, &dir, &pane);
            forget(&dir);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the drop box reader");
    }
}

/// Read requests until the lane's pane is gone.
fn serve_box(sup: &Sup, dir: &Path, pane: &str) {
    let req_path = dir.join(REQUEST);
    loop {
        // Blocks until a writer opens it: costs nothing while the lane is
        // idle. Never through a link the lane put in its place.
        let Ok(f) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&req_path)
        else {
            return;
        };
        let Ok(md) = f.metadata() else { return };
        if !md.file_type().is_fifo() {
            return;
        }
        let mut r = std::io::BufReader::new(std::io::Read::take(f, MAX_LINE));
        let mut line = String::new();
        while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
            let resp = answer(sup, pane, (md.dev(), md.ino()), line.trim());
            reply(dir, &resp);
            line.clear();
        }
        let alive = super::report::pane_roots(sup)
            .iter()
            .any(|p| p.name == pane);
        if !alive {
            let _ = std::fs::remove_file(&req_path);
            let _ = std::fs::remove_file(dir.join(ANSWER));
            return;
        }
    }
}

/// Whether a process of the tree led by `leader` holds the file `id` open.
fn tree_holds(leader: u32, id: (u64, u64)) -> bool {
    let all = crate::pane::procfs::all();
    let mut tree = vec![leader];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            all.iter()
                .filter(|(_, st)| st.ppid == i64::from(p))
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    tree.iter().any(|pid| {
        crate::pane::procfs::fd_paths(*pid)
            .iter()
            .any(|p| std::fs::metadata(p).is_ok_and(|m| (m.dev(), m.ino()) == id))
    })
}

fn answer(sup: &Sup, pane: &str, id: (u64, u64), line: &str) -> Response {
    // A line that is JSON but no report is the lane's to refuse, as on the socket.
    let args: Option<crate::proto::args::Report> =
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) => serde_json::from_value(v).ok(),
            Err(_) => {
                return Response::err(0, ErrorCode::Usage, "a drop box request is one JSON line");
            }
        };
    let Some(root) = super::report::pane_roots(sup)
        .into_iter()
        .find(|r| r.name == pane)
    else {
        return Response::err(0, ErrorCode::Refused, format!("lane {pane} is gone"));
    };
    if !tree_holds(root.pid, id) {
        let e = crate::report::ReportError::NotInLane;
        return Response::err(0, ErrorCode::Refused, e.to_string());
    }
    match super::report::for_lane(sup, &root, args.as_ref()) {
        Ok(v) => Response::reply(0, &v),
        Err(r) => Response::reply(0, &super::report::refused(&r)),
    }
}

/// Write the answer to the answer FIFO, if someone waits on it.
fn reply(dir: &Path, resp: &Response) {
    let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(dir.join(ANSWER))
    else {
        return;
    };
    if !f.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
        return;
    }
    // Blocking from here on: an answer may be longer than the pipe holds.
    let _ = nix::fcntl::fcntl(
        &f,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    );
    let mut line = serde_json::to_vec(resp).unwrap_or_default();
    line.push(b'\n');
    let _ = f.write_all(&line);
}
