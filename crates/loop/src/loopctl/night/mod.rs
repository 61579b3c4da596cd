//! What unattended runs are made of: every timing, guards, controls,
//! settings, overnight mode, the convergence tripwire, notifications and
//! lane autotune, stall classes, the nudges of a lane with no report. Pure pieces; the runner applies them.

pub mod autotune;
pub mod clock;
pub mod control;
pub mod guards;
pub mod notify;
pub mod nudge;
pub mod overnight;
pub mod settings;
pub mod stall;
pub mod tripwire;
