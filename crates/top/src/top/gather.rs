//! Reading what `top` shows: the supervisor's pane listing and the selected
//! screen over the socket, jobs, decisions, leases, heartbeats, lanes (as
//! `lane ls` reads them) and the gate from the state dir. Read-only: nothing here writes (a gate check
//! through `gate::check` would log an event, and so wake `top` again).

use super::view::{GateCell, Heartbeat, Inputs, LaneCells, parked_lanes};
use crate::client::Client;
use crate::engine::{Engine, Status};
use crate::proto::{PaneEntry, args};
use crate::registry::{self, events, heartbeat, lease};
use crate::shadow::ShadowDecision;
use crate::statedir::StateDir;
use std::collections::BTreeMap;

/// How many screen lines the detail pane may show.
pub const DETAIL_LINES: usize = 60;

fn ms_of(ts: Option<&str>) -> Option<u64> {
    chrono::DateTime::parse_from_rfc3339(ts?)
        .ok()
        .map(|t| t.timestamp_millis().max(0) as u64)
}

/// Everything but the panes from the state dir; problems become one warning.
pub fn read_state(state_dir: &StateDir, inp: &mut Inputs, warnings: &mut Vec<String>) {
    let now = chrono::Utc::now();
    if state_dir.jobs_dir().is_dir() {
        match Engine::open(state_dir).and_then(|e| e.list()) {
            Ok(jobs) => {
                inp.jobs = jobs
                    .into_iter()
                    .filter(|j| j.status == Status::Running)
                    .map(|j| {
                        let st = serde_json::to_value(j.status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default();
                        (j.job_id, j.session_id.unwrap_or_default(), st)
                    })
                    .collect()
            }
            Err(e) => warnings.push(format!("jobs: {e}")),
        }
    }
    let decisions = state_dir.decisions_log();
    match crate::store::read_jsonl::<ShadowDecision>(&decisions) {
        Ok(r) => {
            for d in r.records {
                inp.decisions.insert(d.job_id, (d.decision, d.summary.pane));
            }
        }
        Err(e) => warnings.push(format!("decisions: {e}")),
    }
    let leases = match lease::load(state_dir) {
        Ok(doc) => doc.map(|d| d.leases).unwrap_or_default(),
        Err(e) => {
            warnings.push(format!("leases: {e}"));
            Vec::new()
        }
    };
    inp.leases = leases
        .iter()
        .map(|l| {
            (
                l.owner_session.clone(),
                l.task_id.clone().unwrap_or_else(|| l.lease_id.clone()),
                l.state.as_str().to_string(),
                l.worktree.clone(),
            )
        })
        .collect();
    // The lanes as `lane ls` shows them (worktree state and ahead/behind
    // from git); their panes' states come from the pane listing.
    match crate::lane::ls::ls(crate::statedir::StateDir::new(state_dir), None) {
        Ok(rows) => inp.lanes = rows.iter().map(LaneCells::from).collect(),
        Err(e) => warnings.push(format!("lanes: {e}")),
    }
    // The loop's lanes are panes named by their lane id; `lane up`'s are
    // lane records: a park names either.
    if state_dir.registry_events().is_file() {
        match events::read(state_dir) {
            Ok(log) => {
                inp.parked = parked_lanes(log.records.iter().map(|e| (e.kind.as_str(), &e.fields)));
            }
            Err(e) => warnings.push(format!("events: {e}")),
        }
    }
    let reg = match registry::load(state_dir) {
        Ok(r) => r,
        Err(e) => {
            warnings.push(format!("registry: {e}"));
            None
        }
    };
    if let Some(reg) = &reg {
        for s in &reg.sessions {
            let fresh =
                heartbeat::freshness(s.last_heartbeat.as_deref(), heartbeat::ttl_of(s), now);
            inp.heartbeats.insert(
                s.session_id.clone(),
                Heartbeat {
                    status: s.status.clone(),
                    at_ms: ms_of(s.last_heartbeat.as_deref()),
                    stale: fresh == heartbeat::Freshness::Stale,
                },
            );
        }
        let report = crate::gate::evaluate(&crate::gate::GateInput {
            registry: Some(reg),
            leases: &leases,
            audit: events::audit(state_dir).map_err(|e| e.to_string()),
            task: None,
            load_bearing: false,
            now,
        });
        inp.gate = Some(GateCell {
            ready: report.verdict == crate::gate::Verdict::Ready,
            reasons: report.reasons.len(),
            words: super::shipgate::words(&report),
        });
    }
}

/// The pane listing from the supervisor.
pub fn panes(client: &mut Client) -> Result<Vec<PaneEntry>, crate::client::ClientError> {
    client.call(args::PaneLs {})
}

/// The last non-blank lines of a pane's screen.
pub fn detail(client: &mut Client, pane: &str) -> Vec<String> {
    let read = args::PaneRead {
        pane: pane.to_string(),
        raw: false,
        scrollback: None,
    };
    let Ok(v) = client.call(read) else {
        return vec!["(the pane is gone)".into()];
    };
    let mut lines: Vec<String> = v.lines.iter().map(|l| l.trim_end().to_string()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let skip = lines.len().saturating_sub(DETAIL_LINES);
    lines.split_off(skip)
}

/// The seen map, the inputs and the pane listing together.
pub fn inputs(
    client: &mut Client,
    state_dir: &StateDir,
    seen: &BTreeMap<String, u64>,
) -> (Inputs, Option<String>) {
    let mut inp = Inputs {
        seen: seen.clone(),
        now_ms: crate::paths::now_ms(),
        ..Default::default()
    };
    let mut warnings = Vec::new();
    match panes(client) {
        Ok(p) => inp.panes = p,
        Err(e) => warnings.push(format!("supervisor: {e}")),
    }
    read_state(state_dir, &mut inp, &mut warnings);
    (inp, warnings.into_iter().next())
}
