//! Append-only JSONL logs and the one torn-tail rule every reader and writer
//! of them follows (docs/state-dir.md):
//!
//! - only the bytes after the last newline can be torn (a writer killed in the
//!   middle of its single `write`);
//! - if they parse as a complete record, the record is kept: readers return it
//!   and the next writer adds the missing newline before its own line;
//! - if they are the start of a record as drover writes one (they begin with
//!   `{`), only they are cut (they were never acknowledged);
//! - anything else — a line before the last newline that does not parse, a
//!   tail that is not a record's start — is corruption: an error naming the
//!   file and line, and nothing is cut or appended.

use super::StoreError;
use serde::de::IgnoredAny;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// How much of a log's end is read per step when looking for its last lines.
const BACK_CHUNK: u64 = 64 * 1024;

/// What the bytes after the last newline are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// Nothing (or only whitespace) after the last newline.
    None,
    /// A complete record whose newline is missing: keep it.
    Complete,
    /// The start of a record that does not parse: a torn write, cut it.
    Torn,
    /// Not a record's start: corruption.
    Foreign,
}

fn judge_tail(tail: &[u8]) -> Tail {
    if tail.iter().all(u8::is_ascii_whitespace) {
        Tail::None
    } else if tail.first() != Some(&b'{') {
        Tail::Foreign
    } else if serde_json::from_slice::<IgnoredAny>(tail).is_ok() {
        Tail::Complete
    } else {
        Tail::Torn
    }
}

fn corrupt(path: &Path, line: usize, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        line: Some(line),
        message: message.into(),
    }
}

/// The 1-based number of the line that starts at byte `offset` (counts the
/// newlines before it; only on the error path, so reading the file is fine).
fn line_at(f: &mut File, path: &Path, offset: u64) -> Result<usize, StoreError> {
    f.seek(SeekFrom::Start(0))
        .map_err(|e| StoreError::io("seek", path, e))?;
    let mut before = Vec::new();
    f.take(offset)
        .read_to_end(&mut before)
        .map_err(|e| StoreError::io("read", path, e))?;
    Ok(before.iter().filter(|b| **b == b'\n').count() + 1)
}

/// Read the end of the file back from `len` until the buffer holds at least
/// `newlines` newline bytes or the whole file. Returns (buffer start, buffer).
/// The first step is a page (a log's last line is far shorter), each next
/// one twice the last up to [`BACK_CHUNK`]; only new bytes are counted.
fn read_back(
    f: &mut File,
    path: &Path,
    len: u64,
    newlines: usize,
) -> Result<(u64, Vec<u8>), StoreError> {
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    let mut seen = 0;
    let mut step = 4096;
    while start > 0 && seen < newlines {
        let from = start.saturating_sub(step);
        let mut chunk = vec![0u8; (start - from) as usize];
        f.seek(SeekFrom::Start(from))
            .map_err(|e| StoreError::io("seek", path, e))?;
        f.read_exact(&mut chunk)
            .map_err(|e| StoreError::io("read", path, e))?;
        seen += chunk.iter().filter(|b| **b == b'\n').count();
        chunk.extend_from_slice(&buf);
        buf = chunk;
        start = from;
        step = (step * 2).min(BACK_CHUNK);
    }
    Ok((start, buf))
}

/// Append one record as one line with a single `write` call, under the lock
/// beside the log, after applying the torn-tail rule to what is there.
/// `durable` fsyncs before returning, after the lock is released: the next
/// appender need not wait for this one's disk flush, and writers appending
/// together share one (group commit).
pub fn append_jsonl<T: serde::Serialize + ?Sized>(
    path: &Path,
    record: &T,
    durable: bool,
) -> Result<(), StoreError> {
    let mut line = serde_json::to_vec(record).map_err(|e| StoreError::Serialize {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    line.push(b'\n');
    // The lock file beside the log is made with its directory.
    let guard = super::lock_beside(path)?;
    let (mut f, md) = super::private::open_private_stat(
        path,
        OpenOptions::new().create(true).read(true).append(true),
    )?;
    // A log its readers refuse is not written to either.
    let tail = check_body(&mut f, path, md)?;
    // Where the log ends before this line (nobody else appends under the
    // lock): what was read to its end, or where a torn tail is cut.
    let end = tail.at + tail.bytes.len() as u64;
    let (dev, ino) = (tail.dev, tail.ino);
    let end = match repair_tail(&mut f, path, tail)? {
        Repair::Newline => {
            line.insert(0, b'\n');
            end
        }
        Repair::Cut(at) => at,
        Repair::None => end,
    };
    f.write_all(&line)
        .map_err(|e| StoreError::io("append", path, e))?;
    remember_checked(path, dev, ino, end + line.len() as u64);
    drop(guard);
    if durable {
        f.sync_data()
            .map_err(|e| StoreError::io("fsync", path, e))?;
    }
    Ok(())
}

/// Make every line appended to the log so far durable, whoever appended it:
/// one `fdatasync`. Writers that sync together share one journal commit
/// (group commit), so lines appended without `durable` under a lock of the
/// caller's and synced after it is let go cost the writers one flush between
/// them, not one each.
pub fn sync_jsonl(path: &Path) -> Result<(), StoreError> {
    let f = File::open(path).map_err(|e| StoreError::io("open", path, e))?;
    f.sync_data().map_err(|e| StoreError::io("fsync", path, e))
}

/// How far each log has been checked by this process, by (path, device,
/// inode): the next append checks only what was added since.
static CHECKED: std::sync::Mutex<Vec<(std::path::PathBuf, u64, u64, u64)>> =
    std::sync::Mutex::new(Vec::new());

fn remember_checked(path: &Path, dev: u64, ino: u64, upto: u64) {
    if let Ok(mut c) = CHECKED.lock() {
        c.retain(|(p, ..)| p != path);
        c.push((path.to_path_buf(), dev, ino, upto));
    }
}

/// The bytes after a log's last newline, read to its end, and where they
/// start.
struct TailBytes {
    at: u64,
    bytes: Vec<u8>,
    /// The log's device and inode, as checked.
    dev: u64,
    ino: u64,
}

/// Every complete line before the last newline parses (blank lines aside),
/// as [`read_jsonl`] requires; else `Corrupt` naming the line. Reads only
/// what this process has not checked in this file before, on to the end:
/// what follows the last newline is returned for the torn-tail rule, so the
/// end is not read again.
fn check_body(f: &mut File, path: &Path, md: std::fs::Metadata) -> Result<TailBytes, StoreError> {
    use std::os::unix::fs::MetadataExt;
    let from = CHECKED
        .lock()
        .ok()
        .and_then(|c| {
            c.iter()
                .find(|(p, dev, ino, upto)| {
                    p == path && *dev == md.dev() && *ino == md.ino() && *upto <= md.len()
                })
                .map(|e| e.3)
        })
        .unwrap_or(0);
    f.seek(SeekFrom::Start(from))
        .map_err(|e| StoreError::io("seek", path, e))?;
    let mut r = std::io::BufReader::new(&mut *f);
    let mut at = from;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_until(&mut r, b'\n', &mut line)
            .map_err(|e| StoreError::io("read", path, e))?;
        if n == 0 || line.last() != Some(&b'\n') {
            // The end, or the tail (the torn-tail rule's to judge).
            break;
        }
        let body = &line[..line.len() - 1];
        if !body.iter().all(u8::is_ascii_whitespace)
            && serde_json::from_slice::<IgnoredAny>(body).is_err()
        {
            let n = line_at(f, path, at)?;
            return Err(corrupt(
                path,
                n,
                "a line is not a record drover wrote; nothing is appended until it is fixed",
            ));
        }
        at += n as u64;
    }
    remember_checked(path, md.dev(), md.ino(), at);
    Ok(TailBytes {
        at,
        bytes: line,
        dev: md.dev(),
        ino: md.ino(),
    })
}

/// What [`repair_tail`] did to the log's end.
enum Repair {
    /// Nothing to do.
    None,
    /// The tail is a complete record: the next line needs a newline first.
    Newline,
    /// A torn tail was cut: the log now ends here.
    Cut(u64),
}

/// Apply the torn-tail rule before an append to `tail`, what follows the
/// log's last newline: keep a complete record (it needs its newline), cut a
/// torn one, refuse a foreign one.
fn repair_tail(f: &mut File, path: &Path, tail: TailBytes) -> Result<Repair, StoreError> {
    let keep = tail.at;
    match judge_tail(&tail.bytes) {
        Tail::None => Ok(Repair::None),
        Tail::Complete => {
            tracing::warn!(path = %path.display(), "the last record had no newline; kept it");
            Ok(Repair::Newline)
        }
        Tail::Torn => {
            tracing::warn!(path = %path.display(), cut = tail.bytes.len(), "cut a torn last line");
            f.set_len(keep)
                .map_err(|e| StoreError::io("truncate", path, e))?;
            Ok(Repair::Cut(keep))
        }
        Tail::Foreign => {
            let line = line_at(f, path, keep)?;
            Err(corrupt(
                path,
                line,
                "the last line is not a record drover wrote",
            ))
        }
    }
}

/// Check, without writing, that the next append to `path` will succeed:
/// `Corrupt` when its tail is not a record's start (the torn-tail rule) or a
/// line before it does not parse. Lets a
/// writer refuse before it commits to something the log must then record.
pub fn check_tail(path: &Path) -> Result<(), StoreError> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    let md = f.metadata().map_err(|e| StoreError::io("stat", path, e))?;
    let (at, bytes) = match check_body(&mut f, path, md) {
        Ok(tail) => (tail.at, tail.bytes),
        // A foreign tail is named before a corrupt line above it.
        Err(e) => {
            let len = f
                .metadata()
                .map_err(|e| StoreError::io("stat", path, e))?
                .len();
            let (start, buf) = read_back(&mut f, path, len, 1)?;
            let tail_at = buf.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
            if judge_tail(&buf[tail_at..]) != Tail::Foreign {
                return Err(e);
            }
            (start + tail_at as u64, buf[tail_at..].to_vec())
        }
    };
    if judge_tail(&bytes) == Tail::Foreign {
        let line = line_at(&mut f, path, at)?;
        return Err(corrupt(
            path,
            line,
            "the last line is not a record drover wrote",
        ));
    }
    Ok(())
}

/// The last record of a log (a complete unterminated tail counts; a torn one
/// does not), or `None` for a missing or empty log. Reads only the file's end.
pub fn last_record<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, StoreError> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    let len = f
        .metadata()
        .map_err(|e| StoreError::io("stat", path, e))?
        .len();
    let mut want = 2;
    loop {
        let (start, buf) = read_back(&mut f, path, len, want)?;
        let tail_at = buf.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
        let tail = &buf[tail_at..];
        let candidate: Option<(u64, &[u8])> = match judge_tail(tail) {
            Tail::Complete => Some((start + tail_at as u64, tail)),
            Tail::Foreign => {
                let line = line_at(&mut f, path, start + tail_at as u64)?;
                return Err(corrupt(
                    path,
                    line,
                    "the last line is not a record drover wrote",
                ));
            }
            Tail::None | Tail::Torn => {
                // The newest non-blank complete line before the tail.
                let body = &buf[..tail_at.saturating_sub(1)];
                let mut found = None;
                let mut end = body.len();
                loop {
                    let from = body[..end].iter().rposition(|b| *b == b'\n').map(|p| p + 1);
                    // Without a newline before it, the line is whole only at the file's start.
                    let Some(from) = from.or((start == 0).then_some(0)) else {
                        break;
                    };
                    let l = &body[from..end];
                    if !l.iter().all(u8::is_ascii_whitespace) {
                        found = Some((start + from as u64, l));
                        break;
                    }
                    if from == 0 {
                        break;
                    }
                    end = from - 1;
                }
                if found.is_none() && start > 0 {
                    want *= 2;
                    continue;
                }
                found
            }
        };
        let Some((at, bytes)) = candidate else {
            return Ok(None);
        };
        return match serde_json::from_slice::<T>(bytes) {
            Ok(r) => Ok(Some(r)),
            Err(e) => {
                let line = line_at(&mut f, path, at)?;
                Err(corrupt(path, line, e.to_string()))
            }
        };
    }
}

/// What a JSONL read found.
#[derive(Debug)]
pub struct JsonlRead<T> {
    /// Every complete record, in file order (an unterminated complete last
    /// record included).
    pub records: Vec<T>,
    /// True when the bytes after the last newline were a torn record and skipped.
    pub torn_tail: bool,
}

/// Read every record under the torn-tail rule: a torn tail is skipped (with a
/// warning); a line that does not parse, or a tail that is not a record's
/// start, is `Corrupt`. A missing file reads as empty.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<JsonlRead<T>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(JsonlRead {
                records: Vec::new(),
                torn_tail: false,
            });
        }
        Err(e) => return Err(StoreError::io("read", path, e)),
    };
    parse_jsonl(path, &bytes)
}

/// [`read_jsonl`] over bytes already read.
pub fn parse_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<JsonlRead<T>, StoreError> {
    let mut records = Vec::new();
    let mut torn_tail = false;
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // `split` yields a final empty slice when the file ends with '\n'.
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        if i == last {
            match judge_tail(line) {
                Tail::None => continue,
                Tail::Torn => {
                    // The writer died mid-record; it was never acknowledged.
                    torn_tail = true;
                    continue;
                }
                Tail::Foreign => {
                    return Err(corrupt(
                        path,
                        i + 1,
                        "the last line is not a record drover wrote",
                    ));
                }
                Tail::Complete => {}
            }
        } else if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<T>(line) {
            Ok(r) => records.push(r),
            Err(e) => return Err(corrupt(path, i + 1, e.to_string())),
        }
    }
    if torn_tail {
        tracing::warn!(path = %path.display(), "skipped a torn last line");
    }
    Ok(JsonlRead { records, torn_tail })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// Guards issue 24 item 16: a corrupt middle line makes writers refuse
    /// too (readers do), naming the line; nothing is appended.
    #[test]
    fn a_corrupt_middle_line_is_refused_by_writers() {
        let (_d, p) = log();
        append_jsonl(&p, &json!({"n": 1}), false).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.extend_from_slice(b"garbage here\n{\"n\":3}\n");
        std::fs::write(&p, &bytes).unwrap();
        let e = append_jsonl(&p, &json!({"n": 4}), false).unwrap_err();
        assert!(
            matches!(e, StoreError::Corrupt { line: Some(2), .. }),
            "{e}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "nothing appended");
        // Fixed, appends go on.
        let fixed = String::from_utf8(bytes)
            .unwrap()
            .replace("garbage here\n", "");
        std::fs::write(&p, fixed).unwrap();
        append_jsonl(&p, &json!({"n": 4}), false).unwrap();
        assert_eq!(read_jsonl::<Value>(&p).unwrap().records.len(), 3);
    }

    fn log() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.jsonl");
        (dir, p)
    }

    #[test]
    fn torn_last_line_is_skipped_and_cut_by_the_next_append() {
        let (_d, p) = log();
        append_jsonl(&p, &json!({"seq": 1}), false).unwrap();
        append_jsonl(&p, &json!({"seq": 2}), true).unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"seq\": 3, \"ki").unwrap();
        let r = read_jsonl::<Value>(&p).unwrap();
        assert_eq!(r.records.len(), 2);
        assert!(r.torn_tail);
        append_jsonl(&p, &json!({"seq": 4}), false).unwrap();
        let r = read_jsonl::<Value>(&p).unwrap();
        assert_eq!(r.records.len(), 3);
        assert!(!r.torn_tail);
        assert_eq!(r.records[2]["seq"], 4);
    }

    /// Guards the complete last record without its newline: it was cut (and its
    /// seq reused); it must be kept by readers and by the next writer.
    #[test]
    fn complete_unterminated_last_record_is_kept() {
        let (_d, p) = log();
        std::fs::write(&p, b"{\"seq\":1}\n{\"seq\":2}").unwrap();
        let r = read_jsonl::<Value>(&p).unwrap();
        assert_eq!(r.records.len(), 2);
        assert!(!r.torn_tail);
        assert_eq!(last_record::<Value>(&p).unwrap().unwrap()["seq"], 2);
        append_jsonl(&p, &json!({"seq": 3}), false).unwrap();
        assert_eq!(
            std::fs::read(&p).unwrap(),
            b"{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3}\n"
        );
    }

    /// Guards a log of random bytes: it was truncated to nothing by the next writer.
    #[test]
    fn random_bytes_are_corruption_and_nothing_is_cut() {
        let (_d, p) = log();
        let junk: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 0x80)
            .collect();
        std::fs::write(&p, &junk).unwrap();
        let err = append_jsonl(&p, &json!({"seq": 1}), false).unwrap_err();
        assert!(
            matches!(err, StoreError::Corrupt { line: Some(1), .. }),
            "{err}"
        );
        assert!(err.to_string().contains("e.jsonl"), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), junk, "nothing cut");
        assert!(read_jsonl::<Value>(&p).is_err());
        assert!(last_record::<Value>(&p).is_err());
    }

    #[test]
    fn a_foreign_tail_after_records_names_its_line() {
        let (_d, p) = log();
        std::fs::write(&p, b"{\"a\":1}\n{\"a\":2}\nxyz").unwrap();
        let err = append_jsonl(&p, &json!({"a": 3}), false).unwrap_err();
        assert!(
            matches!(err, StoreError::Corrupt { line: Some(3), .. }),
            "{err}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n{\"a\":2}\nxyz");
    }

    /// `check_tail` (the engine's check before it commits) judges the tail
    /// from what it reads of the body: a torn tail passes, a foreign one is
    /// named before a corrupt line above it, a corrupt line alone is named.
    #[test]
    fn check_tail_names_a_foreign_tail_first_and_lets_a_torn_one_pass() {
        let (_d, p) = log();
        assert!(check_tail(&p).is_ok(), "a missing log");
        std::fs::write(&p, b"{\"a\":1}\n{\"a\":").unwrap();
        assert!(check_tail(&p).is_ok(), "a torn tail is cut by the append");
        std::fs::write(&p, b"{\"a\":1}\nnot json\n{\"a\":2}\nxyz").unwrap();
        let err = check_tail(&p).unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt { line: Some(4), message, .. }
                if message.contains("last line")),
            "{err}"
        );
        std::fs::write(&p, b"{\"a\":1}\nnot json\n{\"a\":2}\n").unwrap();
        let err = check_tail(&p).unwrap_err();
        assert!(
            matches!(err, StoreError::Corrupt { line: Some(2), .. }),
            "{err}"
        );
    }

    /// An append remembers how far the log is checked from what it read and
    /// wrote, past a tail it repaired (a newline added, a torn tail cut): a
    /// bad line another writer adds after it is still found by the next.
    #[test]
    fn what_others_append_after_a_repaired_tail_is_still_checked() {
        for (start, repaired) in [
            (&b"{\"a\":1}"[..], &b"{\"a\":1}\n{\"a\":2}\n"[..]),
            (&b"{\"a\":1}\n{\"a\":"[..], &b"{\"a\":1}\n{\"a\":2}\n"[..]),
        ] {
            let (_d, p) = log();
            std::fs::write(&p, start).unwrap();
            append_jsonl(&p, &json!({"a": 2}), false).unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), repaired);
            let mut f = OpenOptions::new().append(true).open(&p).unwrap();
            f.write_all(b"garbage\n{\"a\":4}\n").unwrap();
            let err = append_jsonl(&p, &json!({"a": 5}), false).unwrap_err();
            assert!(
                matches!(err, StoreError::Corrupt { line: Some(3), .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn corruption_in_the_middle_is_an_error() {
        let (_d, p) = log();
        std::fs::write(&p, b"{\"a\":1}\nnot json\n{\"a\":2}\n").unwrap();
        let err = read_jsonl::<Value>(&p).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { line: Some(2), .. }));
    }

    #[test]
    fn last_record_skips_a_torn_tail_and_blank_lines() {
        let (_d, p) = log();
        assert!(last_record::<Value>(&p).unwrap().is_none());
        std::fs::write(&p, b"").unwrap();
        assert!(last_record::<Value>(&p).unwrap().is_none());
        std::fs::write(&p, b"{\"a\":1}\n\n{\"a\":2}\n\n{\"a\":3, \"b").unwrap();
        assert_eq!(last_record::<Value>(&p).unwrap().unwrap()["a"], 2);
        std::fs::write(&p, b"{\"a\":1, \"b").unwrap();
        assert!(last_record::<Value>(&p).unwrap().is_none());
        std::fs::write(&p, b"not json\n").unwrap();
        assert!(matches!(
            last_record::<Value>(&p),
            Err(StoreError::Corrupt { line: Some(1), .. })
        ));
    }

    #[test]
    fn last_record_reads_back_past_one_chunk() {
        let (_d, p) = log();
        let big = "x".repeat(BACK_CHUNK as usize + 10);
        append_jsonl(&p, &json!({"a": 1, "pad": big}), false).unwrap();
        append_jsonl(&p, &json!({"a": 2, "pad": big}), false).unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(format!("{{\"a\":3,\"pad\":\"{big}").as_bytes())
            .unwrap();
        assert_eq!(last_record::<Value>(&p).unwrap().unwrap()["a"], 2);
        append_jsonl(&p, &json!({"a": 4}), false).unwrap();
        let r = read_jsonl::<Value>(&p).unwrap();
        let a: Vec<_> = r.records.iter().map(|v| v["a"].clone()).collect();
        assert_eq!(a, [json!(1), json!(2), json!(4)]);
    }

    proptest::proptest! {
        /// Any prefix of a valid log loads: every complete record (terminated or
        /// not), and nothing else; the next append never loses one of them.
        #[test]
        fn any_truncation_loads(n in 1usize..20, cut in 0usize..400) {
            let (_d, p) = log();
            for i in 0..n { append_jsonl(&p, &json!({"seq": i, "pad": "x".repeat(i)}), false).unwrap(); }
            let all = std::fs::read(&p).unwrap();
            let cut = cut.min(all.len());
            std::fs::write(&p, &all[..cut]).unwrap();
            let r = read_jsonl::<Value>(&p).unwrap();
            let terminated = all[..cut].iter().filter(|b| **b == b'\n').count();
            let whole = if cut < all.len() && all[cut] == b'\n' { terminated + 1 } else { terminated };
            proptest::prop_assert_eq!(r.records.len(), whole);
            append_jsonl(&p, &json!({"seq": "next"}), false).unwrap();
            let r = read_jsonl::<Value>(&p).unwrap();
            proptest::prop_assert_eq!(r.records.len(), whole + 1);
        }
    }
}
