//! `drover mix` and `drover mix record`: the Claude:Codex work-unit balance
//! over [`drover::registry::mix`].

use super::fail;
use super::registry::{AgentArg, json_line, map, out};
use chrono::Utc;
use clap::{Args, Subcommand};
use drover::exit;
use drover::registry::{self, mix, view};
use drover::statedir::StateDir;

#[derive(Debug, Args)]
pub struct MixArgs {
    #[command(subcommand)]
    pub(super) cmd: Option<MixCmd>,
    /// Print one JSON document: the balance and each session's next agent.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum MixCmd {
    /// Add WU spent by an agent on a task to the rolling ledger.
    #[command(after_help = "Example:\n  drover mix record --task T-1 --agent claude --wu 3")]
    Record {
        /// The task the work was for.
        #[arg(long)]
        task: String,
        /// The agent that did it.
        #[arg(long, value_enum)]
        agent: AgentArg,
        /// Work units spent.
        #[arg(long)]
        wu: u32,
        /// Also count it on this session's lane.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Print one JSON document: the balance.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: MixArgs, state: &StateDir, now: chrono::DateTime<Utc>) -> anyhow::Result<u8> {
    let (report, json) = match a.cmd {
        Some(MixCmd::Record {
            task,
            agent,
            wu,
            session,
            json,
        }) => {
            let req = mix::RecordRequest {
                task,
                agent: agent.into(),
                wu,
                session,
            };
            (mix::record(state, &req, now).map_err(map)?, json || a.json)
        }
        None => {
            let reg = registry::load(state).map_err(map)?;
            let policy = reg.as_ref().map(|r| r.agent_mix.clone());
            let ledger = mix::load(state)
                .map_err(map)?
                .unwrap_or_else(|| mix::MixLedger::new(policy.clone().unwrap_or_default()));
            let policy = policy.unwrap_or_else(|| ledger.policy.clone());
            let entries = mix::window(&ledger.ledger, policy.window.size);
            (mix::report(&policy, &entries, None), a.json)
        }
    };
    let reg = registry::load(state).map_err(map)?;
    if json {
        let sessions: Vec<serde_json::Value> = reg
            .iter()
            .flat_map(|r| &r.sessions)
            .map(|s| {
                let spent = mix::Spent {
                    claude: s.lanes.claude.wu_spent_rolling,
                    codex: s.lanes.codex.wu_spent_rolling,
                };
                serde_json::json!({
                    "session_id": s.session_id,
                    "spent": spent,
                    "next_agent": mix::next_agent(report.target, report.skew_wu, Some(spent)),
                })
            })
            .collect();
        let mut v = serde_json::to_value(&report).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        v["sessions"] = serde_json::Value::Array(sessions);
        json_line(&v)?;
    } else {
        out(&view::mix(&report, reg.as_ref()));
    }
    Ok(exit::OK)
}
