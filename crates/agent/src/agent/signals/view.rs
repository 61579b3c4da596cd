//! The ledger folded into what a pane's signals add up to ([`SignalView`]):
//! a pure function of the notes, oldest first.
//!
//! - A turn is open from `prompt_submitted` until `turn_ended`,
//!   `turn_failed` or `turn_aborted` (or the session's start or end); a
//!   session's start forgets the last turn's end too.
//! - A permission or question latch is set by `permission_asked`, or a
//!   `notified` `permission_prompt` / `elicitation_dialog`, and cleared by a
//!   tool's result, a new prompt, the turn's end, or the session's start or
//!   end. (The screen clears it too: [`super::fuse`].)
//! - A tool runs from `tool_started` until `tool_finished` or the turn's end.

use super::Ledger;
use crate::proto::fuse::{EndHow, Latch, Mark, SignalView, ToolRun, TurnEnd};
use crate::proto::signal::{Notice, Signal, SignalNote};
use crate::proto::state::BlockedKind;

/// Fold the notes taken at or after `from_ms` (the pane's current
/// generation's start: an earlier process's turn is not this one's).
pub fn fold(ledger: &Ledger, from_ms: u64) -> SignalView {
    let mut v = SignalView::default();
    for (at_ms, note) in ledger.notes().filter(|(at, _)| *at >= from_ms) {
        step(&mut v, *at_ms, note);
    }
    v
}

/// Take one note into the view.
pub fn step(v: &mut SignalView, at_ms: u64, note: &SignalNote) {
    let at = Mark {
        at_ms,
        source: note.source,
    };
    v.notes += 1;
    if note.session.is_some() {
        v.session.clone_from(&note.session);
    }
    let end = |v: &mut SignalView, how: EndHow| {
        v.turn_open = None;
        v.latch = None;
        v.tool = None;
        v.turn_end = Some(TurnEnd {
            at,
            how,
            error: None,
            message_sha256: None,
        });
    };
    match &note.signal {
        Signal::SessionStarted | Signal::SessionEnded => {
            if matches!(note.signal, Signal::SessionStarted) {
                v.turn_end = None; // a new (or cleared) session has no finished turn
            }
            v.turn_open = None;
            v.latch = None;
            v.tool = None;
            v.subagents_open = 0;
        }
        Signal::PromptSubmitted => {
            v.prompt = Some(at);
            v.turn_open = Some(at);
            v.latch = None;
            v.tool = None;
        }
        Signal::ToolStarted { tool } => {
            v.tool = Some(ToolRun {
                at,
                tool: tool.clone(),
            });
        }
        Signal::PermissionAsked { tool } => {
            v.latch = Some(Latch {
                at,
                kind: BlockedKind::Permission,
                tool: Some(tool.clone()),
            });
        }
        Signal::Notified { notice } => {
            let kind = match notice {
                Notice::PermissionPrompt => BlockedKind::Permission,
                Notice::ElicitationDialog => BlockedKind::Question,
                Notice::IdlePrompt | Notice::Other => return,
            };
            // A notification repeating a latch already held keeps its start.
            if v.latch.as_ref().is_some_and(|l| l.kind == kind) {
                return;
            }
            let tool = v.tool.as_ref().map(|t| t.tool.clone());
            v.latch = Some(Latch { at, kind, tool });
        }
        Signal::ToolFinished { .. } => {
            v.tool = None;
            v.latch = None;
        }
        Signal::TurnEnded { message_sha256 } => {
            end(v, EndHow::Ended);
            if let Some(e) = v.turn_end.as_mut() {
                e.message_sha256.clone_from(message_sha256);
            }
        }
        Signal::TurnFailed { error } => {
            end(v, EndHow::Failed);
            if let Some(e) = v.turn_end.as_mut() {
                e.error = Some(*error);
            }
        }
        Signal::TurnAborted => end(v, EndHow::Aborted),
        Signal::SubagentStarted => v.subagents_open = v.subagents_open.saturating_add(1),
        Signal::SubagentStopped => v.subagents_open = v.subagents_open.saturating_sub(1),
        Signal::Compacting => {}
        Signal::Limits(l) => v.limits = Some((at, *l)),
        Signal::Usage(u) => v.usage = Some(*u),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::signal::{Source, TurnError};

    fn note(signal: Signal) -> SignalNote {
        SignalNote {
            source: Source::Hook,
            session: Some("s1".into()),
            signal,
        }
    }

    fn ledger(notes: &[(u64, Signal)]) -> Ledger {
        let mut l = Ledger::default();
        for (at, s) in notes {
            l.apply(*at, note(s.clone()));
        }
        l
    }

    fn bash() -> String {
        "Bash".into()
    }

    #[test]
    fn a_turn_is_open_from_its_prompt_to_its_end() {
        let l = ledger(&[(10, Signal::PromptSubmitted)]);
        let v = fold(&l, 0);
        assert_eq!(v.turn_open.map(|m| m.at_ms), Some(10));
        assert_eq!(v.session.as_deref(), Some("s1"));
        let h = "ab".repeat(32);
        let l = ledger(&[
            (10, Signal::PromptSubmitted),
            (
                20,
                Signal::TurnEnded {
                    message_sha256: Some(h.clone()),
                },
            ),
        ]);
        let v = fold(&l, 0);
        assert!(v.turn_open.is_none());
        let end = v.turn_end.expect("an end");
        assert_eq!((end.at.at_ms, end.how), (20, EndHow::Ended));
        assert_eq!(end.message_sha256, Some(h));
        for (s, how) in [
            (
                Signal::TurnFailed {
                    error: TurnError::RateLimit,
                },
                EndHow::Failed,
            ),
            (Signal::TurnAborted, EndHow::Aborted),
        ] {
            let v = fold(&ledger(&[(10, Signal::PromptSubmitted), (20, s)]), 0);
            assert!(v.turn_open.is_none());
            assert_eq!(v.turn_end.map(|e| e.how), Some(how));
        }
    }

    #[test]
    fn notes_before_the_generation_are_not_folded() {
        let l = ledger(&[(10, Signal::PromptSubmitted)]);
        let v = fold(&l, 11);
        assert!(v.turn_open.is_none());
        assert_eq!(v.notes, 0);
    }

    #[test]
    fn a_latch_is_cleared_by_a_result_a_prompt_or_an_end() {
        let asked = Signal::PermissionAsked { tool: bash() };
        let v = fold(
            &ledger(&[(1, Signal::PromptSubmitted), (2, asked.clone())]),
            0,
        );
        let latch = v.latch.expect("latched");
        assert_eq!(latch.kind, BlockedKind::Permission);
        assert_eq!(latch.tool.as_deref(), Some("Bash"));
        for clear in [
            Signal::ToolFinished {
                tool: bash(),
                failed: false,
            },
            Signal::PromptSubmitted,
            Signal::TurnEnded {
                message_sha256: None,
            },
            Signal::TurnAborted,
            Signal::SessionEnded,
        ] {
            let v = fold(
                &ledger(&[
                    (1, Signal::PromptSubmitted),
                    (2, asked.clone()),
                    (3, clear.clone()),
                ]),
                0,
            );
            assert!(v.latch.is_none(), "{clear:?} clears the latch");
        }
    }

    #[test]
    fn a_notification_latches_with_the_running_tool_and_keeps_its_start() {
        let v = fold(
            &ledger(&[
                (1, Signal::PromptSubmitted),
                (2, Signal::ToolStarted { tool: bash() }),
                (
                    3,
                    Signal::Notified {
                        notice: Notice::PermissionPrompt,
                    },
                ),
                (
                    9,
                    Signal::Notified {
                        notice: Notice::PermissionPrompt,
                    },
                ),
            ]),
            0,
        );
        let latch = v.latch.expect("latched");
        assert_eq!((latch.at.at_ms, latch.tool.as_deref()), (3, Some("Bash")));
        let v = fold(
            &ledger(&[(
                1,
                Signal::Notified {
                    notice: Notice::ElicitationDialog,
                },
            )]),
            0,
        );
        assert_eq!(v.latch.map(|l| l.kind), Some(BlockedKind::Question));
        let v = fold(
            &ledger(&[(
                1,
                Signal::Notified {
                    notice: Notice::IdlePrompt,
                },
            )]),
            0,
        );
        assert!(v.latch.is_none(), "an idle prompt is no latch");
    }

    #[test]
    fn tools_and_subagents_open_and_close() {
        let v = fold(
            &ledger(&[
                (1, Signal::PromptSubmitted),
                (2, Signal::ToolStarted { tool: bash() }),
                (3, Signal::SubagentStarted),
                (4, Signal::SubagentStarted),
                (5, Signal::SubagentStopped),
            ]),
            0,
        );
        assert_eq!(v.tool.map(|t| (t.at.at_ms, t.tool)), Some((2, bash())));
        assert_eq!(v.subagents_open, 1);
        let v = fold(
            &ledger(&[
                (2, Signal::ToolStarted { tool: bash() }),
                (3, Signal::SessionStarted),
            ]),
            0,
        );
        assert!(v.tool.is_none());
        assert_eq!(v.notes, 2);
    }
}
