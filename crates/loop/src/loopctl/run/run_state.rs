//! Where a run is in its life (`run.json`'s `state`): the type is the run
//! state's ([`crate::runstate::run_state`]).

pub use crate::runstate::run_state::*;
