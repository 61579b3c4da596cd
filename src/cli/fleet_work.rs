//! `drover fleet work` (docs/fleet.md): this host pulls the loop's steps
//! from its fleet's work-queue and runs them on its own supervisor.

use super::{Ctx, fail};
use drover::exit;
use drover::fleet::{FleetError, Handed, config};
use drover::loopctl::lanes::fleet_host::{self, HostOptions};
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct WorkArgs {
    /// Lanes this host runs at once (default: the slots it joined with).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    slots: Option<u16>,
    /// The pane backend of its lanes: native, tmux or herdr.
    #[arg(long, value_name = "BACKEND", default_value = "native", value_parser = super::values::backend())]
    backend: drover::pane::Backend,
    /// An agent whose steps this host takes (repeatable; default: claude and codex if on PATH).
    #[arg(long = "agent", value_name = "NAME", value_parser = ["claude", "codex"])]
    agents: Vec<String>,
    /// Set K=V in every lane this host runs (repeatable; the value stays on this host, never on the bus).
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Read K=V lines for every lane from FILE (values never on the bus).
    #[arg(long = "env-file", value_name = "FILE")]
    env_file: Vec<std::path::PathBuf>,
}

pub fn run(a: WorkArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let env = super::loopcmd::lane_env(&a.env, &a.env_file)?;
    let state_dir = ctx.state_dir()?;
    let cfg = config::load(&state_dir)
        .map_err(|e| fail(e.exit_code(), e.to_string()))?
        .ok_or_else(|| fail(exit::REFUSED, FleetError::NotJoined.to_string()))?;
    // Its lanes run on this host's supervisor, which must be in the fleet:
    // one started without the password's variable (after `kill-server`)
    // gets it from here and rejoins; one already connected is left as is.
    let handed = Handed::from_env(&cfg);
    ctx.client_or_start()?
        .call(drover::proto::args::FleetJoin {
            config: cfg.clone(),
            password: handed.password.clone(),
            token: handed.token.clone(),
            rejoin: true,
        })
        .map_err(super::client_err)?;
    let agents = if a.agents.is_empty() {
        drover::agent::version::installed().into_keys().collect()
    } else {
        let mut v = a.agents;
        v.sort();
        v.dedup();
        v
    };
    if agents.is_empty() {
        return Err(fail(
            exit::REFUSED,
            "no agent on this PATH (claude, codex): install one, or name the agents this host takes with --agent",
        ));
    }
    let opts = HostOptions {
        state_dir: state_dir.into_path_buf(),
        exe: std::env::current_exe()?,
        slots: a.slots.map_or(cfg.slots, usize::from),
        cfg,
        backend: a.backend,
        agents,
        ack_wait: drover::fleet::work::ACK_WAIT,
        env,
    };
    let say: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(|m: &str| eprintln!("fleet work: {m}"));
    fleet_host::work(&opts, &handed, say).map_err(|e| fail(e.exit_code(), e.to_string()))?;
    Ok(exit::OK)
}
