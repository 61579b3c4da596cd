//! `drover top`: a live dashboard of every pane and lane, the ones that need
//! a human first. The data is a plain view struct ([`view`]), drawn by a pure
//! function ([`render`]); keys are a pure function too ([`ui`]); only
//! [`app`] touches the terminal, and it redraws on supervisor events.
//! [`fleet`] is `top --fleet`: every joined host's panes, from the fleet's
//! event stream, in the same shape. [`runs`] is the loop's runs above the
//! table, with keys to pause, resume and close out the selected one.

pub mod actions;
pub mod app;
pub mod columns;
pub mod fleet;
pub mod gather;
pub mod input;
pub mod render;
pub mod runs;
pub mod runs_lines;
pub mod seen;
pub mod shipgate;
pub mod state;
pub mod ui;
pub mod view;

pub use actions::{Actions, CliActions};
pub use app::{TopError, TopOptions, run};
