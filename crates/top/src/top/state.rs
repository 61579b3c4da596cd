//! What a `top` row's state column holds: the agent's state while the
//! supervisor has the pane, a pane a stopped supervisor left (`lost`), or
//! the lane's phase when it has no pane.

use crate::agent::State;
use crate::lane::Phase;

/// A row's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    /// The agent's classified state.
    Agent(State),
    /// A pane a supervisor that stopped uncleanly left behind.
    Lost,
    /// A lane without a pane: its phase.
    Lane(Phase),
}

impl Default for RowState {
    /// A lane that says nothing more is down.
    fn default() -> Self {
        RowState::Lane(Phase::Down)
    }
}

impl RowState {
    /// The state a pane's observation names (`lost` for a lost pane); an
    /// observation without one, or with a word no state has, is `unknown`.
    pub fn of_observation(word: Option<&str>) -> Self {
        match word {
            Some("lost") => RowState::Lost,
            Some(w) => RowState::Agent(w.parse().unwrap_or(State::Unknown)),
            None => RowState::Agent(State::Unknown),
        }
    }

    /// The word shown in the column.
    pub fn as_str(self) -> &'static str {
        match self {
            RowState::Agent(s) => s.as_str(),
            RowState::Lost => "lost",
            RowState::Lane(Phase::Creating) => "creating",
            RowState::Lane(Phase::Up) => "up",
            RowState::Lane(Phase::RecoveryNeeded) => "recovery-needed",
            RowState::Lane(Phase::Down) => "down",
        }
    }

    /// The agent's state, when the row has an agent.
    pub fn agent(self) -> Option<State> {
        match self {
            RowState::Agent(s) => Some(s),
            _ => None,
        }
    }
}

/// Written as its word (the page's `state`).
impl serde::Serialize for RowState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for RowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::RowState;
    use crate::agent::State;
    use crate::lane::Phase;

    /// A row's state is written as the word the column shows (the page's
    /// `state`, as it always was).
    #[test]
    fn a_row_state_serializes_as_its_word() {
        let lanes = [
            Phase::Creating,
            Phase::Up,
            Phase::RecoveryNeeded,
            Phase::Down,
        ];
        let all = State::ALL
            .into_iter()
            .map(RowState::Agent)
            .chain([RowState::Lost])
            .chain(lanes.into_iter().map(RowState::Lane));
        for r in all {
            let word = serde_json::to_value(r).ok();
            assert_eq!(word, Some(serde_json::Value::from(r.as_str())));
        }
        assert_eq!(RowState::Agent(State::Blocked).as_str(), "blocked");
        assert_eq!(RowState::Lost.as_str(), "lost");
    }

    /// The lane phases read as `lane ls` writes them.
    #[test]
    fn lane_phases_read_as_lane_ls_writes_them() {
        for p in [
            Phase::Creating,
            Phase::Up,
            Phase::RecoveryNeeded,
            Phase::Down,
        ] {
            let word = serde_json::to_value(p).ok();
            assert_eq!(
                word.as_ref().and_then(|w| w.as_str()),
                Some(RowState::Lane(p).as_str())
            );
        }
    }

    #[test]
    fn observation_words_read_as_states() {
        assert_eq!(RowState::of_observation(Some("idle")).as_str(), "idle");
        assert_eq!(RowState::of_observation(Some("lost")), RowState::Lost);
        assert_eq!(RowState::of_observation(None).as_str(), "unknown");
    }
}
