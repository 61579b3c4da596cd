//! The audit log (`jobs/audit.jsonl`) and its replay through the table.
//!
//! An accepted transition's entry is appended under the jobs lock, after its
//! record, and is its one durable write (the log is synced after the lock is
//! let go); ACKs and refusals are appended after the lock. Accepted entries
//! are in the file in seq order; replay sorts them by `seq` all the same (a
//! log from before was appended after the lock, in any order).

use super::record::{JobRecord, Status, parse_time};
use super::request::Request;
use super::table::{Decision, Inputs, decide};
use crate::statedir::StateDir;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The audit log's name in the jobs dir.
pub use crate::statedir::AUDIT_FILE;

/// `<state>/jobs/audit.jsonl`.
pub fn audit_log(state_dir: &StateDir) -> PathBuf {
    state_dir.jobs_audit()
}

/// Follow the audit log of `state_dir` from where it ends now (creating
/// nothing): each read gives the complete lines appended since. For readers
/// outside the engine (the supervisor's event feed).
pub fn follow(state_dir: &StateDir) -> crate::store::JsonlTail {
    crate::store::JsonlTail::from_end(audit_log(state_dir))
}

/// What became of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Accepted,
    Ack,
    Refused,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The transition's seq; `None` for ACKs and refusals.
    pub seq: Option<u64>,
    /// The request's time (also the record's `updated_at` when accepted).
    pub at: String,
    pub job_id: String,
    pub outcome: Outcome,
    /// The record's status before (None when the job did not exist).
    pub from: Option<Status>,
    /// The record's status after an accepted transition.
    pub to: Option<Status>,
    /// The rule that refused, if refused.
    pub rule: Option<String>,
    pub reason: Option<String>,
    /// The attempt id an accepted claim assigned.
    pub new_attempt_id: Option<String>,
    pub request: Request,
    pub pid: u32,
}

/// Why a replay did not reproduce the records.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayMismatch {
    pub seq: u64,
    pub job_id: String,
    pub what: String,
}

/// Replay every accepted entry, in seq order, through the table. Returns the
/// records the log implies, or the first entry the table would not accept the
/// same way (a lost update or a non-deterministic rule shows up here).
pub fn replay(entries: &[AuditEntry]) -> Result<BTreeMap<String, JobRecord>, ReplayMismatch> {
    let mut accepted: Vec<&AuditEntry> = entries
        .iter()
        .filter(|e| e.outcome == Outcome::Accepted)
        .collect();
    accepted.sort_by_key(|e| e.seq);
    let mut jobs: BTreeMap<String, JobRecord> = BTreeMap::new();
    let mut last_seq = 0u64;
    for e in accepted {
        let mismatch = |what: String| ReplayMismatch {
            seq: e.seq.unwrap_or(0),
            job_id: e.job_id.clone(),
            what,
        };
        let Some(seq) = e.seq else {
            return Err(mismatch("accepted entry without seq".into()));
        };
        if seq <= last_seq {
            return Err(mismatch(format!("seq {seq} not above {last_seq}")));
        }
        last_seq = seq;
        let at = parse_time("at", &e.at).map_err(|x| mismatch(x.to_string()))?;
        let inputs = Inputs {
            at,
            new_attempt_id: e.new_attempt_id.clone().unwrap_or_default(),
        };
        let before = jobs.get(&e.job_id);
        if before.map(|r| r.status) != e.from {
            return Err(mismatch(format!(
                "log says from {:?}, replay has {:?}",
                e.from,
                before.map(|r| r.status)
            )));
        }
        match decide(before, &e.request, &inputs, seq) {
            Decision::Accept(rec) => {
                if Some(rec.status) != e.to {
                    return Err(mismatch(format!(
                        "log says to {:?}, replay gives {}",
                        e.to, rec.status
                    )));
                }
                jobs.insert(e.job_id.clone(), rec);
            }
            other => return Err(mismatch(format!("replay gives {other:?}"))),
        }
    }
    Ok(jobs)
}
