//! The global spawn budget: at most N agents are being started at once on a
//! state dir, whichever process starts them (a loop run, another run, `lane
//! up`). A spawn holds one of N slot locks under `<state>/spawn/` from the
//! moment its pane is asked for until its agent is ready; a slot is released
//! when the guard drops, also when its holder dies (the lock is the kernel's).

use super::LaneError;
use crate::statedir::{StateDir, StateDirBuf};
use crate::store::LockGuard;
use std::time::{Duration, Instant};

/// Agents started at once by default.
pub const DEFAULT_SPAWN_BUDGET: usize = 4;
/// How long a spawn waits for a free slot by default.
pub const DEFAULT_SPAWN_WAIT: Duration = Duration::from_secs(120);
/// How often a waiting spawn tries the slots again.
const RETRY: Duration = Duration::from_millis(50);

/// A held slot of the budget; dropping it frees the slot.
#[derive(Debug)]
pub struct SpawnSlot {
    _guard: LockGuard,
    pub slot: usize,
}

/// The budget of a state dir.
#[derive(Debug, Clone)]
pub struct SpawnBudget {
    state: StateDirBuf,
    size: usize,
}

impl SpawnBudget {
    /// `size` slots under `<state>/spawn/` (0 is taken as 1).
    pub fn new(state_dir: &StateDir, size: usize) -> Self {
        SpawnBudget {
            state: state_dir.to_buf(),
            size: size.max(1),
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Take a free slot, waiting at most `wait`; a budget still in use then
    /// is a timeout naming it.
    pub fn acquire(&self, wait: Duration) -> Result<SpawnSlot, LaneError> {
        crate::store::create_private_dir(&self.state.spawn_dir())?;
        let deadline = Instant::now() + wait;
        loop {
            for slot in 0..self.size {
                let path = self.state.spawn_slot_lock(slot);
                if let Some(g) = LockGuard::try_exclusive(&path)? {
                    return Ok(SpawnSlot { _guard: g, slot });
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(LaneError::Timeout(format!(
                    "all {} agent spawn slot(s) of {} stayed in use for {} s; wait for the agents being started, or raise the spawn budget",
                    self.size,
                    self.state.spawn_dir().display(),
                    wait.as_secs()
                )));
            }
            std::thread::sleep(RETRY.min(deadline - now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_full_budget_times_out_and_a_freed_slot_is_taken() {
        let d = tempfile::tempdir().unwrap();
        let b = SpawnBudget::new(crate::statedir::StateDir::new(d.path()), 2);
        let s1 = b.acquire(Duration::from_secs(5)).unwrap();
        let _s2 = b.acquire(Duration::from_secs(5)).unwrap();
        let e = b.acquire(Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, LaneError::Timeout(_)), "{e}");
        assert!(e.to_string().contains("all 2 agent spawn slot(s)"), "{e}");
        drop(s1);
        assert_eq!(b.acquire(Duration::from_secs(5)).unwrap().slot, 0);
    }

    #[test]
    fn concurrent_spawns_never_exceed_the_budget() {
        let d = tempfile::tempdir().unwrap();
        let b = SpawnBudget::new(crate::statedir::StateDir::new(d.path()), 2);
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..5)
            .map(|_| {
                let (b, now, peak) = (b.clone(), now.clone(), peak.clone());
                std::thread::spawn(move || {
                    let _slot = b.acquire(Duration::from_secs(60)).unwrap();
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    // Hold the slot as a spawn would while its agent starts.
                    std::thread::sleep(Duration::from_millis(150));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let peak = peak.load(Ordering::SeqCst);
        assert!(
            (1..=2).contains(&peak),
            "{peak} spawns at once with a budget of 2"
        );
    }
}
