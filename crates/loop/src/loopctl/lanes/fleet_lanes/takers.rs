//! Whether some host takes an agent's steps: a step no host would pull
//! runs on the coordinator instead of waiting out its turn on the queue.

use super::FleetLanes;
use crate::loopctl::ops::LaneOps;
use std::time::{Duration, Instant};

/// How long the work consumer of an agent is watched for a host pulling
/// or working before a step of that agent runs here instead.
const TAKER_WINDOW: Duration = Duration::from_secs(5);
/// The same for an agent's first step of the run: the work-queue may just
/// have been made, and hosts waiting for it look again every second.
const TAKER_WINDOW_FIRST: Duration = Duration::from_secs(20);
/// How long a host seen taking an agent's steps holds.
const TAKER_MEMORY: Duration = Duration::from_secs(10);
/// How long no host seen taking them holds.
const NO_TAKER_MEMORY: Duration = Duration::from_secs(60);

impl<L: LaneOps> FleetLanes<L> {
    /// Whether some host takes `agent`'s steps: one pulls for them (a host
    /// with a free slot always has a pull waiting) or is working one, seen
    /// within [`TAKER_WINDOW`] ([`TAKER_WINDOW_FIRST`] the first time). A bus that cannot be asked says yes (the
    /// step is queued, as when the server is away).
    pub(super) fn taken(&mut self, agent: crate::registry::Agent) -> bool {
        let window = match self.takers.get(&agent) {
            Some((at, yes)) => {
                let memory = if *yes { TAKER_MEMORY } else { NO_TAKER_MEMORY };
                if at.elapsed() < memory {
                    return *yes;
                }
                TAKER_WINDOW
            }
            None => TAKER_WINDOW_FIRST,
        };
        let yes = self.queue.taken(agent.as_str(), window);
        self.takers.insert(agent, (Instant::now(), yes));
        yes
    }
}
