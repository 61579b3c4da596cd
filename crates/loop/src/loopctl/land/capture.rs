//! Capturing a lane's candidate: `git add -A` then `git diff --cached
//! --binary <merge-base>` in the lane's worktree (new files included; a
//! merge-base that cannot be found fails closed), the changed files checked
//! against the lease's `claimed_files`, written as `candidate.patch` —
//! bytes, exactly as git gave them: that file is what lands, so it is never
//! decoded, re-encoded or redacted. Secret-looking text in it is named
//! (`redactions`); the copies drover shows (the reviewer's copy, reports)
//! are redacted instead.

use crate::loopctl::{LoopError, land::git};
use crate::registry::redact::redact_secrets;
use crate::registry::scope::scope_of;
use std::path::{Path, PathBuf};

/// A captured candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    pub task: String,
    /// The merge-base the patch is against.
    pub base: String,
    pub files: Vec<String>,
    pub patch_path: PathBuf,
    /// sha256 of the patch: the worktree still holds exactly the landed
    /// work when its capture hashes the same.
    pub raw_sha256: String,
    /// Secret rules that fire on the patch (it lands as written; the
    /// copies shown are redacted).
    pub redactions: Vec<String>,
}

/// Why a capture produced no usable candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Refusal {
    /// Nothing changed against the merge-base.
    Empty,
    /// Files outside the lease's claim.
    OutOfScope { files: Vec<String> },
    /// The worktree cannot be captured as files: git refused to stage it
    /// (a nested repository without a commit, a path git may not hold such
    /// as `.GIT/…`); git's own words.
    Uncapturable { why: String },
    /// Nested repositories: they would land as bare gitlinks (no
    /// `.gitmodules` entry, none of their files).
    Nested { paths: Vec<String> },
}

impl Refusal {
    pub fn describe(&self) -> String {
        match self {
            Refusal::Empty => "the candidate is empty (no changes against the base)".into(),
            Refusal::OutOfScope { files } => format!(
                "the candidate touches files outside its claim: {}",
                files.join(", ")
            ),
            Refusal::Uncapturable { why } => {
                format!("the candidate cannot be captured: {why}")
            }
            Refusal::Nested { paths } => format!(
                "the candidate holds nested git repositories, which would land as bare gitlinks without their files: {}",
                paths.join(", ")
            ),
        }
    }
}

impl Refusal {
    /// What the owner does before the task is rerun.
    pub fn resume(&self) -> &'static str {
        match self {
            Refusal::Uncapturable { .. } | Refusal::Nested { .. } => {
                "remove the nested repository or the path git refuses from its worktree (or make it a declared submodule), then rerun"
            }
            _ => "claim the files in modified_files or narrow the change, then rerun",
        }
    }
}

/// Stage the worktree (`git add -A`); what git refuses to stage is a
/// refusal of the candidate, not an error of the run.
fn stage(worktree: &Path) -> Result<Result<(), Refusal>, LoopError> {
    let out = git::output(worktree, &["add", "-A"])?;
    if out.status.success() {
        return Ok(Ok(()));
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let why: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect();
    Ok(Err(Refusal::Uncapturable {
        why: crate::registry::redact::redact_shown(&format!("git add -A: {}", why.join(" / "))),
    }))
}

/// The paths the staged change makes (or changes into) gitlinks that
/// `.gitmodules` does not declare: a repository nested in the worktree, not
/// a submodule (an existing gitlink's new commit is a submodule's bump).
fn gitlinks(worktree: &Path, mb: &str) -> Result<Vec<String>, LoopError> {
    let declared: Vec<String> = std::fs::read_to_string(worktree.join(".gitmodules"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "path").then(|| v.trim().to_string())
        })
        .collect();
    let raw = git::run(
        worktree,
        &["diff", "--cached", "--raw", "-z", "--no-renames", mb],
    )?;
    // `:<old mode> <new mode> <old> <new> <status>\0<path>\0`, repeated.
    let mut out = Vec::new();
    let mut parts = raw.split('\0');
    while let Some(meta) = parts.next() {
        let Some(path) = parts.next() else { break };
        let mut modes = meta.trim_start_matches(':').split(' ');
        let (old, new) = (modes.next(), modes.next());
        if new == Some("160000") && old != Some("160000") && !declared.iter().any(|d| d == path) {
            out.push(path.to_string());
        }
    }
    Ok(out)
}

/// The raw capture: merge-base, changed files, patch bytes (no writes but the index).
pub fn diff(worktree: &Path, base: &str) -> Result<(String, Vec<String>, Vec<u8>), LoopError> {
    if let Err(r) = stage(worktree)? {
        let message = match r {
            Refusal::Uncapturable { why } => why.trim_start_matches("git add -A: ").to_string(),
            other => other.describe(),
        };
        return Err(LoopError::Git {
            args: "add -A".into(),
            message,
        });
    }
    diff_staged(worktree, base)
}

/// [`diff`] of what is staged already.
fn diff_staged(worktree: &Path, base: &str) -> Result<(String, Vec<String>, Vec<u8>), LoopError> {
    let mb = git::line(worktree, &["merge-base", "HEAD", base]).map_err(|e| LoopError::Git {
        args: format!("merge-base HEAD {base}"),
        message: format!("no merge-base, capture refused (fails closed): {e}"),
    })?;
    if mb.is_empty() {
        return Err(LoopError::Git {
            args: format!("merge-base HEAD {base}"),
            message: "no merge-base, capture refused (fails closed)".into(),
        });
    }
    let names = git::run(worktree, &["diff", "--cached", "--name-only", "-z", &mb])?;
    let files: Vec<String> = names
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let patch = git::run_bytes(
        worktree,
        &["diff", "--cached", "--binary", "--full-index", &mb],
    )?;
    Ok((mb, files, patch))
}

/// Capture a candidate into `lane_dir/candidate.patch`.
pub fn capture(
    task: &str,
    worktree: &Path,
    base: &str,
    claimed: &[String],
    lane_dir: &Path,
) -> Result<Result<Candidate, Refusal>, LoopError> {
    if let Err(r) = stage(worktree)? {
        return Ok(Err(r));
    }
    let (mb, files, patch) = diff_staged(worktree, base)?;
    let nested = gitlinks(worktree, &mb)?;
    if !nested.is_empty() {
        return Ok(Err(Refusal::Nested { paths: nested }));
    }
    if files.is_empty() {
        return Ok(Err(Refusal::Empty));
    }
    let scope = scope_of(claimed, &files);
    if scope.unenforced {
        // A claim of nothing is refused, never read as "anything goes".
        return Ok(Err(Refusal::OutOfScope { files }));
    }
    if !scope.out_of_scope.is_empty() {
        return Ok(Err(Refusal::OutOfScope {
            files: scope.out_of_scope,
        }));
    }
    let raw_sha256 = crate::loopctl::sha256::hex(&patch);
    let (_, fired) = redact_secrets(&String::from_utf8_lossy(&patch));
    let patch_path = lane_dir.join("candidate.patch");
    crate::store::write_bytes_atomic(&patch_path, &patch)?;
    Ok(Ok(Candidate {
        task: task.to_string(),
        base: mb,
        files,
        patch_path,
        raw_sha256,
        redactions: fired.into_iter().map(str::to_string).collect(),
    }))
}

/// A copy of a patch to show (the reviewer's): its text with secrets
/// redacted. Never applied.
pub fn shown_copy(patch: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(patch);
    let (clean, fired) = redact_secrets(&text);
    if fired.is_empty() {
        // Nothing to hide: the bytes as they are (no lossy decoding).
        return patch.to_vec();
    }
    clean.into_bytes()
}

/// Write the lane's `return.md`: what came back and what happened to it.
pub fn write_return(lane_dir: &Path, task: &str, lines: &[String]) -> Result<(), LoopError> {
    let mut t = format!("# Return: {task}\n\n");
    for l in lines {
        t.push_str(&format!("- {}\n", l.replace('\n', " ")));
    }
    let t = crate::registry::redact::redact_shown(&t);
    crate::store::write_bytes_atomic(&lane_dir.join("return.md"), t.as_bytes())?;
    Ok(())
}
