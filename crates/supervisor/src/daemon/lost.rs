//! Process records of the supervisor's panes, and what a supervisor that
//! stopped uncleanly (`kill -9`) left behind: found from the records at
//! startup, listed by `pane ls` as `lost` with a note, and ended.

use super::server::{Sup, lock};
use crate::pane::record::{self, PaneRecord};
use crate::pane::{KILL_GRACE, PaneBackend};
use crate::proto::LostPane;
use crate::proto::snapshot::{LostObservation, LostState};
use std::sync::Arc;
use std::time::Duration;

/// How long ending a lost pane's processes may take after the grace period.
const LOST_SWEEP: Duration = Duration::from_secs(3);
/// How often the records' descendant lists are refreshed.
pub const RECORD_REFRESH: Duration = Duration::from_secs(10);

/// Write (or rewrite) the record of `pane`'s current generation (backends
/// that keep their own record, such as tmux, write none here).
pub(super) fn record(sup: &Sup, pane: &dyn PaneBackend) {
    let Some(rec) = pane.process_record(Vec::new()) else {
        return;
    };
    if let Err(e) = record::write(sup.state_dir(), &rec) {
        tracing::warn!(pane = %pane.name(), error = %e, "cannot write the pane's process record");
    }
}

/// The pane's processes are ended: drop its record.
pub(super) fn forget(sup: &Sup, name: &str) {
    if let Err(e) = record::remove(sup.state_dir(), name) {
        tracing::warn!(pane = %name, error = %e, "cannot remove the pane's process record");
    }
}

/// Drop a lost pane's record unless a new pane of the same name wrote its own.
fn forget_if_unchanged(sup: &Sup, rec: &PaneRecord) {
    let path = record::path(sup.state_dir(), &rec.name);
    let same = crate::store::read_json::<PaneRecord>(&path)
        .ok()
        .flatten()
        .is_some_and(|now| now == *rec);
    if same {
        forget(sup, &rec.name);
    }
}

/// A `pane ls` entry for a lost pane.
fn lost_entry(rec: &PaneRecord, note: String, running: usize) -> LostPane {
    LostPane {
        name: rec.name.clone(),
        backend: rec.backend,
        pid: rec.pid,
        generation: rec.generation,
        agent: rec.agent.clone(),
        cols: None,
        rows: None,
        lost: true,
        note,
        left_running: running,
        observation: LostObservation {
            pane: rec.name.clone(),
            state: LostState::Lost,
            generation: rec.generation,
            since_ms: crate::paths::now_ms(),
        },
    }
}

/// Whether a record is of a pane this supervisor has (re-adopted), or one
/// its backend still keeps for re-adoption: never lost, never ended here.
fn kept(sup: &Sup, rec: &PaneRecord) -> bool {
    lock(&sup.panes).contains_key(&rec.name)
        || (rec.backend == crate::pane::Backend::Tmux
            && crate::pane::tmux::keeps_pane(sup.state_dir(), &rec.name))
}

/// Read the records a previous supervisor left, list their panes as lost,
/// and end what still runs (in the background; notes are updated after).
/// Run after re-adoption: the records of re-adopted panes are skipped.
pub(super) async fn recover(sup: &Arc<Sup>) {
    let dir = sup.state_dir().to_path_buf();
    let s = sup.clone();
    let found = tokio::task::spawn_blocking(move || {
        record::load_all(crate::statedir::StateDir::new(&dir))
            .into_iter()
            .filter(|(_, r)| !r.as_ref().is_ok_and(|rec| kept(&s, rec)))
            .map(|(path, r)| match r {
                Ok(rec) => {
                    let left = rec.leftovers();
                    (path, Ok((rec, left)))
                }
                Err(e) => (path, Err(e)),
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    for (path, r) in found {
        let (rec, left) = match r {
            Ok(x) => x,
            Err(e) => {
                // Never removed: the operator decides what a corrupt record meant.
                tracing::error!(error = %e, "unreadable pane record; left in place");
                let _ = path;
                continue;
            }
        };
        let note = if left.is_empty() {
            "left by a supervisor that stopped without ending it; none of its processes still ran"
                .to_string()
        } else {
            format!(
                "left by a supervisor that stopped without ending it; ending its {} remaining process(es)",
                left.len()
            )
        };
        tracing::warn!(pane = %rec.name, pid = rec.pid, remaining = left.len(), "found a lost pane");
        lock(&sup.lost).insert(rec.name.clone(), lost_entry(&rec, note, left.len()));
        let sup = sup.clone();
        tokio::spawn(async move {
            let r2 = rec.clone();
            let ended = tokio::task::spawn_blocking(move || {
                crate::pane::reap::end_tree(&r2.tree_key(), KILL_GRACE, LOST_SWEEP)
            })
            .await
            .unwrap_or_default();
            let still = rec.leftovers().len();
            let note = if still == 0 {
                if ended.is_empty() {
                    "left by a supervisor that stopped without ending it; none of its processes still ran".to_string()
                } else {
                    format!(
                        "left by a supervisor that stopped without ending it; its {} remaining process(es) were ended",
                        ended.len()
                    )
                }
            } else {
                format!(
                    "left by a supervisor that stopped without ending it; {still} process(es) could not be ended"
                )
            };
            if still == 0 {
                forget_if_unchanged(&sup, &rec);
            }
            tracing::info!(pane = %rec.name, ended = ended.len(), still, "lost pane handled");
            if let Some(v) = lock(&sup.lost).get_mut(&rec.name) {
                v.note = note;
                v.left_running = still;
            }
        });
    }
}

/// Refresh every pane's record with the processes it has now, so a record
/// names descendants that have since left the session.
pub(super) async fn refresher(sup: Arc<Sup>) {
    let mut last: std::collections::HashMap<String, Vec<crate::pane::Member>> =
        std::collections::HashMap::new();
    loop {
        tokio::time::sleep(RECORD_REFRESH).await;
        let entries: Vec<_> = lock(&sup.panes).values().cloned().collect();
        for e in entries {
            let pane = e.pane.clone();
            let Ok(members) = tokio::task::spawn_blocking(move || pane.members()).await else {
                continue;
            };
            let name = e.pane.name().to_string();
            if last.get(&name) == Some(&members) || !lock(&sup.panes).contains_key(&name) {
                continue;
            }
            let Some(mut rec) = e.pane.process_record(Vec::new()) else {
                continue;
            };
            rec.descendants = members
                .iter()
                .filter(|m| m.pid != rec.pid)
                .copied()
                .collect();
            if let Err(err) = record::write(sup.state_dir(), &rec) {
                tracing::warn!(pane = %name, error = %err, "cannot refresh the pane's process record");
            }
            last.insert(name, members);
        }
        last.retain(|n, _| lock(&sup.panes).contains_key(n));
    }
}
