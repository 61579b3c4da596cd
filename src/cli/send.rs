//! `drover send`: deliver a prompt to an agent and confirm it was taken.

use super::{Ctx, client_err};
use drover::exit;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The agent's pane.
    pub pane: String,
    /// The prompt.
    pub text: String,
    /// How long to wait for the agent to be ready.
    #[arg(long, default_value_t = 60_000)]
    pub ready_timeout_ms: u64,
    /// How long the agent has to show it started working.
    #[arg(long, default_value_t = 10_000)]
    pub confirm_timeout_ms: u64,
    /// A nonce to record with the delivery (default: a new one).
    #[arg(long)]
    pub nonce: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: SendArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let mut c = ctx.client()?;
    let v = c
        .call(
            "deliver",
            json!({
                "pane": a.pane,
                "text": a.text,
                "ready_timeout_ms": a.ready_timeout_ms,
                "confirm_timeout_ms": a.confirm_timeout_ms,
                "nonce": a.nonce,
            }),
        )
        .map_err(client_err)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "delivered to {} (attempts {}, now {}, nonce {})",
            a.pane,
            v["attempts"],
            v["state"].as_str().unwrap_or("?"),
            v["nonce"].as_str().unwrap_or("?")
        );
    }
    Ok(exit::OK)
}
