//! The loop (`drover loop run`, described in `LOOP.md`): a Backlog.md board
//! worked through lanes — implement, capture, review, gate, land on an
//! integration branch, close out.
//!
//! Layers, lowest first; each only uses the ones above it in this list:
//! - [`sha256`], [`board`] (the Backlog.md directory), [`charter`];
//! - [`ready`] (which tasks may start, the task pool, `loop lint queue`),
//!   [`brief`] (the lane's first message), [`rundir`] (`<state>/loop<N>/`);
//! - [`capture`] (a lane's candidate patch), [`land`] (the integration branch
//!   and the gate), [`closeout`];
//! - [`ops`] (what the runner needs from lanes and dispatch, as a trait) and
//!   [`runner`] (the pipeline over it); [`simlanes`] implements the trait over
//!   panes the supervisor runs today.

pub mod board;
pub mod brief;
pub mod capture;
pub mod charter;
pub mod closeout;
mod error;
pub mod git;
pub mod land;
mod landing;
pub mod ops;
pub mod ready;
pub mod rundir;
pub mod runner;
pub mod sha256;
pub mod simlanes;
mod steps;

pub use error::LoopError;
