//! The supervisor's typed protocol and the state vocabulary every client shares.

pub mod proto;
