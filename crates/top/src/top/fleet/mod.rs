//! `drover top --fleet FLEET`: every joined host's panes, a HOST column
//! first, built from the fleet's event stream and its presence bucket
//! (docs/fleet.md). The same shape as `top`: a feed ([`feed`]) folded into
//! a model, a view built from it by a pure function ([`model`]), drawn by a
//! pure function ([`render`]), keys a pure function too ([`ui`]); only
//! [`run`] touches the terminal. It watches only: acting on a remote pane
//! (attach, approve, send) is done by `drover top` on its host. The loop's
//! runs of this host's state dir show above the hosts, as in `top` (a fleet
//! run on its coordinator), with the same run keys.

pub mod bounds;
pub mod feed;
pub mod model;
pub mod render;
pub mod ui;

use super::app::{Ready, Screen, TopError, ancestors, read_keys};
use crate::fleet::{FleetConfig, Handed};
use feed::{FleetFeed, Msg};
use model::{BuildArgs, FleetModel, FleetView, build};
use ui::{FleetCommand, FleetUi};

/// Run the fleet dashboard until `q`, Ctrl-C, SIGTERM/SIGHUP or the fleet's
/// event stream ends. Reaching the fleet fails before the screen is taken.
///
/// `state_dir`: this host's state dir, whose loop runs show (none: no
/// runs); `actions` set a control on one of them.
pub fn run(
    cfg: &FleetConfig,
    handed: &Handed,
    state_dir: Option<&crate::statedir::StateDir>,
    actions: &mut dyn crate::top::Actions,
) -> Result<(), TopError> {
    let (mut feed, hosts) = FleetFeed::open(cfg, handed)?;
    let mut model = FleetModel::default();
    model.set_present(hosts);
    let mut ui = FleetUi::default();
    let ancestors = ancestors();
    let mut warning: Option<String> = None;
    let mut runs = crate::top::runs::RunsReader::default();
    if let Some(dir) = state_dir {
        runs.update(dir);
    }
    let view_of = |model: &FleetModel,
                   ui: &FleetUi,
                   warning: &Option<String>,
                   runs: &crate::top::runs::RunsReader|
     -> FleetView {
        let mut v = build(
            model,
            &BuildArgs {
                fleet: &cfg.fleet,
                this_host: &cfg.host,
                ancestors: &ancestors,
                seen: &ui.seen,
                now_ms: crate::paths::now_ms(),
            },
        );
        v.warning = warning.clone().or_else(|| runs.warning.clone());
        (v.runs, v.older_runs) = crate::top::runs::shown(&runs.runs());
        v
    };
    let mut screen = Screen::open()?;
    let mut view = view_of(&model, &ui, &warning, &runs);
    let mut redraw = true;
    loop {
        if std::mem::take(&mut redraw) {
            screen.term.draw(|f| render::render(f, &view, &ui))?;
        }
        let Ready {
            tty,
            feed: ev,
            signal,
        } = screen.wait_for(
            feed.fd(),
            runs.any_live().then_some(crate::top::app::RUN_LOOK),
        )?;
        if screen.quitting() {
            return Ok(());
        }
        let mut dirty = false;
        // A live run changes without a fleet event: look at its files.
        if let Some(dir) = state_dir
            && runs.update(dir)
        {
            dirty = true;
        }
        if signal {
            screen.on_signal()?;
            redraw = true;
        }
        if ev {
            for msg in feed.drain() {
                match msg {
                    Msg::Event(e) => model.apply(&e),
                    Msg::Hosts(Ok(h)) => {
                        model.set_present(h);
                        warning = None;
                    }
                    Msg::Hosts(Err(e)) => warning = Some(format!("hosts: {e}")),
                    Msg::Ended(e) => return Err(TopError::Fleet(e)),
                }
                dirty = true;
            }
        }
        if tty {
            let Some(keys) = read_keys()? else {
                return Ok(());
            };
            for key in keys {
                match ui.on_key(&view, key) {
                    FleetCommand::Quit => return Ok(()),
                    FleetCommand::Redraw => {}
                    FleetCommand::Control(run, c) => {
                        ui.message = Some(format!("{} of loop{run}…", c.as_str()));
                        screen.term.draw(|f| render::render(f, &view, &ui))?;
                        ui.message = Some(match actions.control(run, c) {
                            Ok(m) | Err(m) => m,
                        });
                        if let Some(dir) = state_dir {
                            runs.update(dir);
                        }
                    }
                }
                dirty = true;
            }
        }
        if dirty {
            view = view_of(&model, &ui, &warning, &runs);
            redraw = true;
        }
    }
}
