//! The lanes the runner works through: `drover lane` lanes with real or sim
//! agents ([`lanes_ops`], with [`renew`] keeping an implementer's lease
//! alive) and bare sim panes ([`simlanes`]), a lane whose pane is gone said at once
//! ([`gone`]); across hosts, the
//! coordinator's [`fleet_lanes`] and a host's [`fleet_host`].

pub mod fleet_host;
pub mod fleet_lanes;
pub mod gone;
pub mod lanes_ops;
pub mod renew;
pub mod simlanes;
