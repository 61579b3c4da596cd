//! Renewing a task's write lease while its implementer lane works: a thread
//! that extends the lease by its TTL every third of it, so it never expires
//! under a live writer, and stops when the lane goes down (the handle is
//! dropped), when the lease is no longer active (released, expired,
//! recovery-needed: an expired lease is never brought back) — never after
//! some fixed time: a lane kept up at a weekly usage limit waits days.

use crate::registry::lease::{self, ClaimRequest, LeaseState};
use crate::statedir::StateDir;
use chrono::Utc;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// The session that owns loop write leases.
const OWNER: &str = "implementer";

/// A running renewal; dropping it stops the thread and waits for it.
#[derive(Debug)]
pub struct Renewal {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<u32>>,
}

impl Renewal {
    /// Renew `task`'s lease to `ttl` from now, every `ttl / 3`, until stopped.
    pub fn start(state_dir: &StateDir, task: &str, ttl: Duration) -> Renewal {
        let (tx, rx) = mpsc::channel::<()>();
        let state_dir: PathBuf = state_dir.to_path_buf();
        let task = task.to_string();
        let every = (ttl / 3).max(Duration::from_millis(100));
        let thread = std::thread::Builder::new()
            .name(format!("lease-renew-{task}"))
            .spawn(move || {
                let mut renewed = 0;
                loop {
                    if !renew_once(StateDir::new(&state_dir), &task, ttl) {
                        return renewed;
                    }
                    renewed += 1;
                    match rx.recv_timeout(every) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return renewed,
                    }
                }
            })
            .ok();
        Renewal {
            stop: Some(tx),
            thread,
        }
    }

    /// Stop renewing; returns how many renewals were made.
    pub fn stop(mut self) -> u32 {
        self.finish()
    }

    fn finish(&mut self) -> u32 {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0)
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Extend the task's lease when it is active; false when there is none to
/// extend (or the registry cannot be read), which ends the renewal.
fn renew_once(state_dir: &StateDir, task: &str, ttl: Duration) -> bool {
    let now = Utc::now();
    let Ok(leases) = lease::list(state_dir, now) else {
        return false;
    };
    let Some(l) = leases
        .into_iter()
        .find(|l| l.task_id.as_deref() == Some(task) && l.state == LeaseState::Active)
    else {
        return false;
    };
    if l.past_expiry(now) {
        return false;
    }
    // The same branch, worktree and files: a renewal changes only the expiry.
    let req = ClaimRequest {
        task: task.to_string(),
        session: Some(OWNER.into()),
        branch: l.branch.clone(),
        worktree: l.worktree.as_ref().map(PathBuf::from),
        files: l.claimed_files.clone(),
        ttl_s: Some(ttl.as_secs().max(1)),
    };
    matches!(
        lease::claim(state_dir, &req, now),
        Ok(lease::ClaimOutcome::Renewed(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{InitRequest, Topology};
    use std::time::Instant;

    fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
        let t = Instant::now();
        while t.elapsed() < timeout {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        cond()
    }

    fn lease_of(d: &std::path::Path, task: &str) -> Option<lease::Lease> {
        lease::list(StateDir::new(d), Utc::now())
            .unwrap()
            .into_iter()
            .find(|l| l.task_id.as_deref() == Some(task))
    }

    fn setup(ttl_s: u64) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        crate::registry::init(
            StateDir::new(d.path()),
            &InitRequest {
                topology: Topology::FourRole,
                agent_mix: None,
                force: false,
            },
        )
        .unwrap();
        lease::claim(
            StateDir::new(d.path()),
            &ClaimRequest {
                task: "TASK-1".into(),
                session: Some(OWNER.into()),
                files: vec!["a.txt".into()],
                ttl_s: Some(ttl_s),
                ..Default::default()
            },
            Utc::now(),
        )
        .unwrap();
        d
    }

    /// Guards renewal: a 2 s lease outlives 5 s of work while renewed, and
    /// expires once the renewal stops (so without it, it would have).
    #[test]
    fn a_short_lease_lives_while_renewed_and_expires_after() {
        let d = setup(2);
        let r = Renewal::start(StateDir::new(d.path()), "TASK-1", Duration::from_secs(2));
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            let l = lease_of(d.path(), "TASK-1").unwrap();
            assert_eq!(l.state, LeaseState::Active, "expired while renewed");
            assert_eq!(l.claimed_files, ["a.txt"], "a renewal keeps the claim");
            std::thread::sleep(Duration::from_millis(200));
        }
        let n = r.stop();
        assert!(n >= 3, "renewed {n} times in 5 s with a 2 s TTL");
        assert!(wait_until(Duration::from_secs(10), || {
            lease_of(d.path(), "TASK-1").is_none_or(|l| l.state != LeaseState::Active)
        }));
    }

    /// Guards that an expired lease is never brought back by a renewal.
    #[test]
    fn an_expired_lease_is_not_renewed() {
        let d = setup(1);
        assert!(wait_until(Duration::from_secs(10), || {
            lease_of(d.path(), "TASK-1").is_some_and(|l| l.past_expiry(Utc::now()))
        }));
        let r = Renewal::start(StateDir::new(d.path()), "TASK-1", Duration::from_secs(60));
        assert_eq!(r.stop(), 0);
        let l = lease_of(d.path(), "TASK-1");
        assert!(l.is_none_or(|l| l.state != LeaseState::Active));
    }
}
