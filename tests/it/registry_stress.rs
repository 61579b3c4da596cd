//! Many real processes at once, and writers killed with SIGKILL: no update is
//! lost and no file is ever left unparseable.

use crate::registry_common;

use registry_common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

const ITERATIONS: usize = 24;
const HEARTBEAT_ROUNDS: usize = 6;
const SESSIONS: [&str; 8] = [
    "orchestrator",
    "planner-triage",
    "experiment-scout",
    "implementer",
    "reviewer",
    "deep-reviewer",
    "ci-regression-auditor",
    "eval-claim-privacy-auditor",
];

fn seqs(e: &Env) -> Vec<u64> {
    e.expect(0, &["events", "--jsonl"])
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("event line")["seq"]
                .as_u64()
                .expect("seq")
        })
        .collect()
}

/// Three processes heartbeat at once, each owning different slots (the Claude
/// lanes, the Codex lanes, the session-level statuses of all eight sessions),
/// round after round; after every round every slot holds that round's value.
/// Any lost read-modify-write would leave an older value behind.
/// A valid status per writer and round that differs from the writer's status
/// of the round before, so a lost update shows.
fn status_of(who: &str, round: usize) -> &'static str {
    const S: &[&str] = drover::registry::heartbeat::NEUTRAL_CLASS;
    let offset = match who {
        "claude" => 0,
        "codex" => 1,
        _ => 2,
    };
    S[(round + offset) % S.len()]
}

#[test]
fn concurrent_heartbeats_lose_no_update() {
    let e = Env::new();
    e.init("expanded-eight");
    for round in 0..HEARTBEAT_ROUNDS {
        std::thread::scope(|scope| {
            for who in ["claude", "codex", "session"] {
                let e = &e;
                scope.spawn(move || {
                    for session in SESSIONS {
                        let status = status_of(who, round).to_string();
                        let mut args = vec![
                            "session-heartbeat",
                            "--session",
                            session,
                            "--status",
                            &status,
                        ];
                        if who != "session" {
                            args.extend(["--agent", who]);
                        }
                        e.expect(0, &args);
                    }
                });
            }
        });
        let reg = e.read_doc("session_registry.json");
        for s in reg["sessions"].as_array().unwrap() {
            let id = &s["session_id"];
            assert_eq!(
                s["lanes"]["claude"]["status"],
                status_of("claude", round),
                "round {round}: {id} claude lane lost"
            );
            assert_eq!(
                s["lanes"]["codex"]["status"],
                status_of("codex", round),
                "round {round}: {id} codex lane lost"
            );
            assert_eq!(
                s["status"],
                status_of("session", round),
                "round {round}: {id} session status lost"
            );
        }
    }
    let s = seqs(&e);
    let expected: Vec<u64> = (1..=(1 + 24 * HEARTBEAT_ROUNDS as u64)).collect();
    assert_eq!(
        s, expected,
        "one event per heartbeat, seqs without gaps or repeats"
    );
}

/// Two processes claim different leases and record WU at the same time: every
/// lease and every ledger row survives, and event seqs never repeat.
#[test]
fn concurrent_claims_and_mix_records_lose_no_update() {
    let e = Env::new();
    e.init("four-role");
    std::thread::scope(|scope| {
        for (who, agent) in [("a", "claude"), ("b", "codex")] {
            let e = &e;
            scope.spawn(move || {
                for i in 0..ITERATIONS {
                    e.expect(0, &["lease", "claim", "--task", &format!("{who}-{i}")]);
                    e.expect(
                        0,
                        &[
                            "mix",
                            "record",
                            "--task",
                            &format!("mix-{who}"),
                            "--agent",
                            agent,
                            "--wu",
                            "1",
                            "--session",
                            "implementer",
                        ],
                    );
                }
            });
        }
    });
    let leases = e.json(&["lease", "ls", "--json"]);
    let tasks: BTreeSet<String> = leases
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["task_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tasks.len(), 2 * ITERATIONS, "every claim is present");
    let mix = e.json(&["mix", "--json"]);
    assert_eq!(mix["spent"]["claude"], ITERATIONS);
    assert_eq!(mix["spent"]["codex"], ITERATIONS);
    let lanes = &e.read_doc("session_registry.json")["sessions"][1]["lanes"];
    assert_eq!(lanes["claude"]["wu_spent_rolling"], ITERATIONS);
    assert_eq!(lanes["codex"]["wu_spent_rolling"], ITERATIONS);
    let s = seqs(&e);
    let expected: Vec<u64> = (1..=(1 + 4 * ITERATIONS as u64)).collect();
    assert_eq!(
        s, expected,
        "one event per change, seqs without gaps or repeats"
    );
}

/// SIGKILL a writer at varying moments, many times: every JSON document still
/// parses, the event log still reads, and later writes carry on.
#[test]
fn kill_9_never_leaves_an_unparseable_file() {
    let e = Env::new();
    e.init("four-role");
    e.expect(0, &["lease", "claim", "--task", "K-0"]);
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for i in 0..48 {
        let task = format!("K-{}", i % 5);
        let args: Vec<String> = match i % 4 {
            0 => vec![
                "session-heartbeat".into(),
                "--session".into(),
                "reviewer".into(),
                "--task".into(),
                task,
                "--status".into(),
                "passed".into(),
                "--agent".into(),
                "codex".into(),
            ],
            1 => vec![
                "mix".into(),
                "record".into(),
                "--task".into(),
                task,
                "--agent".into(),
                "claude".into(),
                "--wu".into(),
                "2".into(),
                "--session".into(),
                "implementer".into(),
            ],
            2 => vec!["lease".into(), "claim".into(), "--task".into(), task],
            _ => vec!["lease".into(), "release".into(), "--task".into(), task],
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = e
            .cmd(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Kill at a different moment each time: from before main() to after the write.
        std::thread::sleep(Duration::from_micros(next() % 12_000));
        let _ = child.kill();
        child.wait().unwrap();
        for name in ["session_registry.json", "leases.json", "agent_mix.json"] {
            let p = e.reg_file(name);
            if p.exists() {
                let bytes = std::fs::read(&p).unwrap();
                serde_json::from_slice::<Value>(&bytes)
                    .unwrap_or_else(|err| panic!("iteration {i}: {name} does not parse: {err}"));
            }
        }
    }
    // drover itself reads everything, and writes carry on after the kills.
    e.expect(0, &["registry", "show", "--json"]);
    e.expect(0, &["lease", "ls", "--json"]);
    e.expect(0, &["mix", "--json"]);
    e.expect(
        0,
        &[
            "session-heartbeat",
            "--session",
            "reviewer",
            "--status",
            "working",
        ],
    );
    let s = seqs(&e);
    assert!(
        s.windows(2).all(|w| w[0] < w[1]),
        "seqs strictly increase: {s:?}"
    );
    // Locks die with their holders: nothing is left locked.
    e.expect(0, &["lease", "claim", "--task", "after-kills"]);
}
