//! What `drover fleet join` records in the state dir (`fleet.json`), and the
//! credentials it names. The file never holds a secret: it names the file or
//! the environment variable to read one from, each time a connection is made,
//! so a rotated password needs no new join and nothing secret is in argv.

use super::FleetError;
use crate::statedir::StateDir;
use std::path::{Path, PathBuf};

/// The environment variable a password is read from when no file is given.
pub const PASSWORD_ENV: &str = crate::statedir::env::NATS_PASSWORD;
/// The environment variable a token is read from when no file is given.
pub const TOKEN_ENV: &str = crate::statedir::env::NATS_TOKEN;
/// How often a joined supervisor heartbeats by default.
pub const DEFAULT_HEARTBEAT_MS: u64 = 5_000;

pub use crate::proto::fleet::{Auth, FleetConfig, Secret};

/// Reading a [`Secret`] (the type is the protocol crate's, so reading it
/// lives in this extension trait).
pub trait SecretLoad {
    /// The secret, without a final newline.
    fn load(&self, what: &'static str) -> Result<String, FleetError>;
}

impl SecretLoad for Secret {
    /// The secret, without a final newline.
    fn load(&self, what: &'static str) -> Result<String, FleetError> {
        let raw = match self {
            Secret::File { path } => {
                check_private(path, what)?;
                std::fs::read_to_string(path).map_err(|source| FleetError::Secret {
                    what,
                    path: path.clone(),
                    source,
                })?
            }
            Secret::Env { var } => std::env::var(var).unwrap_or_default(),
        };
        let s = raw.trim_end_matches(['\n', '\r']).to_string();
        if s.is_empty() {
            return Err(match self {
                Secret::Env { var } => FleetError::SecretEnv {
                    what,
                    var: var.clone(),
                },
                Secret::File { path } => FleetError::Secret {
                    what,
                    path: path.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, "empty"),
                },
            });
        }
        Ok(s)
    }
}

/// A secret file others can read is refused, as ssh refuses a loose key:
/// the fix is one `chmod 600`, the leak would be silent.
pub fn check_private(path: &Path, what: &'static str) -> Result<(), FleetError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|source| FleetError::Secret {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(FleetError::LooseSecret {
            what,
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// The fleet config of a state dir.
pub fn path(state_dir: &StateDir) -> PathBuf {
    state_dir.fleet_config()
}

/// The state dir's fleet config; `Ok(None)` when it joined none.
pub fn load(state_dir: &StateDir) -> Result<Option<FleetConfig>, FleetError> {
    Ok(crate::store::read_json(&path(state_dir))?)
}

/// Record the fleet config (atomically, private to the user).
pub fn save(state_dir: &StateDir, cfg: &FleetConfig) -> Result<(), FleetError> {
    Ok(crate::store::write_json_atomic(&path(state_dir), cfg)?)
}

/// Forget the fleet config; true when there was one.
pub fn remove(state_dir: &StateDir) -> Result<bool, FleetError> {
    let p = path(state_dir);
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(FleetError::Store(crate::store::StoreError::Io {
            op: "remove",
            path: p,
            source: e,
        })),
    }
}

/// A URL that carries a user or password (`nats://u:p@host`) would put a
/// secret in argv and in `fleet.json`: refused.
pub fn check_url(url: &str) -> Result<(), FleetError> {
    for one in url.split(',') {
        let rest = one.split_once("://").map_or(one, |(_, r)| r);
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(FleetError::Connect {
                url: "(a URL with credentials, not repeated here)".into(),
                message: "credentials in the URL would be in argv and on disk; use --user with --password-file, --token-file or --creds".into(),
            });
        }
        if authority.is_empty() {
            return Err(FleetError::Connect {
                url: one.to_string(),
                message: "no host in the URL".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_come_from_files_or_the_environment_and_are_never_empty() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "s3cret\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Secret::File { path: f.clone() }
            .load("password")
            .unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let s = Secret::File { path: f.clone() };
        assert_eq!(s.load("password").unwrap(), "s3cret");
        std::fs::write(&f, "\n").unwrap();
        assert!(s.load("password").is_err());
        let e = Secret::Env {
            var: "DROVER_TEST_SURELY_UNSET_VAR".into(),
        };
        let err = e.load("password").unwrap_err().to_string();
        assert!(err.contains("DROVER_TEST_SURELY_UNSET_VAR"), "{err}");
    }

    #[test]
    fn a_url_with_credentials_is_refused_without_repeating_them() {
        let err = check_url("nats://bob:hunter2@host:4222").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(check_url("nats://a:4222,tls://b:4222").is_ok());
        assert!(check_url("nats://").is_err());
    }

    #[test]
    fn a_config_written_before_replicas_reads_as_one_copy() {
        let old = r#"{"fleet":"lab","url":"nats://127.0.0.1:4222","host":"h1","slots":4,
            "auth":{"kind":"none"},"insecure":true,"heartbeat_ms":5000}"#;
        let cfg: FleetConfig = serde_json::from_str(old).unwrap();
        assert_eq!(cfg.replicas, 1);
    }

    #[test]
    fn the_config_round_trips_and_holds_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = FleetConfig {
            fleet: "lab".into(),
            url: "nats://127.0.0.1:4222".into(),
            host: "h1".into(),
            slots: 4,
            auth: Auth::User {
                user: "h1".into(),
                password: Secret::Env {
                    var: PASSWORD_ENV.into(),
                },
            },
            tls_ca: None,
            insecure: false,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            replicas: 3,
        };
        let state = StateDir::new(dir.path());
        save(state, &cfg).unwrap();
        assert_eq!(load(state).unwrap(), Some(cfg));
        assert!(remove(state).unwrap());
        assert_eq!(load(state).unwrap(), None);
    }
}
