//! Command-line parsing and dispatch. Each noun lives in its own file and
//! exposes a clap `Commands` enum (flattened into the top level) and `run`.
//! Library errors are mapped to the exit codes of SPEC §3 here, nowhere else.

mod agent;
mod answer;
mod attach;
mod demo;
mod job;
mod pane;
mod policy;
mod registry;
mod rehearse;
mod send;
mod serve;
mod shadow;
mod status;
mod wait;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// drover: a supervisor for AI coding agents in terminal panes.
#[derive(Debug, Parser)]
#[command(name = "drover", version, about, propagate_version = true)]
pub struct Cli {
    /// State dir (default: `<git toplevel>/.drover`, else `$XDG_STATE_HOME/drover`).
    #[arg(long, global = true, env = "DROVER_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// More logging (-v info, -vv debug, -vvv trace); `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Do not start the supervisor when none is running.
    #[arg(long, global = true)]
    pub no_autostart: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the supervisor (foreground; `--daemon` to detach).
    Serve(serve::ServeArgs),
    /// Stop the supervisor and every pane it owns.
    KillServer,
    /// The main job on simulated agents: dispatch, shadow decisions, auto-completion (no API keys).
    Demo(demo::DemoArgs),
    /// Panes: create, list, read, send, keys, resize, kill, respawn.
    Pane {
        #[command(subcommand)]
        cmd: pane::PaneCmd,
    },
    /// Attach this terminal to a pane (detach with Ctrl-\).
    Attach(attach::AttachArgs),
    /// Wait until panes reach one of the given states.
    Wait(wait::WaitArgs),
    /// Deliver a prompt to an agent and confirm it started working (exit 3 if not).
    Send(send::SendArgs),
    /// Claim a job for a pane's session and deliver its prompt (confirmed).
    Dispatch(shadow::DispatchArgs),
    /// The shadow policy runner.
    Shadow {
        #[command(subcommand)]
        cmd: shadow::ShadowCmd,
    },
    /// Each pane's agent state and since when, and each running job's latest decision.
    Status {
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Registry(registry::Commands),
    #[command(flatten)]
    Job(job::Commands),
    #[command(flatten)]
    Agent(agent::Commands),
    #[command(flatten)]
    Policy(policy::Commands),
    #[command(flatten)]
    Rehearse(rehearse::Commands),
    #[command(flatten)]
    Answer(answer::Commands),
}

/// What every command may need: where the state is, and how to reach the supervisor.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub state_dir_arg: Option<PathBuf>,
    pub verbose: u8,
    pub autostart: bool,
}

impl Ctx {
    /// The resolved (and created) state dir.
    pub fn state_dir(&self) -> anyhow::Result<PathBuf> {
        drover::paths::resolve_state_dir(self.state_dir_arg.as_deref())
            .map_err(|e| fail(drover::exit::ERROR, e.to_string()))
    }
}

impl Ctx {
    /// The supervisor's socket for this state dir.
    pub fn socket(&self, state_dir: &std::path::Path) -> anyhow::Result<PathBuf> {
        drover::paths::socket_path(state_dir).map_err(|e| fail(drover::exit::ERROR, e.to_string()))
    }

    /// A connection to the supervisor, starting it unless `--no-autostart`.
    pub fn client(&self) -> anyhow::Result<drover::daemon::Client> {
        let state_dir = self.state_dir()?;
        let socket = self.socket(&state_dir)?;
        let exe = if self.autostart {
            Some(std::env::current_exe().map_err(|e| {
                fail(
                    drover::exit::ERROR,
                    format!("cannot find the drover binary: {e}"),
                )
            })?)
        } else {
            None
        };
        drover::daemon::Client::connect_or_start(&state_dir, &socket, exe.as_deref())
            .map_err(client_err)
    }
}

/// Map a client error to its exit code.
pub fn client_err(e: drover::daemon::ClientError) -> anyhow::Error {
    fail(e.exit_code(), e.to_string())
}

/// An error that carries its exit code. The message is printed as one line.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub msg: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Exit {}

/// Build an error that exits with `code` after printing `msg` on stderr.
pub fn fail(code: u8, msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code,
        msg: msg.into(),
    })
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = Ctx {
        state_dir_arg: cli.state_dir.clone(),
        verbose: cli.verbose,
        autostart: !cli.no_autostart,
    };
    if !matches!(cli.command, Command::Serve(_)) {
        // The supervisor logs to its file; every other command logs to stderr.
        let level = match cli.verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        };
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .without_time()
            .with_target(false)
            .try_init();
    }
    let result = match cli.command {
        Command::Serve(a) => serve::run(a, &ctx),
        Command::KillServer => serve::kill_server(&ctx),
        Command::Demo(a) => demo::run(a, &ctx),
        Command::Pane { cmd } => pane::run(cmd, &ctx),
        Command::Attach(a) => attach::run(a, &ctx),
        Command::Wait(a) => wait::run(a, &ctx),
        Command::Send(a) => send::run(a, &ctx),
        Command::Dispatch(a) => shadow::dispatch_cmd(a, &ctx),
        Command::Shadow { cmd } => shadow::run(cmd, &ctx),
        Command::Status { json } => status::run(json, &ctx),
        Command::Registry(c) => registry::run(c, &ctx),
        Command::Job(c) => job::run(c, &ctx),
        Command::Agent(c) => agent::run(c, &ctx),
        Command::Policy(c) => policy::run(c, &ctx),
        Command::Rehearse(c) => rehearse::run(c, &ctx),
        Command::Answer(c) => answer::run(c, &ctx),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let code = e
                .downcast_ref::<Exit>()
                .map(|x| x.code)
                .unwrap_or(drover::exit::ERROR);
            let msg = format!("{e:#}");
            if !msg.is_empty() {
                eprintln!("drover: {}", msg.replace('\n', " "));
            }
            ExitCode::from(code)
        }
    }
}
