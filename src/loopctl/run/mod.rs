//! A run: its directory (`<state>/loop<N>/`) and the runner, whose methods
//! are spread over one file per part of the pipeline.

pub(in crate::loopctl) mod boardsync;
mod bounded;
pub mod cause;
pub mod closeonly;
mod drive;
mod escalate;
mod finish;
mod gatecheck;
mod landing;
pub mod limits;
pub mod nudge;
pub mod resume;
pub mod rounds;
pub mod run_state;
pub mod rundir;
pub mod runner;
mod setup;
mod stall;
mod steps;
mod tuning;
