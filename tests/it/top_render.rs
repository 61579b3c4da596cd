//! `drover top`'s screen, cell for cell, from a view and the interaction
//! state: 8 lanes at 80×24 and 200×60, and each footer mode. The clock is
//! fixed by the view (`now_ms`), so no timestamp moves between runs.

use drover::lane::ls::WorktreeState;
use drover::proto::PaneEntry;
use drover::top::render::render;
use drover::top::ui::{Key, Ui};
use drover::top::view::{Heartbeat, Inputs, LaneCells, View, build};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

const NOW: u64 = 1_764_590_400_000; // 2025-12-01T12:00:00Z

fn lanes_view() -> View {
    let states = [
        ("impl-claude", "claude", "working", None, 90),
        ("impl-codex", "codex", "blocked", Some("permission"), 30),
        ("rev-claude", "claude", "done", None, 600),
        ("rev-codex", "codex", "idle", None, 4000),
        ("ci-claude", "claude", "idle", None, 7200),
        ("ci-codex", "codex", "unknown", None, 5),
        ("deep-claude", "claude", "exited", None, 100),
        ("deep-codex", "codex", "starting", None, 1),
    ];
    let panes = states
        .iter()
        .map(|(n, a, st, k, ago)| {
            // A pane as `pane.ls` lists it (only the fields shown matter).
            let mut p = json!({"name": n, "agent": a, "generation": 1, "pid": 1,
                   "backend": "native", "cols": 80, "rows": 24, "argv": [], "env_names": [],
                   "env_verified": true, "started_at_ms": 0, "bytes": 0, "exit": null,
                   "attached": false,
                   "observation": {"state": st, "kind": k, "since_ms": NOW - ago * 1000,
                                   "exit_code": if *st == "exited" { Some(1) } else { None },
                                   "pane": n, "generation": 1, "since": "", "evidence": [],
                                   "screen_hash": ""}});
            // What the agents reported using: Claude's tokens and cost,
            // Codex's tokens only; the rest reported nothing.
            if *n == "impl-claude" {
                p["usage"] =
                    json!({"input_tokens": 48210, "output_tokens": 5120, "cost_usd": 0.8734});
            } else if *n == "impl-codex" {
                p["usage"] = json!({"input_tokens": 9100, "output_tokens": 870});
            }
            serde_json::from_value::<PaneEntry>(p).expect("a pane")
        })
        .collect();
    let lanes = states
        .iter()
        .enumerate()
        .map(|(i, (n, a, ..))| LaneCells {
            lane_id: n.to_string(),
            pane: n.to_string(),
            agent: a.to_string(),
            session_id: n.split('-').next().unwrap().to_string(),
            agent_version: Some(if *a == "claude" { "2.1.197" } else { "0.171.0" }.into()),
            worktree_state: if i % 3 == 0 {
                WorktreeState::Dirty
            } else {
                WorktreeState::Clean
            },
            ahead: Some(i as u64),
            behind: Some(i as u64 % 2),
            ..Default::default()
        })
        .collect();
    let mut inp = Inputs {
        panes,
        lanes,
        jobs: vec![("J-42".into(), "impl".into(), "running".into())],
        now_ms: NOW,
        ..Default::default()
    };
    inp.decisions.insert(
        "J-42".into(),
        ("hold_working".into(), Some("impl-claude".into())),
    );
    inp.leases.push((
        "impl".into(),
        "T7".into(),
        "active".into(),
        Some("wt/impl".into()),
    ));
    inp.heartbeats.insert(
        "impl".into(),
        Heartbeat {
            status: "working".into(),
            at_ms: Some(NOW - 45_000),
            stale: false,
        },
    );
    let mut v = build(&inp);
    v.detail = vec![
        "● Bash(cargo test)".into(),
        "  ⎿  Waiting…".into(),
        " Do you want to proceed?".into(),
        " ❯ 1. Yes".into(),
        "   2. No".into(),
    ];
    v
}

fn screen(view: &View, ui: &Ui, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render(f, view, ui)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[test]
fn eight_lanes_at_80x24() {
    insta::assert_snapshot!(screen(&lanes_view(), &Ui::default(), 80, 24));
}

#[test]
fn eight_lanes_at_200x60() {
    insta::assert_snapshot!(screen(&lanes_view(), &Ui::default(), 200, 60));
}

#[test]
fn confirm_send_and_filter_footers() {
    let v = lanes_view();
    let mut ui = Ui::default();
    ui.on_key(&v, Key::Char('a'));
    insta::assert_snapshot!("confirm", screen(&v, &ui, 80, 24));
    ui.on_key(&v, Key::Esc);
    ui.on_key(&v, Key::Char('s'));
    for c in "go on".chars() {
        ui.on_key(&v, Key::Char(c));
    }
    let send = screen(&v, &ui, 80, 24);
    assert!(
        send.contains("send to impl-codex (enter sends, esc cancels): go on_"),
        "{send}"
    );
    ui.on_key(&v, Key::Esc);
    ui.on_key(&v, Key::Char('/'));
    for c in "codex".chars() {
        ui.on_key(&v, Key::Char(c));
    }
    ui.on_key(&v, Key::Enter);
    insta::assert_snapshot!("filtered", screen(&v, &ui, 80, 24));
}

/// A terminal smaller than the layout asks for still draws (no panic).
#[test]
fn a_tiny_terminal_does_not_panic() {
    let v = lanes_view();
    for (w, h) in [(1, 1), (10, 3), (80, 2), (20, 24)] {
        let _ = screen(&v, &Ui::default(), w, h);
    }
}

/// Guards: between 120 and 174 columns the lane columns once squeezed the
/// pane and state columns to five characters. Columns are sized by what
/// they hold: the lane columns show where every column fits whole (always
/// from 175 on), and the pane and state are never cut where they fit.
#[test]
fn the_lane_columns_show_only_where_they_fit() {
    let v = lanes_view();
    let narrow = screen(&v, &Ui::default(), 100, 24);
    assert!(!narrow.contains("WORKTREE"), "{narrow}");
    assert!(narrow.contains("! impl-codex "), "{narrow}");
    assert!(narrow.contains("blocked:permission"), "{narrow}");
    let wide = screen(&v, &Ui::default(), 160, 24);
    assert!(wide.contains("WORKTREE"), "{wide}");
    assert!(wide.contains("blocked:permission"), "{wide}");
}

/// At 160 columns a loop's job id, decision and lease show whole (they
/// were cut to `loop3-…`); at 80 they lose their middle, not the tail that
/// tells them apart. The run shows above the table, the header says what
/// the ship gate waits for.
#[test]
fn loop_ids_show_whole_at_160_columns_and_keep_their_tail_at_80() {
    let mut v = lanes_view();
    let job = "loop3-implement-TASK-17-attempt-2";
    let lease = "TASK-17:active";
    let row = v.rows.iter_mut().find(|r| r.pane == "impl-claude").unwrap();
    row.job = Some(drover::top::view::JobCell {
        job_id: job.into(),
        status: "running".into(),
        decision: Some("hold_working".into()),
    });
    row.lease = Some(lease.into());
    v.gate = Some(drover::top::view::GateCell {
        ready: false,
        reasons: 1,
        words: "ship gate: no single task to check".into(),
    });
    v.runs = vec![drover::top::runs::RunCell {
        n: 3,
        state: drover::runstate::RunState::Running,
        live: true,
        total: 2,
        tasks: vec![drover::top::runs::RunTask {
            id: "TASK-17".into(),
            phase: drover::runstate::Phase::Implementing,
            round: 1,
            agent: Some(drover::registry::Agent::Claude),
            lane: Some("l3-impl-task-17".into()),
            ..Default::default()
        }],
        ..Default::default()
    }];
    let wide = screen(&v, &Ui::default(), 160, 30);
    assert!(wide.contains(job) && wide.contains(lease), "{wide}");
    assert!(
        wide.contains("ship gate: no single task to check"),
        "{wide}"
    );
    assert!(
        wide.contains("loop3 running · 0 of 2 landed")
            && wide.contains("TASK-17 implementing round 1 claude lane l3-impl-task-17"),
        "{wide}"
    );
    let small = screen(&v, &Ui::default(), 80, 24);
    let line = small
        .lines()
        .find(|l| l.contains("impl-claude"))
        .unwrap_or_default();
    assert!(line.contains("impl-claude "), "the pane whole: {small}");
    assert!(line.contains("…t-2 "), "the job's tail: {small}");
}
