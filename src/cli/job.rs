//! `drover job …`: requests to the transition engine and reads of jobs.
//!
//! Inside a lane (`DROVER_LANE_ID` set) every request is made with agent
//! authority on behalf of that lane: the engine then lets it touch only the job
//! whose `lane_id` is this lane (set when the lane claimed it), and a claim must
//! name the lane's session (`DROVER_SESSION_ID`, also `--session`'s default).

use super::{Ctx, fail};
use clap::{Args, Subcommand, ValueEnum};
use drover::engine::{
    Action, Actor, Applied, AuditEntry, Authority, Engine, EngineError, JobRecord, Lane, Request,
    Status,
};
use drover::exit;
use serde_json::{Map, Value};

#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Jobs and their status transitions: one compare-and-swap writer.
    Job {
        #[command(subcommand)]
        cmd: JobCmd,
    },
}

/// Preconditions and authority, accepted by every request.
#[derive(Debug, Args)]
pub struct Common {
    /// Refuse unless the job's attempt is A (refused when the job has no attempt).
    #[arg(long, value_name = "A")]
    expected_attempt: Option<String>,
    /// Refuse unless the job's status is S.
    #[arg(long, value_name = "S", value_parser = parse_status)]
    expected_status: Option<Status>,
    /// Authority to act with (outside a lane; inside one only `agent` is accepted).
    #[arg(long = "as", value_enum, value_name = "WHO")]
    authority: Option<AsArg>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AsArg {
    Agent,
    Operator,
}

#[derive(Debug, Subcommand)]
pub enum JobCmd {
    /// Create a pending job.
    #[command(after_help = "Example:\n  drover job create T-1 --deadline 2026-12-31T00:00:00Z")]
    Create {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// After this RFC 3339 time `timeout` may end the job.
        #[arg(long, value_name = "RFC3339")]
        deadline: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Claim a pending job for a session; prints the new attempt id.
    #[command(after_help = "Example:\n  drover job claim T-1 --session implementer")]
    Claim {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Session the attempt belongs to (inside a lane: the lane's session).
        #[arg(long, value_name = "ID", env = drover::statedir::env::SESSION_ID)]
        session: String,
        #[command(flatten)]
        common: Common,
    },
    /// Report that the assigned session started the attempt.
    #[command(after_help = "Example:\n  drover job started T-1 --session implementer")]
    Started {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Session the attempt belongs to (inside a lane: the lane's session).
        #[arg(long, value_name = "ID", env = drover::statedir::env::SESSION_ID)]
        session: String,
        #[command(flatten)]
        common: Common,
    },
    /// Merge metadata into a running job (never `status`).
    #[command(after_help = "Example:\n  drover job progress T-1 --set step=tests")]
    Progress {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Metadata to merge, as strings; repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE", required = true, num_args = 1..)]
        set: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Complete a running job.
    #[command(
        after_help = "Example:\n  drover job complete T-1 --expected-attempt A --reason \"tests pass\""
    )]
    Complete {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Why (one line), stored in the record's `reason`.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Fail a running job.
    #[command(after_help = "Example:\n  drover job fail T-1 --reason \"build broke\"")]
    Fail {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Why (one line), stored in the record's `reason`.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Cancel a pending or running job (operator).
    #[command(after_help = "Example:\n  drover job cancel T-1 --reason \"superseded\"")]
    Cancel {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Why (one line), stored in the record's `reason`.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Time out a pending or running job whose deadline has passed (operator).
    #[command(after_help = "Example:\n  drover job timeout T-1")]
    Timeout {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        #[command(flatten)]
        common: Common,
    },
    /// Send a finished job back to pending for the next iteration (operator).
    #[command(after_help = "Example:\n  drover job redispatch T-1 --iteration 2")]
    Redispatch {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Must be the current iteration + 1.
        #[arg(long, value_name = "N")]
        iteration: u64,
        #[command(flatten)]
        common: Common,
    },
    /// Fail a pending or running job whose budget is exhausted (operator).
    #[command(after_help = "Example:\n  drover job finalize T-1")]
    Finalize {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        #[command(flatten)]
        common: Common,
    },
    /// Show one job.
    #[command(after_help = "Example:\n  drover job show T-1 --json")]
    Show {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Print one JSON document: the job record.
        #[arg(long)]
        json: bool,
    },
    /// List jobs.
    #[command(after_help = "Example:\n  drover job ls")]
    Ls {
        /// Print one JSON document (an array of job records).
        #[arg(long)]
        json: bool,
    },
    /// Show a job's audit entries (accepted, ACKed and refused requests).
    #[command(after_help = "Example:\n  drover job audit T-1")]
    Audit {
        /// Job id (letters, digits, '.', '_', '-').
        job: String,
        /// Print one JSON document (an array of audit entries).
        #[arg(long)]
        json: bool,
    },
}

fn parse_status(s: &str) -> Result<Status, String> {
    Status::parse("status", s).map_err(|e| e.to_string())
}

pub fn run(cmd: Commands, ctx: &Ctx) -> anyhow::Result<u8> {
    let Commands::Job { cmd } = cmd;
    let reads = matches!(
        cmd,
        JobCmd::Show { .. } | JobCmd::Ls { .. } | JobCmd::Audit { .. }
    );
    let state_dir = if reads {
        ctx.state_dir()?
    } else {
        ctx.state_dir_create()?
    };
    let engine = Engine::open(&state_dir).map_err(to_exit)?;
    let (job, action, common) = match cmd {
        JobCmd::Show { job, json } => {
            let r = engine.show(&job).map_err(to_exit)?;
            print_out(json, &r, || show_text(&r))?;
            return Ok(exit::OK);
        }
        JobCmd::Ls { json } => {
            let all = engine.list().map_err(to_exit)?;
            print_out(json, &all, || ls_text(&all))?;
            return Ok(exit::OK);
        }
        JobCmd::Audit { job, json } => {
            drover::engine::record::validate_job_id(&job).map_err(to_exit)?;
            let entries = engine.audit(Some(&job)).map_err(to_exit)?;
            print_out(json, &entries, || audit_text(&entries))?;
            return Ok(exit::OK);
        }
        JobCmd::Create {
            job,
            deadline,
            common,
        } => (job, Action::Create { deadline }, common),
        JobCmd::Claim {
            job,
            session,
            common,
        } => (job, Action::Claim { session }, common),
        JobCmd::Started {
            job,
            session,
            common,
        } => (job, Action::Started { session }, common),
        JobCmd::Progress { job, set, common } => (
            job,
            Action::Progress {
                set: parse_set(&set)?,
            },
            common,
        ),
        JobCmd::Complete {
            job,
            reason,
            common,
        } => (job, Action::Complete { reason }, common),
        JobCmd::Fail {
            job,
            reason,
            common,
        } => (job, Action::Fail { reason }, common),
        JobCmd::Cancel {
            job,
            reason,
            common,
        } => (job, Action::Cancel { reason }, common),
        JobCmd::Timeout { job, common } => (job, Action::Timeout, common),
        JobCmd::Redispatch {
            job,
            iteration,
            common,
        } => (job, Action::Redispatch { iteration }, common),
        JobCmd::Finalize { job, common } => (job, Action::Finalize, common),
    };
    let is_claim = matches!(action, Action::Claim { .. });
    let req = Request {
        job_id: job,
        action,
        expected_attempt: common.expected_attempt,
        expected_status: common.expected_status,
        actor: actor_from_env(common.authority),
    };
    match engine.transition(&req).map_err(to_exit)? {
        Applied::Accepted { record } if is_claim => {
            println!("{}", record.attempt_id.as_deref().unwrap_or_default());
        }
        Applied::Accepted { record } => println!(
            "{} {} seq {}",
            record.job_id, record.status, record.transition_seq
        ),
        Applied::Ack { record } => println!(
            "{} {} (already; nothing written)",
            record.job_id, record.status
        ),
    }
    Ok(exit::OK)
}

/// The caller's authority: `--as` (default operator) outside a lane; inside a
/// lane always agent for that lane (an explicit `--as operator` reaches the
/// engine and is refused there, with an audit entry).
fn actor_from_env(flag: Option<AsArg>) -> Actor {
    let var = |k| std::env::var(k).ok().filter(|v: &String| !v.is_empty());
    let lane = var(drover::statedir::env::LANE_ID).map(|lane_id| Lane {
        lane_id,
        session_id: var(drover::statedir::env::SESSION_ID),
    });
    let authority = match (flag, &lane) {
        (Some(AsArg::Agent), _) | (None, Some(_)) => Authority::Agent,
        (Some(AsArg::Operator), _) | (None, None) => Authority::Operator,
    };
    Actor { authority, lane }
}

fn parse_set(items: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut m = Map::new();
    for it in items {
        let Some((k, v)) = it.split_once('=') else {
            return Err(fail(
                exit::USAGE,
                format!("--set {it:?}: expected KEY=VALUE"),
            ));
        };
        m.insert(k.to_string(), Value::String(v.to_string()));
    }
    Ok(m)
}

/// Map an engine error to its exit code (refused 3, usage 2, else 1).
pub(super) fn to_exit(e: EngineError) -> anyhow::Error {
    let code = match &e {
        EngineError::Refused { .. } => exit::REFUSED,
        EngineError::Invalid { .. }
        | EngineError::UnknownRequest { .. }
        | EngineError::NotFound { .. } => exit::USAGE,
        _ => exit::ERROR,
    };
    fail(code, e.to_string())
}

fn print_out<T: serde::Serialize + ?Sized>(
    json: bool,
    value: &T,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if json {
        let s = serde_json::to_string_pretty(value)
            .map_err(|e| fail(exit::ERROR, format!("cannot serialise output: {e}")))?;
        println!("{s}");
    } else {
        print!("{}", text());
    }
    Ok(())
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("-")
}

fn show_text(r: &JobRecord) -> String {
    let meta = serde_json::to_string(&r.metadata).unwrap_or_default();
    format!(
        "job_id: {}\nstatus: {}\niteration: {}\nattempt_id: {}\nsession_id: {}\nlane_id: {}\n\
         deadline: {}\nreason: {}\nmetadata: {}\ncreated_at: {}\nupdated_at: {}\ntransition_seq: {}\n",
        r.job_id,
        r.status,
        r.iteration,
        opt(&r.attempt_id),
        opt(&r.session_id),
        opt(&r.lane_id),
        opt(&r.deadline),
        opt(&r.reason),
        meta,
        drover::time::format_millis(r.created_at),
        drover::time::format_millis(r.updated_at),
        r.transition_seq
    )
}

fn ls_text(all: &[JobRecord]) -> String {
    let mut s = format!(
        "{:<24} {:<10} {:>4} {:>6}  {:<20} {}\n",
        "JOB", "STATUS", "ITER", "SEQ", "SESSION", "UPDATED"
    );
    for r in all {
        s.push_str(&format!(
            "{:<24} {:<10} {:>4} {:>6}  {:<20} {}\n",
            r.job_id,
            r.status.as_str(),
            r.iteration,
            r.transition_seq,
            opt(&r.session_id),
            drover::time::format_millis(r.updated_at)
        ));
    }
    s
}

fn audit_text(entries: &[AuditEntry]) -> String {
    let mut s = String::new();
    for e in entries {
        let seq = e.seq.map_or("-".to_string(), |n| n.to_string());
        let from = e.from.map_or("none", Status::as_str);
        let to = e.to.map_or("-", Status::as_str);
        let outcome = match e.outcome {
            drover::engine::Outcome::Accepted => "accepted",
            drover::engine::Outcome::Ack => "ack",
            drover::engine::Outcome::Refused => "refused",
        };
        s.push_str(&format!(
            "{seq:>6} {} {:<10} {:<8} {from} -> {to} as {}",
            e.at,
            e.request.action.name(),
            outcome,
            e.request.actor.authority.as_str()
        ));
        if let Some(rule) = &e.rule {
            s.push_str(&format!(" rule {rule}: {}", opt(&e.reason)));
        }
        s.push('\n');
    }
    s
}
