//! What `top --fleet` knows, folded from the fleet's events, and the view
//! built from it: pure, so both are checked without a server or a terminal.
//!
//! Each host's panes come from its own events (`pane.created`, `pane.state`,
//! `pane.exited`, `pane.respawned`, `pane.killed`; any other event about a
//! known pane only counts as its last event). A host's feed numbers its
//! events from 1 each time its supervisor starts, so a `seq` that does not
//! grow means a new supervisor: what the old one held is forgotten. Only
//! hosts present in the fleet's bucket are shown.

use super::bounds::{MAX_FIELD_CHARS, MAX_HOSTS, MAX_KILLED_PER_HOST, make_room};
use crate::agent::State;
use crate::fleet::events::FleetEvent;
use crate::fleet::membership::{self, HostState, Presence};
use crate::top::view::{Attention, state_attention};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// A pane as its host's events describe it.
#[derive(Debug, Clone, PartialEq)]
pub struct PaneCell {
    pub agent: String,
    pub state: State,
    pub state_kind: Option<String>,
    pub exit_code: Option<i64>,
    /// When it entered its state (the host's clock, ms since the epoch).
    pub since_ms: u64,
    /// Its newest event: when, and which kind.
    pub last_ms: u64,
    pub last_kind: String,
    /// The pid of its process, from `pane.created`.
    pub pid: Option<u64>,
}

impl Default for PaneCell {
    /// A pane its events have not described yet.
    fn default() -> Self {
        PaneCell {
            agent: String::new(),
            state: State::Unknown,
            state_kind: None,
            exit_code: None,
            since_ms: 0,
            last_ms: 0,
            last_kind: String::new(),
            pid: None,
        }
    }
}

/// One host's feed as folded so far.
#[derive(Debug, Clone, PartialEq, Default)]
struct HostFeed {
    last_seq: u64,
    /// Events its supervisor could not send (`missed` records).
    missed: u64,
    panes: BTreeMap<String, PaneCell>,
    /// Panes killed and not created again: the detector's last word on a
    /// pane (its `exited`) may come after `pane.killed`.
    killed: std::collections::BTreeSet<String>,
}

/// Everything `top --fleet` has read.
#[derive(Debug, Clone, Default)]
pub struct FleetModel {
    feeds: BTreeMap<String, HostFeed>,
    present: Vec<Presence>,
    /// The newest stream seq folded in.
    pub fleet_seq: u64,
    /// Events the stream no longer held when they were to be read (its age
    /// or size limit took them first): any host's panes may be stale.
    pub stream_missed: u64,
}

fn ms_of(at: Option<&str>) -> Option<u64> {
    chrono::DateTime::parse_from_rfc3339(at?)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
}

fn text(v: &Value, k: &str) -> Option<String> {
    v.get(k)
        .and_then(Value::as_str)
        .map(|t| t.chars().take(MAX_FIELD_CHARS).collect())
}

impl FleetModel {
    /// Fold one event in (the stream's order).
    pub fn apply(&mut self, ev: &FleetEvent) {
        self.fleet_seq = self.fleet_seq.max(ev.fleet_seq);
        let e = &ev.event;
        if ev.host == "-" {
            // The follower's own `missed` record: the stream dropped them.
            self.stream_missed += e.get("missed").and_then(Value::as_u64).unwrap_or(1);
            return;
        }
        if !self.feeds.contains_key(&ev.host) && !self.room_for_host() {
            return;
        }
        let feed = self.feeds.entry(ev.host.clone()).or_default();
        if let Some(seq) = e.get("seq").and_then(Value::as_u64) {
            if seq <= feed.last_seq {
                // A new supervisor on that host: its panes start over.
                *feed = HostFeed::default();
            }
            feed.last_seq = seq;
        }
        let kind = e.get("kind").and_then(Value::as_str).unwrap_or_default();
        let at = ms_of(e.get("at").and_then(Value::as_str)).unwrap_or(0);
        if kind == "missed" {
            feed.missed += e.get("missed").and_then(Value::as_u64).unwrap_or(1);
            return;
        }
        let Some(pane) = e
            .get("pane")
            .and_then(Value::as_str)
            .filter(|p| p.chars().count() <= MAX_FIELD_CHARS)
        else {
            return;
        };
        let kind: String = kind.chars().take(MAX_FIELD_CHARS).collect();
        let kind = kind.as_str();
        let cell = match kind {
            "pane.created" => {
                let cell = PaneCell {
                    agent: text(e, "agent").unwrap_or_else(|| "-".into()),
                    state: State::Starting,
                    since_ms: at,
                    pid: e.get("pid").and_then(Value::as_u64),
                    ..Default::default()
                };
                feed.killed.remove(pane);
                if !feed.panes.contains_key(pane) {
                    make_room(&mut feed.panes);
                }
                feed.panes.insert(pane.to_string(), cell);
                feed.panes.get_mut(pane)
            }
            "pane.killed" => {
                feed.panes.remove(pane);
                while feed.killed.len() >= MAX_KILLED_PER_HOST {
                    feed.killed.pop_first();
                }
                feed.killed.insert(pane.to_string());
                None
            }
            _ if feed.killed.contains(pane) => None,
            // A pane its supervisor held before it joined shows at its first change.
            "pane.state" => {
                if !feed.panes.contains_key(pane) {
                    make_room(&mut feed.panes);
                }
                let cell = feed
                    .panes
                    .entry(pane.to_string())
                    .or_insert_with(|| PaneCell {
                        agent: "-".into(),
                        ..Default::default()
                    });
                // A word no state has (a newer host, a hostile one) is unknown.
                cell.state = text(e, "state")
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(State::Unknown);
                cell.state_kind = text(e, "state_kind");
                cell.exit_code = e.get("exit_code").and_then(Value::as_i64);
                cell.since_ms = at;
                Some(cell)
            }
            "pane.respawned" => {
                if let Some(c) = feed.panes.get_mut(pane) {
                    c.state = State::Starting;
                    c.state_kind = None;
                    c.exit_code = None;
                    c.since_ms = at;
                }
                feed.panes.get_mut(pane)
            }
            "pane.exited" => {
                if let Some(c) = feed.panes.get_mut(pane) {
                    if c.state != State::Exited {
                        c.state = State::Exited;
                        c.since_ms = at;
                    }
                    c.exit_code = e.get("exit_code").and_then(Value::as_i64);
                }
                feed.panes.get_mut(pane)
            }
            _ => feed.panes.get_mut(pane),
        };
        if let Some(c) = cell {
            c.last_ms = at;
            c.last_kind = kind.to_string();
        }
    }

    /// The hosts present now (the fleet's bucket).
    /// Hosts gone from it are forgotten.
    pub fn set_present(&mut self, hosts: Vec<Presence>) {
        self.present = hosts;
        let present = &self.present;
        self.feeds
            .retain(|h, _| present.iter().any(|p| p.host == *h));
    }

    /// Whether one more host's feed may be kept: at [`MAX_HOSTS`], a host
    /// not present is forgotten to make room; with every one present, none.
    fn room_for_host(&mut self) -> bool {
        if self.feeds.len() < MAX_HOSTS {
            return true;
        }
        let gone = self
            .feeds
            .keys()
            .find(|h| !self.present.iter().any(|p| p.host == **h))
            .cloned();
        gone.is_some_and(|h| self.feeds.remove(&h).is_some())
    }

    /// How many hosts' feeds and panes are kept.
    pub fn kept(&self) -> (usize, usize) {
        let panes = self
            .feeds
            .values()
            .map(|f| f.panes.len() + f.killed.len())
            .sum();
        (self.feeds.len(), panes)
    }

    /// Where following the stream starts so that every present host's
    /// events since it joined are read: the earliest join, less `margin`
    /// for clocks that disagree (ms since the epoch); `None` with no host.
    pub fn replay_from(hosts: &[Presence], margin: Duration) -> Option<u64> {
        hosts
            .iter()
            .filter_map(|p| u64::try_from(p.joined_at.timestamp_millis()).ok())
            .min()
            .map(|ms| ms.saturating_sub(margin.as_millis() as u64))
    }
}

/// One pane row.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRow {
    pub host: String,
    pub pane: String,
    pub cell: PaneCell,
    pub attention: Attention,
}

impl FleetRow {
    /// The key a row is selected and seen by: the same pane name may run on two hosts.
    pub fn key(&self) -> (String, String) {
        (self.host.clone(), self.pane.clone())
    }
}

/// One host row.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRow {
    pub host: String,
    /// The host `top` runs on.
    pub this: bool,
    pub state: HostState,
    /// The panes its heartbeat says its supervisor holds.
    pub lanes: usize,
    /// Its last heartbeat (ms since the epoch, its clock).
    pub heartbeat_ms: u64,
    pub missed: u64,
}

/// One screen of `top --fleet`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FleetView {
    pub fleet: String,
    pub hosts: Vec<HostRow>,
    /// Needs-a-human first, then by host and pane.
    pub rows: Vec<FleetRow>,
    pub fleet_seq: u64,
    pub now_ms: u64,
    /// A problem reading the fleet (the footer shows it).
    pub warning: Option<String>,
    /// Events the stream dropped before they were read.
    pub stream_missed: u64,
    /// This host's loop runs (a fleet run's coordinator), and how many older closed ones are left out.
    pub runs: Vec<crate::top::runs::RunCell>,
    pub older_runs: usize,
}

/// What [`build`] needs besides the model.
pub struct BuildArgs<'a> {
    pub fleet: &'a str,
    /// This host's id.
    pub this_host: &'a str,
    /// This process and its parents: the pane `top` runs in is not a row.
    pub ancestors: &'a [u32],
    /// Done panes the operator has selected: (host, pane) → their since_ms.
    pub seen: &'a BTreeMap<(String, String), u64>,
    pub now_ms: u64,
}

/// Build the view from the model (pure).
pub fn build(m: &FleetModel, a: &BuildArgs) -> FleetView {
    let mut hosts = Vec::new();
    let mut rows = Vec::new();
    for p in &m.present {
        let heartbeat_ms = u64::try_from(p.heartbeat_at.timestamp_millis()).unwrap_or(0);
        let since = Duration::from_millis(a.now_ms.saturating_sub(heartbeat_ms));
        let feed = m.feeds.get(&p.host);
        hosts.push(HostRow {
            host: p.host.clone(),
            this: p.host == a.this_host,
            state: membership::state_of(since, p.heartbeat_ms),
            lanes: p.lanes,
            heartbeat_ms,
            missed: feed.map_or(0, |f| f.missed),
        });
        for (pane, cell) in feed.map(|f| &f.panes).into_iter().flatten() {
            let ours = p.host == a.this_host
                && cell
                    .pid
                    .is_some_and(|pid| a.ancestors.iter().any(|&x| u64::from(x) == pid));
            if ours {
                continue;
            }
            let key = (p.host.clone(), pane.clone());
            let seen = a.seen.get(&key) == Some(&cell.since_ms);
            rows.push(FleetRow {
                host: p.host.clone(),
                pane: pane.clone(),
                attention: state_attention(cell.state, seen),
                cell: cell.clone(),
            });
        }
    }
    rows.sort_by(|x, y| {
        x.attention
            .cmp(&y.attention)
            .then_with(|| x.host.cmp(&y.host))
            .then_with(|| x.pane.cmp(&y.pane))
    });
    FleetView {
        fleet: a.fleet.to_string(),
        hosts,
        rows,
        fleet_seq: m.fleet_seq,
        stream_missed: m.stream_missed,
        now_ms: a.now_ms,
        warning: None,
        runs: Vec::new(),
        older_runs: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::bounds::MAX_PANES_PER_HOST;
    use super::*;
    use serde_json::json;

    fn ev(fleet_seq: u64, host: &str, e: Value) -> FleetEvent {
        FleetEvent {
            fleet_seq,
            host: host.into(),
            event: e,
        }
    }

    fn presence(host: &str) -> Presence {
        Presence {
            host: host.into(),
            slots: 4,
            lanes: 1,
            pid: 1,
            version: "0".into(),
            joined_at: "2030-01-01T00:00:00.000Z".parse().unwrap(),
            heartbeat_at: "2030-01-01T00:00:10.000Z".parse().unwrap(),
            heartbeat_ms: 5000,
            agents: Default::default(),
        }
    }

    const NOW: u64 = 1_893_456_012_000; // 2030-01-01T00:00:12Z

    fn view(m: &FleetModel, ancestors: &[u32]) -> FleetView {
        build(
            m,
            &BuildArgs {
                fleet: "lab",
                this_host: "h1",
                ancestors,
                seen: &BTreeMap::new(),
                now_ms: NOW,
            },
        )
    }

    fn at(s: u64) -> String {
        format!("2030-01-01T00:00:{s:02}.000Z")
    }

    /// Guards issue 36 item 12: 20 k ghost-pane events of 1 KB grew
    /// `top --fleet` to 165 MB; the model keeps a bounded number of hosts
    /// and panes, whatever the stream holds.
    #[test]
    fn ghost_panes_and_hosts_keep_the_model_bounded() {
        let mut m = FleetModel::default();
        m.set_present(vec![presence("h1"), presence("h2")]);
        let filler = "x".repeat(1000);
        let mut seq = 0;
        let mut next = || {
            seq += 1;
            seq
        };
        for i in 0..20_000u64 {
            let kind = if i % 3 == 0 {
                "pane.created"
            } else {
                "pane.state"
            };
            m.apply(&ev(
                i + 1,
                "h2",
                json!({"seq": next(), "kind": kind, "pane": format!("ghost-{i}"),
                       "state": filler, "agent": filler, "at": at(i % 60)}),
            ));
            if i % 5 == 0 {
                m.apply(&ev(
                    i + 1,
                    "h2",
                    json!({"seq": next(), "kind": "pane.killed",
                           "pane": format!("ghost-{i}"), "at": at(i % 60)}),
                ));
            }
            m.apply(&ev(
                i + 1,
                &format!("ghost-host-{i}"),
                json!({"seq": 1, "kind": "pane.state", "pane": "p", "state": "idle"}),
            ));
        }
        let (hosts, panes) = m.kept();
        assert!(hosts <= MAX_HOSTS, "{hosts} hosts kept");
        assert!(
            panes <= MAX_HOSTS * (MAX_PANES_PER_HOST + MAX_KILLED_PER_HOST),
            "{panes} panes kept"
        );
        let h2 = &m.feeds["h2"];
        assert!(h2.panes.len() <= MAX_PANES_PER_HOST, "{}", h2.panes.len());
        assert!(
            h2.killed.len() <= MAX_KILLED_PER_HOST,
            "{}",
            h2.killed.len()
        );
        assert!(
            h2.panes
                .values()
                .all(|c| c.state.as_str().chars().count() <= MAX_FIELD_CHARS)
        );
        // The newest panes are the ones kept; the present host stays.
        assert!(h2.panes.contains_key("ghost-19999"));
        // Hosts gone from the bucket are forgotten.
        m.set_present(vec![presence("h2")]);
        assert_eq!(m.kept().0, 1);
    }

    #[test]
    fn a_missed_record_of_the_stream_is_counted_for_the_fleet_not_a_host() {
        let mut m = FleetModel::default();
        m.set_present(vec![presence("h1")]);
        m.apply(&crate::fleet::follow::missed(1, 5));
        assert_eq!(m.stream_missed, 5);
        let v = view(&m, &[]);
        assert_eq!(v.stream_missed, 5);
        assert_eq!(v.hosts.len(), 1, "no host `-`");
        assert_eq!(v.hosts[0].missed, 0);
    }

    #[test]
    fn panes_follow_their_hosts_events_and_a_restarted_supervisor_starts_over() {
        let mut m = FleetModel::default();
        m.set_present(vec![presence("h1"), presence("h2")]);
        m.apply(&ev(1, "h1", json!({"seq": 1, "at": at(1), "kind": "pane.created", "pane": "a", "agent": "sim", "pid": 10})));
        m.apply(&ev(2, "h2", json!({"seq": 1, "at": at(2), "kind": "pane.created", "pane": "a", "agent": "sh", "pid": 20})));
        m.apply(&ev(3, "h2", json!({"seq": 2, "at": at(3), "kind": "pane.state", "pane": "a", "state": "blocked", "state_kind": "permission"})));
        m.apply(&ev(
            4,
            "h1",
            json!({"seq": 2, "at": at(4), "kind": "job.transition", "pane": "a"}),
        ));
        // An event about a pane no event created is not a row.
        m.apply(&ev(
            5,
            "h1",
            json!({"seq": 3, "at": at(5), "kind": "job.transition", "pane": "zz"}),
        ));
        let v = view(&m, &[]);
        let rows: Vec<_> = v
            .rows
            .iter()
            .map(|r| (r.host.as_str(), r.pane.as_str()))
            .collect();
        assert_eq!(rows, [("h2", "a"), ("h1", "a")], "blocked first");
        assert_eq!(v.rows[0].attention, Attention::Blocked);
        assert_eq!(v.rows[0].cell.state_kind.as_deref(), Some("permission"));
        assert_eq!(v.rows[1].cell.last_kind, "job.transition");
        assert_eq!(v.rows[1].cell.since_ms, NOW - 11_000);
        assert_eq!(v.rows[1].cell.last_ms, NOW - 8_000);
        assert_eq!(v.fleet_seq, 5);
        // h2's supervisor restarts: seq 1 again, its old pane is gone.
        m.apply(&ev(
            6,
            "h2",
            json!({"seq": 1, "at": at(6), "kind": "pane.created", "pane": "b", "agent": "sh"}),
        ));
        let v = view(&m, &[]);
        let rows: Vec<_> = v
            .rows
            .iter()
            .map(|r| (r.host.as_str(), r.pane.as_str()))
            .collect();
        assert_eq!(rows, [("h1", "a"), ("h2", "b")]);
        m.apply(&ev(
            7,
            "h2",
            json!({"seq": 2, "at": at(7), "kind": "pane.killed", "pane": "b"}),
        ));
        assert_eq!(view(&m, &[]).rows.len(), 1);
    }

    #[test]
    fn only_present_hosts_show_and_top_hides_its_own_pane() {
        let mut m = FleetModel::default();
        m.apply(&ev(
            1,
            "h1",
            json!({"seq": 1, "at": at(1), "kind": "pane.created", "pane": "top", "pid": 77}),
        ));
        m.apply(&ev(
            2,
            "h2",
            json!({"seq": 1, "at": at(1), "kind": "pane.created", "pane": "x", "pid": 77}),
        ));
        m.apply(&ev(
            3,
            "h3",
            json!({"seq": 1, "at": at(1), "kind": "pane.created", "pane": "y"}),
        ));
        m.apply(&ev(
            4,
            "h2",
            json!({"seq": 2, "at": at(2), "kind": "missed", "missed": 3, "first": 2}),
        ));
        m.set_present(vec![presence("h1"), presence("h2")]);
        let v = view(&m, &[77, 1]);
        // pid 77 on h2 is another machine's process: shown.
        let rows: Vec<_> = v
            .rows
            .iter()
            .map(|r| (r.host.as_str(), r.pane.as_str()))
            .collect();
        assert_eq!(rows, [("h2", "x")]);
        assert_eq!(v.hosts.len(), 2);
        assert!(v.hosts[0].this && !v.hosts[1].this);
        assert_eq!(v.hosts[1].missed, 3);
        assert_eq!(v.hosts[0].state, HostState::Up);
    }

    #[test]
    fn a_pane_from_before_the_join_shows_at_its_first_change_and_exits_keep_their_code() {
        let mut m = FleetModel::default();
        m.set_present(vec![presence("h1")]);
        m.apply(&ev(
            1,
            "h1",
            json!({"seq": 9, "at": at(1), "kind": "pane.state", "pane": "old", "state": "working"}),
        ));
        m.apply(&ev(
            2,
            "h1",
            json!({"seq": 10, "at": at(2), "kind": "pane.exited", "pane": "old", "exit_code": 3}),
        ));
        let v = view(&m, &[]);
        assert_eq!(v.rows[0].cell.state.as_str(), "exited");
        assert_eq!(v.rows[0].cell.exit_code, Some(3));
        assert_eq!(v.rows[0].cell.agent, "-");
        assert_eq!(v.rows[0].attention, Attention::Exited);
    }

    #[test]
    fn replay_starts_at_the_earliest_join_less_the_margin() {
        let mut late = presence("h2");
        late.joined_at = at(30).parse().unwrap();
        let hosts = [late, presence("h1")];
        assert_eq!(
            FleetModel::replay_from(&hosts, Duration::from_secs(10)),
            Some(NOW - 12_000 - 10_000)
        );
        assert_eq!(FleetModel::replay_from(&[], Duration::ZERO), None);
    }
}
