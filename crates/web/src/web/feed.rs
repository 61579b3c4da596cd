//! The live snapshot: one blocking thread follows the supervisor's event
//! stream as `top` does (a burst of events drained, then one rebuild from
//! `top`'s readers) and looks at the loop's runs every [`RUN_LOOK`] only
//! while a loop process works one. It publishes through a `watch` channel
//! only when the snapshot changed (the seq alone is no change). With
//! nothing live and no events it sleeps in poll(2): idle costs nothing.
//! With `--fleet` the same poll(2) waits on the fleet's feed too
//! ([`super::fleet`]), woken as `top --fleet` is.

use super::fleet::WebFleet;
use super::view::{Extras, Snapshot, snapshot};
use crate::client::{Client, ClientError, EventStream, FollowSpec};
use crate::proto::{PaneEntry, args};
use crate::top::app::RUN_LOOK;
use crate::top::gather;
use crate::top::runs::RunsReader;
use crate::top::view::{Inputs, build};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long to wait before connecting again to a supervisor that stopped.
const RECONNECT: Duration = Duration::from_secs(1);

/// What the feed reads and how the snapshot is labelled.
#[derive(Debug, Clone)]
pub struct FeedConfig {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    pub read_only: bool,
    pub token_id: String,
}

struct Feed {
    cfg: FeedConfig,
    host: String,
    runs: RunsReader,
    inputs: Inputs,
    warning: Option<String>,
    seq: u64,
    /// The last snapshot published (its seq set to 0, for comparison).
    last: Option<Snapshot>,
    tx: watch::Sender<Arc<str>>,
    fleet: Option<WebFleet>,
}

/// The option labels of the dialog a blocked pane shows.
fn options_of(client: &mut Client, p: &PaneEntry) -> Vec<String> {
    let Some(v) = p.live() else {
        return Vec::new();
    };
    let Ok(agent) = v.info.agent.parse::<crate::agent::AgentKind>() else {
        return Vec::new();
    };
    let read = args::PaneRead {
        pane: v.info.name.clone(),
        raw: false,
        scrollback: None,
    };
    let Ok(screen) = client.call(read) else {
        return Vec::new();
    };
    crate::agent::dialog::parse(agent, &screen.lines, usize::from(v.info.cols))
        .map(|d| d.choices.into_iter().map(|c| c.label).collect())
        .unwrap_or_default()
}

impl Feed {
    /// What the snapshot carries beside `top`'s view (no options yet).
    fn extras(&self) -> Extras {
        Extras {
            read_only: self.cfg.read_only,
            host: self.host.clone(),
            token_id: self.cfg.token_id.clone(),
            options: BTreeMap::new(),
            hosts: self
                .fleet
                .as_ref()
                .map(|f| f.hosts(crate::paths::now_ms()))
                .unwrap_or_default(),
        }
    }

    /// This host's warning, else the fleet's.
    fn warning(&self) -> Option<String> {
        self.warning
            .clone()
            .or_else(|| self.fleet.as_ref().and_then(|f| f.warning.clone()))
    }

    /// Read everything again (an event came).
    fn refresh(&mut self, client: &mut Client) {
        let seen = crate::top::seen::load(crate::statedir::StateDir::new(&self.cfg.state_dir))
            .unwrap_or_default();
        let (mut inp, warning) = gather::inputs(
            client,
            crate::statedir::StateDir::new(&self.cfg.state_dir),
            &seen,
        );
        self.runs
            .update(crate::statedir::StateDir::new(&self.cfg.state_dir));
        inp.runs = self.runs.runs();
        self.warning = warning.or_else(|| self.runs.warning.clone());
        self.inputs = inp;
        self.publish(client);
    }

    /// Build the snapshot from what was last read; send it if it changed.
    fn publish(&mut self, client: &mut Client) {
        let mut view = build(&self.inputs);
        view.warning = self.warning();
        let mut options = BTreeMap::new();
        for p in &self.inputs.panes {
            if p.is_blocked() {
                options.insert(p.name().to_string(), options_of(client, p));
            }
        }
        let x = Extras {
            options,
            ..self.extras()
        };
        let mut snap = snapshot(&view, &x);
        if self.last.as_ref() == Some(&snap) {
            return;
        }
        self.last = Some(snap.clone());
        snap.seq = self.seq;
        if let Ok(json) = serde_json::to_string(&snap) {
            self.tx.send_replace(Arc::from(json));
        }
    }

    /// The supervisor is gone: say so on the page.
    fn gone(&mut self, why: String) {
        if let Some(f) = self.fleet.as_mut() {
            f.drain();
        }
        self.inputs.panes.clear();
        self.warning = Some(why);
        let x = self.extras();
        let mut view = build(&self.inputs);
        view.warning = self.warning();
        let snap = snapshot(&view, &x);
        if self.last.as_ref() != Some(&snap) {
            self.last = Some(snap.clone());
            if let Ok(json) = serde_json::to_string(&snap) {
                self.tx.send_replace(Arc::from(json));
            }
        }
    }

    /// Follow one supervisor until it stops.
    /// `ready` is told once the first snapshot is out.
    fn follow(
        &mut self,
        mut client: Client,
        ready: &mut Option<std::sync::mpsc::Sender<()>>,
    ) -> Result<(), ClientError> {
        let mut feed =
            EventStream::open(Client::connect(&self.cfg.socket)?, &FollowSpec::default())?;
        self.seq = feed.last_seq;
        self.refresh(&mut client);
        if let Some(r) = ready.take() {
            let _ = r.send(());
        }
        loop {
            let look = self.runs.any_live().then_some(RUN_LOOK);
            let timeout = match look {
                None => PollTimeout::NONE,
                Some(t) => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
            };
            let (n, events, fleet) = {
                let mut fds = vec![PollFd::new(feed.as_fd(), PollFlags::POLLIN)];
                if let Some(fd) = self.fleet.as_ref().and_then(WebFleet::fd) {
                    fds.push(PollFd::new(fd, PollFlags::POLLIN));
                }
                let n = match poll(&mut fds, timeout) {
                    Ok(n) => n,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(ClientError::Protocol(format!("poll: {e}"))),
                };
                let ready = |fd: Option<&PollFd>| {
                    fd.and_then(PollFd::revents).is_some_and(|r| !r.is_empty())
                };
                (n, ready(fds.first()), ready(fds.get(1)))
            };
            if fleet && let Some(f) = self.fleet.as_mut() {
                // The hosts re-read (every heartbeat) or a fleet event.
                f.drain();
                if !events {
                    // A heartbeat may come sooner than RUN_LOOK: the runs too.
                    if self.runs.any_live()
                        && self
                            .runs
                            .update(crate::statedir::StateDir::new(&self.cfg.state_dir))
                    {
                        self.inputs.runs = self.runs.runs();
                    }
                    self.publish(&mut client);
                    continue;
                }
            }
            if n == 0 {
                // Only the runs may have changed: the rest as it was read.
                if self
                    .runs
                    .update(crate::statedir::StateDir::new(&self.cfg.state_dir))
                {
                    self.inputs.runs = self.runs.runs();
                    self.publish(&mut client);
                }
                continue;
            }
            // Drain what is queued: one rebuild for a burst of events.
            loop {
                match feed.next_line()? {
                    Some(line) => {
                        if let Ok(ev) = crate::proto::EventLine::parse(&line) {
                            self.seq = ev.seq;
                        }
                    }
                    None => return Ok(()),
                }
                let mut more = [PollFd::new(feed.as_fd(), PollFlags::POLLIN)];
                if poll(&mut more, PollTimeout::ZERO).unwrap_or(0) == 0 {
                    break;
                }
            }
            self.refresh(&mut client);
        }
    }
}

/// Start the feed thread over `client` (already connected); the first
/// snapshot is in the channel when this returns.
pub fn start(
    cfg: FeedConfig,
    client: Client,
    fleet: Option<WebFleet>,
) -> std::io::Result<watch::Receiver<Arc<str>>> {
    let (tx, rx) = watch::channel::<Arc<str>>(Arc::from("{}"));
    let mut feed = Feed {
        host: super::view::hostname(),
        cfg,
        runs: RunsReader::default(),
        inputs: Inputs::default(),
        warning: None,
        seq: 0,
        last: None,
        tx,
        fleet,
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("web-feed".into())
        .spawn(move || {
            let mut client = Some(client);
            let mut ready = Some(ready_tx);
            loop {
                let c = match client.take() {
                    Some(c) => Ok(c),
                    None => Client::connect(&feed.cfg.socket),
                };
                let res = c.and_then(|c| feed.follow(c, &mut ready));
                let why = match res {
                    Ok(()) => "the supervisor stopped; waiting for it to start again".to_string(),
                    Err(e) => format!("supervisor: {e}"),
                };
                feed.gone(why);
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                if feed.tx.is_closed() {
                    return;
                }
                // Only while the supervisor is gone.
                std::thread::sleep(RECONNECT);
            }
        })?;
    let _ = ready_rx.recv_timeout(Duration::from_secs(30));
    Ok(rx)
}
