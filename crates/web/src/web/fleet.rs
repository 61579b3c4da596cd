//! `drover web --fleet`: every joined host on the page. It reads the fleet
//! as `top --fleet` does ([`crate::top::fleet::feed`]: the presence bucket
//! re-read every heartbeat, the event stream followed), folded into `top
//! --fleet`'s model; the snapshot's `hosts` are built from that model's
//! host rows. The feed thread waits on its wake-up fd in the same poll(2)
//! as the supervisor's events: nothing runs between heartbeats.

use super::view::HostJson;
use crate::fleet::{FleetConfig, FleetError, Handed};
use crate::top::fleet::feed::{FleetFeed, Msg};
use crate::top::fleet::model::{BuildArgs, FleetModel, build};
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;

/// The fleet as the page shows it.
pub struct WebFleet {
    /// None once the fleet's stream ended (its last hosts stay shown).
    feed: Option<FleetFeed>,
    model: FleetModel,
    fleet: String,
    host: String,
    /// Why the hosts could not be read, or why the stream ended.
    pub warning: Option<String>,
}

impl WebFleet {
    /// Reach the fleet and read its hosts; fails before anything is served.
    pub fn open(cfg: &FleetConfig, handed: &Handed) -> Result<WebFleet, FleetError> {
        let (feed, hosts) = FleetFeed::open(cfg, handed)?;
        let mut model = FleetModel::default();
        model.set_present(hosts);
        Ok(WebFleet {
            feed: Some(feed),
            model,
            fleet: cfg.fleet.clone(),
            host: cfg.host.clone(),
            warning: None,
        })
    }

    /// What poll(2) waits on while the fleet is followed.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.feed.as_ref().map(FleetFeed::fd)
    }

    /// Fold in everything read since the last call.
    pub fn drain(&mut self) {
        let Some(feed) = self.feed.as_mut() else {
            return;
        };
        let mut ended = false;
        for msg in feed.drain() {
            match msg {
                Msg::Event(e) => self.model.apply(&e),
                Msg::Hosts(Ok(h)) => {
                    self.model.set_present(h);
                    self.warning = None;
                }
                Msg::Hosts(Err(e)) => self.warning = Some(format!("fleet hosts: {e}")),
                Msg::Ended(e) => {
                    self.warning = Some(format!("fleet: {e}"));
                    ended = true;
                }
            }
        }
        if ended {
            // Its thread is gone: its fd would only say so again and again.
            self.feed = None;
        }
    }

    /// The hosts present now, as the snapshot gives them.
    pub fn hosts(&self, now_ms: u64) -> Vec<HostJson> {
        let view = build(
            &self.model,
            &BuildArgs {
                fleet: &self.fleet,
                this_host: &self.host,
                ancestors: &[],
                seen: &BTreeMap::new(),
                now_ms,
            },
        );
        view.hosts.iter().map(host_json).collect()
    }
}

/// One host row as JSON: its last heartbeat as a time (none if unknown).
fn host_json(h: &crate::top::fleet::model::HostRow) -> HostJson {
    let last_seen = i64::try_from(h.heartbeat_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(crate::time::format_millis);
    HostJson {
        host: h.host.clone(),
        state: h.state,
        last_seen,
        panes: h.lanes,
    }
}
