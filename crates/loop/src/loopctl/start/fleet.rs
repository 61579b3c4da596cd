//! `loop run --fleet FLEET`: the run's steps go on the fleet's work-queue,
//! over the lanes here.

use crate::loopctl::LoopError;
use crate::loopctl::lanes::fleet_lanes::{
    FleetLanes, FleetStart as FleetLanesStart, ItemScript, RemoteSteps,
};
use crate::loopctl::lanes::lanes_ops::RealLanes;
use crate::loopctl::run::runner::RunConfig;
use std::path::PathBuf;
use std::time::Duration;

/// The fleet's lanes of a run and where its record is.
pub struct FleetStart {
    pub lanes: FleetLanes<RealLanes>,
    /// The run's key on the work-queue.
    pub key: String,
    /// The fleet's record of the run.
    pub log: PathBuf,
}

/// The lanes of a run on `fleet` (the one this host joined), over `local`,
/// with `scripts` for simulated lanes and `ack_wait` before a step goes to
/// another host.
pub fn fleet_lanes(
    fleet: &str,
    cfg: &RunConfig,
    sim: bool,
    local: RealLanes,
    scripts: ItemScript,
    ack_wait: Duration,
) -> Result<FleetStart, LoopError> {
    let fc = crate::fleet::config::load(crate::statedir::StateDir::new(&cfg.state_dir))?
        .ok_or(crate::fleet::FleetError::NotJoined)?;
    if fc.fleet != fleet {
        return Err(LoopError::WrongFleet {
            given: fleet.to_string(),
            joined: fc.fleet.clone(),
        });
    }
    let key = format!("{}-{}", fc.host, chrono::Utc::now().format("%Y%m%dT%H%M%S"));
    let board = super::fleet_board(&cfg.repo, &cfg.board_dir, cfg.base.as_deref(), sim)?;
    let log = crate::statedir::StateDir::new(&cfg.state_dir).fleet_log(&key);
    let lanes = FleetLanes::start(
        local,
        FleetLanesStart {
            cfg: &fc,
            handed: &crate::fleet::Handed::from_env(&fc),
            run: &key,
            state_dir: &cfg.state_dir,
            log: &log,
            scripts,
            lease_ttl: Duration::from_secs(crate::registry::lease::DEFAULT_LEASE_TTL_S),
            ack_wait,
            steps: RemoteSteps {
                board,
                turn_timeout: cfg.turn_timeout,
                report_grace: cfg.unattended.report_grace,
            },
        },
    )?;
    Ok(FleetStart { lanes, key, log })
}
