//! `drover pane …`: create, list, read, send, keys, resize, kill, respawn.

use super::{Ctx, client_err, fail};
use drover::exit;
use drover::pane::{PaneSpec, PaneSpecExt, parse_size, validate_env_name};
use drover::proto::{PaneEntry, args};
use std::path::PathBuf;

/// The key names `pane keys` knows, for its help.
const KEYS_HELP: &str = "\
Keys: a single character, or Enter, Esc, Tab, BTab, Up, Down, Left, Right,
Home, End, PageUp, PageDown, Insert, Delete, Backspace, Space, F1-F12,
C-<x> (control), M-<x> (meta). All keys of one call are written at once:
keys after a C-c reach the terminal before the program has handled the
interrupt (they are echoed or lost), so send them in a second call once the
pane is idle again.

Example:
  drover pane keys work Up Enter      # recall the last command and run it
  drover pane keys work C-c           # interrupt";

#[derive(Debug, clap::Subcommand)]
pub enum PaneCmd {
    /// Create a pane running CMD (env is set on the child at creation).
    #[command(
        after_help = "Starts the supervisor when none is running.\n\nExample:\n  drover pane new work --env API_URL=http://127.0.0.1:9 -- bash"
    )]
    New(NewArgs),
    /// List panes with their agent state.
    #[command(after_help = "Example:\n  drover pane ls --json | jq '.[].observation.state'")]
    Ls {
        /// Print one JSON document (an array of panes).
        #[arg(long)]
        json: bool,
    },
    /// Print a pane's screen (sanitised text unless --raw).
    #[command(after_help = "Example:\n  drover pane read work --scrollback 200")]
    Read {
        /// The pane.
        name: String,
        /// Keep SGR attributes (colours) in the output.
        #[arg(long)]
        raw: bool,
        /// Also print up to N rows of scrollback above the screen.
        #[arg(long, value_name = "N", default_value_t = 0)]
        scrollback: usize,
        /// Print one JSON document: {text, lines, formatted, cursor, …}.
        #[arg(long)]
        json: bool,
    },
    /// Send text (bracketed paste when the app enabled it), then Enter.
    #[command(
        after_help = "Written at once, not checked: to submit a prompt to an agent, use `drover send` (it confirms).\n\nExample:\n  drover pane send work 'echo $API_URL'\n  drover pane send work --file script.sh --no-enter"
    )]
    Send {
        /// The pane.
        name: String,
        /// The text (`-` reads stdin); or use --file.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        text: Option<String>,
        /// Read the text from FILE (`-` for stdin): argv cannot carry large texts.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Do not press Enter after the text.
        #[arg(long)]
        no_enter: bool,
    },
    /// Send named keys or single characters (see the list below).
    #[command(after_help = KEYS_HELP)]
    Keys {
        /// The pane.
        name: String,
        /// Keys, in order.
        #[arg(required = true, allow_hyphen_values = true, value_name = "KEY")]
        keys: Vec<String>,
    },
    /// Resize a pane.
    #[command(after_help = "Example:\n  drover pane resize work 120x40")]
    Resize {
        /// The pane.
        name: String,
        /// COLSxROWS, e.g. 120x40.
        #[arg(value_name = "CxR")]
        size: String,
    },
    /// Kill a pane's process group and remove the pane.
    #[command(after_help = "Example:\n  drover pane kill work")]
    Kill {
        /// The pane.
        name: String,
    },
    /// Restart a pane's command as a new generation.
    #[command(after_help = "Example:\n  drover pane respawn work")]
    Respawn {
        /// The pane.
        name: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Pane name: 1-64 of A-Z a-z 0-9 . _ -
    pub name: String,
    /// Set K=V in the child's environment; `--env K` takes K's value from drover's own environment (repeatable).
    #[arg(long = "env", value_name = "K=V|K")]
    pub env: Vec<String>,
    /// Read K=V lines from FILE (mode 0600, yours) into the child's environment (repeatable).
    #[arg(long = "env-file", value_name = "FILE")]
    pub env_file: Vec<PathBuf>,
    /// Working directory (must exist; default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// COLSxROWS (default 120x40).
    #[arg(long, value_name = "CxR")]
    pub size: Option<String>,
    /// How the screen is read: shell, claude, codex, sim.
    #[arg(long, default_value = "shell", value_parser = super::values::pane_agent())]
    pub agent: String,
    /// Where the pane lives: native (a PTY drover owns), tmux or herdr.
    #[arg(long, env = drover::statedir::env::BACKEND, default_value = "native", value_parser = super::values::backend())]
    pub backend: drover::pane::Backend,
    /// herdr only: put the pane beside herdr pane PANE, in its workspace
    /// (`pane split`), instead of in a workspace of its own.
    #[arg(long, value_name = "PANE")]
    pub split: Option<String>,
    /// With --split: where the new pane goes, right or down.
    #[arg(long, value_name = "DIR", default_value = "right", requires = "split")]
    pub split_direction: String,
    /// Start a Claude or Codex agent without its own signals (no `--settings`
    /// hooks and status line, no `-c notify=[…]`; docs/agents.md).
    #[arg(long)]
    pub no_signals: bool,
    /// Print one JSON document: {name, pid, generation, …}.
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments, run exactly as given.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Read a text argument: `Some(F)` from the file F (`-` = stdin), else the
/// positional text (`-` = stdin). Shared by `pane send` and `send`.
pub fn read_text(text: Option<String>, file: Option<&std::path::Path>) -> anyhow::Result<String> {
    use std::io::Read;
    let from_stdin = || -> anyhow::Result<String> {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| usage(format!("cannot read the text from stdin: {e}")))?;
        Ok(s)
    };
    match (text, file) {
        (_, Some(f)) if f.as_os_str() == "-" => from_stdin(),
        (_, Some(f)) => {
            std::fs::read_to_string(f).map_err(|e| usage(format!("--file {}: {e}", f.display())))
        }
        (Some(t), None) if t == "-" => from_stdin(),
        (Some(t), None) => Ok(t),
        (None, None) => Err(usage("give the text, `-` for stdin, or --file FILE")),
    }
}

const AGENTS: &[&str] = &["shell", "claude", "codex", "sim"];

fn usage(msg: impl Into<String>) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

/// Largest `--env-file` read.
const MAX_ENV_FILE: u64 = 64 * 1024;

/// The environment `--env-file F…` then `--env …` give (a later name wins):
/// `--env K=V`; `--env K`, K's value taken from drover's own environment
/// (so the value is in no argv); each file's `K=V` lines (`#` comments,
/// blank lines and an `export ` prefix allowed), the file refused unless it
/// is yours and no one else may read or write it (0600). Errors name files,
/// lines and names, never a value.
pub fn env_args(pairs: &[String], files: &[PathBuf]) -> anyhow::Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| {
        out.retain(|(o, _)| o != k);
        out.push((k.to_string(), v));
    };
    for f in files {
        for (k, v) in read_env_file(f)? {
            put(&k, v);
        }
    }
    for kv in pairs {
        let (k, v) = match kv.split_once('=') {
            Some((k, v)) => (k, v.to_string()),
            None => {
                let v = std::env::var(kv).map_err(|_| {
                    usage(format!(
                        "--env {kv}: not set in drover's environment (give K=V, or export {kv} first)"
                    ))
                })?;
                (kv.as_str(), v)
            }
        };
        validate_env_name(k).map_err(|e| usage(format!("--env: {e}")))?;
        put(k, v);
    }
    Ok(out)
}

fn read_env_file(f: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    use std::os::unix::fs::MetadataExt;
    let name = f.display();
    let meta = std::fs::metadata(f).map_err(|e| usage(format!("--env-file {name}: {e}")))?;
    if !meta.is_file() || meta.len() > MAX_ENV_FILE {
        return Err(usage(format!(
            "--env-file {name}: not a file of at most 64 KiB"
        )));
    }
    if meta.mode() & 0o077 != 0 || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(usage(format!(
            "--env-file {name}: others may read it (mode {:o}); make it yours and 0600 (chmod 600 {name})",
            meta.mode() & 0o777
        )));
    }
    let text = std::fs::read_to_string(f).map_err(|e| usage(format!("--env-file {name}: {e}")))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let l = l.strip_prefix("export ").unwrap_or(l);
        let (k, v) = l
            .split_once('=')
            .ok_or_else(|| usage(format!("--env-file {name}: line {}: expected K=V", i + 1)))?;
        let k = k.trim();
        validate_env_name(k)
            .map_err(|e| usage(format!("--env-file {name}: line {}: {e}", i + 1)))?;
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// Build a spec from `pane new` arguments, resolving paths against this process's cwd.
pub fn build_spec(a: &NewArgs) -> anyhow::Result<PaneSpec> {
    if !AGENTS.contains(&a.agent.as_str()) {
        return Err(usage(format!(
            "--agent {:?}: use one of {}",
            a.agent,
            AGENTS.join(", ")
        )));
    }
    let (cols, rows) = match &a.size {
        Some(s) => parse_size(s).map_err(|e| usage(e.to_string()))?,
        None => (drover::pane::DEFAULT_COLS, drover::pane::DEFAULT_ROWS),
    };
    let cwd = match &a.cwd {
        Some(c) => {
            let c = std::path::absolute(c).map_err(|e| usage(format!("--cwd: {e}")))?;
            if !c.is_dir() {
                return Err(usage(format!(
                    "--cwd {} does not exist or is not a directory",
                    c.display()
                )));
            }
            c
        }
        None => std::env::current_dir()?,
    };
    let spec = PaneSpec {
        name: a.name.clone(),
        argv: a.command.clone(),
        env: env_args(&a.env, &a.env_file)?,
        cwd: Some(cwd),
        cols,
        rows,
        agent: a.agent.clone(),
    };
    spec.validate().map_err(|e| usage(e.to_string()))?;
    Ok(spec)
}

/// A Claude or Codex pane (`--agent claude|codex` running that program) is
/// started with its own signals (docs/agents.md, "The agents' own
/// signals"): the flags go right after the program name; Claude's settings
/// file is written under the state dir.
fn wire_signals(spec: &mut PaneSpec, ctx: &Ctx) -> anyhow::Result<()> {
    use drover::agent::{AgentKind, signal_wire};
    let kind = match spec.agent.as_str() {
        "claude" => AgentKind::Claude,
        "codex" => AgentKind::Codex,
        _ => return Ok(()),
    };
    let program = spec
        .argv
        .first()
        .and_then(|p| std::path::Path::new(p).file_name())
        .and_then(|n| n.to_str());
    if program != Some(spec.agent.as_str()) {
        return Ok(());
    }
    let state_dir = ctx.state_dir_create()?;
    let fail_wire = |e: drover::agent::AgentError| {
        super::fail(
            drover::exit::ERROR,
            format!("cannot wire the agent's signals: {e}"),
        )
    };
    let exe = signal_wire::own_exe().map_err(fail_wire)?;
    let flags = signal_wire::wire(kind, &exe, &state_dir, &spec.name).map_err(fail_wire)?;
    signal_wire::insert_after_program(&mut spec.argv, flags);
    Ok(())
}

/// A reply as JSON, its keys in the order they always had (sorted).
fn print_json<T: serde::Serialize>(v: &T) {
    let v = serde_json::to_value(v).unwrap_or_default();
    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
}

pub fn run(cmd: PaneCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        PaneCmd::New(a) => {
            let mut spec = build_spec(&a)?;
            let backend = a.backend;
            let was_running = ctx.client().is_ok();
            let mut c = ctx.client_or_start()?;
            if !a.no_signals {
                wire_signals(&mut spec, ctx)?;
            }
            let req = args::PaneNew {
                spec,
                backend: Some(backend.to_string()),
                split: a.split.as_ref().map(|of| args::Split {
                    pane: of.clone(),
                    direction: Some(a.split_direction.to_string()),
                }),
            };
            let info = match c.call(req) {
                Ok(info) => info,
                Err(e) => {
                    // A supervisor this command started for a pane it could
                    // not make (herdr or tmux missing, a bad command) is not
                    // left running with nothing in it; it has stopped when
                    // this command returns.
                    let empty = c.call(args::PaneLs {}).is_ok_and(|v| v.is_empty());
                    if !was_running
                        && empty
                        && c.call(args::Shutdown {}).is_ok()
                        && let Ok(dir) = ctx.state_dir()
                    {
                        let _ = drover::daemon::client::wait_stopped(
                            &dir,
                            std::time::Duration::from_secs(10),
                        );
                    }
                    return Err(client_err(e));
                }
            };
            if a.json {
                print_json(&info);
            } else {
                ctx.said(format!(
                    "created pane {} on {} (pid {}, generation {})",
                    a.name, backend, info.info.pid, info.info.generation
                ));
                if let Some(cmd) = &info.attach_command {
                    ctx.said(format!("  or: {cmd}"));
                }
            }
        }
        PaneCmd::Ls { json } => {
            let mut c = ctx.client()?;
            let list = c.call(args::PaneLs {}).map_err(client_err)?;
            if json {
                print_json(&list);
            } else {
                print_table(&list);
            }
        }
        PaneCmd::Read {
            name,
            raw,
            scrollback,
            json,
        } => {
            let mut c = ctx.client()?;
            let v = c
                .call(args::PaneRead {
                    pane: name,
                    raw,
                    scrollback: Some(scrollback as u64),
                })
                .map_err(client_err)?;
            if json {
                print_json(&v);
            } else if raw {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                // Scrollback rows are plain; screen rows carry their SGR.
                let formatted = v.formatted.unwrap_or_default();
                let plain = v.lines.len().saturating_sub(formatted.len());
                for l in &v.lines[..plain] {
                    writeln!(out, "{l}")?;
                }
                for l in &formatted {
                    writeln!(out, "{l}\x1b[0m")?;
                }
            } else {
                print!("{}", v.text);
            }
        }
        PaneCmd::Send {
            name,
            text,
            file,
            no_enter,
        } => {
            let text = read_text(text, file.as_deref())?;
            let mut c = ctx.client()?;
            let v = c
                .call(args::PaneSend {
                    pane: name.clone(),
                    text: text.clone(),
                    enter: !no_enter,
                })
                .map_err(client_err)?;
            if let agent @ ("claude" | "codex") = v.agent.as_str() {
                // Written at once: an agent's TUI may keep it in its composer.
                eprintln!(
                    "drover: warning: pane send does not confirm that {agent} took the prompt; \
                     to submit it and confirm, use `drover send {name} …`"
                );
            }
            ctx.said(format!(
                "sent {} bytes to {name}{}",
                text.len(),
                if no_enter { "" } else { ", then Enter" }
            ));
        }
        PaneCmd::Keys { name, keys } => {
            for k in &keys {
                drover::pane::key_bytes(k, false).map_err(|e| usage(e.to_string()))?;
            }
            let mut c = ctx.client()?;
            c.call(args::PaneKeys {
                pane: name.clone(),
                keys: keys.clone(),
            })
            .map_err(client_err)?;
            ctx.said(format!("sent {} to {name}", keys.join(" ")));
        }
        PaneCmd::Resize { name, size } => {
            let (cols, rows) = parse_size(&size).map_err(|e| usage(e.to_string()))?;
            let mut c = ctx.client()?;
            c.call(args::PaneResize {
                pane: name.clone(),
                cols,
                rows,
            })
            .map_err(client_err)?;
            ctx.said(format!("resized {name} to {cols}x{rows}"));
        }
        PaneCmd::Kill { name } => {
            let mut c = ctx.client()?;
            c.call(args::PaneKill { pane: name.clone() })
                .map_err(client_err)?;
            ctx.said(format!("killed pane {name}"));
        }
        PaneCmd::Respawn { name } => {
            let mut c = ctx.client()?;
            let v = c
                .call(args::PaneRespawn { pane: name.clone() })
                .map_err(client_err)?;
            ctx.said(format!(
                "respawned pane {name} (generation {})",
                v.generation
            ));
        }
    }
    Ok(exit::OK)
}

pub fn print_table(rows: &[PaneEntry]) {
    if rows.is_empty() {
        println!("no panes");
        return;
    }
    println!(
        "{:<20} {:<7} {:>8} {:>4} {:>8} {:<7} {:<20} {:>8}",
        "NAME", "BACKEND", "PID", "GEN", "SIZE", "AGENT", "STATE", "SINCE"
    );
    for p in rows {
        let (name, backend, pid, generation, size, agent, state, since_ms) = match p {
            PaneEntry::Live(v) => {
                let o = &v.observation;
                let mut state = o.state.to_string();
                if let Some(k) = o.kind {
                    state = format!("{state}:{k}");
                }
                if let Some(code) = o.exit_code {
                    state = format!("{state}({code})");
                }
                let i = &v.info;
                let size = format!("{}x{}", i.cols, i.rows);
                (
                    &i.name,
                    &i.backend,
                    i.pid,
                    i.generation,
                    size,
                    &i.agent,
                    state,
                    o.since_ms,
                )
            }
            PaneEntry::Lost(l) => (
                &l.name,
                &l.backend,
                l.pid,
                l.generation,
                "-".to_string(),
                &l.agent,
                "lost".to_string(),
                l.observation.since_ms,
            ),
        };
        println!(
            "{:<20} {:<7} {:>8} {:>4} {:>8} {:<7} {:<20} {:>8}",
            name,
            backend,
            pid,
            generation,
            size,
            agent,
            state,
            super::fmt::ago(since_ms),
        );
    }
    // Panes a stopped supervisor left behind say what became of them.
    for p in rows {
        if let PaneEntry::Lost(l) = p {
            println!(
                "{}: lost — {} (`drover pane kill {}` dismisses it)",
                l.name, l.note, l.name,
            );
        }
    }
}
