//! `drover mock-model` and `drover rehearse`: the real agent TUIs against
//! drover's own mock model server (docs/rehearsal.md).

use super::{Ctx, client_err, fail};
use drover::exit;
use drover::pane::{PaneSpec, PaneSpecExt};
use drover::proto::args;
use drover::rehearse::{self, Agent, MockServer, Script, SetupFault, discover, home};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `rehearse` waits for its mock server to report its port.
const MOCK_START_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Subcommand)]
pub enum Commands {
    /// Serve a scripted mock of the Anthropic and OpenAI APIs on 127.0.0.1.
    #[command(
        after_help = "Example:\n  drover mock-model --port 0 --script tests/fixtures/mock-scripts/demo.toml"
    )]
    MockModel(MockArgs),
    /// Start a real claude/codex TUI in a pane against a mock model server.
    #[command(
        after_help = "Example:\n  drover rehearse --agent claude --script tests/fixtures/mock-scripts/demo.toml"
    )]
    Rehearse(Box<RehearseArgs>),
}

#[derive(Debug, clap::Args)]
pub struct MockArgs {
    /// Port on 127.0.0.1 (0 = any free port; the bound port is printed).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Script of turns to answer with (TOML; see docs/rehearsal.md).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Also write the bound port to FILE (atomically), for callers to read.
    #[arg(long, value_name = "FILE")]
    pub port_file: Option<PathBuf>,
    /// Follow whatever brief the prompt holds, with no script (docs/rehearsal.md).
    #[arg(long, conflicts_with = "script")]
    pub follow_brief: bool,
    /// With --follow-brief, how the model reports: command, json, guess or forget.
    #[arg(
        long,
        value_name = "HOW",
        default_value = "command",
        requires = "follow_brief"
    )]
    pub reports: String,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum AgentArg {
    Claude,
    Codex,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FaultArg {
    /// The working folder is not trusted.
    Untrusted,
    /// Claude: the API key was never approved.
    UnapprovedKey,
    /// Codex: no model provider configured.
    NoProvider,
}

#[derive(Debug, clap::Args)]
pub struct RehearseArgs {
    /// Which agent TUI to start.
    #[arg(long, value_enum)]
    pub agent: AgentArg,
    /// The claude binary (default: PATH, then the install cache).
    #[arg(long, value_name = "PATH")]
    pub claude_bin: Option<PathBuf>,
    /// The codex binary (default: PATH, then the install cache).
    #[arg(long, value_name = "PATH")]
    pub codex_bin: Option<PathBuf>,
    /// Script for the mock model (TOML; see docs/rehearsal.md).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Working directory of the agent (default: a fresh git repository `<dir>/home/project`).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Pane name (default `rehearse-<agent>`); the mock runs in `<name>-mock`.
    #[arg(long)]
    pub name: Option<String>,
    /// Where the fresh HOME goes (default `<state dir>/rehearse/<name>`; emptied first).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// COLSxROWS (default 120x40).
    #[arg(long)]
    pub size: Option<String>,
    /// Leave the setup wrong on purpose, to rehearse a setup dialog.
    #[arg(long, value_enum, value_name = "FAULT")]
    pub wrong_setup: Option<FaultArg>,
    /// Claude's permission mode (default `default`: asks before each edit and
    /// command; 2.1.332 would otherwise start in auto mode). Ignored when the
    /// extra arguments set one.
    #[arg(long, value_name = "MODE", value_parser = ["default", "plan", "acceptEdits", "auto"])]
    pub permission_mode: Option<String>,
    /// Claude: sign in with a mock subscription token instead of an API key
    /// (usage limits then show as a subscription's, with reset times and a menu).
    #[arg(long)]
    pub subscription: bool,
    /// `TZ` for the agent, e.g. America/Los_Angeles (reset times are shown in it).
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// Record the agent's raw PTY output to FILE (runs it under script(1)).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Print one JSON document: what was started.
    #[arg(long)]
    pub json: bool,
    /// Start the agent wired for its own signals as a lane's is (Claude's
    /// hooks and status line, Codex's notify and rollout), so `drover agent
    /// explain` shows them beside the screen.
    #[arg(long)]
    pub signals: bool,
    /// Extra arguments for the agent (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

pub fn run(cmd: Commands, ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        Commands::MockModel(a) => mock_model(a),
        Commands::Rehearse(a) => rehearse_run(*a, ctx),
    }
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

fn load_script(path: Option<&Path>) -> anyhow::Result<Script> {
    match path {
        Some(p) => Script::load(p).map_err(|e| usage(e.to_string())),
        None => Ok(Script::default()),
    }
}

fn write_port_file(path: &Path, port: u16) -> anyhow::Result<()> {
    drover::store::write_bytes_atomic(path, format!("{port}\n").as_bytes())
        .map_err(|e| fail(exit::ERROR, format!("--port-file: {e}")))
}

fn mock_model(a: MockArgs) -> anyhow::Result<u8> {
    let mut script = load_script(a.script.as_deref())?;
    if a.follow_brief {
        script.follow = Some(a.reports.parse().map_err(usage)?);
    }
    let log: rehearse::Logger = Arc::new(|line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{} {line}", drover::paths::now_rfc3339());
        let _ = out.flush();
    });
    let server =
        MockServer::start(a.port, script, log).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    // The port file first: whoever reads the printed line may look for it next.
    if let Some(p) = &a.port_file {
        write_port_file(p, server.port())?;
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "mock-model listening on http://{}", server.addr())?;
        out.flush()?;
    }
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])
    .map_err(|e| fail(exit::ERROR, format!("cannot watch signals: {e}")))?;
    let _ = signals.forever().next();
    drop(server);
    Ok(exit::OK)
}

fn wait_for_port(file: &Path, mock_pane: &str, ctx: &Ctx) -> anyhow::Result<u16> {
    let deadline = Instant::now() + MOCK_START_TIMEOUT;
    let mut delay =
        drover::backoff::Backoff::new(Duration::from_millis(5), Duration::from_millis(100));
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(port) = text.trim().parse::<u16>()
        {
            return Ok(port);
        }
        if Instant::now() >= deadline {
            let screen = ctx
                .client()
                .and_then(|mut c| c.call(args::PaneRead::new(mock_pane)).map_err(client_err))
                .map(|v| v.text.trim().to_string())
                .unwrap_or_default();
            return Err(fail(
                exit::ERROR,
                format!("the mock model did not start within {MOCK_START_TIMEOUT:?}: {screen}"),
            ));
        }
        std::thread::sleep(delay.next_delay());
    }
}

/// Best effort: without git the project is a plain folder.
fn git_init(dir: &Path) {
    let _ = drover::git::Git::new(dir).args(["init", "-q"]).succeeds();
}

fn rehearse_run(a: RehearseArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let agent = match a.agent {
        AgentArg::Claude => Agent::Claude,
        AgentArg::Codex => Agent::Codex,
    };
    let fault = a.wrong_setup.map(|f| match f {
        FaultArg::Untrusted => SetupFault::Untrusted,
        FaultArg::UnapprovedKey => SetupFault::UnapprovedKey,
        FaultArg::NoProvider => SetupFault::NoProvider,
    });
    let explicit = match agent {
        Agent::Claude => a.claude_bin.as_deref(),
        Agent::Codex => a.codex_bin.as_deref(),
    };
    home::check_fault(agent, fault).map_err(|e| usage(e.to_string()))?;
    let bin = discover::find(agent, explicit).map_err(|e| usage(e.to_string()))?;
    let script_path = match &a.script {
        Some(p) => {
            load_script(Some(p))?;
            Some(std::path::absolute(p)?)
        }
        None => None,
    };
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("rehearse-{}", agent.name()));
    let mock_name = format!("{name}-mock");
    drover::pane::validate_pane_name(&mock_name).map_err(|e| usage(e.to_string()))?;
    let (cols, rows) = match &a.size {
        Some(s) => drover::pane::parse_size(s).map_err(|e| usage(e.to_string()))?,
        None => (drover::pane::DEFAULT_COLS, drover::pane::DEFAULT_ROWS),
    };
    let dir = match &a.dir {
        Some(d) => std::path::absolute(d)?,
        None => ctx.state_dir_create()?.rehearsal_dir(&name),
    };
    let io = |what: &str, p: &Path, e: std::io::Error| {
        fail(exit::ERROR, format!("{what} {}: {e}", p.display()))
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| io("cannot empty", &dir, e))?;
    }
    let home_dir = dir.join("home");
    let cwd = match &a.cwd {
        Some(c) => c.clone(),
        None => home_dir.join("project"),
    };
    std::fs::create_dir_all(&cwd).map_err(|e| io("cannot create", &cwd, e))?;
    if a.cwd.is_none() {
        // Lanes are git worktrees, and Codex asks about trust only inside a repository.
        git_init(&cwd);
    }
    let cwd = std::fs::canonicalize(&cwd).map_err(|e| io("cannot resolve", &cwd, e))?;
    let home_dir = {
        std::fs::create_dir_all(&home_dir).map_err(|e| io("cannot create", &home_dir, e))?;
        std::fs::canonicalize(&home_dir).map_err(|e| io("cannot resolve", &home_dir, e))?
    };

    let mut client = ctx.client_or_start()?;
    let port_file = dir.join("mock.port");
    let exe = std::env::current_exe()
        .map_err(|e| fail(exit::ERROR, format!("cannot find the drover binary: {e}")))?;
    let mut mock_argv = vec![
        exe.to_string_lossy().into_owned(),
        "mock-model".into(),
        "--port".into(),
        "0".into(),
        "--port-file".into(),
        port_file.to_string_lossy().into_owned(),
    ];
    if let Some(s) = &script_path {
        mock_argv.extend(["--script".into(), s.to_string_lossy().into_owned()]);
    }
    let mock_spec = PaneSpec {
        name: mock_name.clone(),
        argv: mock_argv,
        env: vec![],
        cwd: Some(dir.clone()),
        cols: 160,
        rows: 40,
        agent: "shell".into(),
    };
    // Both panes go on the backend `pane new` would use: on tmux the mock
    // model outlives a supervisor restart as its agent does.
    let backend = std::env::var(drover::statedir::env::BACKEND).unwrap_or_else(|_| "native".into());
    client
        .call(args::PaneNew {
            spec: mock_spec,
            backend: Some(backend.clone()),
            split: None,
        })
        .map_err(client_err)?;
    let started = (|| {
        let port = wait_for_port(&port_file, &mock_name, ctx)?;
        let opts = home::Options {
            subscription: a.subscription,
            tz: a.tz.clone(),
        };
        let prepared = home::prepare_with(agent, &home_dir, &cwd, port, fault, &opts)
            .map_err(|e| usage(e.to_string()))?;
        let mut argv = vec![bin.to_string_lossy().into_owned()];
        argv.extend(prepared.args.iter().cloned());
        // An explicit permission mode (docs/rehearsal.md): never the agent's default.
        if agent == Agent::Claude
            && !drover::agent::adapter::sets_permission_mode(
                drover::agent::AgentKind::Claude,
                &a.args,
            )
        {
            let mode = a.permission_mode.as_deref().unwrap_or("default");
            argv.extend(["--permission-mode".to_string(), mode.to_string()]);
        }
        argv.extend(a.args.iter().cloned());
        if a.signals {
            // Right after the program, as a lane's agent gets them.
            let kind = match agent {
                Agent::Claude => drover::agent::AgentKind::Claude,
                Agent::Codex => drover::agent::AgentKind::Codex,
            };
            let state = ctx.state_dir_create()?;
            let flags = drover::agent::signal_wire::wire(kind, &exe, &state, &name)
                .map_err(|e| fail(exit::ERROR, format!("cannot wire the agent's signals: {e}")))?;
            drover::agent::signal_wire::insert_after_program(&mut argv, flags);
        }
        if let Some(rec) = &a.record {
            argv = rehearse::recorded_argv(&argv, &std::path::absolute(rec)?);
        }
        let spec = PaneSpec {
            name: name.clone(),
            argv,
            env: prepared.env,
            cwd: Some(cwd.clone()),
            cols,
            rows,
            agent: agent.name().into(),
        };
        spec.validate().map_err(|e| usage(e.to_string()))?;
        let info = client
            .call(args::PaneNew {
                spec,
                backend: Some(backend.clone()),
                split: None,
            })
            .map_err(client_err)?;
        anyhow::Ok((port, info))
    })();
    let (port, info) = match started {
        Ok(v) => v,
        Err(e) => {
            // Leave nothing behind: the mock is useless without its agent.
            let _ = client.call(args::PaneKill {
                pane: mock_name.clone(),
            });
            return Err(e);
        }
    };
    if a.json {
        let v = json!({
            "pane": name, "mock_pane": mock_name, "port": port, "agent": agent.name(),
            "bin": bin, "home": home_dir, "cwd": cwd, "pid": info.info.pid,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "rehearsal: pane {name} runs {} against the mock model on 127.0.0.1:{port}",
            bin.display()
        );
        println!("  attach:   drover attach {name}      (detach with Ctrl-\\)");
        println!("  read:     drover pane read {name}");
        println!("  prompt:   drover send {name} 'say hello'      (submits and confirms)");
        println!("  mock log: drover pane read {mock_name}");
        println!("  stop:     drover pane kill {name} && drover pane kill {mock_name}");
    }
    Ok(exit::OK)
}
