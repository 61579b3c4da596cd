//! Following a JSONL file as it grows: the complete lines appended since
//! the last read, a torn last line kept until its newline arrives. A tail
//! may bound its lines: a longer one is skipped without being held whole.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// How much of the file one read takes at a time.
const CHUNK: usize = 64 * 1024;

/// A read position in a JSONL file and the bytes of its unfinished line.
#[derive(Debug)]
pub struct JsonlTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    /// The longest line kept, if bounded.
    max_line: Option<usize>,
    /// Inside a line over the bound: its bytes are dropped up to its newline.
    skipping: bool,
    skipped: u64,
}

impl JsonlTail {
    /// Follow `path` from where it ends now: what is on disk already is
    /// history. A file not there yet is followed from its start.
    pub fn from_end(path: PathBuf) -> Self {
        let offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        JsonlTail {
            path,
            offset,
            partial: Vec::new(),
            max_line: None,
            skipping: false,
            skipped: 0,
        }
    }

    /// Follow `path` from its first line.
    pub fn from_start(path: PathBuf) -> Self {
        let mut t = Self::from_end(PathBuf::new());
        t.path = path;
        t.offset = 0;
        t
    }

    /// Skip every line longer than `max` bytes (without its newline).
    pub fn with_max_line(mut self, max: usize) -> Self {
        self.max_line = Some(max);
        self
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many lines were skipped as over the bound so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The complete, non-empty lines written since the last call (without
    /// their newline). A file replaced by a shorter one is read from its
    /// start.
    pub fn read_new(&mut self) -> Vec<Vec<u8>> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
            self.skipping = false;
        }
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut left = len - self.offset;
        let mut buf = vec![0u8; CHUNK];
        while left > 0 {
            let want = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
            let n = match f.read(&mut buf[..want]) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            self.offset += n as u64;
            left -= n as u64;
            self.take(&buf[..n], &mut out);
        }
        out
    }

    /// Split `bytes` into lines onto `out`, keeping the unfinished one.
    fn take(&mut self, mut bytes: &[u8], out: &mut Vec<Vec<u8>>) {
        while !bytes.is_empty() {
            let nl = bytes.iter().position(|b| *b == b'\n');
            let (piece, rest, ends) = match nl {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if !self.skipping {
                self.partial.extend_from_slice(piece);
                if self.max_line.is_some_and(|m| self.partial.len() > m) {
                    self.partial = Vec::new();
                    self.skipping = true;
                    self.skipped += 1;
                }
            }
            if ends {
                if self.skipping {
                    self.skipping = false;
                } else if !self.partial.is_empty() {
                    out.push(std::mem::take(&mut self.partial));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_line_over_the_bound_is_skipped_and_the_next_one_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.jsonl");
        std::fs::write(&p, "").unwrap();
        let mut t = JsonlTail::from_start(p.clone()).with_max_line(8);
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"short\n0123456789").unwrap();
        assert_eq!(t.read_new(), vec![b"short".to_vec()]);
        assert_eq!(t.skipped(), 1);
        f.write_all(b"more of the long line\nok\ntorn").unwrap();
        assert_eq!(t.read_new(), vec![b"ok".to_vec()]);
        f.write_all(b"\n").unwrap();
        assert_eq!(t.read_new(), vec![b"torn".to_vec()]);
        assert_eq!(t.skipped(), 1);
    }

    #[test]
    fn a_line_longer_than_a_chunk_is_kept_whole_without_a_bound() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.jsonl");
        let long = vec![b'a'; CHUNK * 2 + 5];
        let mut all = long.clone();
        all.extend_from_slice(b"\nb\n");
        std::fs::write(&p, &all).unwrap();
        let mut t = JsonlTail::from_start(p);
        assert_eq!(t.read_new(), vec![long, b"b".to_vec()]);
    }
}
