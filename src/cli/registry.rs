//! `registry`, `session-heartbeat`, `lease`, `mix`, `gate`, `events`: the CLI
//! over [`drover::registry`] and [`drover::gate`]. Parses, calls the library,
//! prints (tables for people, JSON with `--json`), and maps errors to exit codes.

use super::{Ctx, fail};
use chrono::Utc;
use clap::{Args, Subcommand, ValueEnum};
use drover::exit;
use drover::gate;
use drover::registry::{
    self, Agent, InitRequest, RegistryError, Topology, events, heartbeat, lease, mix, scope, view,
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
    Mix(MixArgs),
    /// The conservative gate.
    Gate {
        #[command(subcommand)]
        cmd: GateCmd,
    },
    /// Print the event log (`--follow` to keep printing new events).
    #[command(
        after_help = "Example:\n  drover events --kind lease.claimed\n  drover events --follow --jsonl | jq .kind"
    )]
    Events(EventsArgs),
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

/// A lease's task: `--task T` (the old positional spelling is still read).
#[derive(Debug, Args)]
pub struct TaskArg {
    /// The task whose lease this is.
    #[arg(
        long = "task",
        value_name = "TASK",
        required_unless_present = "task_positional"
    )]
    task: Option<String>,
    #[arg(value_name = "TASK", hide = true, conflicts_with = "task")]
    task_positional: Option<String>,
}

impl TaskArg {
    fn get(self) -> String {
        self.task.or(self.task_positional).unwrap_or_default()
    }
}

#[derive(Debug, Subcommand)]
pub enum LeaseCmd {
    /// Claim (or, as its owner, renew) the write lease of a task.
    #[command(
        after_help = "Example:\n  drover lease claim --task T-1 --worktree ../wt --file src/ --file Cargo.toml"
    )]
    Claim {
        /// The task to lease.
        #[arg(long)]
        task: String,
        /// Default: the registry's write-lease owner (the Implementer).
        #[arg(long)]
        session: Option<String>,
        /// The branch the work happens on.
        #[arg(long)]
        branch: Option<String>,
        /// The worktree the work happens in (resolved; a warning when it does not exist).
        #[arg(long, value_name = "DIR")]
        worktree: Option<PathBuf>,
        /// A claimed path, directory or glob, relative to the worktree (repeatable).
        #[arg(long = "file", value_name = "PATH")]
        files: Vec<String>,
        /// Seconds until the lease expires (default 7200).
        #[arg(long, value_name = "S")]
        ttl_s: Option<u64>,
        /// Print one JSON document: {outcome, lease}.
        #[arg(long)]
        json: bool,
    },
    /// Release a task's lease (--force for a borrowed or recovery-needed one).
    #[command(after_help = "Example:\n  drover lease release --task T-1")]
    Release {
        /// The task whose lease to release.
        #[arg(long)]
        task: String,
        /// Release a borrowed or recovery-needed lease too.
        #[arg(long)]
        force: bool,
    },
    /// Lend the lease to one agent (refused while the other holds it).
    #[command(after_help = "Example:\n  drover lease borrow --task T-1 --agent codex")]
    Borrow {
        /// The task whose lease to lend.
        #[arg(long)]
        task: String,
        /// The agent that borrows it.
        #[arg(long, value_enum)]
        agent: AgentArg,
    },
    /// Give a borrowed lease back.
    #[command(after_help = "Example:\n  drover lease return --task T-1 --agent codex")]
    Return {
        /// The task whose lease to give back.
        #[arg(long)]
        task: String,
        /// The agent that borrowed it.
        #[arg(long, value_enum)]
        agent: AgentArg,
    },
    /// List leases with their current state.
    #[command(after_help = "Example:\n  drover lease ls --json")]
    Ls {
        /// Print one JSON document (an array of leases).
        #[arg(long)]
        json: bool,
    },
    /// One lease and a live look at its worktree.
    #[command(
        alias = "inspect",
        after_help = "Example:\n  drover lease show --task T-1"
    )]
    Show {
        #[command(flatten)]
        task: TaskArg,
        /// Print one JSON document: {lease, worktree_check}.
        #[arg(long)]
        json: bool,
    },
    /// Exit 3 naming the files outside the lease's claimed_files.
    #[command(
        after_help = "Example:\n  drover lease check-scope --task T-1 src/lib.rs docs/cli.md"
    )]
    CheckScope {
        /// The task whose lease to check against.
        #[arg(long)]
        task: Option<String>,
        /// Paths relative to the worktree (without --task, the first is the task).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        /// Print one JSON document: {in_scope, out_of_scope, unenforced}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct MixArgs {
    #[command(subcommand)]
    cmd: Option<MixCmd>,
    /// Print one JSON document: the balance and each session's next agent.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum MixCmd {
    /// Add WU spent by an agent on a task to the rolling ledger.
    #[command(after_help = "Example:\n  drover mix record --task T-1 --agent claude --wu 3")]
    Record {
        /// The task the work was for.
        #[arg(long)]
        task: String,
        /// The agent that did it.
        #[arg(long, value_enum)]
        agent: AgentArg,
        /// Work units spent.
        #[arg(long)]
        wu: u32,
        /// Also count it on this session's lane.
        #[arg(long)]
        session: Option<String>,
        /// Print one JSON document: the balance.
        #[arg(long)]
        json: bool,
    },
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

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Keep printing new events as they are written.
    #[arg(long)]
    follow: bool,
    /// Only events of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Print one JSON document (an array of events); not with --follow.
    #[arg(long, conflicts_with_all = ["jsonl", "follow"])]
    json: bool,
    /// Print one JSON object per event per line.
    #[arg(long)]
    jsonl: bool,
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
        Commands::Events(a) => run_events(a, &state),
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
            let (lease::ClaimOutcome::Claimed(l) | lease::ClaimOutcome::Renewed(l)) = &o;
            if let Some(w) = &l.worktree
                && !std::path::Path::new(w).is_dir()
            {
                eprintln!("drover: warning: the worktree {w} does not exist (yet)");
            }
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
        LeaseCmd::Show { task, json } => {
            let task = task.get();
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
        LeaseCmd::CheckScope {
            task,
            mut files,
            json,
        } => {
            // The old spelling `check-scope TASK FILE…`.
            let task = match task {
                Some(t) => t,
                None if files.len() >= 2 => files.remove(0),
                None => {
                    return Err(fail(
                        exit::USAGE,
                        "give the task with --task and at least one file",
                    ));
                }
            };
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

fn run_events(a: EventsArgs, state: &std::path::Path) -> anyhow::Result<u8> {
    let show = |e: &events::Event| -> bool {
        if a.kind.as_deref().is_some_and(|k| k != e.kind) {
            return true;
        }
        let line = if a.jsonl {
            serde_json::to_string(e).unwrap_or_default()
        } else {
            let fields: Vec<String> = e
                .fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect();
            format!(
                "{:>5}  {}  {:<18} {}",
                e.seq,
                e.at,
                e.kind,
                fields.join(" ")
            )
        };
        out(&(line.trim_end().to_string() + "\n"))
    };
    if !a.follow {
        let r = events::read(state).map_err(map)?;
        if r.torn_tail {
            eprintln!(
                "drover: warning: skipped a torn last line in {}",
                registry::events_path(state).display()
            );
        }
        if a.json {
            let kept: Vec<&events::Event> = r
                .records
                .iter()
                .filter(|e| a.kind.as_deref().is_none_or(|k| k == e.kind))
                .collect();
            return json_line(&kept).map(|()| exit::OK);
        }
        for e in &r.records {
            if !show(e) {
                break;
            }
        }
        return Ok(exit::OK);
    }
    let mut f = events::Follower::new(state);
    loop {
        for e in f.poll().map_err(map)? {
            if !show(&e) {
                return Ok(exit::OK);
            }
        }
        std::thread::sleep(events::FOLLOW_POLL);
    }
}
