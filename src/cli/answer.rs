//! `drover approve|deny PANE` and `drover answer PANE N|LABEL`: act on the
//! dialog a pane is blocked on and confirm the pane left it (docs/agents.md
//! "Answering dialogs"). Exit 3 when there is no dialog the action fits.

use super::{Ctx, client_err};
use drover::exit;
use drover::proto::args::{AnswerAction, PaneAnswer};

#[derive(Debug, clap::Subcommand)]
pub enum Commands {
    /// Approve the permission dialog a pane is blocked on (confirmed; exit 3 if none).
    #[command(after_help = "Example:\n  drover approve implementer-claude")]
    Approve(Target),
    /// Deny the permission dialog a pane is blocked on (confirmed; exit 3 if none).
    #[command(after_help = "Example:\n  drover deny reviewer-codex --json")]
    Deny(Target),
    /// Pick an option of the dialog a pane is blocked on, by number or label.
    #[command(
        after_help = "Example:\n  drover answer implementer-claude 'Stop and wait for limit to reset'"
    )]
    Answer(AnswerArgs),
}

#[derive(Debug, clap::Args)]
pub struct Target {
    /// The agent's pane.
    pub pane: String,
    /// Print one JSON document: the dialog, keys sent, attempts and the state after.
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
    /// Print one JSON document: the dialog, keys sent, attempts and the state after.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: Commands, ctx: &Ctx) -> anyhow::Result<u8> {
    let (pane, args, json_out) = match cmd {
        Commands::Approve(t) => (
            t.pane.clone(),
            PaneAnswer {
                pane: t.pane,
                action: AnswerAction::Approve,
                choice: None,
            },
            t.json,
        ),
        Commands::Deny(t) => (
            t.pane.clone(),
            PaneAnswer {
                pane: t.pane,
                action: AnswerAction::Deny,
                choice: None,
            },
            t.json,
        ),
        Commands::Answer(a) => (
            a.pane.clone(),
            PaneAnswer {
                pane: a.pane,
                action: AnswerAction::Answer,
                choice: Some(a.choice),
            },
            a.json,
        ),
    };
    let mut c = ctx.client()?;
    let v = c.call(args).map_err(client_err)?;
    if json_out {
        // As a JSON value: its keys in the order they always had (sorted).
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&v)?)?
        );
    } else {
        println!(
            "{pane}: answered the {} dialog (keys {}, attempts {}); now {}",
            v.dialog,
            v.keys.join(" "),
            v.attempts,
            v.state,
        );
    }
    Ok(exit::OK)
}
