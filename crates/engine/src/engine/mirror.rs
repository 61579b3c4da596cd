//! `jobs/status.json`: a mirror of every job's status for cheap readers.
//!
//! Written after the jobs lock is released, by whichever process made a
//! transition. Two writers can finish out of order, so each update is a
//! read-compare-write under the mirror's own lock: a job's entry is replaced only
//! by a record with a higher `transition_seq`, and the entry is taken from the
//! record on disk at that moment, so a late writer can only move it forward.

use super::record::{JobRecord, Status};
use crate::store::{StoreError, lock_beside, read_json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The mirror document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusMirror {
    /// The highest `transition_seq` mirrored so far; never goes backwards.
    pub transition_seq: u64,
    pub jobs: BTreeMap<String, MirrorEntry>,
}

/// One job in the mirror.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MirrorEntry {
    pub status: Status,
    pub iteration: u64,
    pub attempt_id: Option<String>,
    pub session_id: Option<String>,
    #[serde(with = "crate::time::millis")]
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub transition_seq: u64,
}

impl From<&JobRecord> for MirrorEntry {
    fn from(r: &JobRecord) -> Self {
        MirrorEntry {
            status: r.status,
            iteration: r.iteration,
            attempt_id: r.attempt_id.clone(),
            session_id: r.session_id.clone(),
            updated_at: r.updated_at,
            transition_seq: r.transition_seq,
        }
    }
}

/// Bring `job_id`'s mirror entry up to the record on disk, never backwards.
/// When the mirror lags further (an earlier transition's mirror write failed,
/// e.g. on a full disk), every entry is repaired from the records beside.
/// Returns whether the mirror was written.
pub fn refresh(mirror_path: &Path, record_path: &Path, job_id: &str) -> Result<bool, StoreError> {
    let guard = lock_beside(mirror_path)?;
    let mut doc: StatusMirror = read_json(mirror_path)?.unwrap_or_default();
    let Some(rec) = super::record::read_record(record_path, job_id)? else {
        return Ok(false);
    };
    let mirrored = doc.transition_seq;
    let mut changed = forward(&mut doc, &rec);
    if mirrored < rec.transition_seq.saturating_sub(1)
        && let Some(dir) = record_path.parent()
    {
        changed |= repair(&mut doc, dir);
    }
    if changed {
        let renamed = crate::store::write_json_renamed_steps(mirror_path, &doc, &mut |step| {
            super::crash::point(step)
        })?;
        // The next refresher reads the renamed mirror; the directory's
        // fsync needs no lock.
        drop(guard);
        renamed.sync()?;
        super::crash::point("dir synced");
    }
    Ok(changed)
}

/// Move one entry forward to `rec`; false when the mirror already has it or newer.
fn forward(doc: &mut StatusMirror, rec: &JobRecord) -> bool {
    let have = doc
        .jobs
        .get(&rec.job_id)
        .map(|e| e.transition_seq)
        .unwrap_or(0);
    if rec.transition_seq <= have {
        return false;
    }
    doc.jobs.insert(rec.job_id.clone(), MirrorEntry::from(rec));
    doc.transition_seq = doc.transition_seq.max(rec.transition_seq);
    true
}

/// Bring every entry forward from the records in `dir`. A record that cannot
/// be read is left out (its own readers report it) rather than stopping the repair.
fn repair(doc: &mut StatusMirror, dir: &Path) -> bool {
    let records = match super::record::read_all(dir) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "status mirror repair skipped");
            return false;
        }
    };
    let mut changed = false;
    for rec in &records {
        changed |= forward(doc, rec);
    }
    if changed {
        tracing::info!(
            mirror_seq = doc.transition_seq,
            "status mirror repaired from the records"
        );
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::write_json_atomic;

    fn record(seq: u64, status: Status) -> JobRecord {
        JobRecord {
            job_id: "J".into(),
            status,
            iteration: 1,
            attempt_id: None,
            session_id: None,
            deadline: None,
            metadata: serde_json::Map::new(),
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
            transition_seq: seq,
            lane_id: None,
            reason: None,
        }
    }

    /// A slow writer that reaches the mirror after a newer one must not move it back.
    #[test]
    fn a_late_older_record_never_moves_the_mirror_back() {
        let dir = tempfile::tempdir().unwrap();
        let (m, r) = (
            dir.path().join("status.json"),
            dir.path().join("J.job.json"),
        );
        write_json_atomic(&r, &record(5, Status::Completed)).unwrap();
        assert!(refresh(&m, &r, "J").unwrap());
        write_json_atomic(&r, &record(3, Status::Running)).unwrap();
        assert!(!refresh(&m, &r, "J").unwrap(), "skipped");
        let doc: StatusMirror = read_json(&m).unwrap().unwrap();
        assert_eq!(doc.transition_seq, 5);
        assert_eq!(doc.jobs["J"].status, Status::Completed);
        write_json_atomic(&r, &record(6, Status::Pending)).unwrap();
        assert!(refresh(&m, &r, "J").unwrap());
        let doc: StatusMirror = read_json(&m).unwrap().unwrap();
        assert_eq!(
            (doc.transition_seq, doc.jobs["J"].status),
            (6, Status::Pending)
        );
    }

    /// Guards a mirror write lost on a full disk: the next refresh, for any
    /// job, brings every lagging entry up to its record.
    #[test]
    fn a_lost_mirror_write_is_repaired_by_the_next_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("status.json");
        let (a, b) = (dir.path().join("A.job.json"), dir.path().join("B.job.json"));
        let mut ra = record(1, Status::Pending);
        ra.job_id = "A".into();
        write_json_atomic(&a, &ra).unwrap();
        assert!(refresh(&m, &a, "A").unwrap());
        ra.transition_seq = 2;
        ra.status = Status::Running;
        write_json_atomic(&a, &ra).unwrap(); // its mirror write is "lost"
        let mut rb = record(3, Status::Pending);
        rb.job_id = "B".into();
        write_json_atomic(&b, &rb).unwrap();
        assert!(refresh(&m, &b, "B").unwrap());
        let doc: StatusMirror = read_json(&m).unwrap().unwrap();
        assert_eq!(doc.jobs["A"].status, Status::Running);
        assert_eq!(doc.transition_seq, 3);
    }
}
