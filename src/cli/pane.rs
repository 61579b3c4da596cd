//! `drover pane …`: create, list, read, send, keys, resize, kill, respawn.

use super::{Ctx, client_err, fail};
use drover::exit;
use drover::pane::{PaneSpec, parse_size, validate_env_name};
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum PaneCmd {
    /// Create a pane running CMD (env is set on the child at creation).
    New(NewArgs),
    /// List panes with their agent state.
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// Print a pane's screen (sanitised text unless --raw).
    Read {
        name: String,
        /// Keep SGR attributes (colours) in the output.
        #[arg(long)]
        raw: bool,
        /// Also print up to N rows of scrollback above the screen.
        #[arg(long, value_name = "N", default_value_t = 0)]
        scrollback: usize,
        #[arg(long)]
        json: bool,
    },
    /// Send text (bracketed paste when the app enabled it), then Enter.
    Send {
        name: String,
        text: String,
        /// Do not press Enter after the text.
        #[arg(long)]
        no_enter: bool,
    },
    /// Send named keys (Enter, Esc, Tab, Up, C-c, …) or single characters.
    Keys {
        name: String,
        #[arg(required = true, allow_hyphen_values = true)]
        keys: Vec<String>,
    },
    /// Resize a pane.
    Resize {
        name: String,
        /// COLSxROWS, e.g. 120x40.
        size: String,
    },
    /// Kill a pane's process group and remove the pane.
    Kill { name: String },
    /// Restart a pane's command as a new generation.
    Respawn { name: String },
}

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Pane name: 1-64 of A-Z a-z 0-9 . _ -
    pub name: String,
    /// Set K=V in the child's environment (repeatable).
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Working directory (must exist; default: the current directory).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// COLSxROWS (default 120x40).
    #[arg(long)]
    pub size: Option<String>,
    /// How the screen is read: shell, claude, codex, sim.
    #[arg(long, default_value = "shell")]
    pub agent: String,
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments, run exactly as given.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

const AGENTS: &[&str] = &["shell", "claude", "codex", "sim"];

fn usage(msg: impl Into<String>) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

/// Parse `K=V` pairs; the value may contain `=`, the name may not be empty.
pub fn parse_env(pairs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| usage(format!("--env {kv:?}: expected K=V")))?;
            validate_env_name(k).map_err(|e| usage(format!("--env: {e}")))?;
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
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
        env: parse_env(&a.env)?,
        cwd: Some(cwd),
        cols,
        rows,
        agent: a.agent.clone(),
    };
    spec.validate().map_err(|e| usage(e.to_string()))?;
    Ok(spec)
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub fn run(cmd: PaneCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        PaneCmd::New(a) => {
            let spec = build_spec(&a)?;
            let mut c = ctx.client()?;
            let info = c
                .call("pane.new", json!({"spec": spec}))
                .map_err(client_err)?;
            if a.json {
                print_json(&info);
            } else {
                println!(
                    "created pane {} (pid {}, generation {})",
                    a.name, info["pid"], info["generation"]
                );
            }
        }
        PaneCmd::Ls { json } => {
            let mut c = ctx.client()?;
            let list = c.call("pane.ls", json!({})).map_err(client_err)?;
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
                .call(
                    "pane.read",
                    json!({"pane": name, "raw": raw, "scrollback": scrollback}),
                )
                .map_err(client_err)?;
            if json {
                print_json(&v);
            } else if raw {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                if let Some(lines) = v["lines"].as_array() {
                    // Scrollback rows are plain; screen rows carry their SGR.
                    let formatted = v["formatted"].as_array().cloned().unwrap_or_default();
                    let plain = lines.len().saturating_sub(formatted.len());
                    for l in &lines[..plain] {
                        writeln!(out, "{}", l.as_str().unwrap_or_default())?;
                    }
                    for l in &formatted {
                        writeln!(out, "{}\x1b[0m", l.as_str().unwrap_or_default())?;
                    }
                }
            } else {
                print!("{}", v["text"].as_str().unwrap_or_default());
            }
        }
        PaneCmd::Send {
            name,
            text,
            no_enter,
        } => {
            let mut c = ctx.client()?;
            c.call(
                "pane.send",
                json!({"pane": name, "text": text, "enter": !no_enter}),
            )
            .map_err(client_err)?;
        }
        PaneCmd::Keys { name, keys } => {
            for k in &keys {
                drover::pane::key_bytes(k, false).map_err(|e| usage(e.to_string()))?;
            }
            let mut c = ctx.client()?;
            c.call("pane.keys", json!({"pane": name, "keys": keys}))
                .map_err(client_err)?;
        }
        PaneCmd::Resize { name, size } => {
            let (cols, rows) = parse_size(&size).map_err(|e| usage(e.to_string()))?;
            let mut c = ctx.client()?;
            c.call(
                "pane.resize",
                json!({"pane": name, "cols": cols, "rows": rows}),
            )
            .map_err(client_err)?;
        }
        PaneCmd::Kill { name } => {
            let mut c = ctx.client()?;
            c.call("pane.kill", json!({"pane": name}))
                .map_err(client_err)?;
        }
        PaneCmd::Respawn { name } => {
            let mut c = ctx.client()?;
            let v = c
                .call("pane.respawn", json!({"pane": name}))
                .map_err(client_err)?;
            println!("respawned pane {name} (generation {})", v["generation"]);
        }
    }
    Ok(exit::OK)
}

fn age(since_ms: u64) -> String {
    let secs = drover::paths::now_ms().saturating_sub(since_ms) / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{}s", secs / 60, secs % 60),
        _ => format!("{}h{}m", secs / 3600, (secs % 3600) / 60),
    }
}

pub fn print_table(list: &Value) {
    let rows = list.as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        println!("no panes");
        return;
    }
    println!(
        "{:<20} {:<7} {:>8} {:>4} {:>8} {:<7} {:<20} {:>7}",
        "NAME", "BACKEND", "PID", "GEN", "SIZE", "AGENT", "STATE", "SINCE"
    );
    for p in &rows {
        let o = &p["observation"];
        let mut state = o["state"].as_str().unwrap_or("?").to_string();
        if let Some(k) = o["kind"].as_str() {
            state = format!("{state}{{{k}}}");
        }
        if let Some(code) = o["exit_code"].as_i64() {
            state = format!("{state}({code})");
        }
        println!(
            "{:<20} {:<7} {:>8} {:>4} {:>8} {:<7} {:<20} {:>7}",
            p["name"].as_str().unwrap_or("?"),
            p["backend"].as_str().unwrap_or("?"),
            p["pid"].to_string(),
            p["generation"].to_string(),
            if p["cols"].is_null() {
                "-".to_string()
            } else {
                format!("{}x{}", p["cols"], p["rows"])
            },
            p["agent"].as_str().unwrap_or("?"),
            state,
            age(o["since_ms"].as_u64().unwrap_or(0)),
        );
    }
    // Panes a stopped supervisor left behind say what became of them.
    for p in rows.iter().filter(|p| p["lost"] == true) {
        println!(
            "{}: lost — {} (`drover pane kill {}` dismisses it)",
            p["name"].as_str().unwrap_or("?"),
            p["note"].as_str().unwrap_or(""),
            p["name"].as_str().unwrap_or("?"),
        );
    }
}
