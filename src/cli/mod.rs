//! Command-line parsing and dispatch. Each noun lives in its own file and
//! exposes a clap `Commands` enum (flattened into the top level) and `run`.
//! Library errors are mapped to the exit codes of docs/cli.md here, nowhere else.

mod agent;
mod answer;
mod attach;
mod completions;
mod console;
mod demo;
mod demo_loop;
mod events;
mod fleet;
mod fleet_work;
mod fmt;
mod job;
mod lane;
mod lease;
mod loopcmd;
mod loopstatus;
mod mix;
mod notify;
mod pane;
mod policy;
mod registry;
mod rehearse;
mod report;
mod send;
mod serve;
mod shadow;
mod signal;
mod status;
mod top;
mod values;
mod wait;
mod web;

use clap::{Parser, Subcommand};
use drover::statedir::{StateDir, StateDirBuf};
use std::path::PathBuf;
use std::process::ExitCode;

/// The exit codes and the output rule, at the end of `drover --help`.
const TOP_AFTER_HELP: &str = "\
Exit codes:
  0  done (also an idempotent repeat of a transition already made)
  1  error: I/O, bad state on disk, internal
  2  usage: bad arguments or a bad input file (the message names the field)
  3  refused: the transition table, a lease, a gate, a lint or a lane said no
  4  timeout: a barrier ran out of time (stdout empty)
  5  transport: no supervisor running, tmux/herdr unreachable, pane gone

Output: text for people; --json prints one JSON document, --jsonl one JSON
object per line. Errors are one line on stderr. Only commands that create
something (pane new, dispatch, rehearse, demo) start a supervisor.

Example:
  drover pane new work -- bash && drover attach work";

/// drover: a supervisor for AI coding agents in terminal panes.
#[derive(Debug, Parser)]
#[command(
    name = "drover",
    version,
    about,
    propagate_version = true,
    after_help = TOP_AFTER_HELP
)]
pub struct Cli {
    /// State dir (default: `<git toplevel>/.drover`, else `$XDG_STATE_HOME/drover`).
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = drover::statedir::env::STATE_DIR,
        value_name = "DIR"
    )]
    pub state_dir: Option<PathBuf>,
    /// More logging (-v info, -vv debug, -vvv trace); `RUST_LOG` overrides.
    /// Passed on to a supervisor this command starts.
    #[arg(short, long, global = true, help_heading = "Global options", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print nothing on success for commands that only change something.
    #[arg(short, long, global = true, help_heading = "Global options")]
    pub quiet: bool,
    /// Never start a supervisor, even for commands that create something.
    #[arg(long, global = true, help_heading = "Global options")]
    pub no_autostart: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the supervisor (foreground; `--daemon` to detach).
    #[command(after_help = "Example:\n  drover serve --daemon")]
    Serve(serve::ServeArgs),
    /// Stop the supervisor and every pane it owns.
    #[command(after_help = "Example:\n  drover kill-server")]
    KillServer,
    /// The main job on simulated agents: dispatch, shadow decisions, auto-completion (no API keys).
    #[command(after_help = "Example:\n  drover demo --keep")]
    Demo(demo::DemoArgs),
    /// Panes: create, list, read, send, keys, resize, kill, respawn.
    Pane {
        #[command(subcommand)]
        cmd: pane::PaneCmd,
    },
    /// Attach this terminal to a pane (detach with Ctrl-\; `-r` to watch only).
    #[command(after_help = "Example:\n  drover attach work        # Ctrl-\\ detaches")]
    Attach(attach::AttachArgs),
    /// Lanes: a worktree and an agent pane per (session, agent).
    Lane {
        #[command(subcommand)]
        cmd: lane::LaneCmd,
    },
    /// Wait until panes reach one of the given states.
    #[command(after_help = wait::AFTER_HELP)]
    Wait(wait::WaitArgs),
    /// Deliver a prompt to an agent and confirm it started working (exit 3 if not).
    #[command(
        after_help = "Example:\n  drover send sim 'refactor the parser'\n  drover send sim --file prompt.md"
    )]
    Send(send::SendArgs),
    /// Claim a job for a pane's session and deliver its prompt (confirmed).
    #[command(
        after_help = "A pane holds at most one running job: a second is refused (exit 3).\n\nExample:\n  drover dispatch T-1 --pane sim --prompt 'write NOTES.md and report'"
    )]
    Dispatch(shadow::DispatchArgs),
    /// The shadow policy runner.
    Shadow {
        #[command(subcommand)]
        cmd: shadow::ShadowCmd,
    },
    /// Each pane's agent state and since when, and each running job's latest decision.
    #[command(after_help = "Example:\n  drover status --all --wide")]
    Status(status::StatusArgs),
    /// Print a completion script for a shell.
    #[command(
        after_help = "Example:\n  drover completions bash > ~/.local/share/bash-completion/completions/drover"
    )]
    Completions(completions::CompletionsArgs),
    /// Print every man page (roff) or one command's, or write them to a directory.
    #[command(after_help = "Example:\n  drover man pane new | man -l -")]
    Man(completions::ManArgs),
    /// The loop: a Backlog.md board worked through lanes onto an integration branch (LOOP.md).
    #[command(after_help = "Example:\n  drover loop status")]
    Loop {
        #[command(subcommand)]
        cmd: loopcmd::LoopCmd,
    },
    /// Inside a lane: report the turn done, failed or blocked (drover lists the files changed).
    #[command(
        after_help = "Run by the agent in its lane; everything else comes from the lane's env.\n\nExample:\n  drover report done --summary 'added notes/TASK-1.md'"
    )]
    Report {
        #[command(subcommand)]
        cmd: report::ReportCmd,
    },
    /// The fleet: this host's supervisor joined to others over NATS (docs/fleet.md).
    Fleet {
        #[command(subcommand)]
        cmd: fleet::FleetCmd,
    },
    /// A live dashboard of every pane and lane, the ones that need you first.
    #[command(after_help = "Example:\n  drover top")]
    Top(top::TopArgs),
    /// A live page of panes, lanes, runs and hosts for a browser; read-only unless --allow-actions.
    #[command(
        after_help = "Prints the URL with its token once. Loopback by default; see docs/web.md.\n\nExample:\n  drover web --allow-actions"
    )]
    Web(web::WebArgs),
    /// Run by an agent's hook, status line or notify program: hand drover its signal (always exit 0).
    #[command(
        hide = true,
        after_help = "Wired per pane by drover (docs/agents.md, \"The agents' own signals\"); gives up silently after 300 ms.\n\nExample:\n  drover signal claude-hook < hook.json\n  drover signal codex-notify '{\"type\":\"agent-turn-complete\"}'"
    )]
    Signal(signal::SignalArgs),
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
    /// `--state-dir` was given on the command line (not only by `DROVER_STATE_DIR`).
    pub state_dir_flag: bool,
    pub verbose: u8,
    pub quiet: bool,
    pub autostart: bool,
    /// Where the state dir is, found once per command (finding it may run
    /// git); every accessor below starts from it.
    pub state_dir_at: std::cell::OnceCell<PathBuf>,
}

impl Ctx {
    /// The state dir, which must exist: for commands that only read.
    /// Nothing is created.
    pub fn state_dir(&self) -> anyhow::Result<StateDirBuf> {
        drover::paths::existing_state_dir(Some(self.state_dir_located()?))
            .map(StateDirBuf::from)
            .map_err(|e| fail(drover::exit::ERROR, e.to_string()))
    }

    /// Where the state dir is (absolute), resolved on the first call.
    fn state_dir_located(&self) -> anyhow::Result<&std::path::Path> {
        if let Some(p) = self.state_dir_at.get() {
            return Ok(p);
        }
        let p = drover::paths::state_dir_path(self.state_dir_arg.as_deref())
            .map_err(|e| fail(drover::exit::ERROR, e.to_string()))?;
        Ok(self.state_dir_at.get_or_init(|| p))
    }

    /// The state dir, created if missing: for commands that write.
    pub fn state_dir_create(&self) -> anyhow::Result<StateDirBuf> {
        drover::paths::resolve_state_dir(Some(self.state_dir_located()?))
            .map(StateDirBuf::from)
            .map_err(|e| fail(drover::exit::ERROR, e.to_string()))
    }

    /// The supervisor's socket for this state dir.
    pub fn socket(&self, state_dir: &StateDir) -> anyhow::Result<PathBuf> {
        drover::paths::socket_path(state_dir).map_err(|e| fail(drover::exit::ERROR, e.to_string()))
    }

    /// A connection to the running supervisor. None running: exit 5, "no
    /// supervisor running for <state dir>", and nothing is created.
    pub fn client(&self) -> anyhow::Result<drover::daemon::Client> {
        let not_running =
            |dir: PathBuf| client_err(drover::daemon::ClientError::NotRunning { state_dir: dir });
        let state_dir = match drover::paths::existing_state_dir(Some(self.state_dir_located()?)) {
            Ok(d) => StateDirBuf::from(d),
            Err(drover::paths::PathError::Missing { path }) => return Err(not_running(path)),
            Err(e) => return Err(fail(drover::exit::ERROR, e.to_string())),
        };
        let socket = self.socket(&state_dir)?;
        drover::daemon::Client::connect_running(&state_dir, &socket).map_err(client_err)
    }

    /// A connection to the supervisor, starting it (and creating the state
    /// dir) when none runs, unless `--no-autostart`. Only for commands that
    /// create something.
    pub fn client_or_start(&self) -> anyhow::Result<drover::daemon::Client> {
        if !self.autostart {
            return self.client();
        }
        let state_dir = self.state_dir_create()?;
        let socket = self.socket(&state_dir)?;
        let exe = std::env::current_exe().map_err(|e| {
            fail(
                drover::exit::ERROR,
                format!("cannot find the drover binary: {e}"),
            )
        })?;
        drover::daemon::Client::connect_or_start_verbose(
            &state_dir,
            &socket,
            Some(&exe),
            self.verbose,
        )
        .map_err(client_err)
    }

    /// Say what a command did (one line on stdout), unless `-q`.
    pub fn said(&self, msg: impl std::fmt::Display) {
        if !self.quiet {
            println!("{msg}");
        }
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

/// Exit status when stdout was closed under us (`drover events | head`):
/// what a process killed by SIGPIPE reports, silently.
const CLOSED_STDOUT: i32 = 128 + 13;

/// `println!`/`eprintln!` panic when stdout or stderr is a closed pipe, and
/// so does a library that `expect`s its write; end quietly instead, as Unix
/// tools do. (SIGPIPE stays ignored: a supervisor that hangs up must be an
/// error message, not a silent death.) `loop run` never gets here: its
/// console writes ignore a closed pipe (`loopcmd::Console`).
fn quiet_on_closed_stdout() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if closed_pipe_panic(msg) {
            std::process::exit(CLOSED_STDOUT);
        }
        prev(info);
    }));
}

/// Whether a panic's message is a write to a closed pipe: `failed printing
/// to stdout: Broken pipe (os error 32)`, the same for stderr, or an
/// `expect` on an `io::Error` of kind `BrokenPipe`.
fn closed_pipe_panic(msg: &str) -> bool {
    msg.contains("Broken pipe (os error 32)") || msg.contains("kind: BrokenPipe")
}

/// Whether `--state-dir` itself was given (at the top or under a
/// subcommand), as against filled in from `DROVER_STATE_DIR`.
fn state_dir_on_command_line(m: &clap::ArgMatches) -> bool {
    let here = m.value_source("state_dir") == Some(clap::parser::ValueSource::CommandLine);
    here || m
        .subcommand()
        .is_some_and(|(_, sub)| state_dir_on_command_line(sub))
}

pub fn main() -> ExitCode {
    quiet_on_closed_stdout();
    // An agent's hook: before the parser and the log, so that nothing it is
    // handed can make it fail, print or take time.
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if argv.get(1).map(String::as_str) == Some("signal") {
        return signal::main_direct(&argv[2..]);
    }
    let parsed = <Cli as clap::CommandFactory>::command()
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m).map(|c| (c, m)));
    let (cli, matches) = match parsed {
        Ok(x) => x,
        Err(e) => return values::report_parse_error(e),
    };
    let ctx = Ctx {
        state_dir_arg: cli.state_dir.clone(),
        state_dir_flag: state_dir_on_command_line(&matches),
        verbose: cli.verbose,
        quiet: cli.quiet,
        autostart: !cli.no_autostart,
        state_dir_at: std::cell::OnceCell::new(),
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
            // Its own complaint about a failed write is an `eprintln!`, which
            // panics when stderr is a closed pipe.
            .log_internal_errors(false)
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
        Command::Lane { cmd } => lane::run(cmd, &ctx),
        Command::Wait(a) => wait::run(a, &ctx),
        Command::Send(a) => send::run(a, &ctx),
        Command::Dispatch(a) => shadow::dispatch_cmd(a, &ctx),
        Command::Shadow { cmd } => shadow::run(cmd, &ctx),
        Command::Status(a) => status::run(a, &ctx),
        Command::Completions(a) => completions::completions(a),
        Command::Man(a) => completions::man(a),
        Command::Loop { cmd } => loopcmd::run(cmd, &ctx),
        Command::Top(a) => top::run(a, &ctx),
        Command::Web(a) => web::run(a, &ctx),
        Command::Fleet { cmd } => fleet::run(cmd, &ctx),
        Command::Report { cmd } => report::run(cmd, &ctx),
        Command::Signal(a) => return signal::run(a, ctx.state_dir_arg.clone()),
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
                use std::io::Write;
                // Nobody to tell when stderr is closed; the exit code says it.
                let _ = writeln!(std::io::stderr(), "drover: {}", msg.replace('\n', " "));
            }
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod grammar {
    //! The written grammar (docs/cli.md), checked on the clap definitions so
    //! a new command cannot drift from it.
    use super::Cli;
    use clap::CommandFactory;

    fn leaves(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        let subs: Vec<&clap::Command> = cmd
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .collect();
        // A command that takes arguments of its own (e.g. `mix --json`) counts
        // as a command even when it has subcommands.
        let own_args = cmd
            .get_arguments()
            .any(|a| !a.is_global_set() && a.get_id() != "help" && a.get_id() != "version");
        if subs.is_empty() || (own_args && cmd.get_name() != "drover") {
            out.push((path.clone(), cmd.clone()));
        }
        for s in subs {
            leaves(s, format!("{path} {}", s.get_name()), out);
        }
    }

    fn all_leaves() -> Vec<(String, clap::Command)> {
        let mut out = Vec::new();
        leaves(&Cli::command(), "drover".into(), &mut out);
        out
    }

    #[test]
    fn every_command_has_an_example() {
        let missing: Vec<String> = all_leaves()
            .into_iter()
            .filter(|(_, c)| {
                !c.get_after_help()
                    .is_some_and(|h| h.to_string().contains("Example:\n  drover "))
            })
            .map(|(p, _)| p)
            .collect();
        assert!(
            missing.is_empty(),
            "no `Example:` in after_help: {missing:?}"
        );
    }

    #[test]
    fn every_argument_has_a_help_line() {
        let mut missing = Vec::new();
        for (path, c) in all_leaves() {
            for a in c.get_arguments() {
                if a.is_hide_set() || a.get_id() == "help" || a.get_id() == "version" {
                    continue;
                }
                if a.get_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
        }
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    /// `--json` is one document; a stream is `--jsonl`.
    #[test]
    fn json_flags_follow_the_rule() {
        let mut bad = Vec::new();
        for (path, c) in all_leaves() {
            for a in c.get_arguments() {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                match a.get_long() {
                    Some("json") if !help.starts_with("Print one JSON document") => {
                        bad.push(format!("{path} --json: {help:?}"))
                    }
                    Some("jsonl") if !help.contains("per line") => {
                        bad.push(format!("{path} --jsonl: {help:?}"))
                    }
                    _ => {}
                }
            }
        }
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn top_help_lists_the_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        for code in [
            "0  done",
            "2  usage",
            "3  refused",
            "4  timeout",
            "5  transport",
        ] {
            assert!(help.contains(code), "{code:?} missing from drover --help");
        }
    }

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }
}
