//! `drover wait`: a barrier over panes' agent states.

use super::{Ctx, client_err, fail};
use drover::agent::Until;
use drover::exit;
use drover::proto::{Snapshot, args};

/// States and kinds, listed in `drover wait --help`.
pub const AFTER_HELP: &str = "\
States: starting, idle, working, blocked, done, exited, unknown; a blocked
state may name its kind: blocked:permission, blocked:question, blocked:setup,
blocked:usage_limit (see docs/agents.md).

Matched: exit 0 and one JSON snapshot per pane per line (--json: one array).
Timeout: exit 4, empty stdout, the last states on stderr. Pane gone or no
supervisor: exit 5.

Example:
  drover pane send work 'make test'
  drover wait work --fresh --until idle --timeout-ms 600000";

#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// Panes to wait on.
    #[arg(required = true)]
    pub panes: Vec<String>,
    /// States to wait for, comma-separated (e.g. idle,done or blocked:permission).
    #[arg(long, required = true, value_delimiter = ',', value_name = "STATE,…", value_parser = super::values::UntilParser)]
    pub until: Vec<String>,
    /// Give up after this many milliseconds (exit 4, empty stdout).
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub timeout_ms: u64,
    /// Every pane must match (the default).
    #[arg(long, conflicts_with = "any")]
    pub all: bool,
    /// One matching pane is enough.
    #[arg(long)]
    pub any: bool,
    /// Count only observations made after this call began (use after `send`).
    #[arg(long)]
    pub fresh: bool,
    /// Print one JSON document (an array of snapshots).
    #[arg(long, conflicts_with = "jsonl")]
    pub json: bool,
    /// Print one JSON snapshot per line (the default).
    #[arg(long)]
    pub jsonl: bool,
}

pub fn run(a: WaitArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    // A target that can never match was refused by clap (values::UntilParser),
    // a usage error, not a wait that times out.
    let mut c = ctx.client()?;
    let until = a
        .until
        .iter()
        .map(|u| u.parse::<Until>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(exit::USAGE, e.to_string()))?;
    let v = c
        .call(args::Wait {
            panes: a.panes.clone(),
            until,
            timeout_ms: Some(a.timeout_ms),
            mode: if a.any {
                args::WaitMode::Any
            } else {
                args::WaitMode::All
            },
            fresh: a.fresh,
        })
        .map_err(client_err)?;
    if v.timed_out {
        let states: Vec<String> = v.snapshots.iter().map(|s| describe(&s.snapshot)).collect();
        return Err(fail(
            exit::TIMEOUT,
            format!(
                "timed out after {} ms waiting for {}; last states: {}",
                a.timeout_ms,
                a.until.join(","),
                states.join(", ")
            ),
        ));
    }
    // As JSON values: their keys in the order they always had (sorted).
    let snaps = serde_json::to_value(&v.snapshots)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&snaps)?);
    } else {
        for s in snaps.as_array().into_iter().flatten() {
            println!("{}", serde_json::to_string(s)?);
        }
    }
    Ok(exit::OK)
}

fn describe(s: &Snapshot) -> String {
    let mut out = format!("{}={}", s.pane, s.state);
    if let Some(k) = s.kind {
        out.push_str(&format!(":{k}"));
    }
    out
}
