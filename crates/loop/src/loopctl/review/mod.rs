//! Review: a read-only reviewer's stated verdict and the watcher that reads
//! it from the agent's transcript.

pub mod verdict;
pub mod verdict_watch;
