//! `drover agent classify`, `drover agent explain` and `drover sim-agent`.

use super::{Ctx, client_err, fail};
use clap::{Args, Subcommand};
use drover::agent::{AgentKind, Classifier, Signals, rows_from_text};
use drover::exit;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Inspect how drover sees agents.
    Agent {
        #[command(subcommand)]
        cmd: AgentCmd,
    },
    /// Run the built-in simulated agent TUI (for tests and the demo).
    #[command(after_help = "Example:\n  drover sim-agent --profile claude --script turns.toml")]
    SimAgent(SimArgs),
}

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Classify a saved screen (plain text, as `tmux capture-pane -p` prints it).
    #[command(after_help = "Example:\n  drover agent classify --agent claude screen.txt --json")]
    Classify(ClassifyArgs),
    /// How a pane's state was decided: the screen's observation, the newest
    /// signal of each source, what they add up to, and the rule that decided.
    #[command(after_help = "Example:\n  drover agent explain w1 --json")]
    Explain(ExplainArgs),
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The pane.
    pub pane: String,
    /// Print one JSON document: the supervisor's answer (`pane.explain`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// Which agent's rules to apply.
    #[arg(long, value_enum)]
    pub agent: AgentKind,
    /// The screen file.
    pub file: PathBuf,
    /// Print one JSON document: {"state", "kind", "evidence"}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Which real agent's screens to imitate.
    #[arg(long, value_enum)]
    pub profile: drover::agent::sim::Profile,
    /// Script of steps per prompt (TOML or JSON; see docs/agents.md).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Claude's permission mode (`plan` is read-only: write steps are not carried out).
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<String>,
    /// Codex's sandbox (`read-only`: write steps are not carried out).
    #[arg(short = 's', long, value_name = "MODE")]
    pub sandbox: Option<String>,
    /// Codex's approval policy (accepted, as a lane passes it; no effect on the sim).
    #[arg(short = 'a', long, value_name = "POLICY")]
    pub ask_for_approval: Option<String>,
    /// Claude's effort level (accepted, as an autotuned lane passes it; named in reports).
    #[arg(long, value_name = "LEVEL")]
    pub effort: Option<String>,
    /// Codex's config override `key=value` (repeatable; `model_reasoning_effort` is named in reports).
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
    pub config: Vec<String>,
}

pub fn run(cmd: Commands, ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        Commands::Agent {
            cmd: AgentCmd::Classify(a),
        } => classify(a, ctx),
        Commands::Agent {
            cmd: AgentCmd::Explain(a),
        } => explain(a, ctx),
        Commands::SimAgent(a) => sim_agent(a),
    }
}

fn classify(a: ClassifyArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let bytes = std::fs::read(&a.file).map_err(|e| {
        fail(
            exit::USAGE,
            format!("cannot read screen file {}: {e}", a.file.display()),
        )
    })?;
    let text = String::from_utf8_lossy(&bytes);
    // The override rules live in the state dir; without one, use the builtin.
    let classifier = match ctx.state_dir() {
        Ok(dir) => Classifier::load(&dir),
        Err(_) => Classifier::builtin(),
    }
    .map_err(|e| fail(exit::USAGE, e.to_string()))?;
    let rows = rows_from_text(&text);
    let o = classifier.classify(a.agent, &Signals::screen_only(&rows));
    if a.json {
        let v = serde_json::json!({
            "state": o.state,
            "kind": o.kind,
            "evidence": o.evidence,
        });
        println!("{v}");
    } else {
        println!("{}\t{}", o.label(), o.evidence.join(" "));
    }
    Ok(exit::OK)
}

fn explain(a: ExplainArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let mut c = ctx.client()?;
    let x = c
        .call(drover::proto::args::PaneExplain {
            pane: a.pane,
            settle_ms: None,
        })
        .map_err(client_err)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&x)?);
        return Ok(exit::OK);
    }
    println!(
        "{}\t{} (rule {}, from {})",
        x.pane,
        x.fused.label(),
        x.rule,
        x.fused.source
    );
    match &x.screen {
        Some(o) => println!(
            "screen\t{}\t{}\thash {}",
            o.label(),
            o.evidence.join(" "),
            x.screen_hash
        ),
        None => println!("screen\tnot classified yet"),
    }
    for s in &x.signals {
        println!("{}\t{}\t{} ms ago", s.source, s.signal, s.age_ms);
    }
    if x.signals.is_empty() {
        println!("signals\tnone: the screen alone decides");
    }
    let used = x.usage.map_or_else(|| "not reported".into(), |u| u.brief());
    println!("usage\t{used}");
    if let Some(d) = &x.disagreement {
        let reported = if x.disagreement_reported {
            ", reported"
        } else {
            ""
        };
        let age = drover::paths::now_ms().saturating_sub(d.since_ms);
        println!(
            "disagree\tscreen {} vs signals {} for {age} ms{reported}",
            d.screen, d.signals
        );
    }
    Ok(exit::OK)
}

fn sim_agent(a: SimArgs) -> anyhow::Result<u8> {
    let script = match &a.script {
        Some(p) => {
            drover::agent::sim::Script::load(p).map_err(|e| fail(exit::USAGE, e.to_string()))?
        }
        None => drover::agent::sim::Script::default(),
    };
    let read_only =
        a.permission_mode.as_deref() == Some("plan") || a.sandbox.as_deref() == Some("read-only");
    let script = if read_only {
        script.read_only()
    } else {
        script
    };
    let effort = a.effort.clone().or_else(|| {
        a.config
            .iter()
            .find_map(|c| c.strip_prefix("model_reasoning_effort="))
            .map(str::to_string)
    });
    let script = script.with_effort(effort);
    drover::agent::sim::run(a.profile, script).map_err(|e| fail(exit::ERROR, e.to_string()))
}
