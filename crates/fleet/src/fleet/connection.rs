//! One connection to the fleet's NATS servers through the official
//! `async-nats` client. Secrets are read here, at connect time, from the
//! files or environment variables the fleet config names, and never leave
//! this function: errors name the file or variable, never the value.

use super::FleetError;
use super::config::{Auth, FleetConfig, PASSWORD_ENV, Secret, SecretLoad, TOKEN_ENV};
use std::time::Duration;

/// How long one attempt to reach a server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request on the bus (a KV put, a stream lookup) may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Secrets handed over in memory instead of read from this process's
/// environment: `fleet join` reads `DROVER_NATS_PASSWORD` in the operator's
/// shell and passes it to a supervisor that was started without it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Handed {
    pub password: Option<String>,
    pub token: Option<String>,
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values.
        f.debug_struct("Handed")
            .field("password", &self.password.is_some())
            .field("token", &self.token.is_some())
            .finish()
    }
}

impl Handed {
    /// The environment secrets `cfg` names, read from this process's
    /// environment (for handing to the supervisor).
    pub fn from_env(cfg: &FleetConfig) -> Self {
        let read = |s: &Secret| match s {
            Secret::Env { var } => std::env::var(var).ok().filter(|v| !v.is_empty()),
            Secret::File { .. } => None,
        };
        match &cfg.auth {
            Auth::User { password, .. } => Handed {
                password: read(password),
                token: None,
            },
            Auth::Token { token } => Handed {
                password: None,
                token: read(token),
            },
            _ => Handed::default(),
        }
    }
}

/// Load one secret: a handed-over value first, then its file or variable.
fn secret(s: &Secret, handed: Option<&String>, what: &'static str) -> Result<String, FleetError> {
    if let (Secret::Env { .. }, Some(v)) = (s, handed) {
        return Ok(v.clone());
    }
    s.load(what)
}

/// The `async-nats` options for `cfg`: credentials, TLS, names.
async fn options(
    cfg: &FleetConfig,
    handed: &Handed,
) -> Result<async_nats::ConnectOptions, FleetError> {
    let mut o = match &cfg.auth {
        Auth::None => async_nats::ConnectOptions::new(),
        Auth::Creds { file } => async_nats::ConnectOptions::with_credentials_file(file.clone())
            .await
            .map_err(|source| FleetError::Secret {
                what: "credentials",
                path: file.clone(),
                source,
            })?,
        Auth::User { user, password } => {
            let pw = secret(password, handed.password.as_ref(), "password")?;
            async_nats::ConnectOptions::with_user_and_password(user.clone(), pw)
        }
        Auth::Token { token } => {
            async_nats::ConnectOptions::with_token(secret(token, handed.token.as_ref(), "token")?)
        }
    };
    if let Some(ca) = &cfg.tls_ca {
        // Read it ourselves first, so a missing file is an error naming it.
        std::fs::metadata(ca).map_err(|source| FleetError::Secret {
            what: "TLS CA",
            path: ca.clone(),
            source,
        })?;
        o = o.add_root_certificates(ca.clone()).require_tls(true);
    }
    if cfg.url.split(',').any(|u| u.trim().starts_with("tls://")) {
        o = o.require_tls(true);
    }
    let names = super::Names::new(&cfg.fleet)?;
    Ok(o.name(format!("drover {}/{}", cfg.fleet, cfg.host))
        .event_callback(|ev| async move {
            // A permissions violation is otherwise only a request that
            // times out: say what the server refused (a subject, no secret).
            if let async_nats::Event::ServerError(async_nats::ServerError::Other(e)) = ev {
                tracing::warn!(error = %e, "the NATS server refused an operation");
            }
        })
        .custom_inbox_prefix(names.inbox_prefix(&cfg.host))
        .connection_timeout(CONNECT_TIMEOUT)
        .request_timeout(Some(REQUEST_TIMEOUT)))
}

/// Connect to the fleet's servers once; refuses a server that asks no
/// authentication unless the config says `insecure`.
pub async fn connect(cfg: &FleetConfig, handed: &Handed) -> Result<async_nats::Client, FleetError> {
    if matches!(cfg.auth, Auth::None) && !cfg.insecure {
        return Err(FleetError::NoCredentials);
    }
    super::config::check_url(&cfg.url)?;
    let opts = options(cfg, handed).await?;
    let urls: Vec<String> = cfg.url.split(',').map(|u| u.trim().to_string()).collect();
    let client = opts
        .connect(urls.as_slice())
        .await
        .map_err(|e| connect_error(&cfg.url, &e))?;
    // The version is the one in the INFO of the server this client reached.
    if let Err(e) = super::version::check(&cfg.url, &client.server_info().version) {
        let _ = client.drain().await;
        return Err(e);
    }
    if !client.server_info().auth_required && !cfg.insecure {
        let _ = client.drain().await;
        return Err(FleetError::Unauthenticated {
            url: cfg.url.clone(),
        });
    }
    Ok(client)
}

/// What went wrong, in words that name no secret (the client's own
/// messages are kind names and I/O or TLS errors, which hold none).
fn connect_error(url: &str, e: &async_nats::ConnectError) -> FleetError {
    use async_nats::ConnectErrorKind as K;
    let message = match e.kind() {
        K::AuthorizationViolation | K::Authentication => {
            "the server refused the credentials (authorization violation): check the user, password, token or creds file".to_string()
        }
        K::Tls => tls_advice(&e.to_string()),
        // rustls reports a certificate it does not trust as an I/O error.
        K::Io if e.to_string().contains("certificate") => tls_advice(&e.to_string()),
        K::TimedOut => "timed out".to_string(),
        _ => e.to_string(),
    };
    FleetError::Connect {
        url: url.to_string(),
        message,
    }
}

fn tls_advice(e: &str) -> String {
    format!(
        "TLS failed ({e}): check --tls-ca names the CA that signed the server's certificate, and that the certificate names the host in the URL"
    )
}

/// The environment variables that hold NATS secrets: scrubbed from every
/// pane's environment so an agent never sees them.
pub const SECRET_ENV_VARS: [&str; 2] = [PASSWORD_ENV, TOKEN_ENV];

#[cfg(test)]
mod tests {
    #[test]
    fn panes_never_inherit_the_nats_secrets() {
        assert_eq!(super::SECRET_ENV_VARS, crate::pane::SCRUBBED_ENV);
    }
}
