//! Controls of a running loop (`drover loop control <run> …`, `LOOP.md`
//! "Controls"): a `control.json` in the run dir, written atomically under a
//! lock beside it, read by the runner once per loop. Several may be set; the
//! one that rules is chosen by precedence: emergency stop > pause > close
//! out > resume (`resume` clears a pause and nothing else).

use crate::runstate::run_state::RunState;
use crate::statedir::StateDir;
use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The control file's name in the run dir.
pub const FILE: &str = "control.json";

/// What an operator asks of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Control {
    /// Stop now: cancel in-flight jobs, stop every lane, close out.
    EmergencyStop,
    /// Start nothing new, let in-flight work settle, then wait for `resume`.
    Pause,
    /// Start nothing new, let in-flight work finish and land, then close out.
    CloseOut,
    /// Undo a pause.
    Resume,
}

impl Control {
    pub fn parse(s: &str) -> Option<Control> {
        match s {
            "emergency-stop" => Some(Control::EmergencyStop),
            "pause" => Some(Control::Pause),
            "close-out" => Some(Control::CloseOut),
            "resume" => Some(Control::Resume),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Control::EmergencyStop => "emergency-stop",
            Control::Pause => "pause",
            Control::CloseOut => "close-out",
            Control::Resume => "resume",
        }
    }
}

/// The controls set on a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controls {
    #[serde(default)]
    pub emergency_stop: Option<String>,
    #[serde(default)]
    pub pause: Option<String>,
    #[serde(default)]
    pub close_out: Option<String>,
}

impl Controls {
    /// The control that rules now (`None`: run on).
    pub fn ruling(&self) -> Option<(Control, &str)> {
        if let Some(r) = &self.emergency_stop {
            return Some((Control::EmergencyStop, r));
        }
        if let Some(r) = &self.pause {
            return Some((Control::Pause, r));
        }
        self.close_out.as_deref().map(|r| (Control::CloseOut, r))
    }

    /// Apply one control (with the operator's reason).
    pub fn apply(&mut self, c: Control, reason: &str) {
        let r = Some(reason.to_string());
        match c {
            Control::EmergencyStop => self.emergency_stop = r,
            Control::Pause => self.pause = r,
            Control::CloseOut => self.close_out = r,
            Control::Resume => self.pause = None,
        }
    }
}

/// Set a control on a run (atomic, locked against other writers).
pub fn write(run_dir: &Path, c: Control, reason: &str) -> Result<Controls, StoreError> {
    let path = run_dir.join(FILE);
    let _lock = crate::store::lock_beside(&path)?;
    let mut cur = read(run_dir)?;
    cur.apply(c, reason);
    crate::store::write_json_atomic(&path, &cur)?;
    Ok(cur)
}

/// What [`request`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// The control is set; the loop working the run reads it.
    Set(Controls),
    /// A close-out of a run whose loop process is gone: nothing reads a
    /// control, so the caller closes the run itself (as `loop run --resume N`
    /// would open it, without starting anything).
    CloseWithoutResume,
}

/// Why a control was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    #[error("loop{n} is {state} (closed); nothing runs it")]
    Closed { n: u32, state: RunState },
    #[error(
        "loop{n} is not running: its loop process is gone; resume it with `drover loop run --resume {n}`"
    )]
    NotRunning { n: u32 },
    #[error("RUN: no run loop{n} in this state dir; see `drover loop status`")]
    NoRun { n: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ControlError {
    /// The exit code of `docs/cli.md` for this refusal.
    pub fn exit_code(&self) -> u8 {
        match self {
            ControlError::Closed { .. } | ControlError::NotRunning { .. } => crate::exit::REFUSED,
            ControlError::NoRun { .. } => crate::exit::USAGE,
            ControlError::Store(_) => crate::exit::ERROR,
        }
    }
}

/// Ask for control `c` on run `n` of `state` with `loop control`'s
/// checks (one function for the CLI, `top` and `drover web`): a control on
/// a run nobody works would sit in the file and do nothing, so a closed run
/// or one whose loop process is gone refuses it, except a close-out of an
/// unfinished run, which the caller carries out ([`Requested::CloseWithoutResume`]).
pub fn request(
    state: &StateDir,
    n: u32,
    c: Control,
    reason: &str,
) -> Result<Requested, ControlError> {
    let dir = state.run_dir(n);
    if !dir.is_dir() {
        return Err(ControlError::NoRun { n });
    }
    if let Ok(Some(st)) = crate::runstate::status::read(state, n)
        && !st.is_live()
    {
        if st.finished_at.is_none() && c == Control::CloseOut {
            return Ok(Requested::CloseWithoutResume);
        }
        return Err(if st.finished_at.is_some() {
            ControlError::Closed { n, state: st.state }
        } else {
            ControlError::NotRunning { n }
        });
    }
    Ok(Requested::Set(write(&dir, c, reason)?))
}

/// The controls set on a run (none when the file is absent; a corrupt file
/// is an error, never read as "no controls").
pub fn read(run_dir: &Path) -> Result<Controls, StoreError> {
    Ok(crate::store::read_json::<Controls>(&run_dir.join(FILE))?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_emergency_stop_then_pause_then_close_out() {
        let mut c = Controls::default();
        assert_eq!(c.ruling(), None);
        c.apply(Control::CloseOut, "done for today");
        assert_eq!(c.ruling().map(|r| r.0), Some(Control::CloseOut));
        c.apply(Control::Pause, "lunch");
        assert_eq!(c.ruling(), Some((Control::Pause, "lunch")));
        c.apply(Control::Resume, "back");
        assert_eq!(
            c.ruling().map(|r| r.0),
            Some(Control::CloseOut),
            "resume clears only a pause"
        );
        c.apply(Control::Pause, "again");
        c.apply(Control::EmergencyStop, "fire");
        assert_eq!(c.ruling(), Some((Control::EmergencyStop, "fire")));
        c.apply(Control::Resume, "back");
        assert_eq!(c.ruling().map(|r| r.0), Some(Control::EmergencyStop));
    }

    #[test]
    fn written_controls_read_back_and_a_corrupt_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), Control::Pause, "p").unwrap();
        write(d.path(), Control::CloseOut, "c").unwrap();
        let c = read(d.path()).unwrap();
        assert_eq!(c.pause.as_deref(), Some("p"));
        assert_eq!(c.close_out.as_deref(), Some("c"));
        std::fs::write(d.path().join(FILE), "{not json").unwrap();
        assert!(read(d.path()).is_err());
    }
}
