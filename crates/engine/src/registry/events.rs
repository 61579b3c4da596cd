//! `events.jsonl`: the append-only, privacy-safe operational log (docs/registry.md).
//!
//! Every record has `seq` (1, 2, 3… with no gaps or repeats across processes),
//! `at` (RFC 3339 UTC) and `kind`; the rest are the caller's fields, scrubbed by
//! [`Redactor`] before they are written. [`emit`] is
//! the only writer: it takes a sequence lock, reads the last record's `seq`
//! from the file's tail, and appends one line through the store.

use super::RegistryError;
use super::redact::{Finding, Redactor};
use crate::statedir::StateDir;
use crate::store::{self, LockGuard};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often `drover events --follow` looks for growth.
pub const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// Fields a caller cannot set.
const RESERVED: &[&str] = &["seq", "at", "kind"];
/// Longest accepted `kind`.
const MAX_KIND_LEN: usize = 64;

/// One event as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub at: String,
    pub kind: String,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

fn seq_lock_path(log: &Path) -> PathBuf {
    let mut s = log.as_os_str().to_owned();
    s.push(".seq.lock");
    PathBuf::from(s)
}

/// The redactor for this state dir: paths under the state dir and the lease
/// worktrees may stay, every other absolute path goes.
pub fn redactor(state_dir: &StateDir) -> Redactor {
    let mut roots = vec![state_dir.to_path_buf()];
    if let Ok(canon) = std::fs::canonicalize(state_dir) {
        roots.push(canon);
    }
    // A lease file we cannot read only means fewer allowed roots: more is redacted.
    if let Ok(Some(doc)) = super::lease::load(state_dir) {
        roots.extend(
            doc.leases
                .into_iter()
                .filter_map(|l| l.worktree)
                .map(PathBuf::from),
        );
    }
    Redactor::new(roots)
}

/// Append an event; returns its `seq`. `fields` must be an object or null; it
/// is redacted before it is written.
pub fn emit(state_dir: &StateDir, kind: &str, fields: Value) -> Result<u64, RegistryError> {
    if kind.is_empty()
        || kind.len() > MAX_KIND_LEN
        || !kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
    {
        return Err(RegistryError::usage(
            "kind",
            format!("{kind:?} must be 1-{MAX_KIND_LEN} of [a-z0-9._-]"),
        ));
    }
    let mut fields = match fields {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        _ => return Err(RegistryError::usage("fields", "must be a JSON object")),
    };
    for k in RESERVED {
        fields.remove(*k);
    }
    let mut fields = Value::Object(fields);
    redactor(state_dir).redact_value(&mut fields);
    let Value::Object(fields) = fields else {
        return Err(RegistryError::usage("fields", "must be a JSON object"));
    };
    let log = state_dir.registry_events();
    let _seq_lock = LockGuard::exclusive(&seq_lock_path(&log))?;
    let seq = last_seq(&log)? + 1;
    let ev = Event {
        seq,
        at: crate::paths::now_rfc3339(),
        kind: kind.to_string(),
        fields,
    };
    store::append_jsonl(&log, &ev, true)?;
    Ok(seq)
}

/// [`emit`], logging instead of failing: for events that follow a change
/// already made (the change must not be reported as failed).
pub fn emit_quiet(state_dir: &StateDir, kind: &str, fields: Value) {
    if let Err(e) = emit(state_dir, kind, fields) {
        tracing::warn!(kind, error = %e, "could not record event");
    }
}

/// The `seq` of the last record (0 for an empty or missing log), by the
/// store's torn-tail rule: a complete record without its newline counts.
fn last_seq(log: &Path) -> Result<u64, RegistryError> {
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
    }
    Ok(store::last_record::<Seq>(log)?.map_or(0, |s| s.seq))
}

fn store_io(op: &'static str, path: &Path, source: std::io::Error) -> RegistryError {
    RegistryError::Store(store::StoreError::Io {
        op,
        path: path.to_path_buf(),
        source,
    })
}

/// Every event, and whether a torn last line was skipped.
pub fn read(state_dir: &StateDir) -> Result<store::JsonlRead<Event>, RegistryError> {
    Ok(store::read_jsonl(&state_dir.registry_events())?)
}

/// A privacy finding in the log, located by `seq` (or line when a record has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditFinding {
    pub seq: Option<u64>,
    pub line: usize,
    pub rule: &'static str,
    pub field: String,
}

/// The privacy audit of the whole log: every finding, never the offending value.
pub fn audit(state_dir: &StateDir) -> Result<Vec<AuditFinding>, RegistryError> {
    let log = state_dir.registry_events();
    let r = store::read_jsonl::<Value>(&log)?;
    let red = redactor(state_dir);
    let mut out = Vec::new();
    for (i, rec) in r.records.iter().enumerate() {
        let seq = rec.get("seq").and_then(Value::as_u64);
        for Finding { rule, field } in red.audit_value(rec) {
            out.push(AuditFinding {
                seq,
                line: i + 1,
                rule,
                field,
            });
        }
    }
    Ok(out)
}

/// Reads new complete records as the log grows (for `events --follow`).
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    last_seq: u64,
    /// Complete lines consumed so far (for the line number of a corrupt one).
    line: usize,
}

impl Follower {
    /// Follow the log of a state dir from its start.
    pub fn new(state_dir: &StateDir) -> Follower {
        Follower {
            path: state_dir.registry_events(),
            offset: 0,
            partial: Vec::new(),
            last_seq: 0,
            line: 0,
        }
    }

    /// The complete records written since the last call. A log that shrank
    /// (replaced) is read again from its start, skipping what was already seen.
    pub fn poll(&mut self) -> Result<Vec<Event>, RegistryError> {
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(store_io("open", &self.path, e)),
        };
        let len = f
            .metadata()
            .map_err(|e| store_io("stat", &self.path, e))?
            .len();
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
            self.line = 0;
        }
        if len == self.offset {
            return Ok(Vec::new());
        }
        f.seek(SeekFrom::Start(self.offset))
            .map_err(|e| store_io("seek", &self.path, e))?;
        let mut buf = Vec::new();
        f.take(len - self.offset)
            .read_to_end(&mut buf)
            .map_err(|e| store_io("read", &self.path, e))?;
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut out = Vec::new();
        let mut keep = |ev: Event, out: &mut Vec<Event>| {
            if ev.seq > self.last_seq {
                self.last_seq = ev.seq;
                out.push(ev);
            }
        };
        while let Some(nl) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=nl).collect();
            self.line += 1;
            if line[..nl].iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Event>(&line[..nl]) {
                Ok(ev) => keep(ev, &mut out),
                Err(e) => {
                    return Err(RegistryError::Store(store::StoreError::Corrupt {
                        path: self.path.clone(),
                        line: Some(self.line),
                        message: e.to_string(),
                    }));
                }
            }
        }
        // A complete record still waiting for its newline is a record (the
        // next writer adds the newline; its seq is then already seen).
        if let Ok(ev) = serde_json::from_slice::<Event>(&self.partial) {
            keep(ev, &mut out);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seq_counts_up_and_survives_a_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            emit(
                crate::statedir::StateDir::new(d.path()),
                "a",
                json!({"x": 1})
            )
            .unwrap(),
            1
        );
        assert_eq!(
            emit(crate::statedir::StateDir::new(d.path()), "b", Value::Null).unwrap(),
            2
        );
        use std::io::Write;
        let log = StateDir::new(d.path()).registry_events();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"{\"seq\": 3, \"ki")
            .unwrap();
        assert_eq!(
            emit(
                crate::statedir::StateDir::new(d.path()),
                "c",
                json!({"seq": 99})
            )
            .unwrap(),
            3
        );
        let r = read(crate::statedir::StateDir::new(d.path())).unwrap();
        assert!(!r.torn_tail);
        let seqs: Vec<_> = r.records.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
    }

    #[test]
    fn secrets_never_reach_the_log() {
        let d = tempfile::tempdir().unwrap();
        emit(
            crate::statedir::StateDir::new(d.path()),
            "x",
            json!({"cmd": "export GH=ghp_ABCDEFGHIJKLMNOPQRSTUVWX0123"}),
        )
        .unwrap();
        let text = std::fs::read_to_string(StateDir::new(d.path()).registry_events()).unwrap();
        assert!(!text.contains("ABCDEFGHIJKLMNOP"), "{text}");
        assert!(
            audit(crate::statedir::StateDir::new(d.path()))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn bad_kind_is_a_usage_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            emit(
                crate::statedir::StateDir::new(d.path()),
                "Bad Kind",
                Value::Null
            ),
            Err(RegistryError::Usage { .. })
        ));
    }

    #[test]
    fn follower_sees_only_complete_new_lines() {
        let d = tempfile::tempdir().unwrap();
        let mut f = Follower::new(crate::statedir::StateDir::new(d.path()));
        assert!(f.poll().unwrap().is_empty());
        emit(crate::statedir::StateDir::new(d.path()), "a", Value::Null).unwrap();
        assert_eq!(f.poll().unwrap().len(), 1);
        assert!(f.poll().unwrap().is_empty());
        emit(crate::statedir::StateDir::new(d.path()), "b", Value::Null).unwrap();
        let got = f.poll().unwrap();
        assert_eq!(got[0].kind, "b");
    }
}
