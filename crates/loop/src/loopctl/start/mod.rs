//! Starting a run (`drover loop run`): what it is given resolved against
//! the recorded run it resumes, its repository, charter and board checked
//! before anything is created, its clock and mode set, its lanes — here or
//! on a fleet — chosen, and the run driven to its end. The CLI parses the
//! flags into [`Given`] and [`RunConfig`], calls these and prints.

mod checks;
mod fleet;
mod prepare;

pub use checks::{fleet_board, need_agents, need_board, need_file, need_signing, repo};
pub use fleet::{FleetStart, fleet_lanes};
pub use prepare::{Prepared, prepare, read_script, refuse_after_unclosed, sim_scripts};

use crate::loopctl::LoopError;
use crate::loopctl::board::charter::{self, Charter};
use crate::loopctl::night::overnight;
use crate::loopctl::night::settings::SimLanesRecord;
use crate::loopctl::ops::LaneOps;
use crate::loopctl::run::rundir::RunDir;
use crate::loopctl::run::runner::{self, Phase, RunConfig, RunStatus};
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};

/// What a run is told of where it works and what lanes it runs, before a
/// resumed run's record fills in what was not given.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub repo: Option<PathBuf>,
    pub charter: Option<PathBuf>,
    pub board: Option<PathBuf>,
    pub base: Option<String>,
    pub sim: bool,
    pub sim_implementer: Option<PathBuf>,
    pub sim_reviewer: Option<PathBuf>,
}

impl Given {
    /// Fill in from `st`, the run resumed: its repo, board, base and
    /// charter where none is given, and a sim run resumes as a sim run
    /// with its scripts (sim flags given now win).
    pub fn fill_from(&mut self, st: &RunStatus) {
        self.repo.get_or_insert_with(|| st.repo.clone());
        self.charter.get_or_insert_with(|| st.charter.clone());
        if let Some(b) = &st.board_dir {
            self.board.get_or_insert_with(|| b.clone());
        }
        self.base.get_or_insert_with(|| st.base.clone());
        if let Some(rec) = &st.sim
            && !self.sim
            && self.sim_implementer.is_none()
            && self.sim_reviewer.is_none()
        {
            self.sim = true;
            self.sim_implementer = rec.implementer.clone();
            self.sim_reviewer = rec.reviewer.clone();
        }
    }

    /// Whether the lanes are simulated (`--sim` or a script given).
    pub fn is_sim(&self) -> bool {
        self.sim || self.sim_implementer.is_some() || self.sim_reviewer.is_some()
    }

    /// What `run.json` records of the sim lanes (absent: real agents), its
    /// scripts from the root (a resume may run from another directory).
    pub fn sim_record(&self) -> Option<SimLanesRecord> {
        let absolute = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        self.is_sim().then(|| SimLanesRecord {
            implementer: self.sim_implementer.as_deref().map(absolute),
            reviewer: self.sim_reviewer.as_deref().map(absolute),
        })
    }
}

/// The recorded state of run `n`, to resume it.
pub fn recorded(state: &crate::statedir::StateDir, n: u32) -> Result<RunStatus, LoopError> {
    let run = RunDir::open(state, n)?;
    crate::loopctl::run::resume::recorded(&run)
}

/// Where a run works: its repository, charter (path and content) and board.
#[derive(Debug, Clone)]
pub struct Place {
    pub repo: PathBuf,
    pub charter_path: PathBuf,
    pub charter: Charter,
    pub board_dir: PathBuf,
}

/// The repository, charter and board `g` names (the current git toplevel
/// and its `backlog` by default), each checked before anything starts.
pub fn place(g: &Given) -> Result<Place, LoopError> {
    let repo = repo(g.repo.as_deref())?;
    let charter_path = g
        .charter
        .clone()
        .ok_or_else(|| LoopError::Flag("pass --charter FILE (or --resume RUN)".into()))?;
    need_file("--charter", &charter_path)?;
    let charter = charter::load(&charter_path)?;
    let board_dir = g.board.clone().unwrap_or_else(|| repo.join("backlog"));
    need_board(&board_dir, g.board.is_some())?;
    Ok(Place {
        repo,
        charter_path,
        charter,
        board_dir,
    })
}

/// A rehearsal's clock `scale` times the wall clock's, going on from a
/// resumed run's recorded clock (never back); scale 1 leaves it real.
pub fn set_clock(cfg: &mut RunConfig, scale: u32, resumed: Option<&RunStatus>) {
    if scale > 1 {
        let recorded = resumed.and_then(|st| st.clock_at);
        let start = recorded.map_or(Utc::now(), |t| t.max(Utc::now()));
        cfg.unattended.clock =
            std::sync::Arc::new(crate::loopctl::night::clock::FastClock::new(start, scale));
    }
}

/// `--overnight [--until HH:MM]` (the owner's local time) as a mode.
pub fn overnight_mode(
    until: Option<&str>,
    now: DateTime<Utc>,
) -> Result<overnight::Mode, LoopError> {
    let until = match until {
        None => None,
        Some(u) => {
            let at = overnight::parse_hhmm(u).ok_or_else(|| {
                LoopError::Flag(format!(
                    "--until {u:?} is a time HH:MM (24 h, the owner's local time)"
                ))
            })?;
            Some(overnight::until_utc(now, at, &chrono::Local))
        }
    };
    Ok(overnight::Mode::Overnight { until })
}

/// Run (or resume run `resumed`, or close it unresumed for `close_only`)
/// on `lanes`.
pub fn drive<O: LaneOps>(
    mut lanes: O,
    cfg: RunConfig,
    resumed: Option<u32>,
    close_only: Option<&str>,
    say: impl FnMut(&str),
) -> Result<RunStatus, LoopError> {
    match resumed {
        Some(n) if let Some(why) = close_only => {
            crate::loopctl::run::closeonly::close_unresumed(&mut lanes, cfg, n, why, say)
        }
        Some(n) => crate::loopctl::run::resume::resume(&mut lanes, cfg, n, say),
        None => runner::run(&mut lanes, cfg, say),
    }
}

/// The tasks an earlier run's write lease kept from starting, with the
/// command that clears each, when the run landed nothing because of them
/// (not a success); none otherwise.
pub fn refused_by_stale_holds(st: &RunStatus) -> Vec<(String, String)> {
    if st.tasks.iter().any(|t| t.kind() == Phase::Landed) {
        return Vec::new();
    }
    st.stale_holds()
}
