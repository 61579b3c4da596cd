//! `drover web`: one page and a JSON API over what `top` shows, served over
//! HTTP (axum on hyper) from a live snapshot ([`feed`]) that follows the
//! supervisor's event stream. Safe by default: loopback unless told
//! otherwise (a non-loopback address needs TLS or `--insecure-http`), a
//! token traded for an `HttpOnly`, `SameSite=Strict` cookie, the `Host` and
//! `Origin` checked, no CORS, a strict CSP ([`auth`]). Read-only unless
//! `--allow-actions`; each action is audited ([`audit`]). docs/web.md.

pub mod actions;
pub mod api;
pub mod audit;
pub mod auth;
pub mod feed;
pub mod fleet;
pub mod tls;
pub mod token;
pub mod view;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

/// The address `drover web` listens on unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// How `drover web` serves.
#[derive(Debug, Clone)]
pub struct WebOptions {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    /// This drover binary (a close-out of a run whose loop is gone runs it).
    pub exe: PathBuf,
    pub listen: SocketAddr,
    pub allow_actions: bool,
    /// The operator's certificate chain and key (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    pub insecure_http: bool,
    /// Host names accepted beside the listener's own.
    pub allow_hosts: Vec<String>,
    pub new_token: bool,
    /// Show the fleet's hosts too: the joined fleet and its handed secrets.
    pub fleet: Option<(crate::fleet::FleetConfig, crate::fleet::Handed)>,
}

/// Why `drover web` could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebError {
    #[error(
        "{0} is not a loopback address: serve it over TLS (--tls-cert and --tls-key) or say --insecure-http"
    )]
    NeedsTls(SocketAddr),
    #[error("--tls-cert and --tls-key go together")]
    HalfTls,
    #[error("--allow-host {0:?} is not a host name")]
    BadHost(String),
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the web token: {0}")]
    Token(#[from] crate::store::StoreError),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl WebError {
    /// The exit code (docs/cli.md).
    pub fn exit_code(&self) -> u8 {
        match self {
            WebError::NeedsTls(_) | WebError::HalfTls | WebError::BadHost(_) => crate::exit::USAGE,
            WebError::Client(e) => e.exit_code(),
            WebError::Fleet(e) => e.exit_code(),
            _ => crate::exit::ERROR,
        }
    }
}

/// Check the options before anything is opened (pure).
pub fn check(o: &WebOptions) -> Result<(), WebError> {
    if o.tls.is_none() && !o.insecure_http && !o.listen.ip().is_loopback() {
        return Err(WebError::NeedsTls(o.listen));
    }
    for h in &o.allow_hosts {
        let ok = !h.is_empty()
            && h.len() <= 253
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
        if !ok {
            return Err(WebError::BadHost(h.clone()));
        }
    }
    Ok(())
}

/// What every request handler shares.
pub struct Shared {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    pub exe: PathBuf,
    pub token: token::Token,
    pub guard: auth::Guard,
    pub allow_actions: bool,
    /// The latest snapshot, as JSON on one line.
    pub view: tokio::sync::watch::Receiver<Arc<str>>,
}

/// The URL printed at start (the only place the token is shown).
pub fn url(tls: bool, listen: SocketAddr, token: &token::Token) -> String {
    let scheme = if tls { "https" } else { "http" };
    let host = match listen.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    format!(
        "{scheme}://{host}:{}/?token={}",
        listen.port(),
        token.secret()
    )
}

/// Serve until the process is stopped. `said` gets the two start lines
/// (the URL with the token, and whether actions are allowed).
pub fn serve(o: WebOptions, said: &mut dyn FnMut(&str)) -> Result<(), WebError> {
    check(&o)?;
    let tls = match &o.tls {
        Some((cert, key)) => Some(tls::acceptor(cert, key)?),
        None => None,
    };
    let token =
        token::Token::load_or_create(crate::statedir::StateDir::new(&o.state_dir), o.new_token)?;
    // The supervisor must be there: its feed is what the page shows.
    let client = crate::client::Client::connect(&o.socket)?;
    // The fleet too, when asked for: reaching it fails before serving.
    let fleet = match &o.fleet {
        Some((cfg, handed)) => Some(fleet::WebFleet::open(cfg, handed)?),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(o.listen))
        .map_err(|source| WebError::Listen {
            addr: o.listen,
            source,
        })?;
    let addr = listener.local_addr()?;
    let view = feed::start(
        feed::FeedConfig {
            state_dir: o.state_dir.clone(),
            socket: o.socket.clone(),
            read_only: !o.allow_actions,
            token_id: token.id(),
        },
        client,
        fleet,
    )?;
    let shared = Arc::new(Shared {
        guard: auth::Guard::new(addr.ip(), tls.is_some(), &o.allow_hosts),
        state_dir: o.state_dir,
        socket: o.socket,
        exe: o.exe,
        token,
        allow_actions: o.allow_actions,
        view,
    });
    said(&format!(
        "drover web: {}",
        url(tls.is_some(), addr, &shared.token)
    ));
    said(if o.allow_actions {
        "actions allowed"
    } else {
        "read-only"
    });
    let app = api::router(shared);
    rt.block_on(async move {
        match tls {
            Some(acceptor) => {
                let l = tls::TlsListener::new(listener, acceptor);
                axum::serve(l, app).await
            }
            None => axum::serve(listener, app).await,
        }
    })?;
    Ok(())
}
