//! `registry`, `session-heartbeat`, `lease`, `mix`, `gate`, `events`: the CLI
//! over [`drover::registry`] and [`drover::gate`]. Parses, calls the library,
//! prints (tables for people, JSON with `--json`), and maps errors to exit codes.

use super::{Ctx, fail};
use chrono::Utc;
use clap::{Args, Subcommand, ValueEnum};
use drover::exit;
use drover::gate;
use drover::registry::{
    self, Agent, InitRequest, RegistryError, Topology, heartbeat, lease, mix, scope, view,
};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Create or show the session registry.
    Registry {
        #[command(subcommand)]
        cmd: RegistryCmd,
    },
    /// Report a session's status, or one lane's with --agent.
    SessionHeartbeat(HeartbeatArgs),
    /// Write leases: one per task, held by the Implementer.
    Lease {
        #[command(subcommand)]
        cmd: LeaseCmd,
    },
    /// The Claude:Codex work-unit balance.
    Mix(MixArgs),
    /// The conservative gate.
    Gate {
        #[command(subcommand)]
        cmd: GateCmd,
    },
    /// The registry's event log; `--follow` streams every supervisor event live.
    Events(super::events::EventsArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TopologyArg {
    FourRole,
    ExpandedEight,
}

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
    Init {
        #[arg(long, value_enum)]
        topology: TopologyArg,
        /// WU target, e.g. claude=5,codex=5.
        #[arg(long, value_name = "AGENT=WU,…")]
        agent_mix: Option<String>,
        /// Replace a registry of another topology.
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show sessions × lanes (`--json`: the document lifted to version 2).
    Show {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct HeartbeatArgs {
    #[arg(long)]
    session_id: String,
    /// Must match the session's role when given.
    #[arg(long)]
    role: Option<String>,
    #[arg(long)]
    task: Option<String>,
    /// e.g. active, working, passed, clear, approved, failed, blocked.
    #[arg(long)]
    status: String,
    /// Update this lane only.
    #[arg(long, value_enum)]
    agent: Option<AgentArg>,
    /// Seconds until the heartbeat is stale (default 1800).
    #[arg(long)]
    ttl_s: Option<u64>,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum LeaseCmd {
    /// Claim (or, as its owner, renew) the write lease of a task.
    Claim {
        #[arg(long)]
        task: String,
        /// Default: the registry's write-lease owner (the Implementer).
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        branch: Option<String>,
        #[arg(long)]
        worktree: Option<PathBuf>,
        /// A claimed path, directory or glob, relative to the worktree (repeatable).
        #[arg(long = "file", value_name = "PATH")]
        files: Vec<String>,
        /// Seconds until the lease expires (default 7200).
        #[arg(long)]
        ttl_s: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Release a task's lease (--force for a borrowed or recovery-needed one).
    Release {
        #[arg(long)]
        task: String,
        #[arg(long)]
        force: bool,
    },
    /// Lend the lease to one agent (refused while the other holds it).
    Borrow {
        #[arg(long)]
        task: String,
        #[arg(long, value_enum)]
        agent: AgentArg,
    },
    /// Give a borrowed lease back.
    Return {
        #[arg(long)]
        task: String,
        #[arg(long, value_enum)]
        agent: AgentArg,
    },
    /// List leases with their current state.
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// One lease and a live look at its worktree.
    Inspect {
        task: String,
        #[arg(long)]
        json: bool,
    },
    /// Exit 3 naming the files outside the lease's claimed_files.
    CheckScope {
        task: String,
        #[arg(required = true)]
        files: Vec<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct MixArgs {
    #[command(subcommand)]
    cmd: Option<MixCmd>,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum MixCmd {
    /// Add WU spent by an agent on a task to the rolling ledger.
    Record {
        #[arg(long)]
        task: String,
        #[arg(long, value_enum)]
        agent: AgentArg,
        #[arg(long)]
        wu: u32,
        /// Also count it on this session's lane.
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum GateCmd {
    /// `ready` (exit 0) or `blocked` (exit 3) with every reason.
    Check {
        /// Default: the Implementer's task, else the only lease's task.
        #[arg(long)]
        task: Option<String>,
        /// A load-bearing path changed (the Deep Reviewer must pass too).
        #[arg(long)]
        load_bearing: bool,
        #[arg(long)]
        json: bool,
    },
}

fn map(e: RegistryError) -> anyhow::Error {
    fail(e.exit_code(), e.to_string())
}

/// Write to stdout; a closed pipe is not an error worth a panic.
fn out(s: &str) -> bool {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes()).and_then(|()| o.flush()).is_ok()
}

fn json_line<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    let s = serde_json::to_string_pretty(v).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    out(&(s + "\n"));
    Ok(())
}

pub fn run(cmd: Commands, ctx: &Ctx) -> anyhow::Result<u8> {
    let state = ctx.state_dir()?;
    let now = Utc::now();
    match cmd {
        Commands::Registry { cmd } => run_registry(cmd, &state, now),
        Commands::SessionHeartbeat(a) => {
            let req = heartbeat::HeartbeatRequest {
                session_id: a.session_id,
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
        Commands::Lease { cmd } => run_lease(cmd, &state, now),
        Commands::Mix(a) => run_mix(a, &state, now),
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
    state: &std::path::Path,
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
                    registry::registry_path(state).display(),
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

fn run_lease(
    cmd: LeaseCmd,
    state: &std::path::Path,
    now: chrono::DateTime<Utc>,
) -> anyhow::Result<u8> {
    match cmd {
        LeaseCmd::Claim {
            task,
            session,
            branch,
            worktree,
            files,
            ttl_s,
            json,
        } => {
            let req = lease::ClaimRequest {
                task,
                session,
                branch,
                worktree,
                files,
                ttl_s,
            };
            let o = lease::claim(state, &req, now).map_err(map)?;
            if json {
                json_line(&o)?;
            } else {
                let (verb, l) = match &o {
                    lease::ClaimOutcome::Claimed(l) => ("claimed", l),
                    lease::ClaimOutcome::Renewed(l) => ("renewed", l),
                };
                out(&format!(
                    "{verb} {} for {} (owner {}, expires {})\n",
                    l.lease_id, req.task, l.owner_session, l.expires_at
                ));
            }
            Ok(exit::OK)
        }
        LeaseCmd::Release { task, force } => {
            let o = lease::release(state, &task, force, now).map_err(map)?;
            out(&match o {
                lease::ReleaseOutcome::Released => format!("released the lease of {task}\n"),
                lease::ReleaseOutcome::NotHeld => {
                    format!("no lease for {task}; nothing to release\n")
                }
            });
            Ok(exit::OK)
        }
        LeaseCmd::Borrow { task, agent } => {
            let agent = Agent::from(agent);
            let o = lease::borrow(state, &task, agent, now).map_err(map)?;
            out(&match o {
                lease::LendOutcome::Changed => format!("{agent} borrowed the lease of {task}\n"),
                lease::LendOutcome::Unchanged => {
                    format!("{agent} already holds the lease of {task}\n")
                }
            });
            Ok(exit::OK)
        }
        LeaseCmd::Return { task, agent } => {
            let agent = Agent::from(agent);
            let o = lease::give_back(state, &task, agent, now).map_err(map)?;
            out(&match o {
                lease::LendOutcome::Changed => format!("{agent} returned the lease of {task}\n"),
                lease::LendOutcome::Unchanged => format!("the lease of {task} was not borrowed\n"),
            });
            Ok(exit::OK)
        }
        LeaseCmd::Ls { json } => {
            let leases = lease::list(state, now).map_err(map)?;
            if json {
                json_line(&leases)?;
            } else {
                out(&view::leases(&leases, now));
            }
            Ok(exit::OK)
        }
        LeaseCmd::Inspect { task, json } => {
            let Some(i) = lease::inspect(state, &task, now).map_err(map)? else {
                return Err(fail(exit::REFUSED, format!("no lease for task {task}")));
            };
            if json {
                json_line(&i)?;
            } else {
                let mut s = view::leases(std::slice::from_ref(&i.lease), now);
                if let Some(c) = &i.worktree_check {
                    s += &format!("worktree: {}\n", c.describe());
                }
                if let Some(c) = &i.lease.recovery_command {
                    s += &format!("recovery: {c}\n");
                }
                out(&s);
            }
            Ok(exit::OK)
        }
        LeaseCmd::CheckScope { task, files, json } => {
            let s = scope::check_scope(state, &task, &files, now).map_err(map)?;
            if json {
                json_line(&s)?;
            } else if s.out_of_scope.is_empty() {
                out(&format!("{} files in scope of {task}\n", files.len()));
            }
            if s.unenforced {
                eprintln!(
                    "drover: warning: the lease of {task} claims no files; scope is not enforced"
                );
            }
            match s.refusal(&task) {
                Some(e) => Err(map(e)),
                None => Ok(exit::OK),
            }
        }
    }
}

fn run_mix(a: MixArgs, state: &std::path::Path, now: chrono::DateTime<Utc>) -> anyhow::Result<u8> {
    let (report, json) = match a.cmd {
        Some(MixCmd::Record {
            task,
            agent,
            wu,
            session,
            json,
        }) => {
            let req = mix::RecordRequest {
                task,
                agent: agent.into(),
                wu,
                session,
            };
            (mix::record(state, &req, now).map_err(map)?, json || a.json)
        }
        None => {
            let reg = registry::load(state).map_err(map)?;
            let policy = reg.as_ref().map(|r| r.agent_mix.clone());
            let ledger = mix::load(state)
                .map_err(map)?
                .unwrap_or_else(|| mix::MixLedger::new(policy.clone().unwrap_or_default()));
            let policy = policy.unwrap_or_else(|| ledger.policy.clone());
            let entries = mix::window(&ledger.ledger, policy.window.size);
            (mix::report(&policy, &entries, None), a.json)
        }
    };
    let reg = registry::load(state).map_err(map)?;
    if json {
        let sessions: Vec<serde_json::Value> = reg
            .iter()
            .flat_map(|r| &r.sessions)
            .map(|s| {
                let spent = mix::Spent {
                    claude: s.lanes.claude.wu_spent_rolling,
                    codex: s.lanes.codex.wu_spent_rolling,
                };
                serde_json::json!({
                    "session_id": s.session_id,
                    "spent": spent,
                    "next_agent": mix::next_agent(report.target, report.skew_wu, Some(spent)),
                })
            })
            .collect();
        let mut v = serde_json::to_value(&report).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        v["sessions"] = serde_json::Value::Array(sessions);
        json_line(&v)?;
    } else {
        out(&view::mix(&report, reg.as_ref()));
    }
    Ok(exit::OK)
}
