//! The shadow runner and auto-completion (docs/policy.md).
//!
//! The runner gathers what the lane reported into the evidence store, builds a
//! scenario from the evidence, asks the pure policy, and appends the decision
//! to `<state>/shadow/decisions.jsonl`. It is given running jobs as plain data
//! and never the engine: it has no route to a job's status.
//!
//! Auto-completion ([`auto`]) is the one place a `complete` decision may turn
//! into a transition, and only when `DROVER_AUTOCOMPLETE=1`.

pub mod auto;
pub mod report;

use crate::evidence::{Evidence, EvidenceStore, latest_dispatch, scenario_value};
use crate::policy::{self, Decision};
use crate::statedir::StateDir;
use crate::store::{StoreError, append_jsonl};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How old the newest observation may be before the policy holds as stale.
pub const STALENESS_MS: u64 = 30_000;

/// A running job as the runner sees it: data, not a handle to the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningJob {
    pub job_id: String,
    pub attempt_id: Option<String>,
}

/// What the evidence held when the decision was made (no bodies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub events: usize,
    pub dispatches: usize,
    pub anchors: usize,
    pub observations: usize,
    pub last_state: Option<String>,
    pub report: Option<String>,
    pub transport_errors: usize,
    pub side_effects_proven: Option<bool>,
    pub pane: Option<String>,
    pub pane_generation: Option<u64>,
    /// The agent's last own word on its turn (`ended by hook`), when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_end: Option<String>,
}

/// One line of `decisions.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShadowDecision {
    pub at: String,
    pub t_ms: u64,
    pub job_id: String,
    pub attempt_id: String,
    pub decision: String,
    pub reason: String,
    pub summary: Summary,
    /// What auto-completion did with it (`None` in shadow mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// Errors of the runner.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShadowError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("evidence of job {job_id} does not make a valid scenario: {message}")]
    Scenario { job_id: String, message: String },
}

/// The shadow runner of one state dir.
#[derive(Debug, Clone)]
pub struct Runner {
    evidence: EvidenceStore,
    decisions: PathBuf,
    staleness_ms: u64,
}

impl Runner {
    /// A runner writing to `<state>/shadow/decisions.jsonl`.
    pub fn new(state_dir: &StateDir) -> Self {
        Runner {
            evidence: EvidenceStore::new(state_dir),
            decisions: state_dir.decisions_log(),
            staleness_ms: STALENESS_MS,
        }
    }

    /// The decisions log.
    pub fn decisions_path(&self) -> &Path {
        &self.decisions
    }

    /// The evidence store it reads.
    pub fn evidence(&self) -> &EvidenceStore {
        &self.evidence
    }

    /// Copy the lane's report into the evidence when it changed, and check its
    /// side effects once it is finalized. Returns whether anything was added.
    pub fn collect_report(&self, job_id: &str, now_ms: u64) -> Result<bool, StoreError> {
        let events = self.evidence.read(job_id)?;
        let Some(Evidence::Dispatch {
            report_path,
            worktree,
            ..
        }) = latest_dispatch(&events)
        else {
            return Ok(false);
        };
        let Some(path) = report_path else {
            return Ok(false);
        };
        let Some(rep) = report::read_report(Path::new(path)) else {
            return Ok(false);
        };
        let manifest_attempt_id = rep.declared().and_then(|m| m.attempt_id);
        let ev = Evidence::Report {
            t_ms: now_ms,
            state: rep.state.clone(),
            attempt_id: rep.attempt_id.clone(),
            session_id: rep.session_id.clone(),
            manifest_attempt_id,
        };
        let same = events
            .iter()
            .rev()
            .find(|e| matches!(e, Evidence::Report { .. }));
        let unchanged = match (same, &ev) {
            (
                Some(Evidence::Report {
                    state: s1,
                    attempt_id: a1,
                    session_id: x1,
                    manifest_attempt_id: m1,
                    ..
                }),
                Evidence::Report {
                    state: s2,
                    attempt_id: a2,
                    session_id: x2,
                    manifest_attempt_id: m2,
                    ..
                },
            ) => s1 == s2 && a1 == a2 && x1 == x2 && m1 == m2,
            _ => false,
        };
        if unchanged {
            return Ok(false);
        }
        self.evidence.append(job_id, &ev)?;
        if rep.state == crate::evidence::LaneReportState::Finalized {
            let v = report::verify_manifest(&rep, worktree.as_deref().map(Path::new));
            self.evidence.append(
                job_id,
                &Evidence::SideEffect {
                    t_ms: now_ms,
                    proven: v.proven,
                    detail: v.detail,
                },
            )?;
        }
        Ok(true)
    }

    /// Decide about one running job without writing anything.
    pub fn decide(
        &self,
        job: &RunningJob,
        now_ms: u64,
    ) -> Result<Option<ShadowDecision>, ShadowError> {
        let events = self.evidence.read(&job.job_id)?;
        let Some(value) = scenario_value(&events, now_ms, self.staleness_ms) else {
            return Ok(None);
        };
        let scenario = policy::scenario_from_value(&value).map_err(|e| ShadowError::Scenario {
            job_id: job.job_id.clone(),
            message: e.to_string(),
        })?;
        let decision: Decision = policy::decide(&scenario);
        let attempt_id = value["dispatch"]["attempt_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Some(ShadowDecision {
            at: crate::paths::now_rfc3339(),
            t_ms: now_ms,
            job_id: job.job_id.clone(),
            attempt_id,
            decision: decision.kind().name().to_string(),
            reason: decision.reason().to_string(),
            summary: summarize(&events),
            action: None,
        }))
    }

    /// Collect, decide and append the decision for one running job.
    pub fn evaluate(
        &self,
        job: &RunningJob,
        now_ms: u64,
    ) -> Result<Option<ShadowDecision>, ShadowError> {
        self.collect_report(&job.job_id, now_ms)?;
        let d = self.decide(job, now_ms)?;
        if let Some(d) = &d {
            self.record(d)?;
        }
        Ok(d)
    }

    /// Append a decision to the log.
    pub fn record(&self, d: &ShadowDecision) -> Result<(), StoreError> {
        let mut d = d.clone();
        d.reason = crate::registry::redact::redact_shown(&d.reason);
        d.action = d.action.map(|a| crate::registry::redact::redact_shown(&a));
        append_jsonl(&self.decisions, &d, true)
    }
}

fn summarize(events: &[Evidence]) -> Summary {
    let mut s = Summary {
        events: events.len(),
        dispatches: 0,
        anchors: 0,
        observations: 0,
        last_state: None,
        report: None,
        transport_errors: 0,
        side_effects_proven: None,
        pane: None,
        pane_generation: None,
        turn_end: None,
    };
    for e in events {
        match e {
            Evidence::Dispatch {
                pane,
                pane_generation,
                ..
            } => {
                s.dispatches += 1;
                s.pane = Some(pane.clone());
                s.pane_generation = Some(*pane_generation);
            }
            Evidence::ExecutionAnchor { .. } => s.anchors += 1,
            Evidence::Observation {
                state, state_kind, ..
            } => {
                s.observations += 1;
                s.last_state = Some(match state_kind {
                    Some(k) => format!("{state}:{k}"),
                    None => state.to_string(),
                });
            }
            Evidence::Transport { result, .. } if result == "error" => s.transport_errors += 1,
            Evidence::Transport { .. } => {}
            Evidence::Report { state, .. } => s.report = Some(state.to_string()),
            Evidence::SideEffect { proven, .. } => s.side_effects_proven = Some(*proven),
            Evidence::TurnEnd { how, source, .. } => {
                s.turn_end = Some(format!("{} by {source}", how.as_str()));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Source;
    use crate::proto::fuse::EndHow;
    use crate::proto::signal::TurnError;

    fn end_copy(v: &serde_json::Value) -> Evidence {
        let mut e = v["timeline"][1].clone();
        e["t_ms"] = serde_json::json!(2);
        serde_json::from_value(e).expect("a timeline turn end reads as evidence")
    }

    /// Every turn end the supervisor records reads as the policy's
    /// `turn_end`: a name out of step between the two would make every
    /// decision of a wired lane fail on a malformed scenario.
    #[test]
    fn every_recorded_turn_end_is_a_scenario_the_policy_reads() {
        let dispatch = Evidence::test_dispatch(1, "A1");
        let ends = [
            (EndHow::Ended, None, Some("0a".repeat(32))),
            (EndHow::Aborted, None, None),
            (EndHow::Failed, Some(TurnError::RateLimit), None),
            (EndHow::Failed, Some(TurnError::Auth), None),
            (EndHow::Failed, Some(TurnError::Billing), None),
            (EndHow::Failed, Some(TurnError::Other), None),
        ];
        for source in [Source::Hook, Source::Notify, Source::Transcript] {
            for (how, error, sha) in &ends {
                let end = Evidence::TurnEnd {
                    t_ms: 2,
                    how: *how,
                    source,
                    error: *error,
                    message_sha256: sha.clone(),
                    session_id: "implementer".into(),
                    pane_generation: 1,
                };
                let v = scenario_value(&[dispatch.clone(), end], 3, 30_000).unwrap();
                let s = policy::scenario_from_value(&v)
                    .unwrap_or_else(|e| panic!("{how:?} {source} {error:?}: {e}"));
                assert!(
                    matches!(s.timeline[1].body, policy::EventBody::TurnEnd { .. }),
                    "{v}"
                );
                let summary = summarize(&[dispatch.clone(), end_copy(&v)]);
                assert_eq!(
                    summary.turn_end.as_deref(),
                    Some(format!("{} by {source}", how.as_str()).as_str())
                );
            }
        }
    }
}
