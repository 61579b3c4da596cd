//! The agents' own signals beside the screen (docs/agents.md, "The agents' own signals").
//!
//! - [`parse`]: a Claude Code hook's or status line's JSON, a Codex notify
//!   argument or rollout line, turned into [`SignalNote`]s (pure; bodies are
//!   dropped here, a last message kept only as its sha256).
//! - [`Ledger`]: what a pane's agent has said, in order, bounded.
//! - [`view`]: the ledger folded into what it adds up to (a turn open, a
//!   permission latch, the last turn's end, limits).
//! - [`fuse`]: the screen's observation and that view fused by rules as
//!   data, with the disagreement between them (the drift canary).

pub mod fuse;
pub mod parse;
pub mod view;

pub use crate::proto::signal::{Signal, SignalNote, Source};
use std::collections::VecDeque;

/// The signals a pane's agent has sent, oldest first, with when the
/// supervisor took each (ms since the epoch). Bounded: the oldest go first.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    notes: VecDeque<(u64, SignalNote)>,
}

impl Ledger {
    /// How many signals a ledger keeps.
    pub const CAP: usize = 256;

    /// Take one signal, seen at `at_ms`.
    pub fn apply(&mut self, at_ms: u64, note: SignalNote) {
        if self.notes.len() == Self::CAP {
            self.notes.pop_front();
        }
        self.notes.push_back((at_ms, note));
    }

    /// Every signal kept, oldest first.
    pub fn notes(&self) -> impl DoubleEndedIterator<Item = &(u64, SignalNote)> {
        self.notes.iter()
    }

    /// The newest signal from `source`.
    pub fn last_of(&self, source: Source) -> Option<&(u64, SignalNote)> {
        self.notes.iter().rev().find(|(_, n)| n.source == source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_keeps_the_newest_cap_signals() {
        let mut l = Ledger::default();
        for i in 0..(Ledger::CAP as u64 + 5) {
            l.apply(
                i,
                SignalNote {
                    source: Source::Hook,
                    session: None,
                    signal: Signal::PromptSubmitted,
                },
            );
        }
        assert_eq!(l.notes().count(), Ledger::CAP);
        assert_eq!(l.notes().next().map(|n| n.0), Some(5));
        assert_eq!(
            l.last_of(Source::Hook).map(|n| n.0),
            Some(Ledger::CAP as u64 + 4)
        );
        assert!(l.last_of(Source::Notify).is_none());
    }
}
