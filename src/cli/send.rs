//! `drover send`: deliver a prompt to an agent and confirm it was taken.

use super::{Ctx, client_err};
use drover::exit;
use drover::proto::args;

#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The agent's pane.
    pub pane: String,
    /// The prompt (`-` reads stdin); or use --file.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub text: Option<String>,
    /// Read the prompt from FILE (`-` for stdin): argv cannot carry large prompts.
    #[arg(long, value_name = "FILE")]
    pub file: Option<std::path::PathBuf>,
    /// How long to wait for the agent to be ready.
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub ready_timeout_ms: u64,
    /// How long the agent has to show it started working.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub confirm_timeout_ms: u64,
    /// A nonce to record with the delivery (default: a new one).
    #[arg(long)]
    pub nonce: Option<String>,
    /// Print one JSON document: {pane, attempts, state, nonce, …}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: SendArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let text = super::pane::read_text(a.text.clone(), a.file.as_deref())?;
    let mut c = ctx.client()?;
    let v = c
        .call(args::Deliver {
            pane: a.pane.clone(),
            text,
            ready_timeout_ms: Some(a.ready_timeout_ms),
            confirm_timeout_ms: Some(a.confirm_timeout_ms),
            nonce: a.nonce.clone(),
        })
        .map_err(client_err)?;
    if a.json {
        // As a JSON value: its keys in the order they always had (sorted).
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&v)?)?
        );
    } else {
        ctx.said(format!(
            "delivered to {} (attempts {}, now {}, nonce {})",
            a.pane, v.attempts, v.state, v.nonce
        ));
    }
    Ok(exit::OK)
}
