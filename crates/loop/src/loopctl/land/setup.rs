//! The charter's `setup:`: a command run in each new worktree before what
//! works in it starts — a task's implementer lane before its agent, the
//! gate's checkout of a candidate before its gate, the integration worktree
//! before its first landing gate (LOOP.md, "Setting a worktree up"). It
//! runs as the gate does (`sh -c`, cwd the worktree, git's repository
//! variables scrubbed, bounded in time and by the run's stops, ended with
//! its whole process group), given the lane's `DROVER_PORT_BASE` when there
//! is one; its output is kept like the gate's (a log, 0600, capped and
//! redacted). A setup that fails or runs out of time is a [`SetupFailed`]:
//! the task parks with the end of its output.

use crate::loopctl::LoopError;
use crate::loopctl::child::{self, Bounds, Ended};
use crate::loopctl::land::{MAX_GATE_LOG_BYTES, cap_log, log_tail, redact_log};
use crate::registry::redact::redact_secrets;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A setup's own time bound when the charter sets no `setup-timeout:`.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Lines of a failed setup's output in its park reason.
pub const TAIL_LINES: usize = 5;
/// Characters of a failed setup's output in its park reason, at most.
pub const TAIL_CHARS: usize = 500;

/// One setup to run: the command, where its output goes, its bounds.
pub struct Setup {
    pub cmd: String,
    pub log: PathBuf,
    pub bounds: Bounds<'static>,
}

/// A setup that did not succeed: how it ended and the end of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupFailed {
    /// `exit 1`, `timed out after 30 s`, `stopped: …`, `killed by a signal`.
    pub how: String,
    /// Its last lines in the order printed, control characters stripped.
    pub tail: String,
}

impl SetupFailed {
    /// The reason a task parks with; `place` says which worktree
    /// (`the worktree`, `the gate's checkout`, `the integration worktree`).
    pub fn reason(&self, place: &str) -> String {
        format!("setup failed in {place} ({}): {}", self.how, self.tail)
    }
}

impl Setup {
    /// Run it in `worktree` with `env` added; `Ok(Err(_))` when it failed.
    pub fn run(
        &self,
        worktree: &Path,
        env: &[(String, String)],
    ) -> Result<Result<(), SetupFailed>, LoopError> {
        if let Some(dir) = self.log.parent() {
            crate::store::create_private_dir(dir)?;
        }
        let mut c = super::integrate::worktree_shell(&self.cmd, worktree, env, &self.log)?;
        let ended = child::run(&mut c, &self.bounds).map_err(|e| LoopError::io(worktree, e))?;
        cap_log(&self.log, MAX_GATE_LOG_BYTES)?;
        redact_log(&self.log)?;
        if let Ended::Exited(s) = &ended
            && s.success()
        {
            return Ok(Ok(()));
        }
        Ok(Err(SetupFailed {
            how: ended.describe(self.bounds.timeout),
            tail: tail(&redact_secrets(&log_tail(&self.log)).0),
        }))
    }
}

/// `text` without terminal escape sequences and control characters (a tab
/// is a space), each line kept (pure).
pub fn strip_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI (`ESC [ … final`) or a two-character escape.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for f in chars.by_ref() {
                        if ('@'..='~').contains(&f) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\n' => out.push('\n'),
            '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The last [`TAIL_LINES`] non-blank lines of `log`, in order, joined by
/// ` / `, at most [`TAIL_CHARS`] characters (its end kept) (pure).
pub fn tail(log: &str) -> String {
    let clean = strip_controls(log);
    let lines: Vec<&str> = clean
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return "(the setup printed nothing)".into();
    }
    let joined = lines[lines.len().saturating_sub(TAIL_LINES)..].join(" / ");
    let n = joined.chars().count();
    if n <= TAIL_CHARS {
        return joined;
    }
    let kept: String = joined.chars().skip(n - TAIL_CHARS + 1).collect();
    format!("…{kept}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_in_order_bounded_and_clean() {
        let log = "one\n\n\u{1b}[31mtwo\u{1b}[0m\tred\nthree\u{7}\nfour\nfive\nsix\n";
        assert_eq!(tail(log), "two red / three / four / five / six");
        assert_eq!(tail("\n \n"), "(the setup printed nothing)");
        let long = "x".repeat(2000);
        let t = tail(&long);
        assert_eq!(t.chars().count(), TAIL_CHARS);
        assert!(t.starts_with('…'));
    }

    #[test]
    fn a_failed_setup_says_where_and_how() {
        let f = SetupFailed {
            how: "exit 3".into(),
            tail: "no requirements.txt".into(),
        };
        assert_eq!(
            f.reason("the worktree"),
            "setup failed in the worktree (exit 3): no requirements.txt"
        );
    }
}
