//! Landing: one at a time, every queued candidate applied to the run's
//! integration branch (`drover/integration/loop<N>`, never `main`) in its own
//! worktree — `git apply --check` first, one commit per task with a `Task:
//! <ID>` trailer — then the charter's gate command on that exact tree. A
//! candidate that does not apply, or turns the gate red, is dropped from the
//! landing (and goes back); the rest land. What the gate saw is written as
//! `gate-evidence/<k>/evidence.json` + `evidence.md`. Nothing is pushed.

use crate::loopctl::child::{self, Bounds, Ended};
use crate::loopctl::{LoopError, land::git};
use crate::registry::redact::redact_secrets;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a gate command may run before it counts as red, unless the
/// charter's `gate-timeout:` says otherwise.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Bytes of the gate's output kept in the evidence (its end, decoded lossily).
const LOG_TAIL_BYTES: u64 = 4096;
/// Most of a gate's log kept on disk: its end, after a note of what was dropped.
pub const MAX_GATE_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// A candidate queued for landing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub task: String,
    pub title: String,
    pub patch: PathBuf,
    /// The commit the candidate was captured on (its merge-base): a patch
    /// that no longer applies is retried three-way against it.
    pub base: Option<String>,
}

/// What became of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Fate {
    Landed {
        sha: String,
        /// Only a three-way apply took it (the integration head had moved).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        three_way: bool,
    },
    Dropped {
        reason: String,
        /// The files a three-way apply left unmerged (empty when it was
        /// dropped for another reason: a red gate).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<String>,
        /// The end of the gate's log when it turned the gate red.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gate_tail: Option<String>,
    },
    /// The run had to stop while the landing's gate ran (an emergency stop,
    /// the wall-clock budget): nothing of the landing is on the branch, the
    /// candidate stays queued.
    Stopped { reason: String },
    /// The gate timed out while its batch was bisected: undecided, so it is
    /// parked (not sent back: the gate could not say it was at fault).
    TimedOut { reason: String },
}

/// One gate run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GateRun {
    pub command: String,
    pub head: String,
    pub tree: String,
    pub exit: Option<i32>,
    pub green: bool,
    pub ms: u64,
    pub log_tail: String,
    /// Why it was ended before its exit (its timeout, a stop of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// Ended because the run must stop (not a red gate).
    #[serde(skip)]
    pub stopped: bool,
}

/// A landing's result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Landing {
    pub number: u32,
    pub branch: String,
    pub start: String,
    pub head: String,
    pub fates: Vec<(String, Fate)>,
    pub gates: Vec<GateRun>,
    pub evidence_dir: PathBuf,
}

/// Run the gate command on the worktree's tree (`sh -c CMD`, cwd the
/// worktree), bounded by `bounds` (its timeout, a stop of the run), its
/// output in `log` (0600); ended with its whole process group.
pub fn run_gate(
    worktree: &Path,
    cmd: &str,
    log: &Path,
    bounds: &Bounds,
) -> Result<GateRun, LoopError> {
    run_gate_env(worktree, cmd, log, bounds, &[])
}

/// [`run_gate`] with `env` added (a lane's `DROVER_PORT_BASE`).
pub fn run_gate_env(
    worktree: &Path,
    cmd: &str,
    log: &Path,
    bounds: &Bounds,
    env: &[(String, String)],
) -> Result<GateRun, LoopError> {
    let head = git::line(worktree, &["rev-parse", "HEAD"])?;
    let tree = git::line(worktree, &["rev-parse", "HEAD^{tree}"])?;
    let mut c = worktree_shell(cmd, worktree, env, log)?;
    let started = Instant::now();
    let ended = child::run(&mut c, bounds).map_err(|e| LoopError::io(worktree, e))?;
    cap_log(log, MAX_GATE_LOG_BYTES)?;
    redact_log(log)?;
    let exit = ended.code();
    Ok(GateRun {
        command: cmd.to_string(),
        head,
        tree,
        exit,
        green: exit == Some(0),
        ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        log_tail: redact_secrets(&log_tail(log)).0,
        ended: (!matches!(ended, Ended::Exited(_))).then(|| ended.describe(bounds.timeout)),
        stopped: matches!(ended, Ended::Stopped(_)),
    })
}

/// A gate's log is a copy drover stores: the values it was given and
/// secrets are redacted from it (a clean log keeps its bytes).
pub fn redact_log(log: &Path) -> Result<(), LoopError> {
    let Ok(bytes) = std::fs::read(log) else {
        return Ok(());
    };
    if let Some(clean) = crate::registry::redact::redact_shown_bytes(&bytes) {
        crate::store::write_bytes_atomic(log, &clean)?;
    }
    Ok(())
}

/// Keep at most `cap` bytes of a log: its end, streamed into a new file
/// (0600) behind one line saying how much of the start was dropped.
pub fn cap_log(log: &Path, cap: u64) -> Result<(), LoopError> {
    use std::io::{Seek, SeekFrom, Write};
    let len = std::fs::metadata(log).map_or(0, |m| m.len());
    if len <= cap {
        return Ok(());
    }
    let io = |e| LoopError::io(log, e);
    let mut from = std::fs::File::open(log).map_err(io)?;
    from.seek(SeekFrom::Start(len - cap)).map_err(io)?;
    let tmp = log.with_extension("log.capped");
    let mut to = crate::store::open_private(
        &tmp,
        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true),
    )?;
    writeln!(
        to,
        "[drover: the first {} bytes of this log were dropped; the last {cap} are kept]",
        len - cap
    )
    .and_then(|()| std::io::copy(&mut from, &mut to).map(|_| ()))
    .and_then(|()| to.sync_all())
    .map_err(io)?;
    std::fs::rename(&tmp, log).map_err(io)
}

/// The last `LOG_TAIL_BYTES` of a log, decoded lossily (one bad byte
/// never empties it), read without loading the whole log.
pub fn log_tail(log: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(LOG_TAIL_BYTES);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err()
        || f.take(LOG_TAIL_BYTES).read_to_end(&mut buf).is_err()
    {
        return String::new();
    }
    // A cut through a character at the start is dropped, not shown as U+FFFD.
    let skip = if from > 0 {
        buf.iter()
            .take(4)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count()
    } else {
        0
    };
    String::from_utf8_lossy(&buf[skip..]).into_owned()
}

/// A candidate dropped because it does not apply.
pub(super) fn dropped(reason: String, conflicts: Vec<String>) -> Fate {
    Fate::Dropped {
        reason,
        conflicts,
        gate_tail: None,
    }
}

/// A candidate dropped because the gate is red with it: the gate's exit and
/// the end of its log (the evidence a repair round is sent).
pub(super) fn red(g: &GateRun) -> Fate {
    let how = g.exit.map_or_else(
        || g.ended.clone().unwrap_or_else(|| "killed".into()),
        |c| format!("exit {c}"),
    );
    Fate::Dropped {
        reason: format!("turns the gate red ({how})"),
        conflicts: Vec::new(),
        gate_tail: Some(g.log_tail.clone()),
    }
}

/// How a gate run ended, in words: `it exited with code 1`, or why it was
/// ended.
pub fn gate_ending(g: &GateRun) -> String {
    match (g.exit, &g.ended) {
        (Some(c), _) => format!("it exited with code {c}"),
        (None, Some(why)) => format!("it was ended: {why}"),
        (None, None) => "it was killed by a signal".into(),
    }
}

/// The last `n` lines of a gate's log, in the order printed, joined by
/// ` / ` (`(the gate printed nothing)` for none).
pub fn tail_in_order(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(n);
    if lines.is_empty() {
        return "(the gate printed nothing)".into();
    }
    lines[from..].join(" / ")
}

/// The tasks landed on `branch` since `base`, by their `Task:` trailers,
/// oldest first: (task, commit). The branch is the truth of what landed.
pub fn landed_on(wt: &Path, base: &str, branch: &str) -> Result<Vec<(String, String)>, LoopError> {
    let log = git::run(
        wt,
        &[
            "log",
            "--reverse",
            "--format=%H%x00%(trailers:key=Task,valueonly,separator=%x00)%x01",
            &format!("{base}..refs/heads/{branch}"),
        ],
    )?;
    Ok(log
        .split('\u{1}')
        .filter_map(|rec| {
            let mut f = rec.trim_start_matches('\n').split('\0');
            let sha = f.next()?.trim().to_string();
            let task = f.next()?.trim().to_string();
            (!sha.is_empty() && !task.is_empty()).then_some((task, sha))
        })
        .collect())
}

/// Write `evidence.json` and `evidence.md` for a landing.
pub fn write_evidence(l: &Landing) -> Result<(), LoopError> {
    let doc = json!({
        "schema_version": 1,
        "landing": l.number,
        "branch": l.branch,
        "start": l.start,
        "head": l.head,
        "candidates": l.fates.iter().map(|(t, f)| json!({"task": t, "fate": f})).collect::<Vec<_>>(),
        "gate_runs": l.gates,
        "at": crate::paths::now_rfc3339(),
    });
    crate::store::write_json_atomic(&l.evidence_dir.join("evidence.json"), &doc)?;
    let mut md = format!(
        "# Gate evidence: landing {} on {}\n\nFrom {} to {}.\n\n## Candidates\n",
        l.number, l.branch, l.start, l.head
    );
    for (t, f) in &l.fates {
        match f {
            Fate::Landed { sha, three_way } => md.push_str(&format!(
                "- {t}: landed as {sha}{}\n",
                if *three_way {
                    " (applied three-way)"
                } else {
                    ""
                }
            )),
            Fate::Dropped { reason, .. } => md.push_str(&format!("- {t}: dropped, {reason}\n")),
            Fate::Stopped { reason } | Fate::TimedOut { reason } => {
                md.push_str(&format!("- {t}: not landed, {reason}\n"))
            }
        }
    }
    md.push_str("\n## Gate runs\n");
    for g in &l.gates {
        md.push_str(&format!(
            "- `{}` on tree {} (HEAD {}): {} in {} ms\n",
            g.command,
            g.tree,
            g.head,
            match (g.green, g.exit) {
                (true, _) => "green".to_string(),
                (false, Some(c)) => format!("red, exit {c}"),
                (false, None) => format!(
                    "red, {}",
                    g.ended.as_deref().unwrap_or("timed out or killed")
                ),
            },
            g.ms
        ));
    }
    crate::store::write_bytes_atomic(&l.evidence_dir.join("evidence.md"), md.as_bytes())?;
    Ok(())
}

/// `sh -c CMD` in `worktree` with `env`, its output truncated into the
/// private file `log`: how the gate and the charter's `setup:` run. The
/// command's own git works on that worktree, never on a repository
/// drover's environment names.
pub(in crate::loopctl) fn worktree_shell(
    cmd: &str,
    worktree: &Path,
    env: &[(String, String)],
    log: &Path,
) -> Result<Command, LoopError> {
    let out = crate::store::open_private(
        log,
        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true),
    )?;
    let err = out.try_clone().map_err(|e| LoopError::io(log, e))?;
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .current_dir(worktree)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .envs(env.iter().map(|(k, v)| (k, v)));
    crate::git::scrub_repository_env(&mut c);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards issue 24 item 14: one non-UTF-8 byte never empties the tail,
    /// a cut through a character is dropped, and only the end is kept.
    #[test]
    fn log_tail_is_the_lossy_end_of_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("gate.log");
        let mut bytes = "é".repeat(60_000).into_bytes();
        bytes.extend_from_slice(b"caf\xe9 failed\nthe end!\n");
        std::fs::write(&log, &bytes).unwrap();
        let tail = log_tail(&log);
        assert!(tail.ends_with("caf\u{fffd} failed\nthe end!\n"), "{tail:?}");
        assert!(tail.len() <= LOG_TAIL_BYTES as usize + 2, "{}", tail.len());
        assert!(
            tail.starts_with('é'),
            "a split character is dropped: {tail:?}"
        );
        assert_eq!(log_tail(&tmp.path().join("missing.log")), "");
    }

    /// Guards issue 24 item 14: what is kept of a huge gate log is capped
    /// (its end, with a note), and a log under the cap is left as it is.
    #[test]
    fn a_gate_log_past_the_cap_keeps_its_end() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("gate-1.log");
        let mut bytes = vec![b'x'; 10_000];
        bytes.extend_from_slice(b"the end\n");
        std::fs::write(&log, &bytes).unwrap();
        cap_log(&log, 1000).unwrap();
        let kept = std::fs::read_to_string(&log).unwrap();
        assert!(kept.starts_with("[drover: the first 9008 bytes"), "{kept}");
        assert!(kept.ends_with("xthe end\n"));
        assert!(kept.len() < 1100, "{}", kept.len());
        let before = std::fs::read(&log).unwrap();
        cap_log(&log, 1 << 20).unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), before);
    }
}
