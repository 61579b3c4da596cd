//! `drover dispatch` and `drover shadow run`.

use super::{Ctx, fail};
use drover::dispatch::{DispatchError, DispatchSpec, dispatch};
use drover::engine::{Engine, Status};
use drover::exit;
use drover::shadow::{Runner, RunningJob, auto};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// The job (created with `drover job create`).
    pub job: String,
    /// The lane's pane.
    #[arg(long)]
    pub pane: String,
    /// The session the job is claimed for (default: the pane's name).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The prompt.
    #[arg(
        long,
        value_name = "TEXT",
        conflicts_with = "prompt_file",
        required_unless_present = "prompt_file"
    )]
    pub prompt: Option<String>,
    /// Read the prompt from FILE (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    pub prompt_file: Option<PathBuf>,
    /// Where the lane writes report.json (default <state>/lanes/<pane>/report.json).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Where declared side effects are checked (default: the pane's cwd).
    #[arg(long, value_name = "DIR")]
    pub worktree: Option<PathBuf>,
    /// How long to wait for the agent to be ready for the prompt.
    #[arg(long, value_name = "MS")]
    pub ready_timeout_ms: Option<u64>,
    /// Print one JSON document: {job_id, attempt_id, nonce, pane, …}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum ShadowCmd {
    /// Decide about running jobs from their evidence; append to shadow/decisions.jsonl.
    #[command(
        after_help = "Example:\n  drover shadow run --once\n  drover shadow run --jsonl | jq .decision"
    )]
    Run {
        /// Only this job.
        #[arg(long)]
        job: Option<String>,
        /// One pass, then exit (default: keep evaluating every few seconds).
        #[arg(long)]
        once: bool,
        /// Print one JSON document (the pass's decisions); needs --once.
        #[arg(long, requires = "once", conflicts_with = "jsonl")]
        json: bool,
        /// Print one JSON object per decision per line.
        #[arg(long)]
        jsonl: bool,
    },
}

pub fn dispatch_cmd(a: DispatchArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let prompt = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) if f.as_os_str() == "-" => super::pane::read_text(Some("-".into()), None)?,
        (None, Some(f)) => std::fs::read_to_string(f)
            .map_err(|e| fail(exit::USAGE, format!("--prompt-file {}: {e}", f.display())))?,
        (None, None) => return Err(fail(exit::USAGE, "give --prompt or --prompt-file")),
    };
    let state_dir = ctx.state_dir_create()?;
    let mut client = ctx.client_or_start()?;
    let spec = DispatchSpec {
        job_id: a.job.clone(),
        session_id: a.session.clone().unwrap_or_else(|| a.pane.clone()),
        pane: a.pane.clone(),
        prompt,
        report_path: a.report.clone(),
        worktree: a.worktree.clone(),
        autocomplete: auto::enabled_by_env(),
        ready_timeout_ms: a.ready_timeout_ms,
        report_by: Default::default(),
    };
    match dispatch(&state_dir, &mut client, &spec) {
        Ok(d) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&d)?);
            } else {
                println!(
                    "dispatched {} to {} (attempt {}, generation {}, auto-completion {})",
                    d.job_id,
                    d.pane,
                    d.attempt_id,
                    d.pane_generation,
                    if d.autocomplete { "on" } else { "off" }
                );
            }
            Ok(exit::OK)
        }
        Err(DispatchError::Engine(e)) => Err(super::job::to_exit(e)),
        Err(DispatchError::Client(e)) => Err(super::client_err(e)),
        Err(e @ (DispatchError::NotDelivered { .. } | DispatchError::LaneBusy { .. })) => {
            Err(fail(exit::REFUSED, e.to_string()))
        }
        Err(e @ DispatchError::UnknownSession { .. }) => Err(fail(exit::USAGE, e.to_string())),
        Err(e @ DispatchError::PromptTooLarge { .. }) => Err(fail(exit::USAGE, e.to_string())),
        Err(e) => Err(fail(exit::ERROR, e.to_string())),
    }
}

/// Pause between passes of `shadow run` without `--once`.
const PASS_INTERVAL: Duration = Duration::from_secs(5);

pub fn run(cmd: ShadowCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    let ShadowCmd::Run {
        job,
        once,
        json,
        jsonl,
    } = cmd;
    let state_dir = ctx.state_dir()?;
    let runner = Runner::new(&state_dir);
    let autocomplete = auto::enabled_by_env();
    loop {
        // The runner gets the running jobs as data; only auto-completion sees the engine.
        let engine = Engine::open(&state_dir).map_err(super::job::to_exit)?;
        let jobs: Vec<RunningJob> = engine
            .list()
            .map_err(super::job::to_exit)?
            .into_iter()
            .filter(|r| r.status == Status::Running)
            .filter(|r| job.as_deref().is_none_or(|j| j == r.job_id))
            .map(|r| RunningJob {
                job_id: r.job_id,
                attempt_id: r.attempt_id,
            })
            .collect();
        let mut out = Vec::new();
        for j in &jobs {
            let now = drover::paths::now_ms();
            runner
                .collect_report(&j.job_id, now)
                .map_err(|e| fail(exit::ERROR, e.to_string()))?;
            let Some(mut d) = runner
                .decide(j, now)
                .map_err(|e| fail(exit::ERROR, e.to_string()))?
            else {
                continue;
            };
            if autocomplete {
                // Recorded before the engine acts on it.
                let _ = auto::commit_and_record(&engine, &runner, &mut d)
                    .map_err(|e| fail(exit::ERROR, e))?;
            } else {
                runner
                    .record(&d)
                    .map_err(|e| fail(exit::ERROR, e.to_string()))?;
            }
            out.push(d);
        }
        if json {
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else if jsonl {
            for d in &out {
                println!("{}", serde_json::to_string(d)?);
            }
        } else if out.is_empty() {
            println!("no running job with evidence");
        } else {
            for d in &out {
                println!(
                    "{:<16} {:<34} {:<18} {}{}",
                    d.job_id,
                    d.attempt_id,
                    d.decision,
                    d.reason,
                    d.action
                        .as_deref()
                        .map(|a| format!(" [{a}]"))
                        .unwrap_or_default()
                );
            }
        }
        if once {
            return Ok(exit::OK);
        }
        std::thread::sleep(PASS_INTERVAL);
    }
}
