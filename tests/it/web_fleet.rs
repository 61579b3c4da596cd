//! `drover web --fleet`: the fleet's hosts in the page's snapshot, read
//! from a real nats-server as `top --fleet` reads them (docs/web.md).

use crate::common::{Drover, wait_until};
use crate::fleet_join::two_fast_hosts;
use crate::web_common::{LONG, Web, start_web};
use serde_json::Value;

/// The snapshot's host `host`, if listed.
fn host_of(v: &Value, host: &str) -> Option<Value> {
    v["hosts"]
        .as_array()?
        .iter()
        .find(|h| h["host"] == host)
        .cloned()
}

/// Wait until the snapshot satisfies `ok`; the last one seen.
fn wait_view(w: &Web, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let held = wait_until(LONG, || {
        last = w.view();
        ok(&last)
    });
    assert!(held, "the snapshot never showed {what}: {last}");
    last
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn the_snapshot_lists_every_joined_host_with_its_pane_count() {
    let (_nats, d1, d2) = two_fast_hosts();
    d2.ok(&["pane", "new", "b1", "--", "sh", "-c", "sleep 120"]);
    d2.ok(&["pane", "new", "b2", "--", "sh", "-c", "sleep 120"]);
    let w = start_web(&d1, &["--fleet"]);
    let v = wait_view(&w, "h1 and h2 with h2's two panes", |v| {
        host_of(v, "h1").is_some() && host_of(v, "h2").is_some_and(|h| h["panes"] == 2)
    });
    let h1 = host_of(&v, "h1").unwrap_or_default();
    assert_eq!(h1["panes"], 0, "{v}");
    for h in [&h1, &host_of(&v, "h2").unwrap_or_default()] {
        assert_eq!(h["state"], "up", "{v}");
        assert!(
            h["last_seen"].as_str().is_some_and(|s| s.ends_with('Z')),
            "{v}"
        );
    }
    // A pane killed on h2 shows in its count at its next heartbeat.
    d2.ok(&["pane", "kill", "b2"]);
    wait_view(&w, "h2 with one pane", |v| {
        host_of(v, "h2").is_some_and(|h| h["panes"] == 1)
    });
    // A pane made here counts for h1.
    d1.ok(&["pane", "new", "a1", "--", "sh", "-c", "sleep 120"]);
    wait_view(&w, "h1 with one pane", |v| {
        host_of(v, "h1").is_some_and(|h| h["panes"] == 1)
    });
}

/// Without a joined fleet, `--fleet` is refused as `top --fleet` is.
#[test]
fn fleet_without_a_joined_fleet_is_refused_in_one_sentence() {
    let d = Drover::new();
    d.serve();
    let out = d.run(&["web", "--fleet"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fleet join"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
