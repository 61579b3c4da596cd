//! Exit codes: part of the CLI contract (docs/cli.md).

/// Done, including an idempotent repeat of a transition already made.
pub const OK: u8 = 0;
/// Error: I/O, bad state on disk, internal.
pub const ERROR: u8 = 1;
/// Usage: bad arguments or a bad input file (the message names the field).
pub const USAGE: u8 = 2;
/// Refused: the transition table, a lease, a gate or a lint said no.
pub const REFUSED: u8 = 3;
/// Timeout: a barrier ran out of time — a healthy answer, stdout empty.
pub const TIMEOUT: u8 = 4;
/// Transport: supervisor, tmux or herdr unreachable, pane gone.
pub const TRANSPORT: u8 = 5;
