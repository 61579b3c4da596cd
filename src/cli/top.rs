//! `drover top`: the live dashboard; `--fleet`: every joined host's panes.

use super::{Ctx, fail};
use drover::exit;
use drover::top::{CliActions, TopError, TopOptions};

#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Every host of this fleet (joined with `fleet join`): their panes with a HOST column, from the fleet's event stream; view only (docs/fleet.md).
    #[arg(long, value_name = "FLEET")]
    fleet: Option<String>,
}

fn top_err(e: TopError) -> anyhow::Error {
    match e {
        TopError::Client(e) => super::client_err(e),
        e @ TopError::SupervisorGone => fail(exit::TRANSPORT, e.to_string()),
        TopError::Fleet(e) => fail(e.exit_code(), e.to_string()),
        e => fail(exit::ERROR, e.to_string()),
    }
}

fn need_terminal() -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(fail(
            exit::USAGE,
            "top needs a terminal; for scripts use `drover status --json` or `drover events --follow`",
        ));
    }
    Ok(())
}

/// The keys' actions: this drover binary's own commands.
fn cli_actions(ctx: &Ctx, state_dir: &drover::statedir::StateDir) -> anyhow::Result<CliActions> {
    let exe = std::env::current_exe()
        .map_err(|e| fail(exit::ERROR, format!("cannot find the drover binary: {e}")))?;
    Ok(CliActions {
        exe,
        state_dir: state_dir.to_path_buf(),
        socket: ctx.socket(state_dir)?,
    })
}

/// No state dir: no run to act on.
struct NoActions;

impl drover::top::Actions for NoActions {
    fn attach(&mut self, _: &str) -> Result<(), String> {
        Err("no state dir here".into())
    }
    fn act(&mut self, _: drover::top::ui::Verb, _: &str) -> Result<String, String> {
        Err("no state dir here".into())
    }
    fn send(&mut self, _: &str, _: &str) -> Result<String, String> {
        Err("no state dir here".into())
    }
    fn control(
        &mut self,
        run: u32,
        _: drover::loopctl::night::control::Control,
    ) -> Result<String, String> {
        Err(format!("loop{run}: no state dir here"))
    }
}

pub fn run(a: TopArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    if let Some(fleet) = &a.fleet {
        // The fleet is checked first: a wrong name is refused anywhere.
        let cfg = super::fleet::joined_as(ctx, fleet)?;
        need_terminal()?;
        let handed = drover::fleet::Handed::from_env(&cfg);
        // This host's loop runs (a fleet run shows on its coordinator).
        let state_dir = ctx.state_dir().ok();
        let mut actions = state_dir
            .as_deref()
            .and_then(|dir| cli_actions(ctx, dir).ok());
        let mut none = NoActions;
        let actions: &mut dyn drover::top::Actions = match &mut actions {
            Some(a) => a,
            None => &mut none,
        };
        return drover::top::fleet::run(&cfg, &handed, state_dir.as_deref(), actions)
            .map(|()| exit::OK)
            .map_err(top_err);
    }
    need_terminal()?;
    let state_dir = ctx.state_dir()?;
    let socket = ctx.socket(&state_dir)?;
    // Start the supervisor as any command does (unless --no-autostart).
    drop(ctx.client()?);
    let mut actions = cli_actions(ctx, &state_dir)?;
    let state_dir = state_dir.into_path_buf();
    drover::top::run(TopOptions { state_dir, socket }, &mut actions)
        .map(|()| exit::OK)
        .map_err(top_err)
}
