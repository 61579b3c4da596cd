//! A request: one variant per operation, each with its own arguments, and
//! the [`Op`] trait that ties an argument struct to its op name and reply.
//!
//! On the wire a request is `{"v", "id", "op", "args"}` (docs/protocol.md);
//! `args` may be absent or null for the ops that take none. A request whose
//! op is unknown, or whose arguments do not fit the op, does not parse: a
//! [`BadRequest`] naming the op and the field, which the supervisor answers
//! with `usage`.

use super::{PROTOCOL_VERSION, args, reply};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Every operation the supervisor serves.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", content = "args")]
pub enum Request {
    #[serde(rename = "ping")]
    Ping(args::Ping),
    #[serde(rename = "pane.new")]
    PaneNew(args::PaneNew),
    #[serde(rename = "pane.ls")]
    PaneLs(args::PaneLs),
    #[serde(rename = "pane.read")]
    PaneRead(args::PaneRead),
    #[serde(rename = "pane.send")]
    PaneSend(args::PaneSend),
    #[serde(rename = "pane.keys")]
    PaneKeys(args::PaneKeys),
    #[serde(rename = "pane.resize")]
    PaneResize(args::PaneResize),
    #[serde(rename = "pane.kill")]
    PaneKill(args::PaneKill),
    #[serde(rename = "pane.respawn")]
    PaneRespawn(args::PaneRespawn),
    #[serde(rename = "wait")]
    Wait(args::Wait),
    #[serde(rename = "deliver")]
    Deliver(args::Deliver),
    #[serde(rename = "pane.answer")]
    PaneAnswer(args::PaneAnswer),
    #[serde(rename = "evidence.watch")]
    EvidenceWatch(args::EvidenceWatch),
    #[serde(rename = "report")]
    Report(args::Report),
    #[serde(rename = "attach")]
    Attach(args::Attach),
    #[serde(rename = "events.follow")]
    EventsFollow(args::EventsFollow),
    #[serde(rename = "fleet.join")]
    FleetJoin(args::FleetJoin),
    #[serde(rename = "fleet.leave")]
    FleetLeave(args::FleetLeave),
    #[serde(rename = "signal")]
    Signal(args::Signal),
    #[serde(rename = "pane.explain")]
    PaneExplain(args::PaneExplain),
    #[serde(rename = "shutdown")]
    Shutdown(args::Shutdown),
}

/// An operation's arguments: its name on the wire and the reply it gets.
pub trait Op: Serialize {
    /// The op's name on the wire.
    const NAME: &'static str;
    /// What a success carries.
    type Reply: DeserializeOwned;
    /// The request these arguments make.
    fn into_request(self) -> Request;
}

macro_rules! ops {
    ($($variant:ident => $name:literal, $reply:ty;)*) => {
        $(
            impl Op for args::$variant {
                const NAME: &'static str = $name;
                type Reply = $reply;
                fn into_request(self) -> Request {
                    Request::$variant(self)
                }
            }
        )*

        /// Every op name, as the wire spells it.
        pub const OP_NAMES: &[&str] = &[$($name),*];

        impl Request {
            /// The op's name on the wire.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Request::$variant(_) => $name,)*
                }
            }

            /// The request of op `op` with these arguments (absent or null
            /// for none); a [`BadRequest`] when the op is unknown or the
            /// arguments do not fit it.
            pub fn from_parts(op: &str, args: serde_json::Value) -> Result<Request, BadRequest> {
                let args = if args.is_null() {
                    serde_json::Value::Object(Default::default())
                } else {
                    args
                };
                match op {
                    $($name => Ok(Request::$variant(parse($name, args)?)),)*
                    other => Err(BadRequest::UnknownOp(other.to_string())),
                }
            }
        }
    };
}

ops! {
    Ping => "ping", reply::Pong;
    PaneNew => "pane.new", reply::Created;
    PaneLs => "pane.ls", Vec<super::pane::PaneEntry>;
    PaneRead => "pane.read", reply::PaneText;
    PaneSend => "pane.send", reply::Sent;
    PaneKeys => "pane.keys", reply::KeysSent;
    PaneResize => "pane.resize", reply::Resized;
    PaneKill => "pane.kill", reply::Killed;
    PaneRespawn => "pane.respawn", reply::Generation;
    Wait => "wait", reply::Waited;
    Deliver => "deliver", reply::Delivered;
    PaneAnswer => "pane.answer", reply::Answered;
    EvidenceWatch => "evidence.watch", reply::Watching;
    Report => "report", reply::Reported;
    Attach => "attach", reply::Attached;
    EventsFollow => "events.follow", reply::Following;
    FleetJoin => "fleet.join", reply::Joined;
    FleetLeave => "fleet.leave", reply::Left;
    Signal => "signal", reply::SignalTaken;
    PaneExplain => "pane.explain", super::fuse::Explained;
    Shutdown => "shutdown", reply::Stopping;
}

/// Arguments that do not fit their op.
fn parse<T: DeserializeOwned + Checked>(
    name: &'static str,
    args: serde_json::Value,
) -> Result<T, BadRequest> {
    let bad = |message: String| BadRequest::Args { name, message };
    let t: T = serde_json::from_value(args).map_err(|e| bad(e.to_string()))?;
    t.check().map_err(bad)?;
    Ok(t)
}

/// What a well-formed argument struct must also hold beyond its types.
trait Checked {
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

impl Checked for args::Wait {
    fn check(&self) -> Result<(), String> {
        args::Wait::check(self)
    }
}

impl Checked for args::Signal {
    fn check(&self) -> Result<(), String> {
        self.note.check()
    }
}

impl Checked for args::PaneAnswer {
    fn check(&self) -> Result<(), String> {
        let named = self.choice.as_deref().is_some_and(|c| !c.trim().is_empty());
        if self.action == args::AnswerAction::Answer && !named {
            return Err("`answer` needs a string field `choice` (a number or a label)".into());
        }
        Ok(())
    }
}

macro_rules! unchecked {
    ($($t:ident),*) => { $(impl Checked for args::$t {})* };
}
unchecked!(
    Ping,
    PaneNew,
    PaneLs,
    PaneRead,
    PaneSend,
    PaneKeys,
    PaneResize,
    PaneKill,
    PaneRespawn,
    Deliver,
    EvidenceWatch,
    Report,
    Attach,
    EventsFollow,
    FleetJoin,
    FleetLeave,
    PaneExplain,
    Shutdown
);

/// A request that does not parse as one the supervisor serves.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadRequest {
    #[error("unknown request {0:?}")]
    UnknownOp(String),
    #[error("{name}: {message}")]
    Args { name: &'static str, message: String },
}

impl BadRequest {
    /// The op the request named, when it is one the supervisor serves.
    pub fn op(&self) -> Option<&str> {
        match self {
            BadRequest::UnknownOp(_) => None,
            BadRequest::Args { name, .. } => Some(name),
        }
    }
}

/// The wire's `{op, args}`, before the op is known.
#[derive(Deserialize)]
struct Tagged<'a> {
    #[serde(borrow)]
    op: Cow<'a, str>,
    #[serde(default)]
    args: serde_json::Value,
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::deserialize(d)?;
        Request::from_parts(&t.op, t.args).map_err(serde::de::Error::custom)
    }
}

/// The envelope every request frame has: its version and id (and an op,
/// read once the version is known to be ours).
#[derive(Debug, Deserialize)]
pub struct Envelope {
    pub v: u32,
    pub id: u64,
    #[serde(rename = "op")]
    _op: IgnoredAny,
}

/// A request as it is framed: version, id, op and arguments.
#[derive(Debug, Clone, Serialize)]
pub struct Framed<'a> {
    pub v: u32,
    pub id: u64,
    #[serde(flatten)]
    pub request: &'a Request,
}

impl<'a> Framed<'a> {
    /// `request` with this protocol's version.
    pub fn new(id: u64, request: &'a Request) -> Self {
        Framed {
            v: PROTOCOL_VERSION,
            id,
            request,
        }
    }
}

/// Parse one request frame's payload: the envelope, then (same version
/// only) the request. The outer error is a payload that is no request at
/// all; the inner one a request the supervisor answers with an error.
pub fn parse_frame(
    payload: &[u8],
) -> Result<(Envelope, Result<Request, RequestError>), serde_json::Error> {
    let env: Envelope = serde_json::from_slice(payload)?;
    if env.v != PROTOCOL_VERSION {
        let v = env.v;
        return Ok((env, Err(RequestError::Version(v))));
    }
    let t: Tagged = serde_json::from_slice(payload)?;
    let req = Request::from_parts(&t.op, t.args).map_err(RequestError::Bad);
    Ok((env, req))
}

/// Why a well-framed request is not served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// Another protocol version.
    #[error("{}", super::error::version_message(*.0))]
    Version(u32),
    #[error(transparent)]
    Bad(#[from] BadRequest),
}
