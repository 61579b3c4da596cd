//! The evidence store (docs/policy.md): what drover saw about each attempt, one
//! append-only JSONL file per job under `<state>/evidence/`, apart from the
//! registry and the jobs.
//!
//! Events use the field names of the policy's scenario timeline (`t_ms`,
//! `kind`, `attempt_id`, `session_id`, `pane_generation`, …) plus a few fields
//! for humans (`pane`, `nonce`, `screen_hash`, `detail`) that
//! [`Evidence::timeline_value`] leaves out. No prompt or reply bodies are stored.

mod report_state;

pub use report_state::LaneReportState;

use crate::proto::fuse::EndHow;
use crate::proto::signal::{Source, TurnError};
use crate::proto::state::State;
use crate::statedir::{StateDir, StateDirBuf};
use crate::store::{StoreError, append_jsonl, read_jsonl};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// A prompt was dispatched and acknowledged: not evidence that it ran.
    Dispatch {
        t_ms: u64,
        job_id: String,
        attempt_id: String,
        session_id: String,
        pane: String,
        pane_generation: u64,
        nonce: String,
        /// Where the lane writes its report.
        #[serde(default)]
        report_path: Option<String>,
        /// The worktree declared side effects are checked in.
        #[serde(default)]
        worktree: Option<String>,
    },
    /// The attempt ran: the agent went working after the dispatch, on the
    /// dispatch's pane generation.
    ExecutionAnchor {
        t_ms: u64,
        attempt_id: String,
        session_id: String,
        pane_generation: u64,
        #[serde(default)]
        detail: String,
    },
    /// A matched snapshot of the agent's state.
    Observation {
        t_ms: u64,
        state: State,
        #[serde(default)]
        state_kind: Option<String>,
        session_id: String,
        pane_generation: u64,
        #[serde(default)]
        screen_hash: String,
    },
    /// How a watcher's barrier ended: `ok`, `timeout` or `error`.
    Transport {
        t_ms: u64,
        result: String,
        #[serde(default)]
        detail: String,
    },
    /// The lane's own account, copied from its `report.json`.
    Report {
        t_ms: u64,
        state: LaneReportState,
        #[serde(default)]
        attempt_id: Option<String>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        manifest_attempt_id: Option<String>,
    },
    /// A check of the declared side effects.
    SideEffect {
        t_ms: u64,
        proven: bool,
        #[serde(default)]
        detail: String,
    },
    /// The agent's own word that its turn ended (a `Stop` or `StopFailure`
    /// hook, Codex's notify or rollout), taken by the supervisor at `t_ms`.
    TurnEnd {
        t_ms: u64,
        how: EndHow,
        source: Source,
        /// With `failed`: why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<TurnError>,
        /// With `ended`: the last assistant message's sha256, never its text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_sha256: Option<String>,
        session_id: String,
        pane_generation: u64,
    },
}

impl Evidence {
    /// When it was seen (ms since the epoch).
    pub fn t_ms(&self) -> u64 {
        match self {
            Evidence::Dispatch { t_ms, .. }
            | Evidence::ExecutionAnchor { t_ms, .. }
            | Evidence::Observation { t_ms, .. }
            | Evidence::Transport { t_ms, .. }
            | Evidence::Report { t_ms, .. }
            | Evidence::SideEffect { t_ms, .. }
            | Evidence::TurnEnd { t_ms, .. } => *t_ms,
        }
    }

    /// The event as a scenario timeline entry (identifiers and policy fields only).
    pub fn timeline_value(&self) -> Value {
        match self {
            Evidence::Dispatch {
                t_ms,
                attempt_id,
                session_id,
                pane_generation,
                ..
            } => json!({"t_ms": t_ms, "kind": "dispatch", "attempt_id": attempt_id,
                        "session_id": session_id, "pane_generation": pane_generation}),
            Evidence::ExecutionAnchor {
                t_ms,
                attempt_id,
                session_id,
                pane_generation,
                ..
            } => json!({"t_ms": t_ms, "kind": "execution_anchor", "attempt_id": attempt_id,
                        "session_id": session_id, "pane_generation": pane_generation}),
            Evidence::Observation {
                t_ms,
                state,
                state_kind,
                session_id,
                pane_generation,
                ..
            } => {
                let mut v = json!({"t_ms": t_ms, "kind": "observation", "state": state,
                                   "session_id": session_id, "pane_generation": pane_generation});
                if let Some(k) = state_kind {
                    v["state_kind"] = json!(k);
                }
                v
            }
            Evidence::Transport { t_ms, result, .. } => {
                json!({"t_ms": t_ms, "kind": "transport", "result": result})
            }
            Evidence::Report {
                t_ms,
                state,
                attempt_id,
                session_id,
                manifest_attempt_id,
            } => {
                let mut v = json!({"t_ms": t_ms, "kind": "report", "state": state});
                for (k, val) in [
                    ("attempt_id", attempt_id),
                    ("session_id", session_id),
                    ("manifest_attempt_id", manifest_attempt_id),
                ] {
                    if let Some(x) = val {
                        v[k] = json!(x);
                    }
                }
                v
            }
            Evidence::SideEffect { t_ms, proven, .. } => {
                json!({"t_ms": t_ms, "kind": "side_effect", "proven": proven})
            }
            Evidence::TurnEnd {
                t_ms,
                how,
                source,
                error,
                message_sha256,
                session_id,
                pane_generation,
            } => {
                let mut v = json!({"t_ms": t_ms, "kind": "turn_end", "how": how,
                                   "source": source, "session_id": session_id,
                                   "pane_generation": pane_generation});
                if let Some(e) = error {
                    v["error"] = json!(e);
                }
                if let Some(h) = message_sha256 {
                    v["message_sha256"] = json!(h);
                }
                v
            }
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Evidence {
    /// A dispatch of job `J1`, attempt `attempt`, session `implementer` on
    /// pane `p` generation 1, at `t_ms` (for tests).
    pub fn test_dispatch(t_ms: u64, attempt: &str) -> Evidence {
        Evidence::Dispatch {
            t_ms,
            job_id: "J1".into(),
            attempt_id: attempt.into(),
            session_id: "implementer".into(),
            pane: "p".into(),
            pane_generation: 1,
            nonce: "n".into(),
            report_path: None,
            worktree: None,
        }
    }
}

/// The evidence files of a state dir.
#[derive(Debug, Clone)]
pub struct EvidenceStore {
    state: StateDirBuf,
}

impl EvidenceStore {
    /// The store under `<state>/evidence/`.
    pub fn new(state_dir: &StateDir) -> Self {
        EvidenceStore {
            state: state_dir.to_buf(),
        }
    }

    /// The file of one job.
    pub fn path(&self, job_id: &str) -> PathBuf {
        self.state.evidence_file(job_id)
    }

    /// Append one event durably (fsync) under the file's lock.
    pub fn append(&self, job_id: &str, ev: &Evidence) -> Result<(), StoreError> {
        append_jsonl(&self.path(job_id), ev, true)
    }

    /// Every event of a job, in file order (a torn last line is skipped).
    pub fn read(&self, job_id: &str) -> Result<Vec<Evidence>, StoreError> {
        Ok(read_jsonl(&self.path(job_id))?.records)
    }

    /// Job ids that have evidence.
    pub fn jobs(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.state.evidence_dir()) else {
            return Vec::new();
        };
        let mut out: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(crate::statedir::EVIDENCE_SUFFIX))
                    .map(str::to_string)
            })
            .collect();
        out.sort();
        out
    }
}

/// The newest dispatch in a job's evidence.
pub fn latest_dispatch(events: &[Evidence]) -> Option<&Evidence> {
    events
        .iter()
        .rev()
        .find(|e| matches!(e, Evidence::Dispatch { .. }))
}

/// Build the policy's scenario document for the newest dispatch of a job.
/// The timeline holds every event of the job, not only the newest attempt's,
/// so a raced second dispatch stays visible to attribution.
pub fn scenario_value(events: &[Evidence], now_ms: u64, staleness_ms: u64) -> Option<Value> {
    let Some(Evidence::Dispatch {
        job_id,
        attempt_id,
        session_id,
        pane_generation,
        ..
    }) = latest_dispatch(events)
    else {
        return None;
    };
    let mut timeline: Vec<&Evidence> = events.iter().collect();
    timeline.sort_by_key(|e| e.t_ms());
    let now_ms = now_ms.max(timeline.last().map(|e| e.t_ms()).unwrap_or(0));
    Some(json!({
        "name": format!("{job_id}/{attempt_id}"),
        "now_ms": now_ms,
        "staleness_ms": staleness_ms,
        "dispatch": {"job_id": job_id, "attempt_id": attempt_id,
                     "session_id": session_id, "pane_generation": pane_generation},
        "timeline": timeline.iter().map(|e| e.timeline_value()).collect::<Vec<_>>(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dispatch(t: u64, attempt: &str) -> Evidence {
        Evidence::test_dispatch(t, attempt)
    }

    #[test]
    fn append_read_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let s = EvidenceStore::new(StateDir::new(d.path()));
        s.append("J1", &dispatch(1, "A1")).unwrap();
        s.append(
            "J1",
            &Evidence::Transport {
                t_ms: 2,
                result: "error".into(),
                detail: "pane gone".into(),
            },
        )
        .unwrap();
        let evs = s.read("J1").unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(s.jobs(), vec!["J1".to_string()]);
    }

    #[test]
    fn scenario_uses_newest_dispatch_keeps_all_events_and_drops_extras() {
        let evs = vec![
            dispatch(5, "A2"),
            dispatch(1, "A1"),
            Evidence::Observation {
                t_ms: 6,
                state: State::Blocked,
                state_kind: Some("permission".into()),
                session_id: "implementer".into(),
                pane_generation: 1,
                screen_hash: "ab".into(),
            },
        ];
        let v = scenario_value(&evs, 10, 30_000).unwrap();
        assert_eq!(v["dispatch"]["attempt_id"], "A1", "newest in file order");
        let tl = v["timeline"].as_array().unwrap();
        assert_eq!(tl.len(), 3);
        assert_eq!(tl[0]["t_ms"], 1, "sorted by time");
        assert!(tl[2].get("screen_hash").is_none());
        assert_eq!(tl[2]["state_kind"], "permission");
    }

    #[test]
    fn an_observation_line_reads_its_state_typed_and_writes_the_same_bytes() {
        let line = r#"{"kind":"observation","t_ms":6,"state":"blocked","state_kind":"permission","session_id":"implementer","pane_generation":1,"screen_hash":"ab"}"#;
        let e: Evidence = serde_json::from_str(line).unwrap();
        assert!(matches!(
            e,
            Evidence::Observation {
                state: State::Blocked,
                ..
            }
        ));
        assert_eq!(serde_json::to_string(&e).unwrap(), line);
        let bad = line.replace("blocked", "sleeping");
        assert!(serde_json::from_str::<Evidence>(&bad).is_err());
    }
}
