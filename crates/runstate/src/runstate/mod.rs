//! A loop run's state on disk (formats in `LOOP.md`): what `run.json`
//! holds, written by the loop and read by `loop status`, `top` and
//! `drover web` through the same types.
//!
//! - [`run_state`]: where a run is in its life (`state`);
//! - [`task`]: one task's state and phase, and the flat record `run.json`
//!   keeps of it; [`cause`]: why a task is held or parked;
//!   [`records`]: the rest a task or a run keeps (findings, rebase rounds,
//!   roles, autotune's efforts, simulated lanes);
//! - [`status`]: the run ([`status::RunStatus`]), its loop process, the
//!   runs of a state dir and the typed read of one;
//! - [`usage`]: what the run's tasks cost, summed;
//! - [`control`]: the controls an operator sets on a run (`control.json`)
//!   and the request with `loop control`'s checks.

pub mod cause;
pub mod control;
pub mod records;
pub mod run_state;
pub mod status;
pub mod task;
pub mod usage;

pub use control::Control;
pub use run_state::RunState;
pub use status::{LoopProcess, RunStatus};
pub use task::Phase;

#[cfg(test)]
mod tests;
