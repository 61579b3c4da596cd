//! The `state` a lane's report gives itself. The lane writes it, so a word
//! drover does not know is kept as written (the policy refuses it there).

use serde::{Deserialize, Serialize};

/// A report's state, written as its word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum LaneReportState {
    /// The lane is still writing it.
    Writing,
    /// The lane stopped writing for a while: not an ending.
    Paused,
    /// The lane declared it final.
    Finalized,
    /// A word no state has, kept as the lane wrote it.
    Other(String),
}

impl LaneReportState {
    /// The word on disk.
    pub fn as_str(&self) -> &str {
        match self {
            LaneReportState::Writing => "writing",
            LaneReportState::Paused => "paused",
            LaneReportState::Finalized => "finalized",
            LaneReportState::Other(w) => w,
        }
    }
}

impl From<String> for LaneReportState {
    fn from(w: String) -> Self {
        match w.as_str() {
            "writing" => LaneReportState::Writing,
            "paused" => LaneReportState::Paused,
            "finalized" => LaneReportState::Finalized,
            _ => LaneReportState::Other(w),
        }
    }
}

impl From<LaneReportState> for String {
    fn from(s: LaneReportState) -> Self {
        match s {
            LaneReportState::Other(w) => w,
            known => known.as_str().to_string(),
        }
    }
}

impl std::fmt::Display for LaneReportState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::LaneReportState;

    /// Every word reads back as written, known or not.
    #[test]
    fn words_round_trip_as_written() {
        for w in ["writing", "paused", "finalized", "completed", ""] {
            let s: LaneReportState = serde_json::from_value(serde_json::json!(w))
                .unwrap_or(LaneReportState::Other("?".into()));
            assert_eq!(serde_json::to_value(&s).ok(), Some(serde_json::json!(w)));
        }
        assert_eq!(
            LaneReportState::from("finalized".to_string()),
            LaneReportState::Finalized
        );
    }
}
