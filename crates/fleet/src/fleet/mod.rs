//! The fleet (docs/fleet.md): supervisors on many hosts joined
//! over NATS with JetStream. Nothing here runs unless the state dir holds a
//! fleet config written by `drover fleet join`; a single host never needs a
//! NATS server.
//!
//! - [`subjects`]: every name on the bus, scoped `drover.<fleet>.…`, and the
//!   permissions a host's NATS user needs.
//! - [`config`]: what `fleet join` records (never a secret itself: files and
//!   environment variables to read it from) and how credentials are loaded.
//! - [`connection`]: connecting through the official `async-nats` client;
//!   secrets are read at connect time and never leave it; a server that asks
//!   no authentication is refused unless told.
//! - [`membership`]: presence, a key per host in a KV bucket whose TTL makes
//!   a dead host disappear by itself.
//! - [`member`]: the supervisor's task that heartbeats while it runs.
//! - [`events`]: each host's event feed into the fleet's stream.
//! - [`candidate`]: the check of a candidate applied from another host: no
//!   symlink that points outside the tree.
//! - [`delivery`]: a host's pull and what a delivery's ack subject says.
//! - [`objects`]: the coordinator's bundles and candidates, and each host's
//!   own bucket of patches, written without a rollup and read back checked.
//! - [`lost`]: which of the fleet's streams a wiped store took, and making
//!   again what this host's user may make.
//! - [`follow`]: watching the fleet from a joined host, the hosts present
//!   and every host's events (`events --follow --fleet`, `top --fleet`).
//! - [`version`]: the server's version from its INFO, and the oldest one
//!   the fleet works on.
//!
//! The supervisor runs this on its own runtime; the `fleet` commands make a
//! small runtime of their own (the rest of drover is synchronous).

pub mod blocking;
pub mod candidate;
pub mod config;
pub mod connection;
pub mod delivery;
pub mod events;
pub mod follow;
pub mod lost;
pub mod member;
pub mod membership;
pub mod objects;
pub mod subjects;
pub mod version;
pub mod work;

pub use config::{Auth, FleetConfig, Secret, SecretLoad};
pub use connection::Handed;
pub use member::Member;
pub use subjects::Names;

use std::path::PathBuf;

/// What can go wrong in the fleet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// A fleet or host id that is not one plain subject token.
    #[error("bad {what} id {id:?}: use 1-64 of A-Z a-z 0-9 _ -")]
    BadId { what: &'static str, id: String },
    /// A fleet name holding `-objects`: its streams could be another
    /// fleet's host buckets (`drover-<fleet>-objects-<host>`) on one server.
    #[error(
        "fleet name {fleet:?} holds \"-objects\", which drover's stream names keep for a fleet's object buckets: pick another name"
    )]
    ReservedFleetName { fleet: String },
    /// The same host given twice to the server config.
    #[error("host {host:?} is given twice")]
    HostTwice { host: String },
    /// Two host ids whose password variables would be the same.
    #[error(
        "hosts {a:?} and {b:?} would share the password variable {var}: use ids that differ in more than case or - and _"
    )]
    PasswordVarClash { a: String, b: String, var: String },
    /// A `--creator` that is not one of the `--host`s.
    #[error("the creator {creator:?} is not one of the --host ids")]
    CreatorNotAHost { creator: String },
    /// An include path the server config cannot quote.
    #[error(
        "cannot include {path:?} in the server config: give a non-empty path without quotes or line breaks"
    )]
    BadInclude { path: String },
    /// A credentials file could not be read.
    #[error("cannot read the {what} file {}: {source}", path.display())]
    Secret {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A secret file that others may read.
    #[error("the {what} file {} is readable by others (mode {mode:04o}): chmod 600 it", path.display())]
    LooseSecret {
        what: &'static str,
        path: PathBuf,
        mode: u32,
    },
    /// A secret named by an environment variable is missing or empty.
    #[error("the environment variable {var} is not set (or empty): it holds the {what}")]
    SecretEnv { what: &'static str, var: String },
    /// The fleet config on disk.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A fleet named that is not the one this host joined.
    #[error("this host joined fleet {joined}, not {asked}")]
    OtherFleet { joined: String, asked: String },
    /// The local state dir holds no fleet config.
    #[error("this host has not joined a fleet (run `drover fleet join FLEET --nats URL`)")]
    NotJoined,
    /// The server asks for no authentication and `--insecure` was not given.
    #[error(
        "the NATS server at {url} asks no authentication: any process that reaches it could write to the fleet; give credentials the server requires, or --insecure to join anyway"
    )]
    Unauthenticated { url: String },
    /// No credentials given and `--insecure` not given.
    #[error(
        "no credentials: give --creds FILE, --user U with --password-file F (or DROVER_NATS_PASSWORD), --token-file F (or DROVER_NATS_TOKEN), or --insecure for a server without authentication"
    )]
    NoCredentials,
    /// Connecting failed (unreachable, TLS, authentication refused).
    #[error("cannot connect to the NATS server at {url}: {message}")]
    Connect { url: String, message: String },
    /// A nats-server older than [`version::OLDEST`].
    #[error(
        "the NATS server at {url} is nats-server {version}: the fleet needs 2.9.0 or newer ({why}); upgrade the server",
        why = version::WHY
    )]
    OldServer { url: String, version: String },
    /// Nobody listens for a run's requests: its coordinator is gone.
    #[error("no coordinator answers for run {run}")]
    NoCoordinator { run: String },
    /// One of the fleet's streams is gone from the server under a run (its
    /// store wiped, the stream deleted): what was queued on it is lost.
    #[error(
        "the fleet's {what} is gone from the NATS server (its store wiped or the stream deleted): the steps queued on it are lost; this run stops here, and `drover loop run --resume` makes it again and queues them anew"
    )]
    Lost { what: String },
    /// A host's `fleet work` found one of the fleet's streams gone from
    /// under it: it may not make it again, and the steps on it are lost.
    #[error(
        "the fleet's {what} is gone from the NATS server (its store wiped or the stream deleted): the steps queued on it are lost and this host may not make it again; the coordinator's `drover loop run --resume` makes it again, then start `drover fleet work` again"
    )]
    HostLost { what: String },
    /// The fleet's object store allows rollups (an older drover made it)
    /// and this host's user may not change that.
    #[error(
        "the fleet's object store {stream} allows rollups (an older drover made it): one message could erase every object; delete that stream with the server's admin user (`nats stream rm {stream}`), then run again: the fleet's creator makes it anew"
    )]
    RollupStore { stream: String },
    /// The fleet's event stream is gone (a wiped store) and this host's
    /// user may not make it again.
    #[error(
        "the fleet's event stream {stream} is gone from the NATS server (its store wiped or the stream deleted) and this host may not make it again: the fleet's creator makes it when its supervisor joins again; then follow again"
    )]
    EventsGone { stream: String },
    /// A call on the bus failed.
    #[error("NATS {op}: {message}")]
    Bus { op: &'static str, message: String },
    /// A cluster could not place a replicated stream or consumer just now:
    /// a peer offline or behind (JetStream error 10005), no metadata leader
    /// (10008), or no answer in time (a node catching up). Asked again
    /// while it lasts (`work::while_placing`).
    #[error("NATS {op}: {message}")]
    Placing { op: &'static str, message: String },
    /// The runtime for the connection could not start.
    #[error("cannot start the fleet's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl FleetError {
    /// A failed call on the bus, with what was being done.
    pub fn bus(op: &'static str, e: impl std::fmt::Display) -> Self {
        FleetError::Bus {
            op,
            message: e.to_string(),
        }
    }

    /// The exit code of docs/cli.md for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            FleetError::BadId { .. }
            | FleetError::ReservedFleetName { .. }
            | FleetError::HostTwice { .. }
            | FleetError::PasswordVarClash { .. }
            | FleetError::CreatorNotAHost { .. }
            | FleetError::BadInclude { .. } => crate::exit::USAGE,
            FleetError::Unauthenticated { .. }
            | FleetError::NoCredentials
            | FleetError::LooseSecret { .. }
            | FleetError::OldServer { .. } => crate::exit::REFUSED,
            FleetError::NotJoined | FleetError::OtherFleet { .. } => crate::exit::REFUSED,
            FleetError::Connect { .. }
            | FleetError::Bus { .. }
            | FleetError::Placing { .. }
            | FleetError::NoCoordinator { .. }
            | FleetError::Lost { .. }
            | FleetError::HostLost { .. }
            | FleetError::EventsGone { .. } => crate::exit::TRANSPORT,
            FleetError::RollupStore { .. } => crate::exit::REFUSED,
            _ => crate::exit::ERROR,
        }
    }

    /// Whether trying again cannot help until someone acts: a secret that
    /// is not there (a variable not set in this process, a file missing or
    /// open to others), no credentials, a server that asks none, a server
    /// too old. A supervisor that rejoins stops retrying on one of these.
    pub fn needs_someone(&self) -> bool {
        matches!(
            self,
            FleetError::SecretEnv { .. }
                | FleetError::Secret { .. }
                | FleetError::LooseSecret { .. }
                | FleetError::NoCredentials
                | FleetError::Unauthenticated { .. }
                | FleetError::OldServer { .. }
        )
    }
}
