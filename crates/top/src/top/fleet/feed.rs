//! `top --fleet`'s feed: a thread that watches the fleet (its own small
//! runtime, as every fleet command has) and hands what it reads to the
//! terminal loop through a channel, with a byte on a socket pair so the
//! loop's one poll(2) wakes for it. The thread only reads the bus; the loop
//! folds what comes into the model.

use super::model::FleetModel;
use crate::fleet::blocking::{FleetRuntime, Threads};
use crate::fleet::events::FleetEvent;
use crate::fleet::follow::{Follower, Start, Watch};
use crate::fleet::membership::{MIN_HEARTBEAT_MS, Presence};
use crate::fleet::{FleetConfig, FleetError, Handed};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;

/// Replay starts this much before the earliest join: hosts' clocks and the
/// server's may disagree a little.
pub const CLOCK_MARGIN: Duration = Duration::from_secs(10);

/// What the thread read.
#[derive(Debug)]
pub enum Msg {
    Event(FleetEvent),
    /// The hosts present (re-read every heartbeat), or why they could not be.
    Hosts(Result<Vec<Presence>, FleetError>),
    /// The event stream failed or ended: nothing more comes.
    Ended(FleetError),
}

/// The loop's end of the feed.
pub struct FleetFeed {
    rx: mpsc::Receiver<Msg>,
    wake: UnixStream,
}

impl FleetFeed {
    /// Connect, read the hosts present and start following every host's
    /// events from the earliest join; errors come back here, before the
    /// screen is taken. The hosts come back too (the model's first list).
    pub fn open(
        cfg: &FleetConfig,
        handed: &Handed,
    ) -> Result<(FleetFeed, Vec<Presence>), FleetError> {
        let rt = FleetRuntime::new(Threads::Caller)?;
        let (watch, follower, hosts) = rt.block_on(async {
            let mut watch = Watch::connect(cfg, handed).await?;
            let hosts = watch.hosts().await?;
            let start =
                FleetModel::replay_from(&hosts, CLOCK_MARGIN).map_or(Start::New, Start::SinceMs);
            let follower = watch.follow(start).await?;
            Ok::<_, FleetError>((watch, follower, hosts))
        })?;
        let (wake, wake_tx) = UnixStream::pair().map_err(FleetError::Runtime)?;
        wake.set_nonblocking(true).map_err(FleetError::Runtime)?;
        wake_tx.set_nonblocking(true).map_err(FleetError::Runtime)?;
        let (tx, rx) = mpsc::channel();
        let every = Duration::from_millis(cfg.heartbeat_ms.max(MIN_HEARTBEAT_MS));
        std::thread::Builder::new()
            .name("top-fleet".into())
            .spawn(move || rt.block_on(watch_loop(watch, follower, every, tx, wake_tx)))
            .map_err(FleetError::Runtime)?;
        Ok((FleetFeed { rx, wake }, hosts))
    }

    /// What poll(2) waits on.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// Everything read since the last call.
    pub fn drain(&mut self) -> Vec<Msg> {
        let mut buf = [0u8; 256];
        while matches!(self.wake.read(&mut buf), Ok(n) if n > 0) {}
        self.rx.try_iter().collect()
    }
}

/// Follow the events and re-read the hosts every heartbeat until the
/// stream ends or the loop is gone.
async fn watch_loop(
    mut watch: Watch,
    mut follower: Follower,
    every: Duration,
    tx: mpsc::Sender<Msg>,
    mut wake: UnixStream,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is now: the hosts were just read
    loop {
        let msg = tokio::select! {
            ev = follower.next() => match ev {
                Some(Ok(ev)) => Msg::Event(ev),
                Some(Err(e)) => Msg::Ended(e),
                None => Msg::Ended(FleetError::bus("follow the event stream", "the stream ended")),
            },
            _ = tick.tick() => Msg::Hosts(watch.hosts().await),
        };
        let last = matches!(msg, Msg::Ended(_));
        if tx.send(msg).is_err() {
            return;
        }
        // A full socket already holds a wake-up the loop has not read.
        let _ = wake.write(&[1]);
        if last {
            return;
        }
    }
}
