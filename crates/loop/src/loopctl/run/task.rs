//! One task's state in a run: the types are the run state's
//! ([`crate::runstate::task`]), where `loop status`, `top` and `drover web`
//! read them too.

pub use crate::runstate::task::*;

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
