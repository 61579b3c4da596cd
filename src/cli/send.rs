//! `drover send`: deliver a prompt to an agent and confirm it was taken.

use super::{Ctx, client_err};
use drover::exit;
use serde_json::json;

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
        .call(
            "deliver",
            json!({
                "pane": a.pane,
                "text": text,
                "ready_timeout_ms": a.ready_timeout_ms,
                "confirm_timeout_ms": a.confirm_timeout_ms,
                "nonce": a.nonce,
            }),
        )
        .map_err(client_err)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        ctx.said(format!(
            "delivered to {} (attempts {}, now {}, nonce {})",
            a.pane,
            v["attempts"],
            v["state"].as_str().unwrap_or("?"),
            v["nonce"].as_str().unwrap_or("?")
        ));
    }
    Ok(exit::OK)
}
