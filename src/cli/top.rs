//! `drover top`: the live dashboard.

use super::{Ctx, fail};
use drover::exit;
use drover::top::{CliActions, TopError, TopOptions};

#[derive(Debug, clap::Args)]
pub struct TopArgs {}

pub fn run(_a: TopArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(fail(
            exit::USAGE,
            "top needs a terminal; for scripts use `drover status --json` or `drover events --follow`",
        ));
    }
    let state_dir = ctx.state_dir()?;
    let socket = ctx.socket(&state_dir)?;
    // Start the supervisor as any command does (unless --no-autostart).
    drop(ctx.client()?);
    let exe = std::env::current_exe()
        .map_err(|e| fail(exit::ERROR, format!("cannot find the drover binary: {e}")))?;
    let mut actions = CliActions {
        exe,
        state_dir: state_dir.clone(),
        socket: socket.clone(),
    };
    match drover::top::run(TopOptions { state_dir, socket }, &mut actions) {
        Ok(()) => Ok(exit::OK),
        Err(TopError::Client(e)) => Err(super::client_err(e)),
        Err(e @ TopError::SupervisorGone) => Err(fail(exit::TRANSPORT, e.to_string())),
        Err(e) => Err(fail(exit::ERROR, e.to_string())),
    }
}
