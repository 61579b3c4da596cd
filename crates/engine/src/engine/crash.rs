//! Crash points: where a test stops a transition's writer between two of its
//! durable steps, the way SQLite's crash tests do.
//!
//! With `DROVER_ENGINE_CRASH_AT=N` in its environment a process kills itself
//! with SIGKILL — what `kill -9` does, nothing flushed or unwound — at the
//! N-th crash point it passes, counted from 1 over its life, after naming the
//! point on stderr. A test runs one transition with N = 1, 2, … until the
//! process outlives every point, and checks the state dir after each kill
//! (`tests/it/engine_crash.rs`; the long version is `cargo bench --bench
//! engine -- --crash`). Unset, as everywhere else, a point costs one load.
//!
//! The points of an accepted transition, in order: `locked`, `seq written`,
//! the record's `written` and `renamed` (not synced), `audited` (the entry
//! appended, not synced), `unlocked`, `synced` (the audit log, after the lock
//! is let go), the mirror's `written` and `renamed` (it is derived and not
//! fsynced).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static AT: OnceLock<Option<u64>> = OnceLock::new();
static PASSED: AtomicU64 = AtomicU64::new(0);

/// Pass a crash point named `name`.
pub(crate) fn point(name: &'static str) {
    let Some(at) = *AT.get_or_init(|| {
        std::env::var(crate::statedir::env::ENGINE_CRASH_AT)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    }) else {
        return;
    };
    let n = PASSED.fetch_add(1, Ordering::SeqCst) + 1;
    if n == at {
        eprintln!("crash point {n}: {name}");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        // SIGKILL cannot be caught; should raise fail, stop anyway.
        std::process::abort();
    }
}
