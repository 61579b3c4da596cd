//! `drover approve|deny PANE` and `drover answer PANE N|LABEL`: act on the
//! dialog a pane is blocked on and confirm the pane left it (docs/agents.md
//! "Answering dialogs"). Exit 3 when there is no dialog the action fits.

use super::{Ctx, client_err};
use drover::exit;
use serde_json::{Value, json};

#[derive(Debug, clap::Subcommand)]
pub enum Commands {
    /// Approve the permission dialog a pane is blocked on (confirmed; exit 3 if none).
    Approve(Target),
    /// Deny the permission dialog a pane is blocked on (confirmed; exit 3 if none).
    Deny(Target),
    /// Pick an option of the dialog a pane is blocked on, by number or label.
    Answer(AnswerArgs),
}

#[derive(Debug, clap::Args)]
pub struct Target {
    /// The agent's pane.
    pub pane: String,
    /// Print the answer as JSON (dialog, keys sent, attempts, state).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The agent's pane.
    pub pane: String,
    /// The option: its number, or its label (case-insensitive; a unique prefix is
    /// enough). The usage-limit menu takes labels only: its rows change order.
    pub choice: String,
    /// Print the answer as JSON (dialog, keys sent, attempts, state).
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: Commands, ctx: &Ctx) -> anyhow::Result<u8> {
    let (pane, args, json_out) = match cmd {
        Commands::Approve(t) => (
            t.pane.clone(),
            json!({"pane": t.pane, "action": "approve"}),
            t.json,
        ),
        Commands::Deny(t) => (
            t.pane.clone(),
            json!({"pane": t.pane, "action": "deny"}),
            t.json,
        ),
        Commands::Answer(a) => (
            a.pane.clone(),
            json!({"pane": a.pane, "action": "answer", "choice": a.choice}),
            a.json,
        ),
    };
    let mut c = ctx.client()?;
    let v: Value = c.call("pane.answer", args).map_err(client_err)?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{pane}: answered the {} dialog (keys {}, attempts {}); now {}",
            v["dialog"].as_str().unwrap_or("?"),
            v["keys"]
                .as_array()
                .map(|k| k
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "))
                .unwrap_or_default(),
            v["attempts"],
            v["state"].as_str().unwrap_or("?"),
        );
    }
    Ok(exit::OK)
}
