//! `drover fleet join|ls|leave|server-config` (docs/fleet.md). join, ls and
//! leave are the only commands that reach a NATS server; each makes a small
//! runtime of its own for it. server-config only prints.

use super::{Ctx, client_err, fail};
use drover::exit;
use drover::fleet::blocking;
use drover::fleet::config::{self, PASSWORD_ENV, TOKEN_ENV};
use drover::fleet::follow::{self, Start};
use drover::fleet::membership::{self, Presence};
use drover::fleet::{Auth, FleetConfig, FleetError, Handed, Names, Secret};
use drover::proto::reply::Left;
use drover::statedir::StateDirBuf;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum FleetCmd {
    /// Attach this host's supervisor to a fleet on a NATS server (starts one if none runs).
    #[command(after_help = JOIN_HELP)]
    Join(Box<JoinArgs>),
    /// List the fleet's hosts: slots, lanes, age, last heartbeat, state.
    #[command(after_help = "Example:\n  drover fleet ls --json")]
    Ls(LsArgs),
    /// Take this host out of its fleet now (its key is removed, its config forgotten).
    #[command(after_help = "Example:\n  drover fleet leave")]
    Leave,
    /// Pull the loop's steps from the fleet's work-queue and run them here (until stopped).
    #[command(after_help = "Example:\n  drover fleet work --slots 4")]
    Work(super::fleet_work::WorkArgs),
    /// Print the nats-server `authorization` block for a fleet's hosts: a user per host, no secrets.
    #[command(name = "server-config", after_help = SERVER_CONFIG_HELP)]
    ServerConfig(ServerConfigArgs),
}

const SERVER_CONFIG_HELP: &str = "\
One user per host, named as the host. A host's user may publish only its own
events and presence, read the fleet, follow its events, work steps and write
its own object bucket; the --creator's user may also create the fleet's
streams (join it first), coordinate runs, and make and read each listed
host's bucket: print the config again when a host is added or drover is
upgraded. Each password
is a variable reference, $DROVER_NATS_PW_<HOST> (upper case, - as _), that
nats-server resolves from its environment or from a file given with
--include; no secret is printed. nats-server reads an include path relative
to the including file's directory, so it must be relative.

Example:
  drover fleet server-config lab --host h1 --host h2 --creator h1 \\
    --include drover-lab-passwords.conf > /etc/nats/drover-lab.conf";

#[derive(Debug, clap::Args)]
pub struct ServerConfigArgs {
    /// The fleet's id.
    fleet: String,
    /// A host of the fleet (repeat for each); its NATS user is named as the host.
    #[arg(long = "host", value_name = "ID", required = true)]
    hosts: Vec<String>,
    /// The host whose user may create the fleet's streams (one of the --host ids).
    #[arg(long, value_name = "ID")]
    creator: String,
    /// A file defining password variables, included before the block (relative to the config's directory; repeatable).
    #[arg(long = "include", value_name = "FILE")]
    includes: Vec<String>,
}

const JOIN_HELP: &str = "\
Secrets never go in argv: a password comes from --password-file (mode 0600)
or DROVER_NATS_PASSWORD, a token from --token-file or DROVER_NATS_TOKEN.
A server that asks no authentication is refused without --insecure.

A shared token (or one user for every host) is not safe between hosts you do
not all trust: every holder can publish events as any host, delete its
presence, answer or take any coordinator's requests, queue steps and read or
replace any host's patches. Use one NATS user per host (`drover fleet
server-config`) for anything but one operator's own machines.

Example:
  drover fleet join lab --nats tls://nats.example:4222 --user h1 --password-file ~/.config/drover/nats.pw --tls-ca ca.pem";

#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    /// The fleet's id (1-64 of A-Z a-z 0-9 _ -).
    fleet: String,
    /// The NATS server URL (nats:// or tls://; several separated by commas).
    #[arg(long, value_name = "URL")]
    nats: String,
    /// This host's id in the fleet (default: the hostname).
    #[arg(long, value_name = "ID")]
    host: Option<String>,
    /// Lanes this host offers the fleet (default: the spawn budget).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    slots: Option<u16>,
    /// A NATS credentials file (user JWT and nkey seed).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["user", "token_file"])]
    creds: Option<PathBuf>,
    /// A NATS user; its password from --password-file or DROVER_NATS_PASSWORD.
    #[arg(long, value_name = "USER", conflicts_with = "token_file")]
    user: Option<String>,
    /// The file holding the user's password (mode 0600).
    #[arg(long, value_name = "FILE", requires = "user")]
    password_file: Option<PathBuf>,
    /// The file holding a token (mode 0600); else DROVER_NATS_TOKEN if set. Every token holder has every host's powers: see below.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Trust this CA (PEM) for the server's certificate; implies TLS.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// Join a server that asks no authentication (anyone who reaches it can write to the fleet).
    #[arg(long)]
    insecure: bool,
    /// How often to heartbeat, in ms; a new fleet's hosts expire after 3 missed.
    #[arg(long, value_name = "MS", default_value_t = config::DEFAULT_HEARTBEAT_MS,
          value_parser = clap::value_parser!(u64).range(membership::MIN_HEARTBEAT_MS..))]
    heartbeat_ms: u64,
    /// Copies JetStream keeps of the fleet's streams this host makes (3 on a three-node cluster).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
    replicas: u8,
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Print one JSON document: the fleet and its hosts.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: FleetCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        FleetCmd::Join(a) => join(*a, ctx),
        FleetCmd::Ls(a) => ls(a, ctx),
        FleetCmd::Leave => leave(ctx),
        FleetCmd::Work(a) => super::fleet_work::run(a, ctx),
        FleetCmd::ServerConfig(a) => server_config(a),
    }
}

/// `fleet server-config`: talks to no server, needs no state dir.
fn server_config(a: ServerConfigArgs) -> anyhow::Result<u8> {
    let names = Names::new(&a.fleet).map_err(fleet_fail)?;
    let block = names
        .authorization(&a.hosts, &a.creator, &a.includes)
        .map_err(fleet_fail)?;
    print!("{block}");
    Ok(exit::OK)
}

fn fleet_fail(e: FleetError) -> anyhow::Error {
    fail(e.exit_code(), e.to_string())
}

/// This machine's hostname as a host id.
fn default_host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    drover::fleet::subjects::host_id_from(name.trim())
}

/// A file given on the command line, made absolute (the supervisor that
/// reads it later runs elsewhere) and checked private when it holds a secret.
fn secret_file(path: &Path, what: &'static str) -> anyhow::Result<PathBuf> {
    let abs = std::fs::canonicalize(path).map_err(|source| {
        fleet_fail(FleetError::Secret {
            what,
            path: path.to_path_buf(),
            source,
        })
    })?;
    config::check_private(&abs, what).map_err(fleet_fail)?;
    Ok(abs)
}

/// The auth of a join, from its flags and this environment.
fn auth(a: &JoinArgs) -> anyhow::Result<Auth> {
    if let Some(f) = &a.creds {
        return Ok(Auth::Creds {
            file: secret_file(f, "credentials")?,
        });
    }
    if let Some(user) = &a.user {
        let password = match &a.password_file {
            Some(f) => Secret::File {
                path: secret_file(f, "password")?,
            },
            None => Secret::Env {
                var: PASSWORD_ENV.into(),
            },
        };
        return Ok(Auth::User {
            user: user.clone(),
            password,
        });
    }
    if let Some(f) = &a.token_file {
        return Ok(Auth::Token {
            token: Secret::File {
                path: secret_file(f, "token")?,
            },
        });
    }
    if std::env::var_os(TOKEN_ENV).is_some_and(|v| !v.is_empty()) {
        return Ok(Auth::Token {
            token: Secret::Env {
                var: TOKEN_ENV.into(),
            },
        });
    }
    Ok(Auth::None)
}

fn join(a: JoinArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    Names::new(&a.fleet).map_err(fleet_fail)?;
    let host = a.host.clone().unwrap_or_else(default_host);
    drover::fleet::subjects::check_id("host", &host).map_err(fleet_fail)?;
    config::check_url(&a.nats).map_err(fleet_fail)?;
    let tls_ca = match &a.tls_ca {
        Some(p) => Some(std::fs::canonicalize(p).map_err(|source| {
            fleet_fail(FleetError::Secret {
                what: "TLS CA",
                path: p.clone(),
                source,
            })
        })?),
        None => None,
    };
    let cfg = FleetConfig {
        fleet: a.fleet.clone(),
        url: a.nats.clone(),
        host,
        slots: a
            .slots
            .map_or(drover::lane::spawn::DEFAULT_SPAWN_BUDGET, usize::from),
        auth: auth(&a)?,
        tls_ca,
        insecure: a.insecure,
        heartbeat_ms: a.heartbeat_ms,
        replicas: usize::from(a.replicas),
    };
    if matches!(cfg.auth, Auth::None) && !cfg.insecure {
        return Err(fleet_fail(FleetError::NoCredentials));
    }
    let handed = Handed::from_env(&cfg);
    // A secret named by a variable that is not set is said here, not later
    // in the supervisor's log.
    for (s, got) in match &cfg.auth {
        Auth::User { password, .. } => vec![(password, &handed.password)],
        Auth::Token { token } => vec![(token, &handed.token)],
        _ => vec![],
    } {
        if let Secret::Env { var } = s
            && got.is_none()
        {
            return Err(fleet_fail(FleetError::SecretEnv {
                what: "secret",
                var: var.clone(),
            }));
        }
    }
    let state_dir = ctx.state_dir_create()?;
    if let Some(old) = config::load(&state_dir).map_err(fleet_fail)?
        && old.fleet != cfg.fleet
    {
        return Err(fail(
            exit::REFUSED,
            format!(
                "this host is in fleet {}; run `drover fleet leave` first",
                old.fleet
            ),
        ));
    }
    let mut c = ctx.client_or_start()?;
    let r = c
        .call(drover::proto::args::FleetJoin {
            config: cfg.clone(),
            password: handed.password.clone(),
            token: handed.token.clone(),
            rejoin: false,
        })
        .map_err(client_err)?;
    let ttl = r.ttl_ms.unwrap_or(0);
    ctx.said(format!(
        "joined fleet {} as host {} ({} slots); a host is gone {}s after its last heartbeat",
        cfg.fleet,
        cfg.host,
        cfg.slots,
        ttl / 1000
    ));
    Ok(exit::OK)
}

pub(super) fn joined(ctx: &Ctx) -> anyhow::Result<(StateDirBuf, FleetConfig)> {
    let dir = ctx
        .state_dir()
        .map_err(|_| fleet_fail(FleetError::NotJoined))?;
    let cfg = config::load(&dir)
        .map_err(fleet_fail)?
        .ok_or_else(|| fleet_fail(FleetError::NotJoined))?;
    Ok((dir, cfg))
}

fn ls(a: LsArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let (_, cfg) = joined(ctx)?;
    let hosts: Vec<Presence> =
        blocking::hosts(&cfg, &Handed::from_env(&cfg)).map_err(fleet_fail)?;
    let now = drover::paths::now_ms();
    let ms_of =
        |at: &chrono::DateTime<chrono::Utc>| u64::try_from(at.timestamp_millis()).unwrap_or(0);
    if a.json {
        let rows: Vec<_> = hosts
            .iter()
            .map(|p| {
                let seen = now.saturating_sub(ms_of(&p.heartbeat_at));
                let mut v = serde_json::to_value(p).unwrap_or_default();
                v["this"] = json!(p.host == cfg.host);
                v["seen_ms"] = json!(seen);
                v["state"] = json!(membership::state_of(
                    Duration::from_millis(seen),
                    p.heartbeat_ms
                ));
                v
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"fleet": cfg.fleet, "hosts": rows}))?
        );
        return Ok(exit::OK);
    }
    println!(
        "{:<24} {:>5} {:>5} {:>9} {:>9} {:<5} {:<9} AGENTS",
        "HOST", "SLOTS", "LANES", "AGE", "SEEN", "STATE", "VERSION"
    );
    for p in &hosts {
        let seen = now.saturating_sub(ms_of(&p.heartbeat_at));
        let mark = if p.host == cfg.host { "*" } else { "" };
        let agents: Vec<String> = p.agents.iter().map(|(a, v)| format!("{a} {v}")).collect();
        println!(
            "{:<24} {:>5} {:>5} {:>9} {:>9} {:<5} {:<9} {}",
            format!("{}{mark}", p.host),
            p.slots,
            p.lanes,
            super::fmt::ago(ms_of(&p.joined_at)).trim_end_matches(" ago"),
            super::fmt::ago(ms_of(&p.heartbeat_at)),
            membership::state_of(Duration::from_millis(seen), p.heartbeat_ms).as_str(),
            p.version,
            if agents.is_empty() {
                "-".to_string()
            } else {
                agents.join(", ")
            }
        );
    }
    Ok(exit::OK)
}

fn leave(ctx: &Ctx) -> anyhow::Result<u8> {
    // A running supervisor holds the heartbeat: it stops it and removes the key.
    if let Ok(mut c) = ctx.client() {
        let r = c
            .call(drover::proto::args::FleetLeave {})
            .map_err(client_err)?;
        match r {
            Left::Left {
                fleet, host, error, ..
            } => {
                if let Some(e) = error {
                    eprintln!(
                        "drover: warning: {e}; the host's entry expires with the fleet's TTL"
                    );
                }
                ctx.said(format!("left fleet {fleet} (host {host})"));
                return Ok(exit::OK);
            }
            Left::NotIn {
                config_removed: false,
                ..
            } => {
                ctx.said("this host is in no fleet");
                return Ok(exit::OK);
            }
            Left::NotIn { .. } => {}
        }
    }
    let Ok((dir, cfg)) = joined(ctx) else {
        ctx.said("this host is in no fleet");
        return Ok(exit::OK);
    };
    // No supervisor: remove the key ourselves, then the config.
    Names::of(&cfg).map_err(fleet_fail)?;
    let removed = blocking::remove_own_presence(&cfg, &Handed::from_env(&cfg));
    config::remove(&dir).map_err(fleet_fail)?;
    if let Err(e) = removed {
        eprintln!("drover: warning: {e}; the host's entry expires with the fleet's TTL");
    }
    ctx.said(format!("left fleet {} (host {})", cfg.fleet, cfg.host));
    Ok(exit::OK)
}

/// What `events --follow --fleet` asks for.
pub struct FleetFollow<'a> {
    pub fleet: &'a str,
    pub since: Option<u64>,
    pub pane: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub jsonl: bool,
}

/// This state dir's fleet config, which must be of `fleet` (else exit 3).
pub(super) fn joined_as(ctx: &Ctx, fleet: &str) -> anyhow::Result<FleetConfig> {
    let (_, cfg) = joined(ctx)?;
    follow::check_fleet(&cfg, fleet).map_err(fleet_fail)?;
    Ok(cfg)
}

/// `events --follow --fleet FLEET`: every host's events from the fleet's
/// stream, in each host's order, until interrupted or stdout closes.
pub fn follow_events(f: &FleetFollow, ctx: &Ctx) -> anyhow::Result<u8> {
    use super::events::{human, kind_matches, out};
    let cfg = joined_as(ctx, f.fleet)?;
    let followed = blocking::follow(
        &cfg,
        &Handed::from_env(&cfg),
        Start::from_since(f.since),
        |ev| {
            if !kind_matches(f.kind, ev.kind()) || f.pane.is_some_and(|p| ev.pane() != Some(p)) {
                return true;
            }
            // Another host's fields reach this terminal: no control
            // character of theirs does (JSON escapes them itself).
            let text = if f.jsonl {
                ev.to_line()
            } else {
                use drover::screen::sanitize_line;
                format!(
                    "{:<16} {}",
                    sanitize_line(&ev.host),
                    sanitize_line(&human(&ev.event))
                )
            };
            out(&(text + "\n"))
        },
    )
    .map_err(fleet_fail)?;
    match followed {
        blocking::Followed::Stopped => Ok(exit::OK),
        blocking::Followed::Ended => Err(fail(
            exit::TRANSPORT,
            "the fleet's event stream ended; run `drover events --follow --fleet FLEET --since FLEET_SEQ` again to resume",
        )),
    }
}
