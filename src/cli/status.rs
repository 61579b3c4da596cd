//! `drover status`: what an operator looks at first — the supervisor, every
//! pane with its agent state and since when, and every running job (every
//! job with `--all`) with the shadow policy's latest word on it.

use super::fmt::{ago_rfc3339, terminal_cols, wrap};
use super::{Ctx, client_err};
use drover::engine::{Engine, Status};
use drover::exit;
use drover::proto::args;
use drover::shadow::ShadowDecision;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Include finished jobs (completed, failed, cancelled, timed out).
    #[arg(long)]
    pub all: bool,
    /// Print each reason in full on one line instead of wrapping it to the terminal.
    #[arg(long)]
    pub wide: bool,
    /// Print one JSON document: {supervisor, panes, jobs}.
    #[arg(long)]
    pub json: bool,
}

/// Where the reason column starts.
const REASON_COL: usize = 16 + 1 + 10 + 1 + 14 + 1 + 18 + 1 + 9 + 1;

pub fn run(a: StatusArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let mut c = ctx.client()?;
    let state_dir = ctx.state_dir()?;
    let ping = c.call(args::Ping {}).map_err(client_err)?;
    let panes = c.call(args::PaneLs {}).map_err(client_err)?;
    let jobs = jobs(&state_dir, a.all);
    if a.json {
        let doc = json!({
            "supervisor": {"pid": ping.pid, "version": ping.version, "state_dir": state_dir},
            "panes": panes,
            "jobs": jobs,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    println!(
        "supervisor pid {} · state dir {} · {} panes · {} {}jobs",
        ping.pid,
        state_dir.display(),
        panes.len(),
        jobs.len(),
        if a.all { "" } else { "running " }
    );
    println!();
    super::pane::print_table(&panes);
    if jobs.is_empty() {
        return Ok(exit::OK);
    }
    println!();
    println!(
        "{:<16} {:<10} {:<14} {:<18} {:<9} REASON",
        "JOB", "STATUS", "SESSION", "DECISION", "DECIDED"
    );
    // Wrapped to the terminal; in full on one line with --wide or into a pipe.
    let width = terminal_cols().map(|c| c.saturating_sub(REASON_COL));
    for j in &jobs {
        let reason = j.reason.as_deref().unwrap_or("-");
        let lines = match width {
            Some(w) if !a.wide => wrap(reason, w),
            _ => vec![reason.to_string()],
        };
        println!(
            "{:<16} {:<10} {:<14} {:<18} {:<9} {}",
            j.job_id,
            j.status.as_str(),
            j.session_id.as_deref().unwrap_or("-"),
            j.decision.as_deref().unwrap_or("(none yet)"),
            j.decided_at.as_deref().map_or("-".into(), ago_rfc3339),
            lines.first().map(String::as_str).unwrap_or_default()
        );
        for l in lines.iter().skip(1) {
            println!("{:REASON_COL$}{l}", "");
        }
    }
    Ok(exit::OK)
}

/// One job as `status` shows it: its record and the shadow policy's newest
/// word on its attempt. Its fields in the order `--json` has always
/// printed them (by name).
#[derive(Debug, Clone, PartialEq, Serialize)]
struct JobRow {
    attempt_id: Option<String>,
    decided_at: Option<String>,
    decision: Option<String>,
    job_id: String,
    reason: Option<String>,
    session_id: Option<String>,
    status: Status,
    updated_at: String,
}

/// Jobs (running ones unless `all`) with their newest shadow decision for
/// the current attempt.
fn jobs(state_dir: &std::path::Path, all: bool) -> Vec<JobRow> {
    if !drover::statedir::StateDir::new(state_dir)
        .jobs_dir()
        .is_dir()
    {
        return Vec::new();
    }
    let Ok(engine) = Engine::open(drover::statedir::StateDir::new(state_dir)) else {
        return Vec::new();
    };
    let records = engine.list().unwrap_or_default();
    let decisions = drover::store::read_jsonl::<ShadowDecision>(
        &drover::statedir::StateDir::new(state_dir).decisions_log(),
    )
    .map(|r| r.records)
    .unwrap_or_default();
    let mut latest: BTreeMap<(String, String), &ShadowDecision> = BTreeMap::new();
    for d in &decisions {
        latest.insert((d.job_id.clone(), d.attempt_id.clone()), d);
    }
    records
        .into_iter()
        .filter(|r| all || r.status == Status::Running)
        .map(|r| {
            let d = r
                .attempt_id
                .as_ref()
                .and_then(|a| latest.get(&(r.job_id.clone(), a.clone())));
            JobRow {
                updated_at: drover::time::format_millis(r.updated_at),
                decision: d.map(|d| d.decision.clone()),
                reason: d.map(|d| d.reason.clone()).or(r.reason.clone()),
                decided_at: d.map(|d| d.at.clone()),
                job_id: r.job_id,
                status: r.status,
                session_id: r.session_id,
                attempt_id: r.attempt_id,
            }
        })
        .collect()
}
