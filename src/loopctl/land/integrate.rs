//! Landing: one at a time, every queued candidate applied to the run's
//! integration branch (`drover/integration/loop<N>`, never `main`) in its own
//! worktree — `git apply --check` first, one commit per task with a `Task:
//! <ID>` trailer — then the charter's gate command on that exact tree. A
//! candidate that does not apply, or turns the gate red, is dropped from the
//! landing (and goes back); the rest land. What the gate saw is written as
//! `gate-evidence/<k>/evidence.json` + `evidence.md`. Nothing is pushed.

use crate::loopctl::{LoopError, land::git};
use crate::registry::redact::redact_secrets;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a gate command may run before it counts as red.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How often a running gate is checked for its exit.
const GATE_POLL: Duration = Duration::from_millis(50);
/// Bytes of the gate's output kept in the evidence.
const LOG_TAIL_BYTES: usize = 4096;

/// A candidate queued for landing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub task: String,
    pub title: String,
    pub patch: PathBuf,
}

/// What became of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Fate {
    Landed { sha: String },
    Dropped { reason: String },
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

/// Run the gate command on the worktree's tree (`sh -c CMD`, cwd the worktree).
pub fn run_gate(worktree: &Path, cmd: &str, log: &Path) -> Result<GateRun, LoopError> {
    let head = git::line(worktree, &["rev-parse", "HEAD"])?;
    let tree = git::line(worktree, &["rev-parse", "HEAD^{tree}"])?;
    let out = std::fs::File::create(log).map_err(|e| LoopError::io(log, e))?;
    let err = out.try_clone().map_err(|e| LoopError::io(log, e))?;
    let started = Instant::now();
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(worktree)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| LoopError::io(worktree, e))?
    };
    let status = loop {
        match child.try_wait().map_err(|e| LoopError::io(worktree, e))? {
            Some(s) => break Some(s),
            None if started.elapsed() > GATE_TIMEOUT => {
                let pg = nix::unistd::Pid::from_raw(-(child.id() as i32));
                let _ = nix::sys::signal::kill(pg, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(GATE_POLL),
        }
    };
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let start = text.len().saturating_sub(LOG_TAIL_BYTES);
    let start = (start..=text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    let exit = status.and_then(|s| s.code());
    Ok(GateRun {
        command: cmd.to_string(),
        head,
        tree,
        exit,
        green: exit == Some(0),
        ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        log_tail: redact_secrets(&text[start..]).0,
    })
}

/// Apply one patch and commit it with its trailer; `Err(reason)` when it does not apply.
fn apply_one(wt: &Path, q: &Queued) -> Result<Result<String, String>, LoopError> {
    let p = q.patch.to_string_lossy();
    let check = git::output(wt, &["apply", "--check", "--index", "--binary", &p])?;
    if !check.status.success() {
        let why = String::from_utf8_lossy(&check.stderr).trim().to_string();
        return Ok(Err(format!("does not apply: {}", first_line(&why))));
    }
    git::run(wt, &["apply", "--index", "--binary", &p])?;
    let msg = format!("{}: {}\n\nTask: {}\n", q.task, q.title, q.task);
    git::run(wt, &["commit", "-q", "--no-verify", "-m", &msg])?;
    Ok(Ok(git::line(wt, &["rev-parse", "HEAD"])?))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(200).collect()
}

/// Land the queued candidates on the integration worktree `wt` (pure git;
/// the caller holds the one-landing-at-a-time rule). `number` names the
/// evidence dir under `evidence_root`.
pub fn land(
    wt: &Path,
    branch: &str,
    queued: &[Queued],
    gate: &str,
    evidence_root: &Path,
    number: u32,
) -> Result<Landing, LoopError> {
    let dir = evidence_root.join(number.to_string());
    crate::store::create_private_dir(&dir)?;
    let start = git::line(wt, &["rev-parse", "HEAD"])?;
    let mut fates: Vec<(String, Fate)> = Vec::new();
    let mut gates = Vec::new();
    // First pass: everything that applies, one commit each, one gate run.
    let mut applied = Vec::new();
    for q in queued {
        match apply_one(wt, q)? {
            Ok(_) => applied.push(q.clone()),
            Err(reason) => fates.push((q.task.clone(), Fate::Dropped { reason })),
        }
    }
    let mut shas: Vec<(String, String)> = Vec::new();
    if !applied.is_empty() {
        let g = run_gate(wt, gate, &dir.join("gate-1.log"))?;
        let green = g.green;
        gates.push(g);
        if green {
            let log = git::run(wt, &["log", "--format=%H", &format!("{start}..HEAD")])?;
            let mut list: Vec<&str> = log.lines().collect();
            list.reverse();
            for (q, sha) in applied.iter().zip(list) {
                shas.push((q.task.clone(), sha.to_string()));
            }
        } else {
            // Red: rebuild one by one, dropping each candidate that turns it red.
            git::run(wt, &["reset", "-q", "--hard", &start])?;
            for q in &applied {
                let before = git::line(wt, &["rev-parse", "HEAD"])?;
                let sha = match apply_one(wt, q)? {
                    Ok(sha) => sha,
                    Err(reason) => {
                        fates.push((q.task.clone(), Fate::Dropped { reason }));
                        continue;
                    }
                };
                let n = gates.len() + 1;
                let g = run_gate(wt, gate, &dir.join(format!("gate-{n}.log")))?;
                if g.green {
                    shas.push((q.task.clone(), sha));
                } else {
                    git::run(wt, &["reset", "-q", "--hard", &before])?;
                    fates.push((
                        q.task.clone(),
                        Fate::Dropped {
                            reason: format!(
                                "turns the gate red (exit {})",
                                g.exit.map_or("none: timed out".into(), |c| c.to_string())
                            ),
                        },
                    ));
                }
                gates.push(g);
            }
        }
    }
    for (task, sha) in shas {
        fates.push((task, Fate::Landed { sha }));
    }
    // Keep the queue's order in the report.
    fates.sort_by_key(|(t, _)| queued.iter().position(|q| &q.task == t));
    let head = git::line(wt, &["rev-parse", "HEAD"])?;
    let landing = Landing {
        number,
        branch: branch.to_string(),
        start,
        head,
        fates,
        gates,
        evidence_dir: dir,
    };
    write_evidence(&landing)?;
    Ok(landing)
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
            Fate::Landed { sha } => md.push_str(&format!("- {t}: landed as {sha}\n")),
            Fate::Dropped { reason } => md.push_str(&format!("- {t}: dropped, {reason}\n")),
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
                (false, None) => "red, timed out or killed".to_string(),
            },
            g.ms
        ));
    }
    crate::store::write_bytes_atomic(&l.evidence_dir.join("evidence.md"), md.as_bytes())?;
    Ok(())
}
