//! `drover serve` and `drover kill-server`.

use super::{Ctx, client_err, fail};
use drover::daemon::{Client, ServeError, ServeOptions, client, serve};
use drover::exit;
use drover::proto::args;
use drover::statedir::{StateDir, StateDirBuf};
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Detach: start the supervisor in the background and return once it answers.
    #[arg(long)]
    pub daemon: bool,
}

pub fn run(args: ServeArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let state_dir = ctx.state_dir_create()?;
    let socket = ctx.socket(&state_dir)?;
    if args.daemon {
        // Running means answering: right after a `kill -9` the dead
        // supervisor's socket file (and for a moment its listening socket)
        // is still there.
        let live = client::liveness(&socket, client::PING_TIMEOUT);
        if live != client::Liveness::Silent {
            let pid = match live {
                client::Liveness::Answers { pid } => pid,
                _ => None,
            };
            return Err(fail(
                exit::ERROR,
                format!(
                    "a supervisor is already running for {}{}; stop it with `drover kill-server`",
                    state_dir.display(),
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                ),
            ));
        }
        let exe = std::env::current_exe()?;
        let child =
            client::start_daemon_verbose(&exe, &state_dir, ctx.verbose).map_err(client_err)?;
        let mut c = client::wait_started(child, &state_dir, &socket, client::START_TIMEOUT)
            .map_err(client_err)?;
        let pong = c.call(args::Ping {}).map_err(client_err)?;
        ctx.said(format!(
            "supervisor running (pid {}) for {}",
            pong.pid,
            state_dir.display()
        ));
        return Ok(exit::OK);
    }
    // Lifecycle events (panes created, exited, killed; clients refused;
    // restarts) are logged at info by default.
    let log_filter = match ctx.verbose {
        0 | 1 => "info",
        2 => "debug",
        _ => "trace",
    };
    reconcile_lanes_once_serving(&state_dir, &socket);
    let opts = ServeOptions {
        state_dir: state_dir.into_path_buf(),
        socket,
        log_filter: format!("drover={log_filter},warn"),
    };
    match serve(opts) {
        Ok(()) => Ok(exit::OK),
        Err(e @ ServeError::AlreadyRunning { .. }) => Err(fail(exit::ERROR, e.to_string())),
        Err(e) => Err(fail(exit::ERROR, e.to_string())),
    }
}

/// Once this supervisor answers on its socket, reconcile the recorded lanes
/// (after a crash or a reboot the panes are gone; see `docs/lanes.md`). A
/// thread of this process, so it ends with it; a supervisor that is another
/// process (this one failed to start) is left alone.
fn reconcile_lanes_once_serving(state_dir: &StateDir, socket: &std::path::Path) {
    if !state_dir.lanes_file().exists() {
        return;
    }
    let (state_dir, socket) = (state_dir.to_buf(), socket.to_path_buf());
    std::thread::spawn(move || {
        let Ok(mut c) =
            drover::daemon::client::wait_for_socket(&socket, drover::daemon::client::START_TIMEOUT)
        else {
            return;
        };
        let ours = c.call(args::Ping {}).ok().map(|v| v.pid) == Some(std::process::id());
        if ours {
            drover::lane::reconcile::at_start(&state_dir, &mut c);
        }
    });
}

/// How long `kill-server` waits for the supervisor to finish stopping panes.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Stop the supervisor. None running is an idempotent repeat (exit 0), and
/// nothing is created.
pub fn kill_server(ctx: &Ctx) -> anyhow::Result<u8> {
    let not_running = |dir: &std::path::Path| {
        eprintln!("drover: no supervisor running for {}", dir.display());
        Ok(exit::OK)
    };
    let state_dir = match drover::paths::existing_state_dir(Some(ctx.state_dir_located()?)) {
        Ok(d) => StateDirBuf::from(d),
        Err(drover::paths::PathError::Missing { path }) => return not_running(&path),
        Err(e) => return Err(fail(exit::ERROR, e.to_string())),
    };
    let socket = ctx.socket(&state_dir)?;
    let Ok(mut c) = Client::connect(&socket) else {
        return not_running(&state_dir);
    };
    let pid = c.call(args::Ping {}).ok().map(|v| v.pid);
    c.call(args::Shutdown {}).map_err(client_err)?;
    match client::wait_stopped(&state_dir, STOP_TIMEOUT) {
        Ok(true) => {
            ctx.said(format!(
                "stopped the supervisor{} for {}",
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                state_dir.display()
            ));
            Ok(exit::OK)
        }
        Ok(false) => Err(fail(
            exit::TRANSPORT,
            "the supervisor did not stop within 15 s",
        )),
        Err(e) => Err(fail(exit::ERROR, e.to_string())),
    }
}
