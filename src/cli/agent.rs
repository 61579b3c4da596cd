//! Placeholder: filled in by its issue.

use super::Ctx;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum Commands {
    #[command(hide = true, name = "__agent_placeholder")]
    Placeholder,
}

pub fn run(cmd: Commands, _ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        Commands::Placeholder => Ok(0),
    }
}
