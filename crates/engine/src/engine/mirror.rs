//! `jobs/status.json`: a mirror of every job's status for cheap readers.
//!
//! Derived from the records and written after the jobs lock is released, by
//! one process at a time under `status.json.lock`. Writers do not queue for
//! that lock: a transition's writer that finds it taken leaves its update to
//! the holder, so a burst of transitions costs one mirror write, not one each.
//!
//! Nothing is lost that way because of one order. An accepted transition's
//! audit entry is appended after its record is renamed into place, and its
//! writer tries the mirror lock only after that. The mirror remembers how far
//! into the audit log it has taken every accepted entry (`audit_offset`); a
//! pass takes the entries past it, reading each named job's record as it is
//! on disk then; and a holder, once it lets the lock go, looks at the log's
//! length again and, if it grew since its pass read it, tries the lock again.
//! A writer W that found the lock taken appended before it tried, and the
//! holder H looked again after it let go, so either H's pass read W's entry
//! or H sees the log grown: H passes again, or whoever took the lock after H
//! let it go reads W's entry in its own pass (and looks again after, in turn).
//!
//! A job's entry is replaced only by a record with a higher
//! `transition_seq`, taken from the record on disk, so the mirror never moves
//! backwards. Seqs the pass cannot account for (an audit append that failed
//! on a full disk, a writer killed between its rename and its append) make
//! it take every record in the directory instead.
//!
//! The mirror may trail a transition just acknowledged, by the holder's
//! pass; once the writers are done it holds every record's status.

use super::record::{JobRecord, Status};
use crate::statedir::StateDir;
use crate::store::{LockGuard, StoreError, lock_path_for, read_json};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The mirror document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusMirror {
    /// The highest `transition_seq` mirrored so far; never goes backwards.
    pub transition_seq: u64,
    /// How far into `audit.jsonl` (bytes) every accepted entry is mirrored;
    /// absent in a mirror written before drover kept it (the next pass then
    /// takes every record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_offset: Option<u64>,
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

/// How a refresh takes the mirror's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Only if nobody holds it; otherwise the holder takes this update (a
    /// transition's writer, whose audit entry is already appended).
    IfFree,
    /// Wait for it, within the store's bounded lock wait (a refresh on demand).
    Wait,
}

/// How far the audit offset moves before it is written on its own.
const OFFSET_ALONE: u64 = 64 << 10;

/// A writer that is not the last in flight still writes the mirror when it
/// is older than this: under a steady stream of transitions somebody is
/// always in flight, and the mirror should not wait for the stream to end.
const MAX_LAG: std::time::Duration = std::time::Duration::from_millis(100);

/// A transition on its way from its commit to its mirror step, registered
/// as a shared flock on `jobs/inflight.lock` from before its critical
/// section. At its mirror step it lets that go and tries the lock
/// exclusively, at once: when that fails, another writer is in flight, will
/// reach its own mirror step after this one's audit entry is appended, and
/// takes it in its pass; so only the last writer of a burst writes the
/// mirror (or one that finds it older than `MAX_LAG`, 100 ms). A request that
/// ends without a mirror step (refused, acknowledged, failed) leaves the
/// same way when dropped, so an update left to it is not stranded. A writer
/// killed in flight holds nothing (its flock goes with it); what it was
/// left, the next transition takes. Registering never fails a transition:
/// a writer that cannot is unregistered and writes the mirror itself.
#[derive(Debug)]
pub struct InFlight {
    state: crate::statedir::StateDirBuf,
    file: Option<std::fs::File>,
}

impl InFlight {
    /// Register this writer (see the type).
    pub fn enter(state: &StateDir) -> InFlight {
        let file = crate::store::open_private(
            &state.jobs_in_flight(),
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
        .ok()
        .filter(|f| f.try_lock_shared().is_ok());
        InFlight {
            state: state.to_buf(),
            file,
        }
    }

    /// Leave; whether this writer is to bring the mirror forward.
    fn leave(&mut self) -> bool {
        let Some(f) = self.file.take() else {
            return true;
        };
        let _ = f.unlock();
        match f.try_lock() {
            Ok(()) => true,
            Err(_) => older_than(&self.state.jobs_status(), MAX_LAG),
        }
    }

    /// An accepted transition's mirror step, after its audit entry is
    /// appended. Returns whether this call wrote the mirror.
    pub fn finish(mut self, job_id: &str) -> Result<bool, StoreError> {
        if self.leave() {
            refresh(&self.state, Some(job_id), Take::IfFree)
        } else {
            Ok(false)
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.file.is_some()
            && self.leave()
            && let Err(e) = refresh(&self.state, None, Take::IfFree)
        {
            tracing::warn!(error = %e, "status mirror: the pass left to this request failed");
        }
    }
}

/// Whether `path` was last written longer than `age` ago (or is missing).
fn older_than(path: &Path, age: std::time::Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|e| e >= age)
}

/// More of the audit log than this past the mirror's offset is not read
/// entry by entry: the pass takes every record instead.
const MAX_RANGE: u64 = 1 << 20;

/// Bring the mirror up to the records: every accepted audit entry past its
/// offset, and `job_id`'s record when given. Returns whether this call wrote
/// the mirror (false also when it left the update to another holder).
pub fn refresh(state: &StateDir, job_id: Option<&str>, take: Take) -> Result<bool, StoreError> {
    let path = state.jobs_status();
    let audit = state.jobs_audit();
    let lock = lock_path_for(&path);
    let (mut own, mut take, mut wrote) = (job_id, take, false);
    loop {
        let guard = match take {
            Take::Wait => LockGuard::exclusive(&lock)?,
            Take::IfFree => match LockGuard::try_exclusive(&lock)? {
                Some(g) => g,
                None => return Ok(wrote),
            },
        };
        let mut doc = read_mirror(&path)?;
        let (changed, read_to) = pass(state, &audit, &mut doc, own)?;
        #[cfg(test)]
        tests::while_held();
        if changed {
            crate::store::replace_json_unsynced_steps(&path, &doc, &mut |step| {
                super::crash::point(step)
            })?;
            wrote = true;
        }
        drop(guard);
        // Looked at after the lock is let go: see the module's doc.
        if audit_len(&audit)? <= read_to {
            return Ok(wrote);
        }
        (own, take) = (None, Take::IfFree);
    }
}

/// The mirror as it is, or a fresh one to fill from the records when there
/// is none or it does not parse (it is not fsynced: a power cut can leave it
/// empty). A mirror that does not parse is kept beside as
/// `status.json.corrupt-<unix ms>` and the warning names it.
fn read_mirror(path: &Path) -> Result<StatusMirror, StoreError> {
    match read_json(path) {
        Ok(doc) => Ok(doc.unwrap_or_default()),
        Err(StoreError::Corrupt { message, .. }) => {
            let aside = crate::store::keep_aside(path)?;
            tracing::warn!(
                kept = %aside.display(),
                error = %message,
                "the status mirror did not parse; it is rebuilt from the records"
            );
            Ok(StatusMirror::default())
        }
        Err(e) => Err(e),
    }
}

/// One pass under the lock. Returns whether `doc` changed and the audit
/// log's length the pass read it at.
fn pass(
    state: &StateDir,
    audit: &Path,
    doc: &mut StatusMirror,
    mut own: Option<&str>,
) -> Result<(bool, u64), StoreError> {
    let before = doc.transition_seq;
    let range = read_range(audit, doc.audit_offset)?;
    let mut changed = false;
    // The seqs above `before` this pass accounts for.
    let mut seen = BTreeSet::new();
    let mut whole = range.entries.is_none();
    for job in range.entries.iter().flatten() {
        let got = read(state, job);
        // Read once: the writer's own job is mostly among the entries.
        if got.is_ok() && own == Some(job.as_str()) {
            own = None;
        }
        match got {
            Ok(Some(rec)) => {
                if rec.transition_seq > before {
                    seen.insert(rec.transition_seq);
                }
                changed |= forward(doc, &rec);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "status mirror: a record was left out");
            }
        }
    }
    seen.extend(range.seqs.iter().filter(|s| **s > before));
    if let Some(job) = own
        && let Some(rec) = read(state, job)?
    {
        if rec.transition_seq > before {
            seen.insert(rec.transition_seq);
        }
        changed |= forward(doc, &rec);
    }
    // A seq between the mirror's and the highest now that nothing here
    // accounts for: its entry is missing from the log or still on its way.
    whole |= (seen.len() as u64) < doc.transition_seq - before;
    if whole {
        changed |= repair(doc, &state.jobs_dir());
    }
    // The offset alone (refusals and ACKs read) is written only once it has
    // moved far: rereading a few lines next time costs less than a write.
    let moved = range.next.abs_diff(doc.audit_offset.unwrap_or(u64::MAX));
    if changed || moved >= OFFSET_ALONE {
        changed |= doc.audit_offset != Some(range.next);
        doc.audit_offset = Some(range.next);
    }
    Ok((changed, range.len))
}

/// A job's record on disk; a job id that is not a valid one is nobody's.
fn read(state: &StateDir, job_id: &str) -> Result<Option<JobRecord>, StoreError> {
    if super::record::validate_job_id(job_id).is_err() {
        return Ok(None);
    }
    super::record::read_record(&state.job_record(job_id), job_id)
}

/// What the audit log holds past the mirror's offset.
struct Range {
    /// The jobs of the accepted entries, each once; `None` when the range
    /// was not read entry by entry (no offset yet, a log shorter than the
    /// offset, or more than [`MAX_RANGE`]).
    entries: Option<BTreeSet<String>>,
    /// The accepted entries' seqs.
    seqs: Vec<u64>,
    /// Where the next pass starts: the end of the last whole line read.
    next: u64,
    /// The log's length when read.
    len: u64,
}

/// The part of one audit line a pass needs.
#[derive(Deserialize)]
struct Line {
    job_id: String,
    seq: Option<u64>,
}

fn audit_len(audit: &Path) -> Result<u64, StoreError> {
    match std::fs::metadata(audit) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StoreError::io("stat", audit, e)),
    }
}

fn read_range(audit: &Path, from: Option<u64>) -> Result<Range, StoreError> {
    use std::os::unix::fs::FileExt;
    let file = match std::fs::File::open(audit) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Range {
                entries: from.filter(|o| *o == 0).map(|_| BTreeSet::new()),
                seqs: Vec::new(),
                next: 0,
                len: 0,
            });
        }
        Err(e) => return Err(StoreError::io("open", audit, e)),
    };
    let len = file
        .metadata()
        .map_err(|e| StoreError::io("stat", audit, e))?
        .len();
    let read = |from: u64| -> Result<Vec<u8>, StoreError> {
        let mut buf = vec![0u8; (len - from) as usize];
        let mut got = 0;
        while got < buf.len() {
            match file.read_at(&mut buf[got..], from + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StoreError::io("read", audit, e)),
            }
        }
        buf.truncate(got);
        Ok(buf)
    };
    // Only whole lines: a line being appended right now is read next time.
    let whole_lines = |buf: &[u8]| buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let Some(from) = from.filter(|o| *o <= len && len - *o <= MAX_RANGE) else {
        // Every record is taken instead; the next pass starts after the last
        // whole line (or at the end, when none is in the last 64 KiB).
        let tail = len.saturating_sub(64 << 10);
        let buf = read(tail)?;
        let next = match whole_lines(&buf) {
            0 if tail > 0 => len,
            n => tail + n as u64,
        };
        return Ok(Range {
            entries: None,
            seqs: Vec::new(),
            next,
            len,
        });
    };
    let buf = read(from)?;
    let whole_lines = whole_lines(&buf);
    let (mut entries, mut seqs) = (BTreeSet::new(), Vec::new());
    for line in buf[..whole_lines].split(|b| *b == b'\n') {
        // A torn line a killed writer left is not an entry.
        let Ok(Line {
            job_id,
            seq: Some(seq),
        }) = serde_json::from_slice::<Line>(line)
        else {
            continue;
        };
        entries.insert(job_id);
        seqs.push(seq);
    }
    Ok(Range {
        entries: Some(entries),
        seqs,
        next: from + whole_lines as u64,
        len,
    })
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

    struct Dir {
        _tmp: tempfile::TempDir,
        state: crate::statedir::StateDirBuf,
    }

    impl Dir {
        fn new() -> Dir {
            let tmp = tempfile::tempdir().unwrap();
            let state = crate::statedir::StateDirBuf::new(tmp.path());
            std::fs::create_dir_all(state.jobs_dir()).unwrap();
            Dir { _tmp: tmp, state }
        }

        fn write(&self, job: &str, seq: u64, status: Status) {
            let mut r = record(seq, status);
            r.job_id = job.into();
            write_json_atomic(&self.state.job_record(job), &r).unwrap();
        }

        /// A transition up to its mirror step: the record, then its entry.
        fn committed(&self, job: &str, seq: u64, status: Status) {
            self.write(job, seq, status);
            self.audit(job, seq);
        }

        /// What a transition's writer appends after its rename.
        fn audit(&self, job: &str, seq: u64) {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.state.jobs_audit())
                .unwrap();
            writeln!(
                f,
                r#"{{"seq":{seq},"job_id":"{job}","outcome":"accepted"}}"#
            )
            .unwrap();
        }

        fn refresh(&self, job: Option<&str>, take: Take) -> bool {
            refresh(&self.state, job, take).unwrap()
        }

        fn mirror(&self) -> StatusMirror {
            read_json(&self.state.jobs_status()).unwrap().unwrap()
        }
    }

    /// A slow writer that reaches the mirror after a newer one must not move it back.
    #[test]
    fn a_late_older_record_never_moves_the_mirror_back() {
        let d = Dir::new();
        d.write("J", 5, Status::Completed);
        assert!(d.refresh(Some("J"), Take::Wait));
        d.write("J", 3, Status::Running);
        assert!(!d.refresh(Some("J"), Take::Wait), "skipped");
        let doc = d.mirror();
        assert_eq!(doc.transition_seq, 5);
        assert_eq!(doc.jobs["J"].status, Status::Completed);
        d.write("J", 6, Status::Pending);
        assert!(d.refresh(Some("J"), Take::IfFree));
        let doc = d.mirror();
        assert_eq!(
            (doc.transition_seq, doc.jobs["J"].status),
            (6, Status::Pending)
        );
    }

    /// Guards a mirror write lost on a full disk: the next refresh, for any
    /// job, brings every lagging entry up to its record.
    #[test]
    fn a_lost_mirror_write_is_repaired_by_the_next_refresh() {
        let d = Dir::new();
        d.write("A", 1, Status::Pending);
        assert!(d.refresh(Some("A"), Take::IfFree));
        d.write("A", 2, Status::Running); // neither audited nor mirrored
        d.write("B", 3, Status::Pending);
        assert!(d.refresh(Some("B"), Take::IfFree));
        let doc = d.mirror();
        assert_eq!(doc.jobs["A"].status, Status::Running);
        assert_eq!(doc.transition_seq, 3);
    }

    /// A writer that finds the lock taken leaves its update to the holder:
    /// the holder's next pass takes it from the audit log alone.
    #[test]
    fn an_update_left_to_the_holder_is_taken_from_the_audit_log() {
        let d = Dir::new();
        d.committed("A", 1, Status::Pending);
        assert!(d.refresh(Some("A"), Take::IfFree));
        assert_eq!(
            d.mirror().audit_offset,
            Some(std::fs::metadata(d.state.jobs_audit()).unwrap().len())
        );
        let held = LockGuard::exclusive(&lock_path_for(&d.state.jobs_status())).unwrap();
        d.committed("B", 2, Status::Running);
        assert!(!d.refresh(Some("B"), Take::IfFree), "left to the holder");
        assert!(!d.mirror().jobs.contains_key("B"));
        drop(held);
        // The holder's pass names no job of its own.
        assert!(d.refresh(None, Take::IfFree));
        let doc = d.mirror();
        assert_eq!(doc.jobs["B"].status, Status::Running);
        assert_eq!(doc.transition_seq, 2);
    }

    thread_local! {
        static WHILE_HELD: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
            std::cell::RefCell::new(None);
    }

    /// Run the hook a test set, once, while a refresh holds the lock.
    pub(super) fn while_held() {
        if let Some(f) = WHILE_HELD.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    /// Guards the holder's second look: an entry appended while it held the
    /// lock, by a writer that found the lock taken and left, is mirrored by
    /// the time the holder returns.
    #[test]
    fn the_holder_takes_what_was_left_to_it_while_it_held_the_lock() {
        let d = std::rc::Rc::new(Dir::new());
        d.committed("A", 1, Status::Pending);
        let other = d.clone();
        WHILE_HELD.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                other.committed("B", 2, Status::Running);
                assert!(!other.refresh(Some("B"), Take::IfFree), "the lock is held");
            }))
        });
        assert!(d.refresh(Some("A"), Take::IfFree));
        let doc = d.mirror();
        assert_eq!(doc.jobs["B"].status, Status::Running, "{doc:?}");
        assert_eq!(doc.transition_seq, 2);
    }

    /// Guards the in-flight hand-over: a writer that is not the last in
    /// flight leaves its entry to the last one, and a request that ends
    /// without a mirror step (refused) still takes what was left to it.
    #[test]
    fn only_the_last_writer_in_flight_writes_and_a_refused_one_still_does() {
        let d = Dir::new();
        d.committed("A", 1, Status::Pending);
        assert!(d.refresh(Some("A"), Take::Wait));
        let refused = InFlight::enter(&d.state);
        let accepted = InFlight::enter(&d.state);
        d.committed("B", 2, Status::Running);
        assert!(!accepted.finish("B").unwrap(), "another is in flight");
        assert!(!d.mirror().jobs.contains_key("B"));
        drop(refused);
        assert_eq!(
            d.mirror().jobs["B"].status,
            Status::Running,
            "taken by the last"
        );
    }

    /// Under a steady stream somebody is always in flight: a mirror older
    /// than MAX_LAG is written anyway.
    #[test]
    fn a_mirror_older_than_the_lag_is_written_by_any_writer() {
        let d = Dir::new();
        d.committed("A", 1, Status::Pending);
        assert!(d.refresh(Some("A"), Take::Wait));
        let old = std::time::SystemTime::now() - 2 * MAX_LAG;
        std::fs::File::options()
            .write(true)
            .open(d.state.jobs_status())
            .unwrap()
            .set_modified(old)
            .unwrap();
        let other = InFlight::enter(&d.state);
        let accepted = InFlight::enter(&d.state);
        d.committed("B", 2, Status::Running);
        assert!(accepted.finish("B").unwrap(), "the mirror was stale");
        assert_eq!(d.mirror().jobs["B"].status, Status::Running);
        drop(other);
    }

    /// A mirror that does not parse (it is not fsynced: a power cut can
    /// leave it empty) is kept beside, and the mirror is rebuilt from the
    /// records rather than every transition failing on it.
    #[test]
    fn a_mirror_that_does_not_parse_is_kept_beside_and_rebuilt() {
        let d = Dir::new();
        d.committed("A", 4, Status::Running);
        std::fs::write(d.state.jobs_status(), b"{\"transition_seq\": 3, \"jo").unwrap();
        assert!(d.refresh(Some("A"), Take::IfFree));
        assert_eq!(d.mirror().jobs["A"].transition_seq, 4);
        let kept: Vec<_> = std::fs::read_dir(d.state.jobs_dir())
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("status.json.corrupt-")
            })
            .map(|e| std::fs::read(e.path()).unwrap())
            .collect();
        assert_eq!(
            kept,
            vec![b"{\"transition_seq\": 3, \"jo".to_vec()],
            "kept as it was"
        );
    }

    /// A line still being appended (or torn by a killed writer) is not an
    /// entry, and the offset stops before it.
    #[test]
    fn the_offset_stops_at_the_last_whole_line() {
        let d = Dir::new();
        d.committed("A", 1, Status::Pending);
        let whole = std::fs::metadata(d.state.jobs_audit()).unwrap().len();
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(d.state.jobs_audit())
                .unwrap();
            f.write_all(br#"{"seq":2,"job_"#).unwrap();
        }
        assert!(d.refresh(None, Take::Wait));
        assert_eq!(d.mirror().audit_offset, Some(whole));
        let r = read_range(&d.state.jobs_audit(), Some(whole)).unwrap();
        assert_eq!(r.entries, Some(BTreeSet::new()));
        assert_eq!(r.next, whole);
        // More than MAX_RANGE past the offset, or an offset past the end:
        // every record is taken instead.
        assert!(
            read_range(&d.state.jobs_audit(), Some(whole + 1_000))
                .unwrap()
                .entries
                .is_none()
        );
        assert!(
            read_range(&d.state.jobs_audit(), None)
                .unwrap()
                .entries
                .is_none()
        );
    }
}
