//! The registry from the command line: schema, v1 lift, topologies,
//! heartbeats, agent mix and events, through the real binary.

use crate::registry_common;

use registry_common::*;
use serde_json::{Value, json};
use std::io::Write;

fn sessions(v: &Value) -> Vec<(String, String, String, bool)> {
    v["sessions"]
        .as_array()
        .expect("sessions is a list")
        .iter()
        .map(|s| {
            (
                s["session_id"].as_str().unwrap_or_default().to_string(),
                s["role"].as_str().unwrap_or_default().to_string(),
                s["ship_gate"].as_str().unwrap_or_default().to_string(),
                s["write_lease_owner"]
                    .as_bool()
                    .expect("write_lease_owner is a bool"),
            )
        })
        .collect()
}

fn row(id: &str, role: &str, gate: &str, writer: bool) -> (String, String, String, bool) {
    (id.into(), role.into(), gate.into(), writer)
}

/// docs/registry.md's topology table, row for row, with idle Claude and Codex lanes.
#[test]
fn topologies_match_the_spec_table() {
    let e = Env::new();
    e.expect(
        0,
        &[
            "registry",
            "init",
            "--topology",
            "four-role",
            "--agent-mix",
            "claude=5,codex=5",
        ],
    );
    let v = e.json(&["registry", "show", "--json"]);
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["gate_policy"], "conservative");
    assert_eq!(
        v["agent_mix"],
        json!({"target": {"claude": 5, "codex": 5}, "unit": "work_unit",
               "window": {"type": "rolling_tasks", "size": 20}, "max_allowed_skew_wu": 2})
    );
    assert_eq!(
        sessions(&v),
        [
            row("orchestrator", "Orchestrator", "control-plane", false),
            row("implementer", "Implementer", "lease-owner", true),
            row("reviewer", "Reviewer", "blocking", false),
            row("ci-eval-auditor", "CI/Eval Auditor", "blocking", false),
        ]
    );
    for s in v["sessions"].as_array().unwrap() {
        assert_eq!(
            s["lanes"]["claude"],
            json!({"agent": "claude", "status": "idle", "current_turn": null, "wu_spent_rolling": 0})
        );
        assert_eq!(s["lanes"]["codex"]["agent"], "codex");
    }
    let e = Env::new();
    e.init("expanded-eight");
    let v = e.json(&["registry", "show", "--json"]);
    assert_eq!(
        sessions(&v),
        [
            row("orchestrator", "Orchestrator", "control-plane", false),
            row(
                "planner-triage",
                "Planner / Issue Triage",
                "non-blocking",
                false
            ),
            row(
                "experiment-scout",
                "Experiment Scout",
                "non-blocking",
                false
            ),
            row("implementer", "Implementer", "lease-owner", true),
            row("reviewer", "Reviewer", "blocking", false),
            row(
                "deep-reviewer",
                "Deep Reviewer",
                "blocking-if-load-bearing",
                false
            ),
            row(
                "ci-regression-auditor",
                "CI / Regression Auditor",
                "blocking",
                false
            ),
            row(
                "eval-claim-privacy-auditor",
                "Eval / Claim / Privacy Auditor",
                "blocking",
                false
            ),
        ]
    );
    assert!(e.reg_file("assignments/deep-reviewer.md").exists());
    assert!(e.reg_file("agent_mix.json").exists());
    // There is no third topology.
    let err = e.stderr(
        2,
        &["registry", "init", "--topology", "four-role-dual-agent"],
    );
    assert!(err.contains("--topology"), "{err}");
}

/// init is idempotent; another topology is refused without --force.
#[test]
fn init_is_idempotent_and_guards_the_existing_registry() {
    let e = Env::new();
    e.init("four-role");
    let before = std::fs::read(e.reg_file("session_registry.json")).unwrap();
    let out = e.expect(0, &["registry", "init", "--topology", "four-role"]);
    assert!(out.contains("already initialised"), "{out}");
    assert_eq!(
        std::fs::read(e.reg_file("session_registry.json")).unwrap(),
        before
    );
    let err = e.stderr(3, &["registry", "init", "--topology", "expanded-eight"]);
    assert!(err.contains("--force"), "{err}");
    e.expect(
        0,
        &[
            "registry",
            "init",
            "--topology",
            "expanded-eight",
            "--force",
        ],
    );
    assert_eq!(
        e.json(&["registry", "show", "--json"])["topology"],
        "expanded-eight"
    );
}

/// `--agent-mix` errors exit 2 and name the option and the problem.
#[test]
fn bad_agent_mix_is_a_usage_error() {
    let e = Env::new();
    for (bad, says) in [
        ("claude=5,gpt=5", "unknown agent"),
        ("claude=x", "whole number"),
        ("claude=0", "positive"),
        ("claude=1,claude=2", "twice"),
    ] {
        let err = e.stderr(
            2,
            &[
                "registry",
                "init",
                "--topology",
                "four-role",
                "--agent-mix",
                bad,
            ],
        );
        assert!(
            err.contains("--agent-mix") && err.contains(says),
            "{bad}: {err}"
        );
    }
    assert!(
        !e.reg_file("session_registry.json").exists(),
        "nothing written on a usage error"
    );
}

fn v1_doc(reviewer_status: &str, auditor_status: &str, at: &str) -> Value {
    json!({"schema_version": 1, "topology": "four-role", "sessions": [
        {"session_id": "orchestrator", "role": "Orchestrator", "task": null, "branch": null, "status": "active",
         "last_heartbeat": at, "next_command": null},
        {"session_id": "implementer", "role": "Implementer", "task": "T-7", "branch": "feature/T-7",
         "status": "active", "last_heartbeat": at, "next_command": "make test"},
        {"session_id": "reviewer", "role": "Reviewer", "task": "T-7", "branch": null, "status": reviewer_status,
         "last_heartbeat": at, "next_command": null},
        {"session_id": "ci-eval-auditor", "role": "CI/Eval Auditor", "task": "T-7", "branch": null,
         "status": auditor_status, "last_heartbeat": at, "next_command": null}]})
}

/// A v1 file reads as v2 (roles, lease ownership, gate classes as four-role)
/// and `show` never rewrites it; the next write stores v2.
#[test]
fn v1_is_lifted_on_read_and_not_rewritten_by_show() {
    let e = Env::new();
    e.write_doc(
        "session_registry.json",
        &v1_doc("passed", "clear", &now_rfc3339()),
    );
    let before = std::fs::read(e.reg_file("session_registry.json")).unwrap();
    let lifted = e.json(&["registry", "show", "--json"]);
    e.expect(0, &["registry", "show"]);
    e.expect(0, &["gate", "check", "--task", "T-7"]);
    assert_eq!(
        std::fs::read(e.reg_file("session_registry.json")).unwrap(),
        before,
        "reading must not rewrite v1"
    );

    let fresh = Env::new();
    fresh.init("four-role");
    let v2 = fresh.json(&["registry", "show", "--json"]);
    assert_eq!(lifted["schema_version"], 2);
    assert_eq!(
        sessions(&lifted),
        sessions(&v2),
        "four-role unchanged in roles, lease ownership, gate classes"
    );
    assert_eq!(lifted["agent_mix"], v2["agent_mix"]);
    assert_eq!(lifted["sessions"][1]["next_command"], "make test");
    assert_eq!(lifted["sessions"][2]["lanes"], v2["sessions"][2]["lanes"]);

    // The next write stores version 2.
    e.expect(
        0,
        &[
            "session-heartbeat",
            "--session",
            "orchestrator",
            "--status",
            "active",
        ],
    );
    let stored = e.read_doc("session_registry.json");
    assert_eq!(stored["schema_version"], 2);
    assert_eq!(stored["sessions"][3]["ship_gate"], "blocking");
}

/// The gate treats a lifted v1 file exactly as four-role: ready with the
/// Reviewer and the CI/Eval Auditor passing, blocked without either.
#[test]
fn v1_gate_behaviour_is_unchanged() {
    let e = Env::new();
    e.write_doc(
        "session_registry.json",
        &v1_doc("approved", "clear", &now_rfc3339()),
    );
    let r = e.json(&["gate", "check", "--json"]);
    assert_eq!(r["verdict"], "ready");
    assert_eq!(r["task"], "T-7", "defaults to the Implementer's task");
    e.write_doc(
        "session_registry.json",
        &v1_doc("approved", "failed", &now_rfc3339()),
    );
    let out = e.expect(3, &["gate", "check", "--task", "T-7", "--json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["verdict"], "blocked");
    assert_eq!(r["reasons"][0]["subject"], "ci-eval-auditor");
    // Only the Implementer may claim the write lease of a lifted registry.
    e.stderr(
        3,
        &["lease", "claim", "--task", "T-7", "--session", "reviewer"],
    );
    e.expect(0, &["lease", "claim", "--task", "T-7"]);
}

/// An unknown schema_version is an error that names the file; nothing is reset.
#[test]
fn unknown_version_is_refused_and_left_alone() {
    let e = Env::new();
    e.write_doc(
        "session_registry.json",
        &json!({"schema_version": 3, "sessions": []}),
    );
    let before = std::fs::read(e.reg_file("session_registry.json")).unwrap();
    for args in [
        &["registry", "show"][..],
        &[
            "session-heartbeat",
            "--session",
            "reviewer",
            "--status",
            "passed",
        ],
        &["registry", "init", "--topology", "four-role", "--force"],
    ] {
        let err = e.stderr(1, args);
        assert!(
            err.contains("session_registry.json") && err.contains("schema_version 3"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read(e.reg_file("session_registry.json")).unwrap(),
        before
    );
    // The same holds for the other documents.
    let e2 = Env::new();
    e2.init("four-role");
    e2.write_doc("leases.json", &json!({"schema_version": 9, "leases": []}));
    e2.write_doc("agent_mix.json", &json!({"schema_version": 9}));
    for (args, file) in [
        (&["lease", "ls"][..], "leases.json"),
        (&["lease", "claim", "--task", "T-1"], "leases.json"),
        (&["gate", "check", "--task", "T-1"], "leases.json"),
        (&["mix"], "agent_mix.json"),
        (
            &[
                "mix", "record", "--task", "T-1", "--agent", "codex", "--wu", "1",
            ],
            "agent_mix.json",
        ),
    ] {
        let err = e2.stderr(1, args);
        assert!(
            err.contains(file) && err.contains("schema_version 9"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(e2.read_doc("leases.json")["schema_version"], 9);
    assert_eq!(e2.read_doc("agent_mix.json")["schema_version"], 9);
    // A corrupt file is also an error naming it, never overwritten.
    std::fs::write(
        e.reg_file("session_registry.json"),
        b"{\"schema_version\": 2, ",
    )
    .unwrap();
    let err = e.stderr(1, &["registry", "init", "--topology", "four-role"]);
    assert!(
        err.contains("session_registry.json") && err.contains("corrupt"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(e.reg_file("session_registry.json")).unwrap(),
        b"{\"schema_version\": 2, "
    );
}

/// A lane heartbeat sets that lane's status and the session's time and task;
/// without --agent the session's status changes.
#[test]
fn heartbeats_are_lane_or_session_level() {
    let e = Env::new();
    e.init("four-role");
    let s = e.json(&[
        "session-heartbeat",
        "--session",
        "reviewer",
        "--task",
        "T-1",
        "--status",
        "working",
        "--agent",
        "claude",
        "--json",
    ]);
    assert_eq!(s["lanes"]["claude"]["status"], "working");
    assert_eq!(s["lanes"]["codex"]["status"], "idle");
    assert_eq!(s["task"], "T-1");
    assert!(s["last_heartbeat"].is_string());
    let s = e.json(&[
        "session-heartbeat",
        "--session",
        "reviewer",
        "--role",
        "Reviewer",
        "--status",
        "passed",
        "--json",
    ]);
    assert_eq!(s["status"], "passed");
    assert_eq!(s["lanes"]["claude"]["status"], "working");
    // Bad input exits 2 and names the field.
    let err = e.stderr(
        2,
        &[
            "session-heartbeat",
            "--session",
            "nobody",
            "--status",
            "passed",
        ],
    );
    assert!(
        err.contains("--session") && err.contains("reviewer"),
        "{err}"
    );
    let err = e.stderr(
        2,
        &[
            "session-heartbeat",
            "--session",
            "reviewer",
            "--role",
            "Implementer",
            "--status",
            "passed",
        ],
    );
    assert!(err.contains("--role"), "{err}");
    let err = e.stderr(
        2,
        &[
            "session-heartbeat",
            "--session",
            "reviewer",
            "--status",
            "passed",
            "--agent",
            "gpt",
        ],
    );
    assert!(err.contains("--agent"), "{err}");
    let err = e.stderr(
        2,
        &[
            "session-heartbeat",
            "--session",
            "reviewer",
            "--task",
            "../x",
            "--status",
            "passed",
        ],
    );
    assert!(err.contains("--task"), "{err}");
}

/// Past the TTL a session is shown as stale and its pass does not count.
#[test]
fn stale_heartbeats_are_shown_and_do_not_pass() {
    let e = Env::new();
    e.init("four-role");
    let mut v = e.read_doc("session_registry.json");
    for (i, at) in [(2, ago_rfc3339(31 * 60)), (3, ago_rfc3339(60))] {
        v["sessions"][i]["task"] = json!("T-1");
        v["sessions"][i]["status"] = json!("passed");
        v["sessions"][i]["last_heartbeat"] = json!(at);
    }
    e.write_doc("session_registry.json", &v);
    let show = e.expect(0, &["registry", "show"]);
    let reviewer = show
        .lines()
        .find(|l| l.starts_with("reviewer"))
        .expect("reviewer row");
    assert!(
        reviewer.contains("stale (passed)") && reviewer.contains("31m"),
        "{show}"
    );
    let auditor = show
        .lines()
        .find(|l| l.starts_with("ci-eval-auditor"))
        .expect("auditor row");
    assert!(!auditor.contains("stale"), "{show}");
    let out = e.expect(3, &["gate", "check", "--task", "T-1", "--json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["reasons"].as_array().unwrap().len(), 1);
    assert!(
        r["reasons"][0]["message"]
            .as_str()
            .unwrap()
            .contains("stale"),
        "{r}"
    );
    // A longer TTL on the heartbeat keeps it fresh.
    e.expect(
        0,
        &[
            "session-heartbeat",
            "--session",
            "reviewer",
            "--task",
            "T-1",
            "--status",
            "passed",
            "--ttl-s",
            "7200",
        ],
    );
    e.expect(0, &["gate", "check", "--task", "T-1"]);
}

/// `mix record` feeds the rolling ledger; `mix` reports target, spent, skew
/// and the next lane; the window keeps the last 20 tasks.
#[test]
fn mix_ledger_skew_and_next_lane() {
    let e = Env::new();
    e.expect(
        0,
        &[
            "registry",
            "init",
            "--topology",
            "four-role",
            "--agent-mix",
            "claude=5,codex=5",
        ],
    );
    let r = e.json(&["mix", "--json"]);
    assert_eq!(r["spent"], json!({"claude": 0, "codex": 0}));
    e.expect(
        0,
        &[
            "mix",
            "record",
            "--task",
            "T-1",
            "--agent",
            "claude",
            "--wu",
            "4",
            "--session",
            "implementer",
        ],
    );
    let r = e.json(&[
        "mix", "record", "--task", "T-2", "--agent", "codex", "--wu", "1", "--json",
    ]);
    assert_eq!(r["spent"], json!({"claude": 4, "codex": 1}));
    assert_eq!(r["skew_wu"], 1.5);
    assert_eq!(r["over_skew"], false);
    assert_eq!(r["next_agent"], "codex");
    e.expect(
        0,
        &[
            "mix", "record", "--task", "T-3", "--agent", "claude", "--wu", "2",
        ],
    );
    let r = e.json(&["mix", "--json"]);
    assert_eq!(r["over_skew"], true, "skew 2.5 > 2: {r}");
    assert!(e.expect(0, &["mix"]).contains("OVER"));
    let imp = r["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == "implementer")
        .unwrap()
        .clone();
    assert_eq!(imp["spent"], json!({"claude": 4, "codex": 0}));
    assert_eq!(
        e.read_doc("session_registry.json")["sessions"][1]["lanes"]["claude"]["wu_spent_rolling"],
        4
    );
    for i in 4..=22 {
        e.expect(
            0,
            &[
                "mix",
                "record",
                "--task",
                &format!("T-{i}"),
                "--agent",
                "codex",
                "--wu",
                "1",
            ],
        );
    }
    let ledger = e.read_doc("agent_mix.json");
    let tasks: Vec<&str> = ledger["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks.len(), 20);
    assert_eq!(tasks[0], "T-3", "T-1 and T-2 fell out of the window");
    assert_eq!(
        e.read_doc("session_registry.json")["sessions"][1]["lanes"]["claude"]["wu_spent_rolling"],
        0
    );
    let err = e.stderr(
        2,
        &[
            "mix", "record", "--task", "T-1", "--agent", "codex", "--wu", "0",
        ],
    );
    assert!(err.contains("--wu"), "{err}");
    let err = e.stderr(
        2,
        &[
            "mix",
            "record",
            "--task",
            "T-1",
            "--agent",
            "codex",
            "--wu",
            "1",
            "--session",
            "ghost",
        ],
    );
    assert!(err.contains("--session"), "{err}");
}

/// events.jsonl: seq/at/kind on every line; a torn last line is skipped with a
/// warning and the next event continues the sequence.
#[test]
fn events_have_seq_and_skip_a_torn_tail() {
    let e = Env::new();
    e.init("four-role");
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
    let log = e.reg_file("events.jsonl");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"{\"seq\": 3, \"kind\": \"torn")
        .unwrap();
    let o = e.run(&["events", "--jsonl"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("torn"), "warns");
    let evs: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(evs.len(), 2);
    for (i, ev) in evs.iter().enumerate() {
        assert_eq!(ev["seq"], i as u64 + 1);
        assert!(ev["at"].is_string() && ev["kind"].is_string());
    }
    e.expect(
        0,
        &[
            "session-heartbeat",
            "--session",
            "reviewer",
            "--status",
            "passed",
        ],
    );
    let out = e.expect(0, &["events", "--jsonl", "--kind", "session.heartbeat"]);
    let seqs: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [2, 3]);
    let human = e.expect(0, &["events"]);
    assert!(
        human.contains("registry.init") && human.contains("status=passed"),
        "{human}"
    );
}

/// The privacy audit catches each secret shape written to the log behind
/// drover's back, blocks the gate naming the rule, and never prints the secret.
#[test]
fn privacy_audit_catches_each_secret_shape() {
    let e = Env::new();
    e.init("four-role");
    for id in ["reviewer", "ci-eval-auditor"] {
        e.expect(
            0,
            &[
                "session-heartbeat",
                "--session",
                id,
                "--task",
                "T-1",
                "--status",
                "passed",
            ],
        );
    }
    e.expect(0, &["gate", "check", "--task", "T-1"]);
    let secrets = [
        ("openai-key", "sk-proj-Zq8xY2wV4uT6sR0pO1nM"),
        ("github-token", "ghp_Zq8xY2wV4uT6sR0pO1nM3lK5jH7g"),
        ("slack-token", "xoxb-998877665544-Zq8xY2wV4u"),
        ("bearer-token", "Bearer Zq8xY2wV4uT6sR0p"),
        ("env-value", "ANTHROPIC_API_KEY=Zq8xY2wV4uT6"),
        ("path-outside-state", "/home/alice/private/Zq8xY2wV.txt"),
    ];
    let log = e.reg_file("events.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    for (i, (_, s)) in secrets.iter().enumerate() {
        writeln!(f, "{}", json!({"seq": 100 + i, "at": now_rfc3339(), "kind": "leak", "detail": format!("saw {s} here")})).unwrap();
    }
    writeln!(
        f,
        "{}",
        json!({"seq": 200, "at": now_rfc3339(), "kind": "leak", "prompt": "the body"})
    )
    .unwrap();
    drop(f);
    let o = e.run(&["gate", "check", "--task", "T-1", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let r: Value = serde_json::from_str(&out).unwrap();
    let msgs: Vec<&str> = r["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["message"].as_str().unwrap())
        .collect();
    for (i, (rule, _)) in secrets.iter().enumerate() {
        assert!(
            msgs.iter()
                .any(|m| m.contains(rule) && m.contains(&format!("seq {}", 100 + i))),
            "{rule}: {msgs:?}"
        );
    }
    assert!(
        msgs.iter()
            .any(|m| m.contains("body") && m.contains("seq 200")),
        "{msgs:?}"
    );
    assert_eq!(r["privacy_findings"], 7);
    assert!(
        !out.contains("Zq8xY2wV") && !err.contains("Zq8xY2wV"),
        "a secret reached the output"
    );
}

/// Snapshot: a recorded v1 registry lifts to exactly the stored v2 document
/// (unknown fields kept), and the file itself is left as it was.
#[test]
fn v1_fixture_lifts_to_its_snapshot() {
    let e = Env::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/registry_fixtures");
    let v1 = std::fs::read(dir.join("v1_four_role.json")).unwrap();
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.join("v1_four_role.lifted.json")).unwrap())
            .unwrap();
    std::fs::create_dir_all(e.reg_file("")).unwrap();
    std::fs::write(e.reg_file("session_registry.json"), &v1).unwrap();
    assert_eq!(e.json(&["registry", "show", "--json"]), expected);
    assert_eq!(
        std::fs::read(e.reg_file("session_registry.json")).unwrap(),
        v1
    );
}

/// The gate lists every reason at once, and Planner / Experiment Scout never block.
#[test]
fn gate_lists_every_reason() {
    let e = Env::new();
    e.init("expanded-eight");
    let hb = |id: &str, task: &str, status: &str| {
        e.expect(
            0,
            &[
                "session-heartbeat",
                "--session",
                id,
                "--task",
                task,
                "--status",
                status,
            ],
        );
    };
    hb("reviewer", "T-1", "rejected");
    hb("ci-regression-auditor", "T-0", "passed");
    hb("planner-triage", "T-1", "failed");
    hb("experiment-scout", "T-1", "blocked");
    let mut v = e.read_doc("session_registry.json");
    let deep = v["sessions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["session_id"] == "deep-reviewer")
        .unwrap();
    deep["task"] = json!("T-1");
    deep["status"] = json!("approved");
    deep["last_heartbeat"] = json!(ago_rfc3339(3600));
    e.write_doc("session_registry.json", &v);
    // A lease whose worktree vanished, past its expiry: recovery-needed.
    e.expect(
        0,
        &[
            "lease",
            "claim",
            "--task",
            "T-1",
            "--worktree",
            e.path("gone").to_str().unwrap(),
        ],
    );
    let mut l = e.read_doc("leases.json");
    l["leases"][0]["expires_at"] = json!(ago_rfc3339(1));
    e.write_doc("leases.json", &l);
    let log = e.reg_file("events.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    writeln!(f, "{}", json!({"seq": 500, "at": now_rfc3339(), "kind": "leak", "auth": "token xoxp-1234567890-abcdef"})).unwrap();
    drop(f);

    let o = e.run(&["gate", "check", "--task", "T-1", "--load-bearing", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["verdict"], "blocked");
    let reasons: Vec<(String, String, String)> = r["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["check"].as_str().unwrap().into(),
                x["subject"].as_str().unwrap().into(),
                x["message"].as_str().unwrap().into(),
            )
        })
        .collect();
    let has = |check: &str, subject: &str, says: &str| {
        assert!(
            reasons
                .iter()
                .any(|(c, s, m)| c == check && s == subject && m.contains(says)),
            "no {check}/{subject} saying {says:?} in {reasons:#?}"
        );
    };
    has("session", "reviewer", "rejected");
    has("session", "deep-reviewer", "stale");
    has("session", "ci-regression-auditor", "for T-0, not T-1");
    has("session", "eval-claim-privacy-auditor", "no heartbeat yet");
    assert!(
        reasons.iter().any(|(c, s, m)| c == "lease"
            && s.starts_with("lease-")
            && m.contains("worktree is missing")),
        "{reasons:#?}"
    );
    has("privacy", "seq 500", "slack-token");
    assert_eq!(reasons.len(), 6, "{reasons:#?}");
    assert!(
        !reasons
            .iter()
            .any(|(_, s, _)| s == "planner-triage" || s == "experiment-scout")
    );
    let required: Vec<&str> = r["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        required,
        [
            "reviewer",
            "deep-reviewer",
            "ci-regression-auditor",
            "eval-claim-privacy-auditor"
        ]
    );
    let human = String::from_utf8_lossy(&o.stderr);
    assert!(
        human.contains("gate blocked") && !human.contains("1234567890"),
        "{human}"
    );
    // Without --load-bearing the Deep Reviewer does not count.
    let r: Value =
        serde_json::from_str(&e.expect(3, &["gate", "check", "--task", "T-1", "--json"])).unwrap();
    assert_eq!(r["reasons"].as_array().unwrap().len(), 5);
}
