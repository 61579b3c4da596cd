//! What a task cost (LOOP.md, "What a task cost"): a lane's agent
//! reports its session's usage the way Claude Code's status line does (the
//! sim's `usage` step runs `drover signal claude-status` in its real pane),
//! and `loop run` records each task's share in `run.json`, sums the run in
//! `loop status` and writes both in the close-out. A task whose lanes
//! reported nothing is "not reported", never zero.

use crate::common::{Drover, stderr, stdout};
use crate::loop_common::{board_repo, loop_run_sim, run_json};
use serde_json::Value;

const IMP: &str = r#"[[turn]]
match = "task=TASK-1 "
steps = [{ usage = { input_tokens = 1200, output_tokens = 300, cost_usd = 0.05 } }, { work = 200 }, { write = { path = "f1.txt", content = "one\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
steps = [{ work = 200 }, { write = { path = "f2.txt", content = "two\n" } }, { report = { path = "{report}" } }, "finish"]
"#;

const REV: &str = r#"[[turn]]
match = "task=TASK-1 "
steps = [{ usage = { input_tokens = 400, output_tokens = 40, cost_usd = 0.01 } }, { heartbeat = { status = "pass" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
steps = [{ heartbeat = { status = "pass" } }, { report = { path = "{report}" } }, "finish"]
"#;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn a_tasks_usage_reaches_run_json_loop_status_and_the_closeout() {
    let d = Drover::new();
    let (repo, charter) = board_repo(&d, 2, "lanes: 4\npool: 2\ngate: true\n");
    let root = d.scratch();
    let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp, IMP).unwrap();
    std::fs::write(&rev, REV).unwrap();
    let out = loop_run_sim(
        &d,
        &charter,
        &repo,
        (&imp, &rev),
        &["--turn-timeout-s", "60"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let closeout = std::fs::read_to_string(d.state.join("loop1/closeout.md")).unwrap();
    assert!(closeout.contains("## Parked\n- none\n"), "{closeout}");

    // run.json: TASK-1's implementer and reviewer, summed; TASK-2 has none.
    let v = run_json(&d);
    let task = |id: &str| {
        v["tasks"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["id"] == id).cloned())
            .unwrap_or_default()
    };
    let u1 = task("TASK-1")["usage"].clone();
    assert_eq!(u1["input_tokens"], 1600, "{v:#}");
    assert_eq!(u1["output_tokens"], 340, "{v:#}");
    assert!(close(u1["cost_usd"].as_f64().unwrap_or(-1.0), 0.06), "{u1}");
    assert_eq!(task("TASK-2").get("usage"), None, "absent, not zero: {v:#}");

    // loop status --json: the same per task, and the run's total.
    let st: Value = serde_json::from_str(&d.ok(&["loop", "status", "--json"])).unwrap();
    assert_eq!(st["tasks"][0]["usage"], v["tasks"][0]["usage"]);
    assert_eq!(st["usage"]["tasks_reported"], 1, "{:#}", st["usage"]);
    assert_eq!(st["usage"]["tasks_with_cost"], 1);
    assert_eq!(st["usage"]["input_tokens"], 1600);
    // Its text form: the run's line.
    let text = d.ok(&["loop", "status"]);
    assert!(
        text.contains("usage: 1600 in · 340 out · $0.06 (1 of 2 task(s) reported, 1 a cost)"),
        "{text}"
    );

    // The close-out: a line per task and the run's.
    assert!(
        closeout.contains(
            "## Usage\n- TASK-1: 1600 in · 340 out · $0.06\n- TASK-2: not reported\n- run: 1600 in · 340 out · $0.06 (1 of 2 task(s) reported, 1 a cost)\n"
        ),
        "{closeout}"
    );
    assert!(
        stdout(&out).contains("## Usage"),
        "the run prints its close-out"
    );
}
