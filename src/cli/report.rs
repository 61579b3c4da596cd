//! `drover report done|failed|blocked`: the lane reports its turn. This
//! command only asks: the supervisor that runs the caller's lane writes the
//! report (the library's `report` module); this file parses and prints.

use super::{Ctx, fail};
use drover::report::{LaneEnv, ReportError, Said};

/// What the agent says of its turn.
#[derive(Debug, clap::Subcommand)]
pub enum ReportCmd {
    /// The task is finished: drover lists the files changed and writes the report.
    #[command(after_help = "Example:\n  drover report done --summary 'added notes/TASK-1.md'")]
    Done {
        /// One line saying what was done.
        #[arg(long, value_name = "TEXT")]
        summary: Option<String>,
        /// Print one JSON document: the report written and where.
        #[arg(long)]
        json: bool,
    },
    /// The task cannot be finished: say why.
    #[command(
        after_help = "Example:\n  drover report failed --reason 'the test suite does not build'"
    )]
    Failed {
        /// One line saying why.
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Print one JSON document: the report written and where.
        #[arg(long)]
        json: bool,
    },
    /// The task needs something only a human can give: say what.
    #[command(
        after_help = "Example:\n  drover report blocked --reason 'needs the staging API key'"
    )]
    Blocked {
        /// One line saying what is needed.
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Print one JSON document: the report written and where.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: ReportCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    // The lane is established by the supervisor, never named by the caller.
    if ctx.state_dir_flag {
        let e = ReportError::StateDirGiven;
        return Err(fail(e.exit_code(), e.to_string()));
    }
    let (said, json_out) = match cmd {
        ReportCmd::Done { summary, json } => (Said::Done { summary }, json),
        ReportCmd::Failed { reason, json } => (Said::Failed { reason }, json),
        ReportCmd::Blocked { reason, json } => (Said::Blocked { reason }, json),
    };
    let claims = LaneEnv::from_env();
    let w = drover::report::request::send(&said, &claims)
        .map_err(|e| fail(e.exit_code(), e.to_string()))?;
    if json_out {
        let doc = serde_json::json!({"path": w.path, "job_id": w.job_id, "replaced": w.replaced, "report": w.report});
        println!("{doc:#}");
    } else if !ctx.quiet {
        let path = w.path.display();
        let job = &w.job_id;
        let how = if w.replaced {
            "replaced at"
        } else {
            "written to"
        };
        println!("report for job {job} {how} {path}:");
        println!(
            "{}",
            serde_json::to_string_pretty(&w.report).unwrap_or_default()
        );
    }
    Ok(drover::exit::OK)
}
