//! Barriers and the watcher (docs/agents.md).
//!
//! - [`barrier`]: [`barrier_met`], the snapshot a matched barrier answers with,
//!   and the [`BarrierSource`] trait (`drover wait` over the socket, or a fake).
//! - [`watcher`]: repeats barriers for long-running components with the
//!   timeout/backoff/cache rules, on an injectable [`Clock`], reporting
//!   [`WatchEvent`]s to an [`EventSink`].

pub mod barrier;
pub mod watcher;

pub use barrier::{
    BarrierMode, BarrierResult, BarrierSource, PaneSnapshot, Snapshot, TransportError, barrier_met,
};
pub use watcher::{
    BACKOFF_CEILING_MS, BACKOFF_START_MS, Backoff, Clock, EventSink, Round, SystemClock,
    TransportResult, WatchEvent, Watcher,
};
