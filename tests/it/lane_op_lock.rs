//! The lanes operation lock (`<state>/registry/lanes.op.lock`): a wait for
//! it honours `DROVER_LOCK_WAIT_MS` and names the holder when it gives up,
//! and `lane gc --dry-run`, which changes nothing, never waits for it.

use crate::common;

use common::{Drover, stderr};
use std::time::{Duration, Instant};

/// Guards issue 24 item 15: with the lock held by this process, `lane
/// down` gives up after `DROVER_LOCK_WAIT_MS` naming this pid, and `lane gc
/// --dry-run` answers at once.
#[test]
fn the_lanes_lock_wait_is_bounded_names_its_holder_and_a_dry_run_skips_it() {
    let d = Drover::new();
    let lock = d.state.join("registry/lanes.op.lock");
    let _held = drover::store::LockGuard::exclusive(&lock).unwrap();
    let t0 = Instant::now();
    let out = d
        .cmd()
        .env("DROVER_LOCK_WAIT_MS", "500")
        .args(["lane", "down", "nobody"])
        .output()
        .unwrap();
    let e = stderr(&out);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(!out.status.success(), "{e}");
    assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
    let t0 = Instant::now();
    let out = d
        .cmd()
        .args(["lane", "gc", "--dry-run", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}
