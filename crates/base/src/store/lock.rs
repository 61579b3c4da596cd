use super::StoreError;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest any lock wait lasts before it is an error naming the holder.
/// Every critical section under a drover lock is a few file operations.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);
/// Overrides [`LOCK_WAIT`] (milliseconds), e.g. for tests.
pub const LOCK_WAIT_ENV: &str = crate::statedir::env::LOCK_WAIT_MS;
/// The first and the longest pause between two tries of a held lock.
const RETRY_FIRST: Duration = Duration::from_micros(200);
const RETRY_MAX: Duration = Duration::from_millis(5);

/// The lock wait in force: [`LOCK_WAIT`] unless `DROVER_LOCK_WAIT_MS` says otherwise.
pub fn lock_wait() -> Duration {
    std::env::var(LOCK_WAIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(LOCK_WAIT, Duration::from_millis)
}

/// An exclusive advisory lock (flock) held until dropped.
#[derive(Debug)]
pub struct LockGuard {
    file: File,
    path: PathBuf,
}

impl LockGuard {
    /// Take an exclusive lock on `lock_file`, creating it if needed; waits at
    /// most [`lock_wait`], then fails naming the file and the holder's pid.
    /// The holder writes its pid into the lock file.
    pub fn exclusive(lock_file: &Path) -> Result<Self, StoreError> {
        let wait = lock_wait();
        let file = open_lock_file(lock_file)?;
        let start = Instant::now();
        let mut pause = crate::backoff::Backoff::new(RETRY_FIRST, RETRY_MAX);
        while !try_take(&file, lock_file)? {
            let waited = start.elapsed();
            if waited >= wait {
                return Err(StoreError::LockTimeout {
                    path: lock_file.to_path_buf(),
                    waited_ms: waited.as_millis() as u64,
                    holder: holder_pid(&file, lock_file),
                });
            }
            std::thread::sleep(pause.next_delay().min(wait - waited));
        }
        Ok(Self::held(file, lock_file))
    }

    /// [`LockGuard::exclusive`], waiting in the kernel's queue of the lock
    /// rather than sleeping between tries: a lock let go passes at once to a
    /// waiter, and a newcomer cannot overtake a waiter again and again. For a
    /// lock many processes take briefly and often (the jobs' registry lock).
    /// The wait runs on a helper thread so it stays bounded; one that gives
    /// up leaves the thread to let the lock go as soon as it gets it.
    pub fn exclusive_queued(lock_file: &Path) -> Result<Self, StoreError> {
        Self::exclusive_queued_within(lock_file, lock_wait())
    }

    fn exclusive_queued_within(lock_file: &Path, wait: Duration) -> Result<Self, StoreError> {
        let file = open_lock_file(lock_file)?;
        if try_take(&file, lock_file)? {
            return Ok(Self::held(file, lock_file));
        }
        let start = Instant::now();
        // A flock belongs to the open file, which the clone shares: the lock
        // the waiter takes is `file`'s. Should nobody take the answer, the
        // waiter's clone is the last of the open file and dropping it lets
        // the lock go.
        let clone = file
            .try_clone()
            .map_err(|e| StoreError::io("lock", lock_file, e))?;
        let (done, rx) = std::sync::mpsc::sync_channel(1);
        waiters::hand_over(waiters::Wait { file: clone, done })
            .map_err(|e| StoreError::io("lock", lock_file, e))?;
        match rx.recv_timeout(wait) {
            Ok(Ok(())) => Ok(Self::held(file, lock_file)),
            Ok(Err(e)) => Err(StoreError::io("lock", lock_file, e)),
            Err(_) => Err(StoreError::LockTimeout {
                path: lock_file.to_path_buf(),
                waited_ms: start.elapsed().as_millis() as u64,
                holder: holder_pid(&file, lock_file),
            }),
        }
    }

    fn held(file: File, lock_file: &Path) -> Self {
        write_holder(&file);
        LockGuard {
            file,
            path: lock_file.to_path_buf(),
        }
    }

    /// Try to take the lock without blocking; `Ok(None)` when another holder has it.
    pub fn try_exclusive(lock_file: &Path) -> Result<Option<Self>, StoreError> {
        let file = open_lock_file(lock_file)?;
        Ok(try_take(&file, lock_file)?.then(|| LockGuard {
            file,
            path: lock_file.to_path_buf(),
        }))
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open lock file (e.g. to write the holder's pid into it).
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Who holds the flock on `lock_file`, when that can be told (see
/// [`LockGuard::exclusive`]'s error).
pub fn holder_of(lock_file: &Path) -> Option<u32> {
    let file = File::open(lock_file).ok()?;
    holder_pid(&file, lock_file)
}

impl LockGuard {
    /// Write this process's pid into the lock file (what
    /// [`LockGuard::exclusive`] does), for a lock taken with `try_exclusive`.
    pub fn note_holder(&self) {
        write_holder(&self.file);
    }
}

/// The `lock-wait` threads of [`LockGuard::exclusive_queued`]: each blocks
/// in `flock` for one wait at a time, then waits for the next. Kept rather
/// than made per wait: making a thread cost more than the wait itself when
/// many processes take one lock briefly and often (the jobs' registry lock).
mod waiters {
    use std::fs::File;
    use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
    use std::sync::{Mutex, PoisonError};

    /// One wait: the lock file (a clone of the waiting caller's) and where
    /// to say whether it was taken.
    pub(super) struct Wait {
        pub(super) file: File,
        pub(super) done: SyncSender<std::io::Result<()>>,
    }

    /// Idle threads kept at most; more exit when their wait is over.
    const KEEP: usize = 4;

    /// The idle threads, by the pid that made them: a forked child has none
    /// of its parent's threads, so it starts with none.
    static IDLE: Mutex<(u32, Vec<SyncSender<Wait>>)> = Mutex::new((0, Vec::new()));

    /// Give `wait` to an idle thread, or to a new one.
    pub(super) fn hand_over(wait: Wait) -> std::io::Result<()> {
        let pid = std::process::id();
        let idle = {
            let mut g = IDLE.lock().unwrap_or_else(PoisonError::into_inner);
            if g.0 != pid {
                *g = (pid, Vec::new());
            }
            g.1.pop()
        };
        let wait = match idle {
            Some(tx) => match tx.send(wait) {
                Ok(()) => return Ok(()),
                Err(e) => e.0,
            },
            None => wait,
        };
        let (tx, rx) = sync_channel(1);
        std::thread::Builder::new()
            .name("lock-wait".into())
            .spawn(move || run(wait, tx, rx))
            .map(drop)
    }

    fn run(mut wait: Wait, me: SyncSender<Wait>, next: Receiver<Wait>) {
        loop {
            let got = wait.file.lock();
            let _ = wait.done.send(got);
            // Drops the clone: if the caller gave up, the lock goes with it.
            drop(wait);
            {
                let mut g = IDLE.lock().unwrap_or_else(PoisonError::into_inner);
                if g.0 != std::process::id() || g.1.len() >= KEEP {
                    return;
                }
                g.1.push(me.clone());
            }
            match next.recv() {
                Ok(w) => wait = w,
                Err(_) => return,
            }
        }
    }
}

/// One try of the flock on `file`: whether it was taken (false: another
/// holder has it).
fn try_take(file: &File, lock_file: &Path) -> Result<bool, StoreError> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::io("lock", lock_file, e)),
    }
}

/// Record our pid in the lock file for whoever times out waiting on us.
/// Best effort: the lock is held whether or not the note is written. The
/// note is always 11 bytes (the pid padded with spaces), as long as any note
/// a holder writes, so it covers the last one whole with no truncate after
/// it (one system call less for every holder of a busy lock).
fn write_holder(file: &File) {
    use std::os::unix::fs::FileExt;
    let note = format!("{:<10}\n", std::process::id());
    let _ = file.write_at(note.as_bytes(), 0);
}

/// Who holds the flock on `file`: the kernel's `/proc/locks` first (it knows
/// holders that are not drover) when that process still lives; else a process
/// that has the file open (a flock belongs to the open file, which a child can
/// inherit); else the pid the holder wrote into the file.
fn holder_pid(file: &File, path: &Path) -> Option<u32> {
    let md = file.metadata().ok()?;
    let alive = |pid: &u32| crate::procfs::exists(*pid);
    crate::procfs::locks()
        .and_then(|t| flock_holder(&t, md.dev(), md.ino()))
        .filter(alive)
        .or_else(|| opener_pid(md.dev(), md.ino()))
        .or_else(|| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .filter(alive)
        })
}

/// Another process with (dev, ino) open, from `/proc/*/fd`.
fn opener_pid(dev: u64, ino: u64) -> Option<u32> {
    let me = std::process::id();
    crate::procfs::pids().into_iter().find(|pid| {
        *pid != me
            && crate::procfs::fd_paths(*pid)
                .iter()
                .any(|fd| std::fs::metadata(fd).is_ok_and(|m| m.dev() == dev && m.ino() == ino))
    })
}

/// The pid holding a FLOCK on (dev, ino) in the text of `/proc/locks`
/// (`1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF`; waiters are marked `->`).
fn flock_holder(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&"FLOCK") {
            return None;
        }
        let mut id = f.get(5)?.split(':');
        let (ma, mi, i) = (id.next()?, id.next()?, id.next()?);
        let same = u64::from_str_radix(ma, 16).ok()? == major
            && u64::from_str_radix(mi, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        same.then(|| f.get(4)?.parse().ok()).flatten()
    })
}

/// Open (or create) a lock file; its directory is made only when missing
/// (checked first on every lock, it cost the holders of a busy one a stat).
fn open_lock_file(lock_file: &Path) -> Result<File, StoreError> {
    let open = || {
        super::open_private(
            lock_file,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
    };
    match open() {
        Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = lock_file.parent() {
                super::create_private_dir(dir)?;
            }
            open()
        }
        other => other,
    }
}

/// `doc.json` → `doc.json.lock`.
pub fn lock_path_for(doc: &Path) -> PathBuf {
    let mut s = doc.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

/// Lock the lock file beside a multi-writer document.
pub fn lock_beside(doc: &Path) -> Result<LockGuard, StoreError> {
    LockGuard::exclusive(&lock_path_for(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queued wait gets a lock as soon as it is let go, and one that
    /// gives up leaves nothing held: its helper lets the lock go once it
    /// gets it.
    #[test]
    fn a_queued_wait_takes_a_lock_let_go_and_a_timed_out_one_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.lock");
        let holder = LockGuard::exclusive(&p).unwrap();
        let waiting = {
            let p = p.clone();
            std::thread::spawn(move || {
                LockGuard::exclusive_queued_within(&p, Duration::from_secs(30))
            })
        };
        // Let go only once the wait is queued in the kernel (its helper runs).
        let start = Instant::now();
        while !helper_waits() {
            assert!(start.elapsed() < Duration::from_secs(10), "no helper waits");
            std::thread::yield_now();
        }
        drop(holder);
        let got = waiting.join().unwrap().expect("taken once let go");
        assert!(
            LockGuard::try_exclusive(&p).unwrap().is_none(),
            "held by the waiter"
        );
        let e = LockGuard::exclusive_queued_within(&p, Duration::from_millis(50))
            .expect_err("held elsewhere");
        assert!(
            matches!(&e, StoreError::LockTimeout { path, .. } if path == &p),
            "{e}"
        );
        drop(got);
        // The timed-out wait's helper takes the lock and lets it go.
        LockGuard::exclusive_queued_within(&p, Duration::from_secs(10))
            .expect("the abandoned wait let the lock go");
    }

    /// A thread of this process named `lock-wait` is blocked in `flock`.
    fn helper_waits() -> bool {
        std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .any(|t| {
                let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
                read("comm").trim() == "lock-wait" && read("wchan").contains("lock")
            })
    }

    #[test]
    fn second_try_lock_fails_while_held() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let g = LockGuard::exclusive(&p).unwrap();
        assert!(LockGuard::try_exclusive(&p).unwrap().is_none());
        drop(g);
        // Another test of this binary forking a child holds a copy of the
        // lock's descriptor until its exec closes it: the lock comes free
        // then, within a bound.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut free = false;
        while !free && std::time::Instant::now() < deadline {
            free = LockGuard::try_exclusive(&p).unwrap().is_some();
            if !free {
                std::thread::yield_now();
            }
        }
        assert!(free, "the lock stayed held after its guard was dropped");
    }

    #[test]
    fn proc_locks_lines_name_the_holder() {
        let text = "1: FLOCK  ADVISORY  WRITE 4242 fe:01:77 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 5151 fe:01:77 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 6161 fe:01:78 0 EOF\n";
        let dev = (0xfe << 8) | 0x01;
        assert_eq!(flock_holder(text, dev, 77), Some(4242));
        assert_eq!(flock_holder(text, dev, 78), None);
        assert_eq!(flock_holder(text, dev + 1, 77), None);
    }

    /// The holder's own pid is found (we hold it through another open file).
    #[test]
    fn holder_is_found_through_proc_locks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let _g = LockGuard::exclusive(&p).unwrap();
        let other = open_lock_file(&p).unwrap();
        assert_eq!(holder_pid(&other, &p), Some(std::process::id()));
    }
}
