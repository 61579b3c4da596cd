use crate::store::StoreError;

/// Errors of the transition engine. A refusal is an error so that `?` can never
/// turn a refused write into success.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The table said no. `status` is the record's status (`none` when it does not exist).
    #[error("refused {request} on job {job_id}: status {status}, rule {rule}: {reason}")]
    Refused {
        request: &'static str,
        job_id: String,
        status: String,
        rule: &'static str,
        reason: String,
    },
    /// An argument is malformed (a usage error); names the field.
    #[error("invalid {field} {value:?}: {reason}")]
    Invalid {
        field: &'static str,
        value: String,
        reason: String,
    },
    /// A request name the table does not know.
    #[error(
        "unknown request {name:?}: the table knows create, claim, started, progress, complete, fail, cancel, timeout, redispatch, finalize"
    )]
    UnknownRequest { name: String },
    /// A read named a job that does not exist.
    #[error("no job {job_id} in {dir}; `drover job ls` lists the jobs")]
    NotFound { job_id: String, dir: String },
    /// A conditional transition found what it was decided on changed (a
    /// lane's report rewritten meanwhile): nothing was written or audited.
    #[error("job {job_id}: {what} changed since it was checked; nothing was written")]
    Changed { job_id: String, what: &'static str },
    /// The state store failed (I/O or a corrupt file, which is never reset).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The transition was committed (record and seq are durable) but its audit
    /// entry or mirror update failed afterwards. Says what was committed, so a
    /// caller learns the seq and the attempt of its claim despite the error.
    #[error(
        "job {job_id}: transition seq {seq}{} is committed, but the {what} failed: {source}; the record is the truth (`drover job show {job_id}`) and the next transition repairs the mirror",
        attempt_id.as_ref().map(|a| format!(" (attempt {a})")).unwrap_or_default()
    )]
    AfterCommit {
        job_id: String,
        seq: u64,
        attempt_id: Option<String>,
        what: &'static str,
        #[source]
        source: Box<StoreError>,
    },
}

impl EngineError {
    pub(crate) fn invalid(field: &'static str, value: &str, reason: impl Into<String>) -> Self {
        EngineError::Invalid {
            field,
            value: value.chars().take(80).collect(),
            reason: reason.into(),
        }
    }
}
