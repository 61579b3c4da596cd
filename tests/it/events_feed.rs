//! `drover events --follow`: the supervisor's feed against a scripted sequence
//! of changes — nothing lost, order kept, `--since` replays exactly, a slow
//! consumer is told what it missed.

use crate::common;

use common::{BIN, Drover};
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

struct Follow(common::EventFollow);

impl Follow {
    fn start(d: &Drover, args: &[&str]) -> Follow {
        Follow(common::EventFollow::of(d, args))
    }

    /// Lines until one satisfies `stop` (included).
    fn until(&self, stop: impl Fn(&Value) -> bool) -> Vec<String> {
        let mut got = Vec::new();
        loop {
            let line = self
                .0
                .next_line(LONG)
                .unwrap_or_else(|| panic!("stream ended or stalled after {got:#?}"));
            let v: Value = serde_json::from_str(&line).unwrap();
            got.push(line);
            if stop(&v) {
                return got;
            }
        }
    }
}

fn parse(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn position(evs: &[Value], kind: &str, key: &str, val: &str) -> usize {
    evs.iter()
        .position(|e| e["kind"] == kind && e[key] == val)
        .unwrap_or_else(|| panic!("no {kind} with {key}={val} in {evs:#?}"))
}

#[test]
fn follow_keeps_a_scripted_sequence_whole_and_in_order_and_since_replays_it_exactly() {
    let d = Drover::new();
    d.serve();
    let all = Follow::start(&d, &["--since", "0"]);
    d.new_pane("p1", &[], &["sh", "-c", "exec cat"]);
    assert_eq!(d.wait_state(&["p1"], "idle", 20_000).status.code(), Some(0));
    d.ok(&["job", "create", "J1"]);
    d.ok(&["job", "claim", "J1", "--session", "impl"]);
    d.ok(&["registry", "init", "--topology", "four-role"]);
    d.ok(&[
        "session-heartbeat",
        "--session-id",
        "reviewer",
        "--status",
        "working",
    ]);
    d.ok(&["pane", "kill", "p1"]);
    let lines = all.until(|v| v["kind"] == "pane.killed");
    let evs = parse(&lines);
    // Nothing lost: seqs count up by one from the first event the supervisor held.
    let seqs: Vec<u64> = evs.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs[0], 1, "{evs:#?}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    // Order kept: the scripted order.
    let created = position(&evs, "pane.created", "pane", "p1");
    let idle = position(&evs, "pane.state", "state", "idle");
    let job_create = position(&evs, "job.transition", "request", "create");
    let job_claim = position(&evs, "job.transition", "request", "claim");
    let heartbeat = position(&evs, "session.heartbeat", "source", "registry");
    let killed = position(&evs, "pane.killed", "pane", "p1");
    assert!(created < idle && idle < job_create, "{evs:#?}");
    assert!(job_create < job_claim && job_claim < heartbeat, "{evs:#?}");
    assert!(heartbeat < killed, "{evs:#?}");
    assert!(
        evs[heartbeat]["registry_seq"].as_u64().is_some(),
        "{evs:#?}"
    );
    assert_eq!(evs[job_claim]["job_id"], "J1");
    assert_eq!(evs[job_claim]["to"], "running");

    // --since replays exactly what followed that seq, byte for byte.
    let mid = seqs[job_create];
    let again = Follow::start(&d, &["--since", &mid.to_string()]);
    let replay = again.until(|v| v["kind"] == "pane.killed");
    assert_eq!(replay, lines[job_create + 1..].to_vec());

    // Filters: one pane, a kind and every kind under it.
    let only = Follow::start(&d, &["--since", "0", "--pane", "p1", "--kind", "pane"]);
    let filtered = parse(&only.until(|v| v["kind"] == "pane.killed"));
    assert!(
        filtered
            .iter()
            .all(|e| e["pane"] == "p1" && e["kind"].as_str().unwrap().starts_with("pane.")),
        "{filtered:#?}"
    );
    assert!(filtered.len() >= 3, "{filtered:#?}");
}

#[test]
fn a_slow_consumer_is_told_what_it_missed_and_the_supervisor_keeps_answering() {
    let d = Drover::new();
    d.serve();
    let client = drover::daemon::Client::connect(&d.socket()).unwrap();
    // Subscribed, and then not read while a flood goes by.
    let mut stream =
        drover::daemon::EventStream::open(client, &drover::daemon::FollowSpec::default()).unwrap();
    const N: u64 = 20_000;
    let dir = d.state.join("registry");
    std::fs::create_dir_all(&dir).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("events.jsonl"))
        .unwrap();
    let mut text = String::new();
    for i in 1..=N {
        text.push_str(&format!(
            "{{\"seq\":{i},\"at\":\"2026-01-01T00:00:00Z\",\"kind\":\"test.flood\",\"i\":{i}}}\n"
        ));
    }
    f.write_all(text.as_bytes()).unwrap();
    drop(f);
    // The supervisor answers while the consumer sleeps on a full socket.
    d.ok(&["pane", "ls"]);
    // A consumer that keeps up sees the whole flood go by; only then does the
    // slow one start reading.
    let fast = drover::daemon::Client::connect(&d.socket()).unwrap();
    let spec = drover::daemon::FollowSpec {
        since: Some(0),
        ..Default::default()
    };
    let mut fast = drover::daemon::EventStream::open(fast, &spec).unwrap();
    let mut fast_seen = 0u64;
    loop {
        let line = fast.next_line().unwrap().expect("stream open");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["kind"] == "test.flood" {
            fast_seen += 1;
        }
        if v["i"] == N {
            break;
        }
    }
    assert!(fast_seen > 0);
    let mut expect = stream.last_seq + 1;
    let mut missed = 0u64;
    let mut delivered = 0u64;
    loop {
        let line = stream.next_line().unwrap().expect("stream open");
        let v: Value = serde_json::from_str(&line).unwrap();
        let seq = v["seq"].as_u64().unwrap();
        if v["kind"] == "missed" {
            assert_eq!(v["first"].as_u64().unwrap(), expect, "{v}");
            let n = v["missed"].as_u64().unwrap();
            assert_eq!(seq, expect + n - 1, "{v}");
            missed += n;
        } else {
            assert_eq!(seq, expect, "{v}");
            delivered += 1;
        }
        expect = seq + 1;
        if v["i"] == N {
            break;
        }
    }
    assert!(
        missed > 0,
        "a consumer that never read was not told it missed any"
    );
    assert_eq!(
        missed + delivered,
        N,
        "every event is either delivered or counted"
    );
}

/// `drover events` without `--follow` still reads the registry's log, with the
/// same filters.
#[test]
fn events_without_follow_reads_the_registry_log_with_filters() {
    let d = Drover::new();
    let dir = d.state.join("registry");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("events.jsonl"),
        "{\"seq\":1,\"at\":\"t\",\"kind\":\"lane.up\",\"pane\":\"a\"}\n\
         {\"seq\":2,\"at\":\"t\",\"kind\":\"lane.down\",\"pane\":\"b\"}\n\
         {\"seq\":3,\"at\":\"t\",\"kind\":\"session.heartbeat\"}\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .env("DROVER_STATE_DIR", &d.state)
        .args(["events", "--jsonl", "--kind", "lane", "--since", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("lane.down"), "{text}");
}
