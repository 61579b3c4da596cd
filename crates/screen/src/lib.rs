//! The screen model: a pane's bytes rendered as a terminal would (vt100).

pub mod screen;
