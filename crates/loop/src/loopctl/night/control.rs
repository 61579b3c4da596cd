//! Controls of a running loop (`drover loop control <run> …`, `LOOP.md`
//! "Controls"): the control file's format, its reading and writing, and
//! the request with `loop control`'s checks live with the run's state
//! ([`crate::runstate::control`]), where `top` and `drover web` use them too.

pub use crate::runstate::control::*;
