//! The watch hub: the latest observation of every pane, and one epoch counter
//! that moves whenever any observation changes. Barriers sleep on the epoch;
//! nothing polls. The observation is the protocol's typed [`Snapshot`].

pub use crate::proto::Snapshot;
