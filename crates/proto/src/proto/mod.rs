//! The supervisor's protocol (docs/protocol.md), typed: the frame codec,
//! the version, one [`Request`] variant per operation with its own argument
//! struct ([`args`]) and reply struct ([`reply`]), the error body, and the
//! state vocabulary the replies carry ([`state`], [`Snapshot`]), the event
//! stream's events ([`event`]) and a fleet's config ([`fleet`]).
//!
//! The server, the client, the feed and the tests share these types, so a
//! renamed field or op is a compile error, not a silent `None`. The module
//! depends on serde, serde_json and thiserror only, and on nothing else of
//! drover's: the pane, agent and daemon modules build on it.

pub mod args;
pub mod attach;
pub mod backend;
pub mod error;
pub mod event;
pub mod fleet;
pub mod frame;
pub mod fuse;
pub mod pane;
pub mod reply;
pub mod request;
pub mod signal;
pub mod snapshot;
pub mod state;
pub mod usage;

#[cfg(test)]
mod tests;

/// Bumped on any incompatible change; a request of another version is
/// answered with `version` ("protocol vN, this supervisor speaks vM", exit 5)
/// and the connection is closed.
pub const PROTOCOL_VERSION: u32 = 1;

pub use attach::{AttachControl, AttachEvent};
pub use backend::{Backend, UnknownBackend};
pub use error::{ErrorBody, ErrorCode, Response, version_message};
pub use event::{Event, EventLine};
pub use frame::{
    Frame, FrameError, FrameKind, MAX_FRAME, check_len, encode, encode_json, read_frame, split,
    write_frame,
};
pub use pane::{LostPane, PaneEntry, PaneSpec, PaneView};
pub use request::{BadRequest, Envelope, Framed, OP_NAMES, Op, Request, RequestError, parse_frame};
pub use signal::{Signal, SignalNote, Source};
pub use snapshot::Snapshot;
