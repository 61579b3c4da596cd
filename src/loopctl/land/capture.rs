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
}

impl Refusal {
    pub fn describe(&self) -> String {
        match self {
            Refusal::Empty => "the candidate is empty (no changes against the base)".into(),
            Refusal::OutOfScope { files } => format!(
                "the candidate touches files outside its claim: {}",
                files.join(", ")
            ),
        }
    }
}

/// The raw capture: merge-base, changed files, patch bytes (no writes but the index).
pub fn diff(worktree: &Path, base: &str) -> Result<(String, Vec<String>, Vec<u8>), LoopError> {
    git::run(worktree, &["add", "-A"])?;
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
    let (mb, files, patch) = diff(worktree, base)?;
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
    crate::store::write_bytes_atomic(&lane_dir.join("return.md"), t.as_bytes())?;
    Ok(())
}
