//! The lanes the runner works through: `drover lane` lanes with real or sim
//! agents ([`lanes_ops`], with [`renew`] keeping an implementer's lease
//! alive) and bare sim panes ([`simlanes`]).

pub mod lanes_ops;
pub mod renew;
pub mod simlanes;
