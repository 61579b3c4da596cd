//! `drover top --fleet`: every joined host's panes with their HOST, drawn in
//! a real PTY (a drover pane), from the fleet's stream on a real
//! nats-server (docs/fleet.md).

use crate::common::{self, BIN, Drover, wait_until};
use crate::fleet_join::{join, run, users};
use crate::nats_common::Nats;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

/// The pane table's rows on top's screen: (mark, host, pane, state), from
/// the line under the PANE header to the first blank line.
fn rows(screen: &str) -> Vec<(String, String, String, String)> {
    screen
        .lines()
        .skip_while(|l| !(l.contains("PANE") && l.contains("HOST")))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let mark = l.get(..1)?.trim().to_string();
            let mut w = l.get(2..)?.split_whitespace();
            let (host, pane, state) = (w.next()?, w.next()?, w.next()?);
            Some((mark, host.into(), pane.into(), state.into()))
        })
        .collect()
}

fn has(screen: &str, host: &str, pane: &str) -> bool {
    rows(screen).iter().any(|r| r.1 == host && r.2 == pane)
}

fn wait_screen(d: &Drover, pane: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    let held = wait_until(LONG, || {
        last = d.read(pane);
        ok(&last)
    });
    assert!(held, "top --fleet never showed {what}; screen:\n{last}");
    last
}

/// A sim script whose every prompt asks permission first.
fn ask_script(d: &Drover) -> std::path::PathBuf {
    let p = d.scratch().join("ask.toml");
    std::fs::write(
        &p,
        "[[turn]]\nsteps = [{ask = \"touch x\"}, {say = \"ok\"}, \"finish\"]\n",
    )
    .unwrap();
    p
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn top_fleet_shows_every_hosts_panes_with_their_host_in_a_real_pty() {
    let nats = Nats::start(&users());
    let (d1, d2) = (Drover::new(), Drover::new());
    join(&d1, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    join(&d2, &nats, "h2", "h2", "pw-h2-Zr9", &[]);
    // Made before top starts: top reads it back from the stream.
    d1.ok(&["pane", "new", "a1", "--", "sh", "-c", "sleep 120"]);
    let state = d1.state.display().to_string();
    d1.ok(&[
        "pane",
        "new",
        "top",
        "--size",
        "120x30",
        "--",
        BIN,
        "--state-dir",
        &state,
        "top",
        "--fleet",
        "lab",
    ]);
    let s = wait_screen(&d1, "top", "h1's a1 and both hosts", |s| {
        s.contains("drover top --fleet lab  2 hosts") && has(s, "h1", "a1")
    });
    assert!(s.contains("h1*"), "this host is marked:\n{s}");

    // Made while top runs: it arrives live, with its host.
    let script = ask_script(&d2);
    d2.sim("b1", "claude", Some(&script));
    let s = wait_screen(&d1, "top", "h2's b1 idle", |s| {
        rows(s)
            .iter()
            .any(|r| r.1 == "h2" && r.2 == "b1" && r.3 == "idle")
    });
    // Its own pane is not a row; a1 is still h1's.
    assert!(!rows(&s).iter().any(|r| r.2 == "top"), "{s}");
    assert!(has(&s, "h1", "a1"), "{s}");

    // A state change on h2 reaches h1's top: blocked, first, needing you.
    d2.ok(&["send", "b1", "make x"]);
    wait_screen(&d1, "top", "b1 blocked first", |s| {
        s.contains("1 need you")
            && rows(s).first().is_some_and(|r| {
                r.0 == "!" && r.1 == "h2" && r.2 == "b1" && r.3.starts_with("blocked")
            })
    });
    // Acting keys say where to act instead.
    d1.ok(&["pane", "keys", "top", "a"]);
    wait_screen(&d1, "top", "where to act", |s| {
        s.contains("b1 runs on h2: act on it with `drover top` there")
    });

    // A pane killed on h2 leaves the table.
    d2.ok(&["pane", "kill", "b1"]);
    wait_screen(&d1, "top", "b1 gone", |s| {
        !has(s, "h2", "b1") && has(s, "h1", "a1")
    });

    // q quits, exit 0.
    d1.ok(&["pane", "keys", "top", "q"]);
    assert_eq!(
        d1.wait_state(&["top"], "exited", 20_000).status.code(),
        Some(0)
    );
    let p = d1.pane("top").unwrap();
    assert_eq!(p["observation"]["exit_code"], 0, "{p}");
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn top_fleet_refuses_a_fleet_this_host_did_not_join() {
    let nats = Nats::start(&users());
    let d1 = Drover::new();
    join(&d1, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    let out = run(&d1, &["top", "--fleet", "other"], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("this host joined fleet lab, not other"),
        "{}",
        common::stderr(&out)
    );
    // A state dir that joined no fleet is refused too.
    let lone = Drover::new();
    let out = run(&lone, &["top", "--fleet", "lab"], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("has not joined a fleet"));
}
