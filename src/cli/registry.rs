//! `registry`, `session-heartbeat`, `gate`, `events`: the CLI over
//! [`drover::registry`] and [`drover::gate`] (`lease` and `mix` have files of
//! their own). Parses, calls the library, prints (tables for people, JSON with
//! `--json`), and maps errors to exit codes.

use super::lease::LeaseCmd;
use super::{Ctx, fail};
use chrono::Utc;
use clap::{Args, Subcommand, ValueEnum};
use drover::exit;
use drover::gate;
use drover::registry::{
    self, Agent, InitRequest, RegistryError, Topology, heartbeat, lease, mix, view,
};
use drover::statedir::StateDir;
use std::io::Write;

#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Create or show the session registry.
    Registry {
        #[command(subcommand)]
        cmd: RegistryCmd,
    },
    /// Report a session's status, or one lane's with --agent.
    #[command(after_help = HEARTBEAT_HELP)]
    SessionHeartbeat(HeartbeatArgs),
    /// Write leases: one per task, held by the Implementer.
    Lease {
        #[command(subcommand)]
        cmd: LeaseCmd,
    },
    /// The Claude:Codex work-unit balance.
    #[command(
        after_help = "Example:\n  drover mix --json\n  drover mix record --task T-1 --agent codex --wu 2"
    )]
    Mix(super::mix::MixArgs),
    /// The conservative gate.
    Gate {
        #[command(subcommand)]
        cmd: GateCmd,
    },
    /// Print the event log (`--follow` to stream every supervisor event as it happens).
    #[command(
        after_help = "Kinds on --follow: pane.created, pane.state, pane.exited, pane.killed, pane.respawned,\njob.transition, job.refused, job.ack, shadow.decision, the registry's kinds, missed.\n\nExample:\n  drover events --kind lease.claim\n  drover events --follow --jsonl --kind pane.state | jq -c 'select(.state == \"blocked\")'"
    )]
    Events(super::events::EventsArgs),
}

const HEARTBEAT_HELP: &str = "\
Statuses: pass-class pass, passed, clear, approved; fail-class fail, failed,
blocked, rejected; neutral active, idle, working, reviewing, waiting.

Example:
  drover session-heartbeat --session reviewer --task T-1 --status passed";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TopologyArg {
    FourRole,
    ExpandedEight,
}

/// An agent, as a flag value.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AgentArg {
    Claude,
    Codex,
}

impl From<AgentArg> for Agent {
    fn from(a: AgentArg) -> Agent {
        match a {
            AgentArg::Claude => Agent::Claude,
            AgentArg::Codex => Agent::Codex,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum RegistryCmd {
    /// Create the registry for a topology (idempotent).
    #[command(
        after_help = "Example:\n  drover registry init --topology four-role --agent-mix claude=5,codex=5"
    )]
    Init {
        /// The set of sessions and lanes to create.
        #[arg(long, value_enum)]
        topology: TopologyArg,
        /// WU target, e.g. claude=5,codex=5.
        #[arg(long, value_name = "AGENT=WU,…")]
        agent_mix: Option<String>,
        /// Replace a registry of another topology.
        #[arg(long)]
        force: bool,
        /// Print one JSON document: {outcome, registry}.
        #[arg(long)]
        json: bool,
    },
    /// Show sessions × lanes (`--json`: the document lifted to version 2).
    #[command(after_help = "Example:\n  drover registry show")]
    Show {
        /// Print one JSON document: the registry.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct HeartbeatArgs {
    /// The session reporting (a session id of the registry).
    #[arg(long, alias = "session-id", value_name = "ID")]
    session: String,
    /// Must match the session's role when given.
    #[arg(long)]
    role: Option<String>,
    /// The task the status is about.
    #[arg(long)]
    task: Option<String>,
    /// A status (see the list below).
    #[arg(long)]
    status: String,
    /// Update this lane only.
    #[arg(long, value_enum)]
    agent: Option<AgentArg>,
    /// Seconds until the heartbeat is stale (default 1800).
    #[arg(long, value_name = "S")]
    ttl_s: Option<u64>,
    /// Print one JSON document: the session.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum GateCmd {
    /// `ready` (exit 0) or `blocked` (exit 3) with every reason.
    #[command(after_help = "Example:\n  drover gate check --task T-1")]
    Check {
        /// Default: the Implementer's task, else the only lease's task.
        #[arg(long)]
        task: Option<String>,
        /// A load-bearing path changed (the Deep Reviewer must pass too).
        #[arg(long)]
        load_bearing: bool,
        /// Print one JSON document: {verdict, reasons}.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn map(e: RegistryError) -> anyhow::Error {
    fail(e.exit_code(), e.to_string())
}

/// Write to stdout; a closed pipe is not an error worth a panic.
pub(super) fn out(s: &str) -> bool {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes()).and_then(|()| o.flush()).is_ok()
}

pub(super) fn json_line<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    let s = serde_json::to_string_pretty(v).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    out(&(s + "\n"));
    Ok(())
}

impl Commands {
    /// Whether the command writes (and so may create the state dir).
    fn writes(&self) -> bool {
        match self {
            Commands::Registry { cmd } => matches!(cmd, RegistryCmd::Init { .. }),
            Commands::SessionHeartbeat(_) => true,
            Commands::Lease { cmd } => matches!(
                cmd,
                LeaseCmd::Claim { .. }
                    | LeaseCmd::Release { .. }
                    | LeaseCmd::Borrow { .. }
                    | LeaseCmd::Return { .. }
            ),
            Commands::Mix(a) => a.cmd.is_some(),
            Commands::Gate { .. } | Commands::Events(_) => false,
        }
    }
}

pub fn run(cmd: Commands, ctx: &Ctx) -> anyhow::Result<u8> {
    let state = if cmd.writes() {
        ctx.state_dir_create()?
    } else {
        ctx.state_dir()?
    };
    let now = Utc::now();
    match cmd {
        Commands::Registry { cmd } => run_registry(cmd, &state, now),
        Commands::SessionHeartbeat(a) => {
            let req = heartbeat::HeartbeatRequest {
                session_id: a.session,
                role: a.role,
                task: a.task,
                status: a.status,
                agent: a.agent.map(Agent::from),
                ttl_s: a.ttl_s,
            };
            let s = heartbeat::heartbeat(&state, &req, now).map_err(map)?;
            if a.json {
                json_line(&s)?;
            } else {
                let what = req
                    .agent
                    .map_or_else(|| "session".to_string(), |a| format!("{a} lane"));
                out(&format!(
                    "{} {what}: {} for {}\n",
                    s.session_id,
                    req.status,
                    s.task.as_deref().unwrap_or("-")
                ));
            }
            Ok(exit::OK)
        }
        Commands::Lease { cmd } => super::lease::run(cmd, &state, now),
        Commands::Mix(a) => super::mix::run(a, &state, now),
        Commands::Gate {
            cmd:
                GateCmd::Check {
                    task,
                    load_bearing,
                    json,
                },
        } => {
            let r = gate::check(&state, task.as_deref(), load_bearing, now).map_err(map)?;
            if json {
                json_line(&r)?;
            } else {
                out(&gate::render(&r));
            }
            match r.verdict {
                gate::Verdict::Ready => Ok(exit::OK),
                gate::Verdict::Blocked => {
                    let why: Vec<&str> = r.reasons.iter().map(|x| x.message.as_str()).collect();
                    Err(fail(
                        exit::REFUSED,
                        format!("gate blocked: {}", why.join("; ")),
                    ))
                }
            }
        }
        Commands::Events(a) => super::events::run(a, &state, ctx),
    }
}

fn run_registry(
    cmd: RegistryCmd,
    state: &StateDir,
    now: chrono::DateTime<Utc>,
) -> anyhow::Result<u8> {
    match cmd {
        RegistryCmd::Init {
            topology,
            agent_mix,
            force,
            json,
        } => {
            let topology = match topology {
                TopologyArg::FourRole => Topology::FourRole,
                TopologyArg::ExpandedEight => Topology::ExpandedEight,
            };
            let agent_mix = agent_mix
                .as_deref()
                .map(mix::parse_agent_mix)
                .transpose()
                .map_err(map)?;
            let (outcome, reg) = registry::init(
                state,
                &InitRequest {
                    topology,
                    agent_mix,
                    force,
                },
            )
            .map_err(map)?;
            if json {
                json_line(&serde_json::json!({"outcome": outcome, "registry": reg}))?;
            } else {
                let what = match outcome {
                    registry::InitOutcome::Created => "created",
                    registry::InitOutcome::Unchanged => "already initialised",
                    registry::InitOutcome::MixUpdated => "updated the agent mix of",
                    registry::InitOutcome::Replaced => "replaced",
                };
                let leases = lease::list(state, now).map_err(map)?;
                out(&format!(
                    "{what} {} registry at {}\n\n{}",
                    reg.topology,
                    state.registry_file().display(),
                    view::registry(&reg, &leases, now)
                ));
            }
            Ok(exit::OK)
        }
        RegistryCmd::Show { json } => {
            if json {
                json_line(&registry::load_required(state).map_err(map)?)?;
            } else {
                out(&view::show(state, now).map_err(map)?);
            }
            Ok(exit::OK)
        }
    }
}
