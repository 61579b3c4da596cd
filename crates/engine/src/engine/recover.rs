//! After a reboot: the records brought up to the audit log.
//!
//! A transition's one durable write is its audit entry. Under
//! `registry.lock` the record is renamed into place without an fsync and the
//! entry appended after it, and only the entry is synced, after the lock is
//! let go, before the transition is acknowledged (`Engine::critical`). A
//! `kill -9` loses nothing of this: the page cache outlives the process. A
//! power cut can lose any record written since the kernel last wrote it back,
//! or leave it empty, while every acknowledged entry stands in the log with
//! every entry before it. So the first holder of the lock in a boot (the seq
//! hint says which boot it was written in, see [`super::seq`]) reads the log,
//! and for every job whose record is missing, does not parse or is behind the
//! job's last accepted entry, replays the job's entries through the table
//! ([`super::replay`], which the race tests hold to reproduce every record
//! exactly) and writes the record that gives, durably. A record that does not
//! parse is kept beside as `<name>.corrupt-<unix ms>`.
//!
//! A record ahead of the log (written back, its entry not: never
//! acknowledged) is kept, as a transition committed but unaudited always was.
//! A job whose entries do not replay (a gap in its history, left in a state
//! dir from before by a writer killed between its record and its entry) is
//! left as it is and named in a warning; a record of it that does not parse
//! stays an error, as everywhere.

use super::audit::{AuditEntry, Outcome, replay};
use super::record::{read_all, read_record, validate_job_id};
use crate::statedir::StateDir;
use crate::store::{StoreError, keep_aside, read_jsonl, write_json_atomic};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The fields of an entry the first pass needs: a long log is read whole
/// only when a record must be restored from it.
#[derive(Deserialize)]
struct Head {
    seq: Option<u64>,
    job_id: String,
    outcome: Outcome,
}

/// Bring every record up to the log (call under `registry.lock`). Returns the
/// last seq given out: the highest of every record and every entry, so no seq
/// the log holds is given out again where its record was lost.
pub(super) fn recover(state: &StateDir) -> Result<u64, StoreError> {
    let log = state.jobs_audit();
    let mut logged = 0;
    let mut last_of: BTreeMap<String, u64> = BTreeMap::new();
    for h in read_jsonl::<Head>(&log)?.records {
        let Some(seq) = h.seq else { continue };
        logged = logged.max(seq);
        if h.outcome == Outcome::Accepted {
            let last = last_of.entry(h.job_id).or_default();
            *last = (*last).max(seq);
        }
    }
    // The jobs whose record is missing, corrupt or behind: (last seq, corrupt).
    let mut lost: BTreeMap<String, (u64, bool)> = BTreeMap::new();
    for (job_id, last) in last_of {
        if validate_job_id(&job_id).is_err() {
            continue;
        }
        let corrupt = match read_record(&state.job_record(&job_id), &job_id) {
            Ok(Some(r)) if r.transition_seq >= last => continue,
            Ok(_) => false,
            Err(StoreError::Corrupt { .. }) => true,
            Err(e) => return Err(e),
        };
        lost.insert(job_id, (last, corrupt));
    }
    if !lost.is_empty() {
        let mut entries: BTreeMap<String, Vec<AuditEntry>> = BTreeMap::new();
        for e in read_jsonl::<AuditEntry>(&log)?.records {
            if e.outcome == Outcome::Accepted && e.seq.is_some() && lost.contains_key(&e.job_id) {
                entries.entry(e.job_id.clone()).or_default().push(e);
            }
        }
        for (job_id, (last, corrupt)) in &lost {
            let of_job = entries.get(job_id).map_or(&[][..], Vec::as_slice);
            restore(&state.job_record(job_id), job_id, of_job, *last, *corrupt)?;
        }
    }
    let recorded = read_all(&state.jobs_dir())?
        .iter()
        .map(|r| r.transition_seq)
        .max()
        .unwrap_or(0);
    Ok(recorded.max(logged))
}

/// Write `job_id`'s record as its entries replay to, if they replay to its
/// last seq; otherwise leave it and warn.
fn restore(
    path: &Path,
    job_id: &str,
    entries: &[AuditEntry],
    last: u64,
    corrupt: bool,
) -> Result<(), StoreError> {
    let replayed = match replay(entries) {
        Ok(mut jobs) => jobs.remove(job_id),
        Err(m) => {
            tracing::warn!(
                job_id,
                seq = m.seq,
                what = %m.what,
                "the audit log cannot restore this job's record: its entries do not replay"
            );
            return Ok(());
        }
    };
    let Some(record) = replayed.filter(|r| r.transition_seq == last) else {
        tracing::warn!(
            job_id,
            seq = last,
            "the audit log's replay misses this job's last seq"
        );
        return Ok(());
    };
    if corrupt {
        let aside = keep_aside(path)?;
        tracing::warn!(kept = %aside.display(), job_id, "a job record did not parse");
    }
    write_json_atomic(path, &record)?;
    tracing::warn!(
        job_id,
        seq = last,
        "job record restored from the audit log (lost or behind after a reboot)"
    );
    Ok(())
}
