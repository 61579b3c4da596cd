//! Following a JSONL file as it grows: the complete lines appended since
//! the last read, a torn last line kept until its newline arrives.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A read position in a JSONL file and the bytes of its unfinished line.
#[derive(Debug)]
pub struct JsonlTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
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
        }
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
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
        }
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = Vec::new();
        if (&mut f)
            .take(len - self.offset)
            .read_to_end(&mut buf)
            .is_err()
        {
            return Vec::new();
        }
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut out = Vec::new();
        while let Some(nl) = self.partial.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.partial.drain(..=nl).collect();
            line.pop();
            if !line.is_empty() {
                out.push(line);
            }
        }
        out
    }
}
