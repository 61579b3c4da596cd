//! A fleet's config as `fleet.join` carries it and `fleet.json` records it
//! (docs/fleet.md): plain data; the fleet module reads the secrets it names.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The fleet this state dir's supervisor belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetConfig {
    pub fleet: String,
    /// One server URL, or several separated by commas.
    pub url: String,
    pub host: String,
    pub slots: usize,
    pub auth: Auth,
    /// A CA to trust for the server's certificate (else the system roots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// Join a server that asks no authentication.
    #[serde(default)]
    pub insecure: bool,
    pub heartbeat_ms: u64,
    /// Copies JetStream keeps of each of the fleet's streams, buckets and
    /// objects when this host makes them (3 on a three-node cluster).
    #[serde(default = "one_replica")]
    pub replicas: usize,
}

fn one_replica() -> usize {
    1
}

/// How to authenticate; each secret is read from a file or the environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Auth {
    /// No credentials (only with `--insecure`).
    None,
    /// A NATS `.creds` file (a user JWT and its nkey seed).
    Creds { file: PathBuf },
    /// A user and a password.
    User { user: String, password: Secret },
    /// A token.
    Token { token: Secret },
}

/// Where a secret is read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Secret {
    File { path: PathBuf },
    Env { var: String },
}
