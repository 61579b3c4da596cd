//! `drover lane {up,ls,down,reconcile,gc}`: the CLI over [`drover::lane`].

use super::{Ctx, fail};
use drover::exit;
use drover::lane::{self, LaneError};
use drover::registry::{Agent, Topology};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum LaneCmd {
    /// Create lanes: a worktree and an agent pane per (session, agent).
    #[command(
        after_help = "Starts the supervisor when none is running.\n\nExample:\n  drover lane up --topology four-role --repo . --sim"
    )]
    Up(UpArgs),
    /// List lanes: pane, agent state, job, lease, heartbeat, worktree, ahead/behind.
    #[command(after_help = "Example:\n  drover lane ls --json")]
    Ls {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Stop lanes; remove each worktree and branch only when nothing can be lost.
    #[command(
        after_help = "Example:\n  drover lane down implementer-claude reviewer-codex\n  drover lane down --all"
    )]
    Down {
        /// Lanes to take down (`<session>-<agent>`, see `drover lane ls`).
        #[arg(
            value_name = "LANE",
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        lanes: Vec<String>,
        /// Take every lane down.
        #[arg(long)]
        all: bool,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Compare recorded lanes with panes, processes and worktrees; repair what is safe.
    #[command(
        after_help = "Starts the supervisor when none is running (it reconciles at start too); --dry-run starts nothing and changes nothing.\n\nExample:\n  drover lane reconcile --dry-run"
    )]
    Reconcile {
        /// Print the differences and planned repairs; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Remove worktrees and drover/* branches no lane owns, when clean and merged.
    #[command(after_help = "Example:\n  drover lane gc --dry-run")]
    Gc {
        /// List what would be removed and why; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// The set of role sessions: four-role or expanded-eight.
    #[arg(long, value_name = "NAME")]
    pub topology: String,
    /// The git repository lanes are cut from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// The commit lanes start from (default: the repository's default branch tip).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Agents per session, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "claude,codex")]
    pub agents: String,
    /// Only these sessions of the topology, comma-separated (default: all).
    #[arg(long, value_name = "ID,…")]
    pub sessions: Option<String>,
    /// Where panes run: native, tmux or herdr.
    #[arg(long, value_name = "NAME", default_value = "native", value_parser = super::values::backend())]
    pub backend: drover::pane::Backend,
    /// Run drover's simulated agent (no agent installed, no API keys).
    #[arg(long)]
    pub sim: bool,
    /// Set K=V in every lane's environment; `--env K` takes K's value from drover's own environment (repeatable).
    #[arg(long = "env", value_name = "K=V|K")]
    pub env: Vec<String>,
    /// Read K=V lines from FILE (mode 0600, yours) into every lane's environment (repeatable).
    #[arg(long = "env-file", value_name = "FILE")]
    pub env_file: Vec<PathBuf>,
    /// How long to wait for every agent to be ready, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub timeout_ms: u64,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

fn lane_err(e: LaneError) -> anyhow::Error {
    fail(e.exit_code(), e.to_string())
}

fn print_json<T: Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn parse_list(field: &str, s: &str) -> anyhow::Result<Vec<String>> {
    let v: Vec<String> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect();
    if v.is_empty() {
        return Err(fail(exit::USAGE, format!("{field}: name at least one")));
    }
    Ok(v)
}

pub fn run(cmd: LaneCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    let state_dir = match &cmd {
        LaneCmd::Up(_) | LaneCmd::Reconcile { .. } => ctx.state_dir_create()?,
        _ => ctx.state_dir()?,
    };
    match cmd {
        LaneCmd::Up(a) => up(a, ctx, &state_dir),
        LaneCmd::Ls { json } => {
            let mut client = ctx.client().ok();
            let rows = lane::ls::ls(&state_dir, client.as_mut()).map_err(lane_err)?;
            if json {
                print_json(&rows);
            } else {
                print_ls(&rows, client.is_some());
            }
            Ok(exit::OK)
        }
        LaneCmd::Down { lanes, all, json } => {
            // No supervisor running means no panes to stop: never start one
            // (it would reconcile the lanes back up first).
            let mut client = ctx.client().ok();
            let ids = (!all).then_some(lanes);
            let out =
                lane::down::down(&state_dir, client.as_mut(), ids.as_deref()).map_err(lane_err)?;
            if json {
                print_json(&out);
            } else if out.is_empty() {
                println!("no lanes");
            }
            for o in out.iter().filter(|_| !json) {
                match &o.kept {
                    None => ctx.said(format!("{}: down; worktree and branch removed", o.lane_id)),
                    Some(why) => ctx.said(format!(
                        "{}: down; worktree and branch kept: {why}",
                        o.lane_id
                    )),
                }
            }
            Ok(exit::OK)
        }
        LaneCmd::Reconcile { dry_run, json } => {
            let rows = if dry_run {
                // A dry run starts nothing: a new supervisor would reconcile.
                let mut client = ctx.client().ok();
                if client.is_none() && !json {
                    eprintln!(
                        "drover: no supervisor is running; a real reconcile starts one, \
                         which finds no lane's pane: what it would do is listed (nothing was started)"
                    );
                }
                lane::reconcile::dry_run(&state_dir, client.as_mut()).map_err(lane_err)?
            } else {
                let mut client = ctx.client_or_start()?;
                lane::reconcile::run(&state_dir, &mut client, false).map_err(lane_err)?
            };
            if json {
                print_json(&rows);
                return Ok(exit::OK);
            }
            if rows.is_empty() {
                println!("no lanes");
            }
            println!(
                "{:<34} {:<8} {:<16} {:<26} {:<10} ACTION",
                "LANE", "DESIRED", "PHASE", "PANE", "WORKTREE"
            );
            for r in &rows {
                let mut action = r.action.describe();
                if let Some(res) = r.result.as_ref().filter(|s| !s.is_empty()) {
                    action = format!("{action} → {res}");
                } else if dry_run && r.action.repairs() {
                    action = format!("would {action}");
                }
                println!(
                    "{:<34} {:<8} {:<16} {:<26} {:<10} {action}",
                    r.lane_id,
                    json_word(&r.desired),
                    json_word(&r.phase),
                    r.pane,
                    r.worktree,
                );
            }
            Ok(exit::OK)
        }
        LaneCmd::Gc { dry_run, json } => {
            let items = lane::gc::gc(&state_dir, dry_run).map_err(lane_err)?;
            if json {
                print_json(&items);
            } else if items.is_empty() {
                println!("nothing to collect");
            } else {
                for i in &items {
                    println!("{:<12} {:<8} {:<40} {}", i.action, i.kind, i.name, i.reason);
                }
            }
            Ok(exit::OK)
        }
    }
}

fn json_word<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn up(a: UpArgs, ctx: &Ctx, state_dir: &drover::statedir::StateDir) -> anyhow::Result<u8> {
    let topology = Topology::parse(&a.topology).ok_or_else(|| {
        fail(
            exit::USAGE,
            format!(
                "--topology {:?}: use four-role or expanded-eight",
                a.topology
            ),
        )
    })?;
    let agents = parse_list("--agents", &a.agents)?
        .iter()
        .map(|s| {
            Agent::parse(s).ok_or_else(|| {
                fail(
                    exit::USAGE,
                    format!("--agents: {s:?} is not claude or codex"),
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let sessions = a
        .sessions
        .as_deref()
        .map(|s| parse_list("--sessions", s))
        .transpose()?;
    let env = super::pane::env_args(&a.env, &a.env_file)?;
    let repo = match a.repo {
        Some(r) => r,
        None => std::env::current_dir()?,
    };
    let exe = std::env::current_exe()
        .map_err(|e| fail(exit::ERROR, format!("cannot find the drover binary: {e}")))?;
    let req = lane::up::UpRequest {
        topology,
        repo,
        base: a.base,
        agents,
        sessions,
        backend: a.backend,
        sim: a.sim,
        exe,
        env,
        socket: ctx.socket(state_dir)?,
        ready_timeout: Duration::from_millis(a.timeout_ms),
    };
    // Check git and the repository before starting a supervisor.
    drover::lane::git::check_installed().map_err(lane_err)?;
    drover::lane::git::toplevel(&req.repo).map_err(lane_err)?;
    let mut client = ctx.client_or_start()?;
    let report = lane::up::up(state_dir, &mut client, &req).map_err(lane_err)?;
    if a.json {
        print_json(&report);
        return Ok(exit::OK);
    }
    if report.main_checkout_changes > 0 {
        eprintln!(
            "note: {} has {} uncommitted path(s); lanes are cut from the base {} ({}), never from uncommitted files",
            report.repo.display(),
            report.main_checkout_changes,
            report.base_ref,
            short(&report.base_sha)
        );
    }
    match (&report.upstream, report.behind_upstream) {
        (Some(up), Some(n)) if n > 0 => eprintln!(
            "warning: base {} is {n} commit(s) behind {up}; drover fetches nothing: update {} first for a fresh base",
            report.base_ref, report.base_ref
        ),
        _ => {}
    }
    println!(
        "base {} at {} ({})",
        report.base_ref,
        short(&report.base_sha),
        match (&report.upstream, report.behind_upstream) {
            (Some(up), Some(n)) => format!("{n} behind {up}"),
            _ => "no upstream".into(),
        }
    );
    for r in &report.lanes {
        let what = if report.created.contains(&r.lane_id) {
            "created".to_string()
        } else if r.action.repairs() {
            r.action.describe()
        } else {
            "unchanged".into()
        };
        println!("{:<34} {what}", r.lane_id);
    }
    println!(
        "{} lane(s) ready, {} unchanged",
        report.lanes.len(),
        report.unchanged
    );
    Ok(exit::OK)
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

pub(super) fn print_ls(rows: &[lane::ls::LaneView], supervisor: bool) {
    if rows.is_empty() {
        println!("no lanes");
        return;
    }
    // Columns as wide as their longest value: a long lease or job never
    // shifts the columns after it.
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let state = match (&r.agent_state, supervisor) {
                (Some(s), _) => s.clone(),
                (None, true) => "no pane".into(),
                (None, false) => "no supervisor".into(),
            };
            let ab = match (r.ahead, r.behind) {
                (Some(a), Some(b)) => format!("+{a}/-{b}"),
                _ => "?".into(),
            };
            let mut phase = json_word(&r.phase);
            if let Some(reason) = &r.reason {
                phase = format!("{phase}: {reason}");
            }
            vec![
                r.lane_id.clone(),
                r.generation.to_string(),
                state,
                r.job.clone().unwrap_or_else(|| "-".into()),
                r.decision.clone().unwrap_or_else(|| "-".into()),
                r.lease.clone().unwrap_or_else(|| "-".into()),
                r.worktree_state.to_string(),
                ab,
                phase,
            ]
        })
        .collect();
    print!(
        "{}",
        drover::registry::view::table(
            &[
                "LANE", "GEN", "STATE", "JOB", "DECISION", "LEASE", "WORKTREE", "+/-", "PHASE"
            ],
            &table
        )
    );
}
