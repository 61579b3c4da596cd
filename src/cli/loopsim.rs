//! The sim lanes of `drover loop run`: the scripts given, or the obedient
//! agent for a role given none.

use super::fail;
use drover::exit;
use drover::loopctl::ops::{LaneSpec, Role};
use std::path::Path;

pub(super) fn read_script(p: &Path) -> anyhow::Result<String> {
    drover::agent::sim::Script::load(p).map_err(|e| fail(exit::USAGE, e.to_string()))?;
    std::fs::read_to_string(p).map_err(|e| fail(exit::USAGE, format!("{}: {e}", p.display())))
}

/// The script each sim lane follows: the given pair, or (no scripts) a
/// minimal obedient agent for its task; none for real agents.
pub(super) fn sim_scripts(
    scripts: &(Option<String>, Option<String>),
    sim: bool,
    board_dir: &std::path::Path,
) -> Option<drover::loopctl::lanes::lanes_ops::ScriptFor> {
    if !sim {
        return None;
    }
    let claimed: std::collections::BTreeMap<String, Vec<String>> =
        drover::loopctl::board::load(board_dir)
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
            drover::loopctl::lanes::simlanes::obedient_script(s.role, &s.task, files)
        })
    }))
}
