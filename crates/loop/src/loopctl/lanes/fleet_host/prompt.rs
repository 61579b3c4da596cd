//! The first prompt of a lane on this host, built from the board at the
//! base as the coordinator builds it: no prompt body travels.

use crate::fleet::work::WorkItem;
use crate::loopctl::LoopError;
use crate::loopctl::board::{self, brief};
use crate::loopctl::land::capture;
use crate::loopctl::ops::Role;
use std::path::Path;

/// The lane's first prompt, built here from the board at the base, as the
/// coordinator builds it (no prompt body travels): the implementer's brief
/// or the reviewer's, with its copies of the candidate in the lane dir. A
/// simulated lane whose task is not on the board at the base gets a short
/// prompt naming the task; a real agent's is an error.
#[allow(clippy::too_many_arguments)]
pub(super) fn prompt(
    item: &WorkItem,
    role: Role,
    id: &str,
    dir: &Path,
    lane_dir: &Path,
    candidate: Option<&[u8]>,
    before: Option<&[u8]>,
    report_cmd: &str,
) -> Result<(String, bool), LoopError> {
    let task = item
        .board
        .as_deref()
        .and_then(|rel| board::load(&dir.join(rel)).ok())
        .and_then(|b| b.task(&item.task).cloned());
    let Some(task) = task else {
        if item.sim_script.is_none() {
            return Err(LoopError::usage(
                "board",
                format!(
                    "task {} is not on the board ({}) at {}: commit the board before `loop run --fleet`",
                    item.task,
                    item.board.as_deref().unwrap_or("outside the repository"),
                    item.base
                ),
            ));
        }
        let short = match role {
            Role::Implementer => format!(
                "Implement task {} of this repository's board.\n[loop] task={} round={} role=implementer",
                item.task, item.task, item.round
            ),
            Role::Reviewer => format!(
                "Review the change in this repository for task {} of its board; end with `VERDICT: pass` or `VERDICT: fail: <reason>`.\n[loop] task={} role=reviewer",
                item.task, item.task
            ),
        };
        return Ok((short, false));
    };
    let tier = brief::tier_named(item.tier.as_deref());
    let (text, tail) = match role {
        Role::Implementer => {
            let b = brief::build(id, &task, tier, &item.others, report_cmd);
            let text = brief::render(&b);
            // A repair round is told its evidence after the brief, as the
            // coordinator tells it.
            let tail = match &item.repair {
                Some(evidence) => format!(
                    "{}{}",
                    brief::repair_addendum(evidence),
                    brief::implementer_trailer(&item.task, item.round, "repair")
                ),
                None => format!(
                    "\n{}",
                    brief::implementer_trailer(&item.task, item.round, "")
                ),
            };
            (text, tail)
        }
        Role::Reviewer => {
            // The reviewer reads its own copies, in its lane dir (a real
            // Claude reviewer's added directory), so reading asks nothing.
            let patch = lane_dir.join(format!("candidate-v{}.patch", item.round));
            crate::store::write_bytes_atomic(
                &patch,
                &capture::shown_copy(candidate.unwrap_or_default()),
            )?;
            let before = match before {
                Some(b) => {
                    let p = lane_dir.join(format!("candidate-v{}-before-rebase.patch", item.round));
                    crate::store::write_bytes_atomic(&p, &capture::shown_copy(b))?;
                    Some(p)
                }
                None => None,
            };
            let text = brief::review(
                &brief::ReviewOf {
                    lane: id,
                    task: &item.task,
                    title: &task.title,
                    tier,
                    round: item.round,
                    reviewer: &item.agent,
                    patch: &patch,
                    before: before.as_deref(),
                },
                &task.criteria,
            );
            let tail = brief::review_trailer(&item.task, item.round, &patch);
            (text, tail)
        }
    };
    crate::store::write_bytes_atomic(&lane_dir.join("brief.md"), text.as_bytes())?;
    Ok((format!("{text}{tail}"), true))
}
