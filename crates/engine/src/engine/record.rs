//! The job record (docs/state-transitions.md) and the validation of the names that go into it.

use super::EngineError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A job's status. Only the request that owns a status can set it (see `table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

impl Status {
    /// Every status, in table order.
    pub const ALL: [Status; 6] = [
        Status::Pending,
        Status::Running,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
        Status::TimedOut,
    ];

    /// True for `completed`, `failed`, `cancelled`, `timed_out`.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Pending | Status::Running)
    }

    /// The name used on disk and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::TimedOut => "timed_out",
        }
    }

    /// Parse a status name; an unknown one is a usage error naming `field`.
    pub fn parse(field: &'static str, s: &str) -> Result<Status, EngineError> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                EngineError::invalid(
                    field,
                    s,
                    "expected pending, running, completed, failed, cancelled or timed_out",
                )
            })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job, as stored in `<state>/jobs/<job_id>.job.json`.
///
/// The fields of docs/state-transitions.md, plus `lane_id` (the lane that claimed the current
/// attempt, which is how an agent inside a lane is confined to its own job) and
/// `reason` (why a terminal was reached, e.g. `exhausted`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: String,
    pub status: Status,
    pub iteration: u64,
    pub attempt_id: Option<String>,
    pub session_id: Option<String>,
    pub deadline: Option<String>,
    pub metadata: Map<String, Value>,
    #[serde(with = "crate::time::millis")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "crate::time::millis")]
    pub updated_at: DateTime<Utc>,
    pub transition_seq: u64,
    #[serde(default)]
    pub lane_id: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

const MAX_NAME: usize = 128;
const MAX_TEXT: usize = 4096;

/// A job id becomes a file name: 1–128 of `[A-Za-z0-9._-]`, starting with a
/// letter or digit (so never `.`, `..` or a hidden temp file).
pub fn validate_job_id(id: &str) -> Result<(), EngineError> {
    let first_ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok {
        return Err(EngineError::invalid(
            "job id",
            id,
            "must start with a letter or digit",
        ));
    }
    if id.len() > MAX_NAME {
        return Err(EngineError::invalid("job id", id, "longer than 128 bytes"));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(EngineError::invalid(
            "job id",
            id,
            format!("character {c:?} not allowed; use letters, digits, '.', '_', '-'"),
        ));
    }
    Ok(())
}

/// Session, lane and attempt ids: 1–128 printable ASCII characters without spaces.
pub fn validate_name(field: &'static str, v: &str) -> Result<(), EngineError> {
    if v.is_empty() || v.len() > MAX_NAME {
        return Err(EngineError::invalid(field, v, "must be 1 to 128 bytes"));
    }
    if !v.chars().all(|c| c.is_ascii_graphic()) {
        return Err(EngineError::invalid(
            field,
            v,
            "only printable ASCII without spaces",
        ));
    }
    Ok(())
}

/// Free text (reasons): one line, at most 4096 bytes.
pub fn validate_text(field: &'static str, v: &str) -> Result<(), EngineError> {
    if v.len() > MAX_TEXT {
        return Err(EngineError::invalid(field, v, "longer than 4096 bytes"));
    }
    if v.chars().any(char::is_control) {
        return Err(EngineError::invalid(
            field,
            v,
            "control characters (newlines included) are not allowed",
        ));
    }
    Ok(())
}

/// Parse an RFC 3339 time into UTC.
pub fn parse_time(
    field: &'static str,
    v: &str,
) -> Result<chrono::DateTime<chrono::Utc>, EngineError> {
    chrono::DateTime::parse_from_rfc3339(v)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| {
            EngineError::invalid(
                field,
                v,
                format!("not RFC 3339 ({e}), e.g. 2026-11-30T01:00:00Z"),
            )
        })
}

/// Format a time as drover does everywhere: RFC 3339, UTC, milliseconds.
pub fn format_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Read the record file of `job_id`; `None` when it does not exist. A record
/// whose `job_id` is not the one its file is named after (a copied file) is
/// corrupt: using it would show or overwrite the wrong job.
pub fn read_record(
    path: &std::path::Path,
    job_id: &str,
) -> Result<Option<JobRecord>, crate::store::StoreError> {
    let Some(rec) = crate::store::read_json::<JobRecord>(path)? else {
        return Ok(None);
    };
    if rec.job_id != job_id {
        return Err(crate::store::StoreError::Corrupt {
            path: path.to_path_buf(),
            line: None,
            message: format!(
                "it holds job_id {:?} but is named for {job_id:?}",
                rec.job_id.chars().take(80).collect::<String>()
            ),
        });
    }
    Ok(Some(rec))
}

/// The suffix of a record file: `<job_id>.job.json`.
pub use crate::statedir::JOB_SUFFIX as RECORD_SUFFIX;

/// Every record in a jobs dir, sorted by id. A corrupt record is an error
/// naming its file.
pub fn read_all(dir: &std::path::Path) -> Result<Vec<JobRecord>, crate::store::StoreError> {
    use crate::store::StoreError;
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read dir", dir, e)),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| StoreError::io("read dir", dir, e))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(job_id) = name.strip_suffix(RECORD_SUFFIX) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        if let Some(r) = read_record(&ent.path(), job_id)? {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    Ok(out)
}

#[cfg(test)]
mod time_tests {
    use super::JobRecord;

    /// A job file as drover has always written it (times with milliseconds
    /// and a `Z`) reads into typed times and is written back byte for byte.
    #[test]
    fn a_job_file_of_todays_form_round_trips_byte_for_byte() {
        let file = r#"{
  "job_id": "J-1",
  "status": "running",
  "iteration": 1,
  "attempt_id": "A1",
  "session_id": "implementer",
  "deadline": null,
  "metadata": {},
  "created_at": "2026-12-05T10:00:00.000Z",
  "updated_at": "2026-12-05T10:00:01.250Z",
  "transition_seq": 3,
  "lane_id": null,
  "reason": null
}"#;
        let r: JobRecord = serde_json::from_str(file).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.updated_at > r.created_at);
        assert_eq!(serde_json::to_string_pretty(&r).unwrap_or_default(), file);
    }
}
