//! Landing: the loop's git, a lane's candidate patch, the integration branch
//! and the gate (`integrate`, re-exported here), the close-out.

pub mod apply;
mod batch;
pub mod bisect;
pub mod capture;
pub mod closeout;
pub mod gate_checkout;
pub mod git;
mod integrate;
pub mod rebase;
pub mod setup;

pub use batch::{land, land_bounded};
pub use integrate::*;
