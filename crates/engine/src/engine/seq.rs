//! The seq counter without a durable write of its own.
//!
//! `transition_seq` is global to the state dir, and a committed seq is never
//! given out again. Every accepted transition's audit entry carries its seq,
//! and so does its record; entries and records are never deleted, so the
//! highest seq of any entry or record is the last one given out: the log and
//! the records are the durable counter (a power cut can lose a record written
//! since the kernel last wrote it back, never an acknowledged entry). Reading
//! them on every transition would cost a read per job, so the last seq given
//! out is kept in `jobs/seq.hint` as well, written in place and never
//! fsynced, with the boot it was written in and a checksum:
//!
//! - it is written under `registry.lock` *before* the record and the entry, so
//!   within a boot it is never behind either (a `kill -9` between them leaves
//!   a gap, never a seq used twice; the page cache survives a killed process);
//! - it is trusted only in the boot that wrote it: after a reboot (a power
//!   loss may have kept an entry and lost the hint) the first holder of the
//!   lock brings the records up to the log and takes the highest seq of both
//!   (the engine's `recover`), and the hint is rewritten;
//! - a hint that does not check (torn, edited, missing) is scanned around the
//!   same way, so it can cost time but never a reused seq.
//!
//! A state dir from before keeps its counter in `seq.json` (written before each
//! record, durably). The first scan takes the highest of it and of the
//! records, writes the hint and removes `seq.json`: a stale `seq.json` left
//! behind would make an older drover reuse seqs, one that is missing makes it
//! scan the records as this one does.

use crate::statedir::StateDir;
use crate::store::{StoreError, read_json};
use serde::Deserialize;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

#[derive(Deserialize)]
struct LegacyDoc {
    last_seq: u64,
}

/// `<seq, 20 digits> <boot id> <checksum, 16 hex digits>\n`: one length for
/// every seq of a boot, so a rewrite covers the whole of the last one.
fn encode(seq: u64, boot: &str) -> String {
    let body = format!("{seq:020} {boot}");
    format!("{body} {:016x}\n", fnv1a(body.as_bytes()))
}

/// The seq of a hint written in `boot`, if it checks.
fn decode(bytes: &[u8], boot: &str) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let (body, sum) = text.rsplit_once(' ')?;
    if u64::from_str_radix(sum, 16).ok()? != fnv1a(body.as_bytes()) {
        return None;
    }
    let (seq, written_in) = body.split_once(' ')?;
    (written_in == boot).then(|| seq.parse().ok()).flatten()
}

/// FNV-1a, 64 bits: enough to tell a torn or edited hint from a whole one.
fn fnv1a(bytes: &[u8]) -> u64 {
    crate::paths::fnv1a64(bytes)
}

/// This boot's id; empty where the kernel does not say, and then no hint is
/// ever trusted (every transition scans).
fn boot() -> &'static str {
    static BOOT: OnceLock<String> = OnceLock::new();
    BOOT.get_or_init(crate::procfs::boot_id)
}

/// The seq of the hint, if it checks in this boot (never where the kernel
/// gives no boot id); a missing hint is `None`, a hint that cannot be read an
/// error.
fn hinted(state_dir: &StateDir) -> Result<Option<u64>, StoreError> {
    let boot = boot();
    if boot.is_empty() {
        return Ok(None);
    }
    let path = state_dir.jobs_seq_hint();
    match std::fs::read(&path) {
        Ok(bytes) => Ok(decode(&bytes, boot)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Io {
            op: "read",
            path,
            source: e,
        }),
    }
}

/// Whether the hint checks in this boot: no scan is due (read without the
/// lock; a hint found torn or missing later is scanned around as ever).
pub fn trusted(state_dir: &StateDir) -> bool {
    matches!(hinted(state_dir), Ok(Some(_)))
}

/// The last seq given out in the state dir. Call under `registry.lock`. `scan` gives
/// the highest seq of any record or entry; it runs only when the hint is not valid,
/// and then the hint is rewritten (and a legacy `seq.json` folded in and removed).
pub fn last(
    state_dir: &StateDir,
    scan: impl FnOnce() -> Result<u64, StoreError>,
) -> Result<u64, StoreError> {
    Hint::open(state_dir)?.last(state_dir, scan)
}

/// The hint open for one critical section, read and then written through
/// one descriptor (two opens cost the lock's holder on every transition).
pub struct Hint {
    file: std::fs::File,
    path: std::path::PathBuf,
    /// The length read, so a write of the same length needs no truncate.
    len: std::cell::Cell<usize>,
}

impl Hint {
    /// Open (or create) `jobs/seq.hint`.
    pub fn open(state_dir: &StateDir) -> Result<Hint, StoreError> {
        let path = state_dir.jobs_seq_hint();
        let file = crate::store::open_private(
            &path,
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )?;
        Ok(Hint {
            file,
            path,
            len: std::cell::Cell::new(0),
        })
    }

    /// The last seq given out (see [`last`]), read through this descriptor;
    /// a hint that does not check is scanned around and rewritten.
    pub fn last(
        &self,
        state_dir: &StateDir,
        scan: impl FnOnce() -> Result<u64, StoreError>,
    ) -> Result<u64, StoreError> {
        let boot = boot();
        let hint = if boot.is_empty() {
            None
        } else {
            // A hint is one short line; one longer than this does not check.
            let mut buf = [0u8; 256];
            let n = self.file.read_at(&mut buf, 0).map_err(|e| StoreError::Io {
                op: "read",
                path: self.path.clone(),
                source: e,
            })?;
            self.len.set(n);
            (n < buf.len()).then(|| decode(&buf[..n], boot)).flatten()
        };
        if let Some(seq) = hint {
            return Ok(seq);
        }
        let legacy_path = state_dir.jobs_seq_legacy();
        let legacy = read_json::<LegacyDoc>(&legacy_path)?.map_or(0, |d| d.last_seq);
        let last = legacy.max(scan()?);
        if !boot.is_empty() {
            self.write(last)?;
        }
        if legacy > 0 || legacy_path.exists() {
            match std::fs::remove_file(&legacy_path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StoreError::Io {
                        op: "remove",
                        path: legacy_path,
                        source: e,
                    });
                }
            }
            tracing::info!(last_seq = last, "seq.json folded into seq.hint");
        }
        Ok(last)
    }

    /// Record `seq` as the last given out. Call under `registry.lock`,
    /// before the record that carries it is written. One `pwrite`, no fsync
    /// (see the module doc).
    pub fn write(&self, seq: u64) -> Result<(), StoreError> {
        let line = encode(seq, boot());
        let io = |op, e| StoreError::Io {
            op,
            path: self.path.clone(),
            source: e,
        };
        self.file
            .write_all_at(line.as_bytes(), 0)
            .map_err(|e| io("write", e))?;
        if self.len.get() != line.len() {
            self.file
                .set_len(line.len() as u64)
                .map_err(|e| io("truncate", e))?;
            self.len.set(line.len());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_checks_only_whole_and_in_its_boot() {
        let line = encode(42, "boot-a");
        assert_eq!(decode(line.as_bytes(), "boot-a"), Some(42));
        assert_eq!(decode(line.as_bytes(), "boot-b"), None, "another boot");
        // Torn: the start of a newer hint over the end of this one.
        let newer = encode(100, "boot-a");
        let torn = format!("{}{}", &newer[..19], &line[19..]);
        assert_eq!(decode(torn.as_bytes(), "boot-a"), None, "torn");
        assert_eq!(decode(b"", "boot-a"), None);
        assert_eq!(decode(&line.as_bytes()[..10], "boot-a"), None);
    }

    /// Through one descriptor: a missing or over-long hint is scanned around
    /// and rewritten whole (cut to one line), and `last` then reads the new
    /// seq without a scan.
    #[test]
    fn the_hint_is_scanned_around_when_missing_or_over_long_and_rewritten_whole() {
        if boot().is_empty() {
            return; // no boot id: no hint is ever trusted (see `boot`)
        }
        let d = tempfile::tempdir().unwrap();
        let sd = StateDir::new(d.path());
        std::fs::create_dir_all(sd.jobs_seq_hint().parent().unwrap()).unwrap();
        let hint = Hint::open(sd).unwrap();
        assert_eq!(hint.last(sd, || Ok(7)).unwrap(), 7, "missing: scanned");
        assert!(trusted(sd), "rewritten by the scan");
        hint.write(8).unwrap();
        assert_eq!(
            last(sd, || panic!("a valid hint is not scanned")).unwrap(),
            8
        );
        // Longer than a hint (a torn rewrite's garbage behind it): scanned
        // around, then cut to the one line.
        let long = format!("{}{}", encode(9, boot()), "x".repeat(300));
        std::fs::write(sd.jobs_seq_hint(), long).unwrap();
        let hint = Hint::open(sd).unwrap();
        assert_eq!(hint.last(sd, || Ok(12)).unwrap(), 12, "over-long: scanned");
        hint.write(13).unwrap();
        let bytes = std::fs::read(sd.jobs_seq_hint()).unwrap();
        assert_eq!(bytes, encode(13, boot()).as_bytes());
        let hint = Hint::open(sd).unwrap();
        assert_eq!(hint.last(sd, || panic!("valid")).unwrap(), 13);
    }
}
