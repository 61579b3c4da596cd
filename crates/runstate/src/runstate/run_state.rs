//! Where a run is in its life (`run.json`'s `state`): one word on disk and
//! in `loop status`, one enum in the code that decides on it.

use serde::{Deserialize, Serialize};

/// A run's state, written as its lowercase name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// A loop process works the run.
    Running,
    /// `pause` was asked; the tasks under way finish first.
    Pausing,
    /// Nothing new starts until `resume`.
    Paused,
    /// Its loop process is gone while the run was not closed.
    Interrupted,
    /// A guard stopped it.
    Blocked,
    /// Its queue drained or a close-out control ended it.
    Closed,
    /// An emergency stop ended it.
    Stopped,
}

impl RunState {
    /// Every state.
    pub const ALL: [RunState; 7] = [
        RunState::Running,
        RunState::Pausing,
        RunState::Paused,
        RunState::Interrupted,
        RunState::Blocked,
        RunState::Closed,
        RunState::Stopped,
    ];

    /// The word on disk and on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Pausing => "pausing",
            RunState::Paused => "paused",
            RunState::Interrupted => "interrupted",
            RunState::Blocked => "blocked",
            RunState::Closed => "closed",
            RunState::Stopped => "stopped",
        }
    }

    /// Whether a loop process should be working a run in this state.
    pub fn is_running(self) -> bool {
        matches!(
            self,
            RunState::Running | RunState::Pausing | RunState::Paused
        )
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::RunState;

    /// The names on disk are the words `run.json` always held.
    #[test]
    fn serializes_as_the_words_on_disk() {
        for s in RunState::ALL {
            let json = serde_json::to_string(&s).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            let back: Result<RunState, _> = serde_json::from_str(&json);
            assert_eq!(back.ok(), Some(s));
        }
    }
}
