//! `drover events --follow --fleet`: every joined host's feed through the
//! fleet's JetStream stream, against a real nats-server (docs/fleet.md).

use crate::common::{self, Drover, wait_until};
use crate::fleet_join::{join, run, users};
use crate::nats_common::Nats;
use serde_json::Value;
use std::collections::HashMap;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running `events --follow --fleet lab` and what it printed so far.
pub(crate) struct Follower {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
}

impl Follower {
    pub(crate) fn start(d: &Drover, since: Option<&str>) -> Follower {
        let mut c = d.cmd();
        c.args(["events", "--follow", "--fleet", "lab", "--jsonl"]);
        if let Some(s) = since {
            c.args(["--since", s]);
        }
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = common::collect_output(Box::new(child.stdout.take().unwrap()));
        Follower { child, out }
    }

    pub(crate) fn events(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.out.lock().unwrap())
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Whether an event of `kind` about `pane` from `host` was printed.
    pub(crate) fn saw(&self, host: &str, kind: &str, pane: &str) -> bool {
        self.events()
            .iter()
            .any(|e| e["host"] == host && e["kind"] == kind && e["pane"] == pane)
    }

    /// Wait until an event of `kind` about `pane` from `host` was printed.
    fn wait_for(&self, host: &str, kind: &str, pane: &str) -> bool {
        self.wait_for_in(Duration::from_secs(20), host, kind, pane)
    }

    fn wait_for_in(&self, t: Duration, host: &str, kind: &str, pane: &str) -> bool {
        wait_until(t, || self.saw(host, kind, pane))
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each host's events in its feed's order, and the stream's order overall.
fn assert_ordered(events: &[Value]) {
    let mut last: HashMap<String, u64> = HashMap::new();
    let mut last_fleet = 0;
    for e in events {
        let host = e["host"].as_str().unwrap().to_string();
        let seq = e["seq"].as_u64().unwrap();
        let fs = e["fleet_seq"].as_u64().unwrap();
        assert!(fs > last_fleet, "fleet_seq went back: {e}");
        last_fleet = fs;
        if let Some(prev) = last.insert(host.clone(), seq) {
            assert!(
                seq > prev,
                "{host}'s events out of order: {prev} then {seq}"
            );
        }
    }
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn every_hosts_events_reach_a_fleet_follower_in_order_and_replay_with_since() {
    let nats = Nats::start(&users());
    let (d1, d2) = (Drover::new(), Drover::new());
    join(&d1, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    join(&d2, &nats, "h2", "h2", "pw-h2-Zr9", &[]);
    let live = Follower::start(&d1, None);
    // The follower is subscribed once the first host's event shows; create
    // panes until it does (no sleep to let it settle).
    let mut n = 0;
    assert!(
        wait_until(Duration::from_secs(20), || {
            n += 1;
            d1.ok(&[
                "pane",
                "new",
                &format!("warm{n}"),
                "--",
                "sh",
                "-c",
                "sleep 60",
            ]);
            live.wait_for_in(
                Duration::from_secs(1),
                "h1",
                "pane.created",
                &format!("warm{n}"),
            )
        }),
        "the follower saw nothing of h1"
    );
    d1.ok(&["pane", "new", "a1", "--", "sh", "-c", "sleep 60"]);
    d2.ok(&["pane", "new", "b1", "--", "sh", "-c", "sleep 60"]);
    d2.ok(&["pane", "kill", "b1"]);
    assert!(live.wait_for("h1", "pane.created", "a1"));
    assert!(live.wait_for("h2", "pane.created", "b1"));
    assert!(live.wait_for("h2", "pane.killed", "b1"));
    let seen = live.events();
    assert_ordered(&seen);
    // The events are the hosts' own feed lines, with the host added.
    let b1 = seen
        .iter()
        .find(|e| e["host"] == "h2" && e["kind"] == "pane.created")
        .unwrap();
    assert!(b1["at"].is_string() && b1["seq"].is_u64(), "{b1}");

    // Replay: --since 0 is everything the stream holds, from both hosts.
    let all = Follower::start(&d2, Some("0"));
    assert!(all.wait_for("h1", "pane.created", "a1"));
    assert!(all.wait_for("h2", "pane.killed", "b1"));
    assert_ordered(&all.events());
    // --since N starts after the stream's event N.
    let from = b1["fleet_seq"].as_u64().unwrap();
    let after = Follower::start(&d1, Some(&from.to_string()));
    assert!(after.wait_for("h2", "pane.killed", "b1"));
    let evs = after.events();
    assert!(
        evs.iter().all(|e| e["fleet_seq"].as_u64().unwrap() > from),
        "replayed at or before {from}: {evs:?}"
    );

    // Another fleet's name is refused.
    let out = run(&d1, &["events", "--follow", "--fleet", "other"], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
}

/// Events the fleet's stream no longer holds (its age or size limit took
/// them; here a purge of the oldest, as the limit would) come to a
/// follower replaying from before them as one `missed` record, host `-`,
/// with how many and from which fleet_seq, then the events it does hold —
/// as the local feed tells a subscriber that fell behind.
#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn events_the_stream_dropped_come_as_one_missed_record() {
    let nats = Nats::start(&users());
    let d = Drover::new();
    join(&d, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    let live = Follower::start(&d, Some("0"));
    for i in 1..=4 {
        d.ok(&[
            "pane",
            "new",
            &format!("p{i}"),
            "--",
            "sh",
            "-c",
            "sleep 60",
        ]);
    }
    assert!(live.wait_for("h1", "pane.created", "p4"));
    assert!(
        !live.events().iter().any(|e| e["kind"] == "missed"),
        "nothing missed while the stream held it all"
    );
    let p3 = live
        .events()
        .iter()
        .find(|e| e["kind"] == "pane.created" && e["pane"] == "p3")
        .and_then(|e| e["fleet_seq"].as_u64())
        .unwrap();
    // The stream drops everything before p3's event.
    let (rt, js) = crate::nats_common::js_as(&nats, "h1", "pw-h1-Xq7");
    rt.block_on(async {
        let s = js.get_stream("drover-lab-events").await.unwrap();
        s.purge().sequence(p3).await.unwrap();
    });
    let replay = Follower::start(&d, Some("0"));
    assert!(replay.wait_for("h1", "pane.created", "p4"));
    let evs = replay.events();
    assert_eq!(evs[0]["kind"], "missed", "{evs:?}");
    assert_eq!(evs[0]["host"], "-", "{evs:?}");
    assert_eq!(evs[0]["missed"].as_u64(), Some(p3 - 1), "{evs:?}");
    assert_eq!(evs[0]["first"].as_u64(), Some(1), "{evs:?}");
    assert_eq!(evs[0]["fleet_seq"].as_u64(), Some(p3 - 1), "{evs:?}");
    assert_eq!(evs[1]["fleet_seq"].as_u64(), Some(p3), "{evs:?}");
    assert!(
        !evs.iter().any(|e| e["pane"] == "p1" || e["pane"] == "p2"),
        "{evs:?}"
    );
    // A follower that starts inside what is held misses nothing.
    let inside = Follower::start(&d, Some(&p3.to_string()));
    assert!(inside.wait_for("h1", "pane.created", "p4"));
    assert!(
        !inside.events().iter().any(|e| e["kind"] == "missed"),
        "{:?}",
        inside.events()
    );
}
