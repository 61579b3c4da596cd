//! Checks `drover loop run` makes before it creates a run: an earlier run
//! on the same repository that stopped unclosed (a kill, a crash, a
//! Ctrl-C) holds its tasks' write leases, so a new run would only park them.

use super::fail;
use drover::exit;
use drover::loopctl::run::{rundir, runner::RunStatus};
use drover::statedir::StateDir;
use std::path::Path;

/// Refuse (exit 3) a new run on `repo` while an earlier run on it stopped
/// unclosed: name the run, how to resume or close it, and its lane panes
/// still live on the supervisor.
pub(super) fn refuse_after_unclosed(
    state_dir: &StateDir,
    repo: &Path,
    client: Option<drover::daemon::Client>,
) -> anyhow::Result<()> {
    let same = |p: &Path| std::fs::canonicalize(p).is_ok_and(|p| p == repo);
    let state = state_dir;
    let unclosed: Vec<(u32, RunStatus)> = rundir::runs(state)
        .into_iter()
        .filter_map(|n| {
            let st = drover::runstate::status::read(state, n).ok()??;
            (st.finished_at.is_none() && !st.is_live() && same(&st.repo)).then_some((n, st))
        })
        .collect();
    let Some((n, st)) = unclosed.last() else {
        return Ok(());
    };
    let panes = live_panes(client, *n);
    let panes = if panes.is_empty() {
        String::new()
    } else {
        format!(
            "; its lane panes still live on the supervisor ({}) are its agents' panes, stopped by the resume or the close-out",
            panes.join(", ")
        )
    };
    let others = if unclosed.len() > 1 {
        let all: Vec<String> = unclosed.iter().map(|(n, _)| format!("loop{n}")).collect();
        format!(" (unclosed runs on it: {})", all.join(", "))
    } else {
        String::new()
    };
    Err(fail(
        exit::REFUSED,
        format!(
            "loop{n} on this repository stopped unclosed ({}) and still holds its tasks' write leases{others}: resume it with `drover loop run --resume {n}`, or close it with `drover loop control {n} close-out`; nothing was created{panes}",
            st.live_state()
        ),
    ))
}

/// The names of run `n`'s lane panes still running on the supervisor.
fn live_panes(client: Option<drover::daemon::Client>, n: u32) -> Vec<String> {
    let Some(mut c) = client else {
        return Vec::new();
    };
    let prefix = format!("l{n}-");
    let Ok(v) = c.call(drover::proto::args::PaneLs {}) else {
        return Vec::new();
    };
    v.iter()
        .filter_map(drover::proto::PaneEntry::live)
        .filter(|p| p.info.exit.is_none())
        .map(|p| p.info.name.clone())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}
