//! The run directory `<state>/loop<N>/` and its files (formats in `LOOP.md`):
//! `QUEUE.md`, `LANES.md`, `DECISIONS.md` (append-only), `STATE.md` (≤ 8 KB),
//! `QUESTIONS.md`, `run.json` (what `loop status` reads), `closeout.md`, and
//! one directory per lane.

use crate::loopctl::LoopError;
use crate::statedir::StateDir;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest STATE.md; older rulings are pruned first.
pub const MAX_STATE_BYTES: usize = 8 * 1024;

/// One row of LANES.md.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaneRow {
    pub id: String,
    pub task: String,
    pub agent: String,
    pub worktree: String,
    /// Why the lane is not progressing (`stalled`, `auth-dead`, `parked`,
    /// `needs-human`, `unreachable`), when it is not.
    #[serde(default)]
    pub stall: Option<String>,
}

/// A run's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    pub path: PathBuf,
    pub n: u32,
}

pub use crate::runstate::status::runs;

fn private_dir(p: &Path) -> Result<(), LoopError> {
    // 0700 set explicitly, whatever the umask (docs/state-dir.md).
    Ok(crate::store::create_private_dir(p)?)
}

impl RunDir {
    /// Create the next run's directory (`loop<N>`, N one past the highest).
    pub fn create(state: &StateDir) -> Result<RunDir, LoopError> {
        RunDir::create_free(state, |_| false)
    }

    /// [`RunDir::create`], skipping every N `taken` says is used elsewhere
    /// (its integration branch already in the repository, say).
    pub fn create_free(state: &StateDir, taken: impl Fn(u32) -> bool) -> Result<RunDir, LoopError> {
        private_dir(state)?;
        let mut n = runs(state).last().copied().unwrap_or(0) + 1;
        loop {
            if taken(n) {
                n += 1;
                continue;
            }
            let path = state.run_dir(n);
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700));
                    let run = RunDir { path, n };
                    for (f, head) in [
                        ("DECISIONS.md", format!("# Decisions: loop{n}\n\n")),
                        ("QUESTIONS.md", format!("# Questions: loop{n}\n\n")),
                    ] {
                        crate::store::write_bytes_atomic(&run.file(f), head.as_bytes())?;
                    }
                    return Ok(run);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => return Err(LoopError::io(&path, e)),
            }
        }
    }

    /// An existing run by number.
    pub fn open(state: &StateDir, n: u32) -> Result<RunDir, LoopError> {
        let path = state.run_dir(n);
        if !path.is_dir() {
            return Err(LoopError::usage(
                "RUN",
                format!("no run loop{n} in this state dir; see `drover loop status`"),
            ));
        }
        Ok(RunDir { path, n })
    }

    /// A file of the run.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A lane's directory (created).
    pub fn lane_dir(&self, lane: &str) -> Result<PathBuf, LoopError> {
        let p = self.path.join(lane);
        private_dir(&p)?;
        Ok(p)
    }

    /// The integration branch of this run.
    pub fn integration_branch(&self) -> String {
        format!("drover/integration/loop{}", self.n)
    }

    /// Write QUEUE.md (atomic).
    pub fn write_queue(
        &self,
        ready: &[(String, String)],
        hold: &[(String, String)],
        landing: &[(String, String)],
    ) -> Result<(), LoopError> {
        let text = shown(&render_queue(self.n, ready, hold, landing));
        crate::store::write_bytes_atomic(&self.file("QUEUE.md"), text.as_bytes())?;
        Ok(())
    }

    /// Write LANES.md (atomic): one line per live lane.
    pub fn write_lanes(&self, lanes: &[LaneRow]) -> Result<(), LoopError> {
        let mut text = format!("# Lanes: loop{}\n\n", self.n);
        for l in lanes {
            text.push_str(&format!(
                "- {} · task {} · agent {} · worktree {}",
                l.id, l.task, l.agent, l.worktree
            ));
            if let Some(s) = &l.stall {
                text.push_str(&format!(" · {s}"));
            }
            text.push('\n');
        }
        crate::store::write_bytes_atomic(&self.file("LANES.md"), shown(&text).as_bytes())?;
        Ok(())
    }

    /// Append one entry to DECISIONS.md (`D<k>`, numbered); returns its id.
    pub fn decide(&self, kind: &str, text: &str) -> Result<String, LoopError> {
        self.decide_at(kind, text, &crate::paths::now_rfc3339())
    }

    /// [`RunDir::decide`] at a time of the loop's clock (RFC 3339).
    pub fn decide_at(&self, kind: &str, text: &str, at: &str) -> Result<String, LoopError> {
        let path = self.file("DECISIONS.md");
        let _lock = crate::store::lock_beside(&path)?;
        let existing = std::fs::read_to_string(&path).unwrap_or_default();
        let k = existing.lines().filter(|l| l.starts_with("- D")).count() + 1;
        let id = format!("D{k}");
        let line = format!("- {id} {at} {kind}: {}\n", shown(&text.replace('\n', " ")));
        append(&path, &line)?;
        Ok(id)
    }

    /// Append a question (with a recommendation) to QUESTIONS.md.
    pub fn ask(&self, task: &str, question: &str, recommendation: &str) -> Result<(), LoopError> {
        self.ask_at(task, question, recommendation, &crate::paths::now_rfc3339())
    }

    /// [`RunDir::ask`] at a time of the loop's clock (RFC 3339).
    pub fn ask_at(
        &self,
        task: &str,
        question: &str,
        recommendation: &str,
        at: &str,
    ) -> Result<(), LoopError> {
        let line = shown(&format!(
            "- {at} {task}: {} — recommendation: {}\n",
            question.replace('\n', " "),
            recommendation.replace('\n', " ")
        ));
        append(&self.file("QUESTIONS.md"), &line)
    }

    /// Write STATE.md (atomic), keeping it under [`MAX_STATE_BYTES`] by
    /// dropping the oldest rulings.
    pub fn write_state(&self, mode: &str, wave: u32, rulings: &[String]) -> Result<(), LoopError> {
        let text = shown(&render_state(self.n, mode, wave, rulings));
        crate::store::write_bytes_atomic(&self.file("STATE.md"), text.as_bytes())?;
        Ok(())
    }
}

/// The lock a run holds on its board while a process runs it: a second run
/// on the same board (same state dir) is refused, naming the first.
pub fn lock_board(
    state: &StateDir,
    board_dir: &Path,
) -> Result<crate::store::LockGuard, LoopError> {
    let canon = std::fs::canonicalize(board_dir).unwrap_or_else(|_| board_dir.to_path_buf());
    let key = crate::loopctl::sha256::hex(canon.to_string_lossy().as_bytes());
    let path = state.board_lock(&key[..16]);
    private_dir(state)?;
    match crate::store::LockGuard::try_exclusive(&path)? {
        Some(g) => Ok(g),
        None => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = holder.trim();
            Err(LoopError::Refused(format!(
                "the board {} is being worked by {} (see `drover loop status`); one run per board",
                canon.display(),
                if holder.is_empty() {
                    "another run".to_string()
                } else {
                    holder.to_string()
                }
            )))
        }
    }
}

/// Say in the board's lock who holds it (read by a run refused).
pub fn note_board_holder(lock: &crate::store::LockGuard, run: u32) {
    use std::os::unix::fs::FileExt;
    let note = format!("loop{run} (pid {})\n", std::process::id());
    if lock.file().write_at(note.as_bytes(), 0).is_ok() {
        let _ = lock.file().set_len(note.len() as u64);
    }
}

/// Every copy the run shows or stores is redacted of the values it was
/// given and of secrets (`registry::redact::redact_shown`).
pub fn shown(text: &str) -> String {
    crate::registry::redact::redact_shown(text)
}

/// Write a JSON document of the run (atomic), its strings redacted as
/// [`shown`] says.
pub fn write_json_shown<T: serde::Serialize>(path: &Path, doc: &T) -> Result<(), LoopError> {
    let mut v = serde_json::to_value(doc).map_err(|e| {
        LoopError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    redact_strings(&mut v);
    crate::store::write_json_atomic(path, &v)?;
    Ok(())
}

/// A JSON text as [`write_json_shown`] would store it (for printing).
pub fn shown_json(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(mut v) => {
            redact_strings(&mut v);
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| shown(text))
        }
        Err(_) => shown(text),
    }
}

fn redact_strings(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            let r = shown(s);
            if r != *s {
                *s = r;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_strings),
        serde_json::Value::Object(m) => m.values_mut().for_each(redact_strings),
        _ => {}
    }
}

fn append(path: &Path, line: &str) -> Result<(), LoopError> {
    let mut f =
        crate::store::open_private(path, std::fs::OpenOptions::new().create(true).append(true))?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(|e| LoopError::io(path, e))
}

/// QUEUE.md's text (pure): rows are (task id, note).
pub fn render_queue(
    n: u32,
    ready: &[(String, String)],
    hold: &[(String, String)],
    landing: &[(String, String)],
) -> String {
    let mut t = format!("# Queue: loop{n}\n\n## Ready\n");
    for (id, note) in ready {
        t.push_str(&format!("- {id} ({note})\n"));
    }
    t.push_str("\n## Hold\n");
    for (id, reason) in hold {
        t.push_str(&format!("- {id}: {}\n", reason.replace('\n', " ")));
    }
    t.push_str("\n## Landing\n");
    for (id, note) in landing {
        t.push_str(&format!("- {id} ({note})\n"));
    }
    t
}

/// STATE.md's text (pure), at most [`MAX_STATE_BYTES`]: newest rulings kept.
pub fn render_state(n: u32, mode: &str, wave: u32, rulings: &[String]) -> String {
    let head = format!("# State: loop{n}\n\nmode: {mode}\nwave: {wave}\n\n## Live rulings\n");
    let mut lines: Vec<String> = rulings
        .iter()
        .map(|r| format!("- {}\n", r.replace('\n', " ")))
        .collect();
    let mut len = head.len() + lines.iter().map(String::len).sum::<usize>();
    while len > MAX_STATE_BYTES && !lines.is_empty() {
        len -= lines.remove(0).len();
    }
    let mut text = head;
    for l in lines {
        text.push_str(&l);
    }
    if text.len() > MAX_STATE_BYTES {
        let end = (0..=MAX_STATE_BYTES)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_files_have_their_formats() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path());
        let a = RunDir::create(state).unwrap();
        let b = RunDir::create(state).unwrap();
        assert_eq!((a.n, b.n), (1, 2));
        assert_eq!(a.integration_branch(), "drover/integration/loop1");
        a.write_queue(
            &[("T-1".into(), "Greet".into())],
            &[("T-2".into(), "depends on T-1".into())],
            &[],
        )
        .unwrap();
        let q = std::fs::read_to_string(a.file("QUEUE.md")).unwrap();
        assert_eq!(
            q,
            "# Queue: loop1\n\n## Ready\n- T-1 (Greet)\n\n## Hold\n- T-2: depends on T-1\n\n## Landing\n"
        );
        assert_eq!(a.decide("ruling", "one").unwrap(), "D1");
        assert_eq!(a.decide("park", "two\nlines").unwrap(), "D2");
        let d = std::fs::read_to_string(a.file("DECISIONS.md")).unwrap();
        let lines: Vec<&str> = d.lines().filter(|l| l.starts_with("- D")).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("- D1 ") && lines[0].ends_with(" ruling: one"));
        assert!(lines[1].ends_with(" park: two lines"));
    }

    #[test]
    fn state_stays_under_8k() {
        let rulings: Vec<String> = (0..500)
            .map(|i| format!("ruling {i} {}", "x".repeat(40)))
            .collect();
        let s = render_state(1, "owner-present", 3, &rulings);
        assert!(s.len() <= MAX_STATE_BYTES, "{}", s.len());
        assert!(s.contains("ruling 499 ") && !s.contains("ruling 0 "));
        assert!(s.starts_with("# State: loop1\n\nmode: owner-present\nwave: 3\n"));
    }
}
