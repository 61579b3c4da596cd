//! `drover web`: the live page of panes, lanes, runs and hosts (docs/web.md).

use super::{Ctx, fail};
use drover::exit;
use drover::web::{DEFAULT_LISTEN, WebError, WebOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// The address to serve on; a non-loopback one needs --tls-cert/--tls-key or --insecure-http.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// Let the page approve, deny or answer a blocked lane and pause, resume or close out a run (audited).
    #[arg(long)]
    allow_actions: bool,
    /// The certificate chain (PEM) to serve HTTPS with.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback address (the token crosses the network in clear).
    #[arg(long)]
    insecure_http: bool,
    /// Another name the page may be reached by (its Host header); repeatable.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// Replace the token: the URL printed before stops working.
    #[arg(long)]
    new_token: bool,
    /// Show the hosts of the fleet this state dir joined (`fleet join`): each one's state, last heartbeat and pane count (docs/fleet.md).
    #[arg(long)]
    fleet: bool,
}

fn web_err(e: WebError) -> anyhow::Error {
    match e {
        WebError::Client(e) => super::client_err(e),
        e => fail(e.exit_code(), e.to_string()),
    }
}

pub fn run(a: WebArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let opts = WebOptions {
        state_dir: PathBuf::new(),
        socket: PathBuf::new(),
        exe: PathBuf::new(),
        listen: a.listen,
        allow_actions: a.allow_actions,
        tls: a.tls_cert.zip(a.tls_key),
        insecure_http: a.insecure_http,
        allow_hosts: a.allow_host,
        new_token: a.new_token,
        fleet: None,
    };
    // Usage errors first, before the state dir or the supervisor.
    drover::web::check(&opts).map_err(web_err)?;
    // The fleet next, as `top --fleet` checks it: not joined is refused.
    let fleet = if a.fleet {
        let (_, cfg) = super::fleet::joined(ctx)?;
        let handed = drover::fleet::Handed::from_env(&cfg);
        Some((cfg, handed))
    } else {
        None
    };
    let state_dir = ctx.state_dir()?;
    // The supervisor must run: its feed is what the page shows.
    drop(ctx.client()?);
    let exe = std::env::current_exe()
        .map_err(|e| fail(exit::ERROR, format!("cannot find the drover binary: {e}")))?;
    let opts = WebOptions {
        socket: ctx.socket(&state_dir)?,
        state_dir: state_dir.into_path_buf(),
        exe,
        fleet,
        ..opts
    };
    drover::web::serve(opts, &mut |line| {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    })
    .map_err(web_err)?;
    Ok(exit::OK)
}
