//! `drover loop run|status|lint`: the CLI over [`drover::loopctl`].

use super::{Ctx, fail};
use clap::{Args, Subcommand};
use drover::exit;
use drover::loopctl::ops::{LaneSpec, Role};
use drover::loopctl::runner::{self, RunConfig, RunStatus};
use drover::loopctl::simlanes::SimLanes;
use drover::loopctl::{LoopError, board, charter, ready, rundir};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum LoopCmd {
    /// Work the board's Ready tasks through lanes, land them on the integration branch, close out.
    #[command(
        after_help = "Example:\n  drover loop run --charter CHARTER.md --sim-implementer imp.toml --sim-reviewer rev.toml"
    )]
    Run(RunArgs),
    /// Show a run (the latest by default): tasks, lanes, landings.
    #[command(after_help = "Example:\n  drover loop status\n  drover loop status loop3 --json")]
    Status(StatusArgs),
    /// Check run files.
    #[command(after_help = "Example:\n  drover loop lint queue CHARTER.md .drover/loop1/QUEUE.md")]
    Lint {
        #[command(subcommand)]
        cmd: LintCmd,
    },
}

#[derive(Debug, Subcommand)]
pub enum LintCmd {
    /// Refuse (exit 3) a QUEUE.md whose Ready rows hold an excluded, Done, needs-owner or unknown task.
    #[command(
        after_help = "Example:\n  drover loop lint queue CHARTER.md .drover/loop1/QUEUE.md --board backlog"
    )]
    Queue(LintQueueArgs),
}

#[derive(Debug, Args)]
pub struct LintQueueArgs {
    /// The charter (its `exclude:` list).
    pub charter: PathBuf,
    /// The QUEUE.md to check.
    pub queue: PathBuf,
    /// The Backlog.md dir (default: `backlog` under the current git toplevel).
    #[arg(long, value_name = "DIR")]
    pub board: Option<PathBuf>,
    /// Print one JSON document: the offences.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The charter: aim, `lanes:`, `exclude:`, `gate:`, `guarded-paths:` (LOOP.md).
    #[arg(long, value_name = "FILE")]
    pub charter: PathBuf,
    /// The Backlog.md dir (default: `<repo>/backlog`).
    #[arg(long, value_name = "DIR")]
    pub board: Option<PathBuf>,
    /// The repository (default: the current git toplevel).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// The base lanes start from (default: main, else master).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Task pool size X (default: the charter's `pool:`, else 2; ≤ 0 → 1).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub pool: Option<String>,
    /// Run once per green landing, with DROVER_INTEGRATION_BRANCH/_SHA in its env (off by default).
    #[arg(long, value_name = "CMD")]
    pub ship_cmd: Option<String>,
    /// Leave jobs for an operator to complete (shadow decisions only); tasks then wait to time out.
    #[arg(long)]
    pub no_autocomplete: bool,
    /// Repair rounds before a task is parked.
    #[arg(long, default_value_t = runner::DEFAULT_REPAIR_ROUNDS)]
    pub repair_rounds: u32,
    /// Longest one agent turn may take before its task is parked (seconds).
    #[arg(long, default_value_t = runner::DEFAULT_TURN_TIMEOUT.as_secs())]
    pub turn_timeout_s: u64,
    /// Simulated implementer lanes following this sim-agent script (docs/agents.md).
    #[arg(long, value_name = "FILE", requires = "sim_reviewer")]
    pub sim_implementer: Option<PathBuf>,
    /// Simulated reviewer lanes following this sim-agent script.
    #[arg(long, value_name = "FILE", requires = "sim_implementer")]
    pub sim_reviewer: Option<PathBuf>,
    /// Print one JSON document: the final status, instead of the close-out.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run number (`3` or `loop3`; default: the latest).
    pub run: Option<String>,
    /// Print one JSON document: the run's `run.json`.
    #[arg(long)]
    pub json: bool,
}

fn lerr(e: LoopError) -> anyhow::Error {
    fail(e.exit_code(), e.to_string())
}

fn toplevel() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    let top =
        drover::loopctl::git::line(&cwd, &["rev-parse", "--show-toplevel"]).map_err(|_| {
            fail(
                exit::USAGE,
                "not in a git repository: pass --repo (and --board)",
            )
        })?;
    Ok(PathBuf::from(top))
}

pub fn run(cmd: LoopCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        LoopCmd::Run(a) => run_cmd(a, ctx),
        LoopCmd::Status(a) => status(a, ctx),
        LoopCmd::Lint {
            cmd: LintCmd::Queue(a),
        } => lint_queue(a),
    }
}

fn lint_queue(a: LintQueueArgs) -> anyhow::Result<u8> {
    let c = charter::load(&a.charter).map_err(lerr)?;
    let board_dir = match a.board {
        Some(b) => b,
        None => toplevel()?.join("backlog"),
    };
    let b = board::load(&board_dir).map_err(lerr)?;
    let q = std::fs::read_to_string(&a.queue)
        .map_err(|e| fail(exit::USAGE, format!("{}: {e}", a.queue.display())))?;
    let offences = ready::lint_queue(&q, &b, &c);
    if a.json {
        println!(
            "{}",
            serde_json::json!({"ok": offences.is_empty(), "offences": offences})
        );
    } else {
        for o in &offences {
            println!("{}:{}: {} {}", a.queue.display(), o.line, o.task, o.message);
        }
    }
    if offences.is_empty() {
        Ok(exit::OK)
    } else {
        if !a.json {
            eprintln!(
                "drover: {} offence(s) in {}: take them out of ## Ready",
                offences.len(),
                a.queue.display()
            );
        }
        Ok(exit::REFUSED)
    }
}

fn read_script(p: &Path) -> anyhow::Result<String> {
    drover::agent::sim::Script::load(p).map_err(|e| fail(exit::USAGE, e.to_string()))?;
    std::fs::read_to_string(p).map_err(|e| fail(exit::USAGE, format!("{}: {e}", p.display())))
}

fn run_cmd(a: RunArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let (Some(imp), Some(rev)) = (&a.sim_implementer, &a.sim_reviewer) else {
        return Err(fail(
            exit::USAGE,
            "this build runs the loop on simulated lanes only: pass --sim-implementer FILE and --sim-reviewer FILE (see LOOP.md)",
        ));
    };
    let (imp, rev) = (read_script(imp)?, read_script(rev)?);
    let repo = match a.repo {
        Some(r) => std::fs::canonicalize(&r)
            .map_err(|e| fail(exit::USAGE, format!("--repo {}: {e}", r.display())))?,
        None => toplevel()?,
    };
    let charter = charter::load(&a.charter).map_err(lerr)?;
    let state_dir = ctx.state_dir_create()?;
    let client = ctx.client_or_start()?;
    let exe = std::env::current_exe()?;
    let scripts = move |s: &LaneSpec| match s.role {
        Role::Implementer => imp.clone(),
        Role::Reviewer => rev.clone(),
    };
    let mut lanes = SimLanes::new(&state_dir, client, &exe, Box::new(scripts));
    let cfg = RunConfig {
        state_dir,
        board_dir: a.board.unwrap_or_else(|| repo.join("backlog")),
        repo,
        charter,
        base: a.base,
        pool: a.pool,
        ship_cmd: a.ship_cmd,
        autocomplete: !a.no_autocomplete,
        repair_rounds: a.repair_rounds,
        turn_timeout: Duration::from_secs(a.turn_timeout_s.max(1)),
    };
    let json = a.json;
    let st = runner::run(&mut lanes, cfg, |m| {
        if !json {
            eprintln!("loop: {m}");
        }
    })
    .map_err(lerr)?;
    print_final(&st, json)
}

/// Print a finished run: its close-out, or its status as JSON.
pub fn print_final(st: &RunStatus, json: bool) -> anyhow::Result<u8> {
    if json {
        println!("{}", serde_json::to_string_pretty(st)?);
    } else if let Some(p) = &st.closeout {
        let text = std::fs::read_to_string(p)
            .map_err(|e| fail(exit::ERROR, format!("{}: {e}", p.display())))?;
        print!("{text}");
        println!("\n(written to {})", p.display());
    }
    Ok(exit::OK)
}

fn status(a: StatusArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let state_dir = ctx.state_dir()?;
    let n = match &a.run {
        Some(r) => r.trim_start_matches("loop").parse::<u32>().map_err(|_| {
            fail(
                exit::USAGE,
                format!("RUN {r:?} is a number like 3 or loop3"),
            )
        })?,
        None => match rundir::runs(&state_dir).last() {
            Some(n) => *n,
            None => return Err(fail(exit::USAGE, "no loop runs in this state dir yet")),
        },
    };
    let run = rundir::RunDir::open(&state_dir, n).map_err(lerr)?;
    let path = run.file("run.json");
    let v: serde_json::Value = drover::store::read_json(&path)
        .map_err(|e| fail(exit::ERROR, e.to_string()))?
        .ok_or_else(|| fail(exit::ERROR, format!("{} is missing", path.display())))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(exit::OK);
    }
    println!(
        "loop{n} · {} · charter {} · pool {} · lanes cap {} · landings {}",
        v["state"].as_str().unwrap_or("?"),
        &v["charter_sha256"]
            .as_str()
            .unwrap_or("?")
            .chars()
            .take(12)
            .collect::<String>(),
        v["pool"],
        v["lanes_cap"],
        v["landings"]
    );
    println!(
        "integration branch {}",
        v["integration_branch"].as_str().unwrap_or("?")
    );
    let rows: Vec<Vec<String>> = v["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap_or("-").to_string();
            vec![
                s("id"),
                s("phase"),
                s("agent"),
                t["round"].to_string(),
                s("lane"),
                t["sha"]
                    .as_str()
                    .map_or("-".into(), |x| x.chars().take(12).collect()),
                s("reason"),
            ]
        })
        .collect();
    print!(
        "{}",
        drover::registry::view::table(
            &["TASK", "PHASE", "AGENT", "ROUND", "LANE", "SHA", "REASON"],
            &rows
        )
    );
    if let Some(c) = v["closeout"].as_str() {
        println!("close-out: {c}");
    }
    Ok(exit::OK)
}
