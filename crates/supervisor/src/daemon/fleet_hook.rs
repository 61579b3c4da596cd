//! Where the supervisor meets the fleet (docs/fleet.md): a membership task
//! that runs only while the state dir holds a fleet config. A supervisor
//! that never joined creates no connection and loads no NATS state.

use super::protocol::{ErrorCode, Response};
use super::server::{Sup, lock};
use crate::fleet::{FleetConfig, FleetError, Handed, Member, config};
use crate::proto::args::FleetJoin;
use crate::proto::reply::{Joined, Left};
use crate::statedir::StateDir;
use std::sync::Arc;

fn lanes_fn(sup: &Arc<Sup>) -> crate::fleet::member::LanesFn {
    let weak = Arc::downgrade(sup);
    Arc::new(move || weak.upgrade().map_or(0, |s| lock(&s.panes).len()))
}

fn fleet_err(e: FleetError) -> Response {
    let code = match e.exit_code() {
        crate::exit::USAGE => ErrorCode::Usage,
        crate::exit::REFUSED => ErrorCode::Refused,
        crate::exit::TRANSPORT => ErrorCode::Unavailable,
        _ => ErrorCode::Internal,
    };
    Response::err(0, code, e.to_string())
}

/// At start: rejoin the fleet the state dir names, in the background.
pub(super) async fn start_if_joined(sup: &Arc<Sup>) {
    let dir = sup.state_dir().to_path_buf();
    let cfg = match tokio::task::spawn_blocking(move || config::load(StateDir::new(&dir))).await {
        Ok(Ok(Some(cfg))) => cfg,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "fleet config unreadable; not joining");
            return;
        }
        Err(_) => return,
    };
    tracing::info!(fleet = %cfg.fleet, host = %cfg.host, "rejoining the fleet");
    let handed = Handed::from_env(&cfg);
    let member = Member::rejoin(cfg, handed, lanes_fn(sup));
    forward_events(sup, &member);
    *lock(&sup.fleet) = Some(member);
}

/// Every event of this supervisor's feed from now on, into the fleet's
/// stream in order; a subscriber that fell behind sends a `missed` record,
/// as `events --follow` does. Ends when the membership stops.
fn forward_events(sup: &Arc<Sup>, member: &Member) {
    let mut sink = match member.events_sink() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "fleet events not forwarded");
            return;
        }
    };
    let mut live = sup.feed.subscribe(None).live;
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        let mut last = 0u64;
        loop {
            let line = tokio::select! {
                r = live.recv() => match r {
                    Ok(ev) => {
                        last = ev.seq;
                        ev.line.clone()
                    }
                    Err(RecvError::Lagged(n)) => super::feed::missed_line(last + 1, n),
                    Err(RecvError::Closed) => return,
                },
                () = sink.stopped() => return,
            };
            if !sink.send(&line).await {
                return;
            }
        }
    });
}

/// `fleet.join {config, password?, token?}`: connect, write the first
/// heartbeat, record the config, keep heartbeating. A member already running
/// (a rejoin, or the same fleet joined again) is replaced.
pub(super) async fn join(sup: &Arc<Sup>, args: FleetJoin) -> Result<Joined, Response> {
    let cfg: FleetConfig = args.config;
    let handed = Handed {
        password: args.password,
        token: args.token,
    };
    // `rejoin`: a member of this config that is connected stays as it is
    // (`fleet work` hands its secrets only to a supervisor not in the fleet).
    if args.rejoin
        && lock(&sup.fleet)
            .as_ref()
            .is_some_and(|m| m.cfg == cfg && m.is_linked())
    {
        return Ok(Joined {
            fleet: cfg.fleet,
            host: cfg.host,
            slots: cfg.slots,
            ttl_ms: None,
            already: true,
        });
    }
    let old = lock(&sup.fleet).take();
    if let Some(old) = old {
        if old.cfg.fleet != cfg.fleet {
            let fleet = old.cfg.fleet.clone();
            *lock(&sup.fleet) = Some(old);
            return Err(Response::err(
                0,
                ErrorCode::Refused,
                format!("this host is in fleet {fleet}; run `drover fleet leave` first"),
            ));
        }
        // Same fleet: a new host id leaves the old key behind at once.
        let leave = old.cfg.host != cfg.host;
        let _ = old.stop(leave).await;
    }
    let member = Member::join(cfg.clone(), handed, lanes_fn(sup))
        .await
        .map_err(fleet_err)?;
    let dir = sup.state_dir().to_path_buf();
    let saved = cfg.clone();
    let write =
        tokio::task::spawn_blocking(move || config::save(StateDir::new(&dir), &saved)).await;
    if let Ok(Err(e)) | Err(e) = write.map_err(|e| FleetError::bus("save", e)) {
        let _ = member.stop(true).await;
        return Err(fleet_err(e));
    }
    let ttl = member.ttl.map(|t| t.as_millis() as u64);
    forward_events(sup, &member);
    *lock(&sup.fleet) = Some(member);
    tracing::info!(fleet = %cfg.fleet, host = %cfg.host, "joined the fleet");
    Ok(Joined {
        fleet: cfg.fleet,
        host: cfg.host,
        slots: cfg.slots,
        ttl_ms: ttl,
        already: false,
    })
}

/// `fleet.leave`: stop heartbeating, remove this host's key, forget the
/// config. `left` is false when this supervisor was in no fleet.
pub(super) async fn leave(sup: &Arc<Sup>) -> Result<Left, Response> {
    let member = lock(&sup.fleet).take();
    let dir = sup.state_dir().to_path_buf();
    let removed = tokio::task::spawn_blocking(move || config::remove(StateDir::new(&dir)))
        .await
        .map_err(|e| Response::err(0, ErrorCode::Internal, e.to_string()))?
        .map_err(fleet_err)?;
    let Some(member) = member else {
        return Ok(Left::NotIn {
            left: false,
            config_removed: removed,
        });
    };
    let (fleet, host) = (member.cfg.fleet.clone(), member.cfg.host.clone());
    // The config is gone first: a failed removal leaves only a key that the
    // TTL expires, never a host that rejoins.
    let removal = member.stop(true).await;
    tracing::info!(%fleet, %host, "left the fleet");
    Ok(Left::Left {
        left: true,
        fleet,
        host,
        removed_now: removal.is_ok(),
        error: removal.err().map(|e| e.to_string()),
    })
}

/// On shutdown: stop heartbeating and take the key down now (a stopped
/// supervisor has no free slots); the config stays, so the next start rejoins.
pub(super) async fn shutdown(sup: &Arc<Sup>) {
    let member = lock(&sup.fleet).take();
    if let Some(m) = member
        && let Err(e) = m.stop(true).await
    {
        tracing::warn!(error = %e, "fleet presence not removed; it expires with the TTL");
    }
}
