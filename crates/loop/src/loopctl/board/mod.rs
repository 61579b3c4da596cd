//! What to work: the Backlog.md board (`backlog`, re-exported here), the
//! charter, which tasks may start and the brief a lane gets.

mod backlog;
pub mod brief;
pub mod charter;
mod load;
pub mod ready;

pub use backlog::*;
pub use load::*;
