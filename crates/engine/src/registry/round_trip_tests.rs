//! The registry's times as `DateTime<Utc>`: files written before they were
//! typed (`tests/registry_fixtures/written_*.json`, as `drover lease claim`
//! and `drover mix record` wrote them) read, and are written back byte for
//! byte; a lease's expiry that is no time is kept and reads as past.

use super::lease::{self, Expiry};
use super::mix;
use crate::statedir::StateDir;
use crate::store;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/registry_fixtures")
        .join(name)
}

/// A state dir holding `text` at `path_of(state)`.
fn state_with(path_of: fn(&StateDir) -> PathBuf, text: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = path_of(StateDir::new(d.path()));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    (d, p)
}

fn rewritten<T: serde::Serialize>(dir: &Path, v: &T) -> Vec<u8> {
    let out = dir.join("rewritten.json");
    store::write_json_atomic(&out, v).unwrap();
    std::fs::read(out).unwrap()
}

fn at(s: &str) -> chrono::DateTime<chrono::Utc> {
    crate::time::parse(s).unwrap()
}

#[test]
fn leases_written_before_read_as_times_and_write_back_the_same() {
    let text = std::fs::read(fixture("written_leases.json")).unwrap();
    let (d, _) = state_with(StateDir::leases_file, &text);
    let doc = lease::load(StateDir::new(d.path())).unwrap().unwrap();
    let times: Vec<_> = doc.leases.iter().map(|l| l.expires_at.time()).collect();
    assert_eq!(
        times,
        [
            Some(at("2026-12-06T03:06:05Z")),
            Some(at("2026-12-06T01:07:05Z"))
        ]
    );
    assert!(!doc.leases[0].past_expiry(at("2026-12-06T03:06:04Z")));
    assert!(doc.leases[0].past_expiry(at("2026-12-06T03:06:05Z")));
    assert_eq!(rewritten(d.path(), &doc), text);
}

#[test]
fn an_unreadable_expiry_is_kept_and_reads_as_expired() {
    let text = std::fs::read_to_string(fixture("written_leases.json")).unwrap();
    let text = text.replace("2026-12-06T03:06:05Z", "next tuesday");
    let (d, _) = state_with(StateDir::leases_file, text.as_bytes());
    let doc = lease::load(StateDir::new(d.path())).unwrap().unwrap();
    let l = &doc.leases[0];
    assert_eq!(l.expires_at, Expiry::Unreadable("next tuesday".into()));
    assert_eq!(l.expires_at.to_string(), "next tuesday");
    assert!(l.past_expiry(at("2000-01-01T00:00:00Z")));
    assert_eq!(rewritten(d.path(), &doc), text.as_bytes());
    // Brought up to date, it is expired (its lease names no worktree).
    let now = at("2026-12-06T01:00:00Z");
    let listed = lease::list(StateDir::new(d.path()), now).unwrap();
    assert_eq!(listed[0].state, lease::LeaseState::Expired);
    assert_eq!(listed[1].state, lease::LeaseState::Active);
}

#[test]
fn an_expiry_that_is_no_text_is_refused_as_before() {
    let text = std::fs::read_to_string(fixture("written_leases.json")).unwrap();
    let text = text.replace("\"2026-12-06T03:06:05Z\"", "17");
    let (d, p) = state_with(StateDir::leases_file, text.as_bytes());
    let e = lease::load(StateDir::new(d.path()))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&p.display().to_string()), "{e}");
}

#[test]
fn a_written_ledger_reads_its_time_and_writes_back_the_same() {
    let text = std::fs::read(fixture("written_agent_mix.json")).unwrap();
    let (d, _) = state_with(StateDir::mix_file, &text);
    let ledger = mix::load(StateDir::new(d.path())).unwrap().unwrap();
    assert_eq!(ledger.updated_at, Some(at("2026-12-06T01:06:05.729Z")));
    assert_eq!(rewritten(d.path(), &ledger), text);
}

#[test]
fn a_ledger_time_that_is_no_time_reads_as_none_and_the_next_write_sets_it() {
    let text = std::fs::read_to_string(fixture("written_agent_mix.json")).unwrap();
    let text = text.replace("2026-12-06T01:06:05.729Z", "garbled");
    let (d, _) = state_with(StateDir::mix_file, text.as_bytes());
    assert_eq!(
        mix::load(StateDir::new(d.path()))
            .unwrap()
            .unwrap()
            .updated_at,
        None
    );
    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    let ((), after) = mix::update(StateDir::new(d.path()), None, |_| ()).unwrap();
    assert!(after.updated_at.is_some_and(|t| t >= before), "{after:?}");
}
