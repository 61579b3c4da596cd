//! What a pane's agent used, across its sessions (docs/agents.md, "What a
//! task cost"): Claude Code's status line, run as the agent runs it
//! (`drover signal claude-status` from the shell of a real pane, with the
//! captured status-line document carrying the figures), reaches the pane's
//! usage tally, shown by `agent explain` and `pane ls --json`. A session's
//! figures are running totals; a new session (`/clear`) or a respawn counts
//! from zero again and is added to what the finished ones used.

use crate::common::{BIN, Drover};
use crate::report_cli::in_pane;
use serde_json::{Value, json};
use std::path::PathBuf;

/// The captured status line with `session` and these totals.
fn status_line(session: &str, input: u64, output: u64, cost: f64) -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/signals/claude-2.1.332/status-line.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    v["session_id"] = session.into();
    v["context_window"]["total_input_tokens"] = input.into();
    v["context_window"]["total_output_tokens"] = output.into();
    v["cost"]["total_cost_usd"] = cost.into();
    v
}

/// Run the status line in `pane` with that document; its one line.
fn status_in(d: &Drover, pane: &str, n: u32, doc: &Value) -> String {
    let dir = d.scratch();
    let file = dir.join(format!("status-{n}.json"));
    std::fs::write(&file, doc.to_string()).unwrap();
    let r = in_pane(
        d,
        pane,
        &dir,
        100 + n,
        &format!("{BIN} signal claude-status < {}", file.display()),
    );
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    r.stdout
}

fn explain_usage(d: &Drover, pane: &str) -> Value {
    let x: Value = serde_json::from_str(&d.ok(&["agent", "explain", pane, "--json"])).unwrap();
    x.get("usage").cloned().unwrap_or(Value::Null)
}

fn ls_usage(d: &Drover, pane: &str) -> Value {
    let rows: Value = serde_json::from_str(&d.ok(&["pane", "ls", "--json"])).unwrap();
    let rows = rows.as_array().cloned().unwrap_or_default();
    let row = rows
        .iter()
        .find(|r| r["name"] == pane)
        .unwrap_or_else(|| panic!("no row for {pane}: {rows:?}"));
    row.get("usage").cloned().unwrap_or(Value::Null)
}

fn assert_usage(u: &Value, input: u64, output: u64, cost: f64) {
    assert_eq!(u["input_tokens"], input, "{u}");
    assert_eq!(u["output_tokens"], output, "{u}");
    let c = u["cost_usd"].as_f64().unwrap_or(-1.0);
    assert!((c - cost).abs() < 1e-9, "cost {c} != {cost}: {u}");
}

#[test]
fn a_panes_usage_adds_up_across_sessions_and_generations() {
    let d = Drover::new();
    d.serve();
    d.new_pane("u", &[], &["bash", "--norc", "--noprofile"]);
    d.new_pane("quiet", &[], &["bash", "--norc", "--noprofile"]);

    let line = status_in(&d, "u", 1, &status_line("s1", 1000, 200, 0.10));
    assert_eq!(line, "drover · u\n");
    assert_usage(&explain_usage(&d, "u"), 1000, 200, 0.10);
    // A running total replaces the last one of its session.
    status_in(&d, "u", 2, &status_line("s1", 1500, 300, 0.15));
    assert_usage(&explain_usage(&d, "u"), 1500, 300, 0.15);
    // `/clear`: another session, counting from zero.
    status_in(&d, "u", 3, &status_line("s2", 100, 10, 0.01));
    assert_usage(&explain_usage(&d, "u"), 1600, 310, 0.16);
    // The current session alone is still the folded view's.
    let x: Value = serde_json::from_str(&d.ok(&["agent", "explain", "u", "--json"])).unwrap();
    assert_eq!(x["view"]["usage"]["input_tokens"], 100, "{x:#}");

    // A respawn: the next generation starts from zero, even in the same session.
    d.ok(&["pane", "respawn", "u"]);
    status_in(&d, "u", 4, &status_line("s2", 50, 5, 0.005));
    let total = explain_usage(&d, "u");
    assert_usage(&total, 1650, 315, 0.165);
    assert_eq!(ls_usage(&d, "u"), total, "pane ls gives the same figure");

    // `agent explain`'s text says it in a line.
    let text = d.ok(&["agent", "explain", "u"]);
    assert!(text.contains("usage\t1650 in · 315 out · $0.1"), "{text}");
    // A pane whose agent reported nothing has no figure, not a zero one.
    assert_eq!(explain_usage(&d, "quiet"), Value::Null);
    assert!(
        d.ok(&["agent", "explain", "quiet"])
            .contains("usage\tnot reported\n")
    );
    assert_eq!(ls_usage(&d, "quiet"), Value::Null);
    // Numbers only: no session id or path in the figure.
    assert_eq!(
        total
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec![
            "cost_usd".to_string(),
            "input_tokens".to_string(),
            "output_tokens".to_string()
        ]),
        "{}",
        json!(total)
    );
}

/// `pane.explain` with `settle_ms`, as a lane going down reads its agent's
/// last figures: Claude's status line brings a turn's cost a few hundred
/// ms after `Stop` (0.23–0.52 s measured on the real TUIs), so a read
/// right at the turn's end waits for it — woken by the status line, and
/// never longer than asked; a pane with no status line answers at once.
#[test]
fn a_settled_read_waits_for_the_status_line_after_the_turn_end() {
    use drover::proto::args::PaneExplain;
    let d = Drover::new();
    d.serve();
    d.new_pane("c", &[], &["bash", "--norc", "--noprofile"]);
    d.new_pane("quiet", &[], &["bash", "--norc", "--noprofile"]);
    let dir = d.scratch();
    status_in(&d, "c", 1, &status_line("s1", 1000, 200, 0.10));
    let stop = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/signals/claude-2.1.332/Stop.json");
    let late = dir.join("late.json");
    std::fs::write(&late, status_line("s1", 1500, 300, 0.25).to_string()).unwrap();
    let mut c = drover::daemon::Client::connect(&d.socket()).unwrap();
    let mut explain = |pane: &str, settle_ms: Option<u64>| {
        let t = std::time::Instant::now();
        let x = c
            .call(PaneExplain {
                pane: pane.into(),
                settle_ms,
            })
            .unwrap();
        (x, t.elapsed())
    };
    // The agent ends its turn, and its status line follows a second later.
    let r = in_pane(
        &d,
        "c",
        &dir,
        2,
        &format!(
            "{BIN} signal claude-hook < {}; ( sleep 1; {BIN} signal claude-status < {} >/dev/null ) &",
            stop.display(),
            late.display()
        ),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let (x, _) = explain("c", None);
    assert!(x.view.turn_end.is_some(), "the Stop is in: {:?}", x.view);
    let (x, took) = explain("c", Some(10_000));
    assert_usage(
        &serde_json::to_value(x.usage.unwrap()).unwrap(),
        1500,
        300,
        0.25,
    );
    assert!(
        took < std::time::Duration::from_secs(8),
        "woken by the status line, not the bound: {took:?}"
    );
    // Settled now: the next read answers at once.
    let (_, took) = explain("c", Some(10_000));
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");

    // Another turn ends and no status line follows: the read waits as long
    // as asked, no longer, and gives what it has.
    let r = in_pane(
        &d,
        "c",
        &dir,
        3,
        &format!("{BIN} signal claude-hook < {}", stop.display()),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let (x, took) = explain("c", Some(600));
    assert!(
        took >= std::time::Duration::from_millis(550),
        "waited for the status line: {took:?}"
    );
    assert_eq!(x.usage.unwrap().cost_usd, Some(0.25));

    // A pane whose agent has no status line: nothing to wait for.
    let (x, took) = explain("quiet", Some(10_000));
    assert!(x.usage.is_none());
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
}
