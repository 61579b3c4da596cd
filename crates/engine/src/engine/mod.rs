//! Jobs and the transition engine: the only writer of a job's status (docs/state-transitions.md).
//!
//! # How a transition runs
//!
//! 1. The request is validated and its inputs fixed (time, a fresh attempt id)
//!    before any lock is taken.
//! 2. The critical section, under `jobs/registry.lock`: read the record and the
//!    seq counter, call [`table::decide`] (a pure `fn` pointer), and on accept
//!    note the new seq in the counter, rename the new record into place and
//!    append its audit entry, none of the three synced. Nothing else happens
//!    while the lock is held: no fsync, subprocess, socket, sleep or
//!    notification (two callers add one file each: [`Engine::transition_if`]
//!    reads the report a completion was decided on,
//!    [`Engine::with_record_locked`] writes a running job's report).
//! 3. After release: the audit log is synced, one `fdatasync` that writers
//!    syncing together share: the transition's one durable write, and only
//!    then is it acknowledged. Then the `status.json` mirror is brought
//!    forward (see [`mirror`]). ACKs and refusals are audited after release.
//!
//! The audit log is the journal: after a reboot, before anything reads a
//! record, the records a power cut lost or left behind are replayed from it
//! (the engine's `recover`). The record and the entry carry their seq and
//! are the durable counter; the counter file is noted first and trusted only
//! in the boot that wrote it, so a `kill -9` at any point leaves a gap in the
//! seq at most, never a seq used twice ([`seq`]; every point is tested, see
//! `crash`).
//!
//! Files under `<state>/jobs/`: `<job_id>.job.json` (one record per job),
//! `seq.hint`, `registry.lock`, `audit.jsonl`, `status.json`, `inflight.lock`.

pub mod audit;
mod crash;
mod error;
pub mod mirror;
pub mod record;
mod recover;
pub mod request;
pub mod seq;
pub mod table;

pub use audit::{AuditEntry, Outcome, replay};
pub use error::EngineError;
pub use mirror::StatusMirror;
pub use record::{JobRecord, Status};
pub use request::{Action, Actor, Authority, Lane, Request};
pub use table::{Decider, Decision, Inputs, Rule, decide};

use crate::statedir::{StateDir, StateDirBuf};
use crate::store::{LockGuard, Replaced, Staged, append_jsonl, read_json, read_jsonl};
use std::path::{Path, PathBuf};

/// What an accepted or acknowledged request left behind.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// A new transition was written with `record.transition_seq`.
    Accepted { record: JobRecord },
    /// The record already had this terminal: nothing was written.
    Ack { record: JobRecord },
}

impl Applied {
    /// The record after the request.
    pub fn record(&self) -> &JobRecord {
        match self {
            Applied::Accepted { record } | Applied::Ack { record } => record,
        }
    }
}

/// The jobs of one state dir.
#[derive(Debug, Clone)]
pub struct Engine {
    state: StateDirBuf,
    dir: PathBuf,
}

impl Engine {
    /// The engine for `<state_dir>/jobs/` (created if missing).
    pub fn open(state_dir: &StateDir) -> Result<Engine, EngineError> {
        let dir = state_dir.jobs_dir();
        crate::store::create_private_dir(&dir)?;
        let engine = Engine {
            state: state_dir.to_buf(),
            dir,
        };
        // The first in a boot brings the records up to the log before
        // anything reads them (see `recover`). Where it cannot (a corrupt
        // log or record, the lock's wait run out), reads still see the
        // records as they are, and every transition reports why, as it
        // makes the same attempt under the lock.
        if !seq::trusted(state_dir)
            && let Err(e) = engine.last_seq()
        {
            tracing::warn!(
                error = %e,
                "the job records could not be brought up to the audit log"
            );
        }
        Ok(engine)
    }

    /// The state dir whose jobs these are.
    pub fn state_dir(&self) -> &StateDir {
        &self.state
    }

    /// `<state>/jobs`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The record file of a job.
    pub fn record_path(&self, job_id: &str) -> PathBuf {
        self.state.job_record(job_id)
    }

    /// `jobs/audit.jsonl`.
    pub fn audit_path(&self) -> PathBuf {
        self.state.jobs_audit()
    }

    /// `jobs/status.json`.
    pub fn mirror_path(&self) -> PathBuf {
        self.state.jobs_status()
    }

    fn lock_path(&self) -> PathBuf {
        self.state.jobs_lock()
    }

    /// Make a request. `Ok` on accept or ACK; every refusal is
    /// `EngineError::Refused` and has been audited.
    pub fn transition(&self, req: &Request) -> Result<Applied, EngineError> {
        self.transition_if(req, None)
    }

    /// [`Engine::transition`], made only if `still` — evaluated under the
    /// lock, after everything else is read — holds: what the request was
    /// decided on (a lane's report) is what it is now. Otherwise
    /// [`EngineError::Changed`], with nothing written or audited. `still`
    /// only reads a file.
    pub fn transition_if(
        &self,
        req: &Request,
        still: Option<(&'static str, &dyn Fn() -> bool)>,
    ) -> Result<Applied, EngineError> {
        req.validate()?;
        // A corrupt audit log refuses the request before it commits anything
        // the log would then fail to record.
        crate::store::check_tail(&self.audit_path())?;
        let inputs = Inputs::now();
        // In flight from before the commit to the mirror step (see
        // `mirror::InFlight`).
        let in_flight = mirror::InFlight::enter(&self.state);
        // The record's temp file, made before the lock is taken.
        let staged = Staged::beside(&self.record_path(&req.job_id))?;
        let (before, decision, replaced) = self.critical(req, &inputs, decide, still, staged)?;
        crash::point("unlocked");
        // The record's old content, removed now that the lock is let go.
        drop(replaced);
        // The lock is released here; what follows may be slow without holding
        // anyone up.
        let from = before.as_ref().map(|r| r.status);
        match decision {
            Decision::Accept(record) => {
                let seq = record.transition_seq;
                let after = |what, source| EngineError::AfterCommit {
                    job_id: req.job_id.clone(),
                    seq,
                    attempt_id: record.attempt_id.clone(),
                    what,
                    source: Box::new(source),
                };
                // The one durable write: the audit entry the critical section
                // appended, with every entry before it (see `recover`). Nothing
                // is acknowledged before it.
                crate::store::sync_jsonl(&self.audit_path())
                    .map_err(|e| after("audit log's sync", e))?;
                crash::point("synced");
                in_flight
                    .finish(&req.job_id)
                    .map_err(|e| after("status mirror", e))?;
                Ok(Applied::Accepted { record })
            }
            Decision::Ack => {
                let mut entry = audit_entry(req, &inputs, from);
                entry.outcome = Outcome::Ack;
                entry.to = from;
                append_jsonl(&self.audit_path(), &entry, true)?;
                let record = before.ok_or_else(|| EngineError::NotFound {
                    job_id: req.job_id.clone(),
                    dir: self.dir.display().to_string(),
                })?;
                Ok(Applied::Ack { record })
            }
            Decision::Refuse { rule, reason } => {
                let mut entry = audit_entry(req, &inputs, from);
                entry.rule = Some(rule.as_str().into());
                entry.reason = Some(reason.clone());
                append_jsonl(&self.audit_path(), &entry, true)?;
                Err(EngineError::Refused {
                    request: req.action.name(),
                    job_id: req.job_id.clone(),
                    status: from.map_or("none", Status::as_str).into(),
                    rule: rule.as_str(),
                    reason,
                })
            }
        }
    }

    /// The critical section: read, decide with `decider`, and on accept
    /// write three things, none of them synced: the seq hint (see [`seq`]),
    /// the record (`staged`, a temp file made before the lock, written and
    /// exchanged into place; the old content it returns is removed by the
    /// caller after the lock) and the audit entry (one append). The audit
    /// log is the journal: the caller makes the entry
    /// durable after the lock is let go, in one `fdatasync` that writers
    /// syncing together share, and after a reboot the records are brought up
    /// to the log ([`recover`]). Appended under the lock, the accepted
    /// entries are in the log in seq order, so an entry synced is synced with
    /// every transition it was decided on. The decider is a `fn` pointer, so
    /// it can use only what it is handed: the record, the request, fixed
    /// inputs.
    fn critical(
        &self,
        req: &Request,
        inputs: &Inputs,
        decider: Decider,
        still: Option<(&'static str, &dyn Fn() -> bool)>,
        staged: Staged,
    ) -> Result<(Option<JobRecord>, Decision, Option<Replaced>), EngineError> {
        let _guard = LockGuard::exclusive_queued(&self.lock_path())?;
        crash::point("locked");
        if let Some((what, still)) = still
            && !still()
        {
            return Err(EngineError::Changed {
                job_id: req.job_id.clone(),
                what,
            });
        }
        let path = self.record_path(&req.job_id);
        let record = record::read_record(&path, &req.job_id)?;
        let hint = seq::Hint::open(&self.state)?;
        let last = hint.last(&self.state, || recover::recover(&self.state))?;
        let last = last.max(record.as_ref().map_or(0, |r| r.transition_seq));
        let next_seq = last.saturating_add(1);
        let decision = decider(record.as_ref(), req, inputs, next_seq);
        let mut replaced = None;
        if let Decision::Accept(new) = &decision {
            hint.write(next_seq)?;
            crash::point("seq written");
            replaced = Some(
                staged.replace_json_unsynced_steps(&path, new, &mut |step| crash::point(step))?,
            );
            let mut entry = audit_entry(req, inputs, record.as_ref().map(|r| r.status));
            entry.seq = Some(next_seq);
            entry.outcome = Outcome::Accepted;
            entry.to = Some(new.status);
            if matches!(req.action, Action::Claim { .. }) {
                entry.new_attempt_id = new.attempt_id.clone();
            }
            append_jsonl(&self.audit_path(), &entry, false).map_err(|e| {
                EngineError::AfterCommit {
                    job_id: req.job_id.clone(),
                    seq: next_seq,
                    attempt_id: new.attempt_id.clone(),
                    what: "audit append",
                    source: Box::new(e),
                }
            })?;
            crash::point("audited");
        }
        Ok((record, decision, replaced))
    }

    /// The last seq given out in this state dir (read under the lock; after
    /// a reboot or with the hint missing, the records are first brought up
    /// to the audit log and both read, see `recover`).
    pub fn last_seq(&self) -> Result<u64, EngineError> {
        let _guard = LockGuard::exclusive_queued(&self.lock_path())?;
        Ok(seq::last(&self.state, || recover::recover(&self.state))?)
    }

    /// Run `f` on a job's record under the lock every transition takes, so
    /// nothing `f` does can interleave with a transition of any job: a lane's
    /// report is written only while its job is still running, and once the
    /// job has left `running` it cannot be written any more (`f` keeps to
    /// one atomic file write: no subprocess, socket or sleep).
    pub fn with_record_locked<R>(
        &self,
        job_id: &str,
        f: impl FnOnce(Option<&JobRecord>) -> R,
    ) -> Result<R, EngineError> {
        record::validate_job_id(job_id)?;
        let _guard = LockGuard::exclusive_queued(&self.lock_path())?;
        let record = record::read_record(&self.record_path(job_id), job_id)?;
        Ok(f(record.as_ref()))
    }

    /// One job's record, or `NotFound`.
    pub fn show(&self, job_id: &str) -> Result<JobRecord, EngineError> {
        record::validate_job_id(job_id)?;
        record::read_record(&self.record_path(job_id), job_id)?.ok_or_else(|| {
            EngineError::NotFound {
                job_id: job_id.into(),
                dir: self.dir.display().to_string(),
            }
        })
    }

    /// Every job, sorted by id. A corrupt record is an error naming its file.
    pub fn list(&self) -> Result<Vec<JobRecord>, EngineError> {
        Ok(record::read_all(&self.dir)?)
    }

    /// The audit entries, in file order; only `job_id`'s when given.
    pub fn audit(&self, job_id: Option<&str>) -> Result<Vec<AuditEntry>, EngineError> {
        let all = read_jsonl::<AuditEntry>(&self.audit_path())?.records;
        Ok(match job_id {
            Some(j) => all.into_iter().filter(|e| e.job_id == j).collect(),
            None => all,
        })
    }

    /// The status mirror, if written yet.
    pub fn mirror(&self) -> Result<Option<StatusMirror>, EngineError> {
        Ok(read_json(&self.mirror_path())?)
    }

    /// Bring the mirror up to the records, `job_id`'s among them (e.g. after
    /// a crash between commit and mirror), waiting for another writer of it.
    /// Never moves it backwards.
    pub fn refresh_mirror(&self, job_id: &str) -> Result<bool, EngineError> {
        record::validate_job_id(job_id)?;
        Ok(mirror::refresh(
            &self.state,
            Some(job_id),
            mirror::Take::Wait,
        )?)
    }
}

/// The audit entry of `req` decided at `inputs` on a record in status
/// `from`, as a refusal; the caller sets what else its outcome needs.
fn audit_entry(req: &Request, inputs: &Inputs, from: Option<Status>) -> AuditEntry {
    AuditEntry {
        seq: None,
        at: record::format_time(inputs.at),
        job_id: req.job_id.clone(),
        outcome: Outcome::Refused,
        from,
        to: None,
        rule: None,
        reason: None,
        new_attempt_id: None,
        request: req.clone(),
        pid: std::process::id(),
    }
}

impl Inputs {
    /// Now (to the millisecond, as it will be stored) and a fresh uuid v4.
    pub fn now() -> Inputs {
        let s = crate::paths::now_rfc3339();
        let at = record::parse_time("now", &s).unwrap_or_else(|_| chrono::Utc::now());
        Inputs {
            at,
            new_attempt_id: uuid::Uuid::new_v4().to_string(),
        }
    }
}
