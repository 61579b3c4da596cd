//! What `drover loop run` settles before it creates anything: the run it
//! resumes, what it was given filled in from that run's record, the sim
//! scripts read, the agents, repository, charter and board checked, an
//! earlier unclosed run on the same repository refused, and signing checked.

use super::{Given, Place};
use crate::client::Client;
use crate::loopctl::LoopError;
use crate::loopctl::lanes::lanes_ops::ScriptFor;
use crate::loopctl::ops::{LaneSpec, Role};
use crate::loopctl::run::rundir;
use crate::loopctl::run::runner::RunStatus;
use crate::statedir::StateDir;
use std::collections::BTreeMap;
use std::path::Path;

/// A run ready to be created or resumed: nothing of it exists yet unless
/// it is resumed.
#[derive(Debug)]
pub struct Prepared {
    /// The recorded state of the run resumed (`--resume`).
    pub resumed: Option<RunStatus>,
    /// What was given, filled in from the resumed run's record.
    pub given: Given,
    pub place: Place,
    /// The sim scripts given: (implementer, reviewer).
    pub scripts: (Option<String>, Option<String>),
}

impl Prepared {
    /// Whether the lanes are simulated.
    pub fn sim(&self) -> bool {
        self.given.is_sim()
    }

    /// The script each sim lane follows (see [`sim_scripts`]); none for
    /// real agents.
    pub fn sim_scripts(&self) -> Option<ScriptFor> {
        sim_scripts(&self.scripts, self.sim(), &self.place.board_dir)
    }
}

/// Settle a run on `state` from `given`: resume run `resume` (when given),
/// and check what it needs (`agents`: real agents' lanes will start; `sign`:
/// `--sign`). `client` reaches the supervisor when one runs, to name the
/// unclosed run's panes.
pub fn prepare(
    state: &StateDir,
    mut given: Given,
    resume: Option<u32>,
    agents: bool,
    sign: bool,
    client: Option<Client>,
) -> Result<Prepared, LoopError> {
    // A resumed run takes its repo, board, base and charter from its run.json.
    let resumed = resume.map(|n| super::recorded(state, n)).transpose()?;
    if let Some(st) = &resumed {
        given.fill_from(st);
    }
    let scripts = (
        given
            .sim_implementer
            .as_deref()
            .map(read_script)
            .transpose()?,
        given.sim_reviewer.as_deref().map(read_script).transpose()?,
    );
    if agents && !given.is_sim() {
        super::need_agents()?;
    }
    let place = super::place(&given)?;
    // A run on this repository that stopped unclosed holds its tasks: said
    // before anything (a run dir, a branch) is created.
    if resumed.is_none() {
        refuse_after_unclosed(state, &place.repo, client)?;
    }
    if sign {
        super::need_signing(&place.repo)?;
    }
    Ok(Prepared {
        resumed,
        given,
        place,
        scripts,
    })
}

/// A sim script's text, checked to parse.
pub fn read_script(p: &Path) -> Result<String, LoopError> {
    crate::agent::sim::Script::load(p).map_err(|e| LoopError::Flag(e.to_string()))?;
    std::fs::read_to_string(p).map_err(|e| LoopError::Flag(format!("{}: {e}", p.display())))
}

/// The script each sim lane follows: the given pair, or (no scripts) a
/// minimal obedient agent for its task; none for real agents.
pub fn sim_scripts(
    scripts: &(Option<String>, Option<String>),
    sim: bool,
    board_dir: &Path,
) -> Option<ScriptFor> {
    if !sim {
        return None;
    }
    let claimed: BTreeMap<String, Vec<String>> = crate::loopctl::board::load(board_dir)
        .map(|b| b.tasks.into_iter().map(|t| (t.id, t.files)).collect())
        .unwrap_or_default();
    let (imp, rev) = scripts.clone();
    Some(Box::new(move |s: &LaneSpec| {
        let given = match s.role {
            Role::Implementer => imp.clone(),
            Role::Reviewer => rev.clone(),
        };
        given.unwrap_or_else(|| {
            let files = claimed.get(&s.task).map(Vec::as_slice).unwrap_or_default();
            crate::loopctl::lanes::simlanes::obedient_script(s.role, &s.task, files)
        })
    }))
}

/// Refuse a new run on `repo` while an earlier run on it stopped unclosed
/// (a kill, a crash, a Ctrl-C): it holds its tasks' write leases, so a new
/// run would only park them. Names the run, how to resume or close it, and
/// its lane panes still live on the supervisor.
pub fn refuse_after_unclosed(
    state: &StateDir,
    repo: &Path,
    client: Option<Client>,
) -> Result<(), LoopError> {
    let same = |p: &Path| std::fs::canonicalize(p).is_ok_and(|p| p == repo);
    let unclosed: Vec<(u32, RunStatus)> = rundir::runs(state)
        .into_iter()
        .filter_map(|n| {
            let st = crate::runstate::status::read(state, n).ok()??;
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
    Err(LoopError::Unclosed(format!(
        "loop{n} on this repository stopped unclosed ({}) and still holds its tasks' write leases{others}: resume it with `drover loop run --resume {n}`, or close it with `drover loop control {n} close-out`; nothing was created{panes}",
        st.live_state()
    )))
}

/// The names of run `n`'s lane panes still running on the supervisor.
fn live_panes(client: Option<Client>, n: u32) -> Vec<String> {
    let Some(mut c) = client else {
        return Vec::new();
    };
    let prefix = format!("l{n}-");
    let Ok(v) = c.call(crate::proto::args::PaneLs {}) else {
        return Vec::new();
    };
    v.iter()
        .filter_map(crate::proto::PaneEntry::live)
        .filter(|p| p.info.exit.is_none())
        .map(|p| p.info.name.clone())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}
