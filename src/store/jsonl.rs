use super::StoreError;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

/// Append one record as one line with a single `write` call, under the lock
/// beside the log. A torn tail left by a writer that died mid-line (never
/// acknowledged) is cut off first, so it cannot glue onto the new record.
/// `durable` fsyncs before returning.
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
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create dir", dir, e))?;
    }
    let _guard = super::lock_beside(path)?;
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| StoreError::io("open", path, e))?;
    cut_torn_tail(&mut f, path)?;
    f.write_all(&line)
        .map_err(|e| StoreError::io("append", path, e))?;
    if durable {
        f.sync_data()
            .map_err(|e| StoreError::io("fsync", path, e))?;
    }
    Ok(())
}

fn cut_torn_tail(f: &mut std::fs::File, path: &Path) -> Result<(), StoreError> {
    use std::io::{Read, Seek, SeekFrom};
    let len = f
        .metadata()
        .map_err(|e| StoreError::io("stat", path, e))?
        .len();
    if len == 0 {
        return Ok(());
    }
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))
            .map_err(|e| StoreError::io("seek", path, e))?;
        f.read_exact(&mut buf[..n])
            .map_err(|e| StoreError::io("read", path, e))?;
        if end == len && buf[n - 1] == b'\n' {
            return Ok(());
        }
        if let Some(pos) = buf[..n].iter().rposition(|b| *b == b'\n') {
            let keep = start + pos as u64 + 1;
            tracing::warn!(path = %path.display(), cut = len - keep, "cut a torn last line");
            return f
                .set_len(keep)
                .map_err(|e| StoreError::io("truncate", path, e));
        }
        if start == 0 {
            tracing::warn!(path = %path.display(), cut = len, "cut a torn only line");
            return f
                .set_len(0)
                .map_err(|e| StoreError::io("truncate", path, e));
        }
        end = start;
    }
}

/// What a JSONL read found.
#[derive(Debug)]
pub struct JsonlRead<T> {
    /// Every complete record, in file order.
    pub records: Vec<T>,
    /// True when the last line was torn (no newline, or unparseable) and skipped.
    pub torn_tail: bool,
}

/// Read every record; a torn last line is skipped (with a warning), a bad line
/// anywhere else is `Corrupt`. A missing file reads as empty.
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
    let mut records = Vec::new();
    let mut torn_tail = false;
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // `split` yields a final empty slice when the file ends with '\n'.
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        if i == last {
            // No newline after it: the writer died mid-record; never acknowledged.
            torn_tail = true;
            continue;
        }
        match serde_json::from_slice::<T>(line) {
            Ok(r) => records.push(r),
            Err(e) => {
                return Err(StoreError::Corrupt {
                    path: path.to_path_buf(),
                    line: Some(i + 1),
                    message: e.to_string(),
                });
            }
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

    #[test]
    fn torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.jsonl");
        append_jsonl(&p, &json!({"seq": 1}), false).unwrap();
        append_jsonl(&p, &json!({"seq": 2}), true).unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"seq\": 3, \"ki").unwrap();
        let r = read_jsonl::<Value>(&p).unwrap();
        assert_eq!(r.records.len(), 2);
        assert!(r.torn_tail);
        // The next append cuts the fragment instead of gluing onto it.
        append_jsonl(&p, &json!({"seq": 4}), false).unwrap();
        let r = read_jsonl::<Value>(&p).unwrap();
        assert_eq!(r.records.len(), 3);
        assert!(!r.torn_tail);
        assert_eq!(r.records[2]["seq"], 4);
    }

    #[test]
    fn corruption_in_the_middle_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.jsonl");
        std::fs::write(&p, b"{\"a\":1}\nnot json\n{\"a\":2}\n").unwrap();
        let err = read_jsonl::<Value>(&p).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { line: Some(2), .. }));
    }

    proptest::proptest! {
        /// Any prefix of a valid log loads: the complete lines, and nothing else.
        #[test]
        fn any_truncation_loads(n in 1usize..20, cut in 0usize..400) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("e.jsonl");
            for i in 0..n { append_jsonl(&p, &json!({"seq": i, "pad": "x".repeat(i)}), false).unwrap(); }
            let all = std::fs::read(&p).unwrap();
            let cut = cut.min(all.len());
            std::fs::write(&p, &all[..cut]).unwrap();
            let r = read_jsonl::<Value>(&p).unwrap();
            let complete = all[..cut].iter().filter(|b| **b == b'\n').count();
            proptest::prop_assert_eq!(r.records.len(), complete);
        }
    }
}
