//! The loop left alone: guards (each trips, decision `blocked`), controls
//! (pause/resume, close-out, emergency stop during a landing), with sim
//! agents in real panes, real git worktrees and a real board.

use crate::common;
use crate::loop_common;

use common::{Drover, wait_until};
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::night::clock;
use drover::loopctl::night::control::{self, Control};
use drover::loopctl::night::guards::Guards;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::run::runner::{self, Phase, RunConfig, RunStatus};
use loop_common::REVIEWER_PASS as REVIEWER;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A repo with `n` tasks, TASK-k claiming `f<k>.txt`, and a charter.
fn setup(d: &Drover, n: u32, gate: &str) -> (PathBuf, PathBuf) {
    loop_common::board_repo(d, n, &format!("- lanes: 4\n- pool: 1\n- gate: `{gate}`\n"))
}

fn lanes(d: &Drover, imp: String) -> SimLanes {
    loop_common::sim_lanes(d, imp, REVIEWER.into())
}

fn config(d: &Drover, repo: &Path, charter: &Path, u: Unattended) -> RunConfig {
    loop_common::run_config(d, repo, charter, 1, Duration::from_secs(120), u)
}

/// Each task's implementer writes its own file; `outside` tasks also write
/// a file outside their claim (a blocker).
fn implementer(n: u32, work_ms: u64, outside: &[u32]) -> String {
    let mut s = String::new();
    for k in 1..=n {
        let extra = if outside.contains(&k) {
            "{ write = { path = \"stray.txt\", content = \"x\\n\" } }, "
        } else {
            ""
        };
        s.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = {work_ms} }}, {{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {extra}{{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
        ));
    }
    s
}

fn phases(st: &RunStatus) -> Vec<(String, Phase)> {
    st.tasks.iter().map(|t| (t.id.clone(), t.kind())).collect()
}

fn decisions(d: &Drover) -> String {
    std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap()
}

/// Guards --max-iterations: one task started, the rest never, decision `blocked`.
#[test]
fn max_iterations_stops_the_run_blocked() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 3, "true");
    let mut ops = lanes(&d, implementer(3, 100, &[]));
    let u = Unattended {
        guards: Guards {
            max_iterations: 1,
            ..Guards::default()
        },
        ..Default::default()
    };
    let st = runner::run(&mut ops, config(&d, &repo, &charter, u), |m| {
        eprintln!("loop: {m}")
    })
    .unwrap();
    assert_eq!(st.state.as_str(), "blocked", "a guard stop is not success");
    assert_eq!(st.iterations, 1);
    assert_eq!(
        phases(&st)[0].1,
        Phase::Landed,
        "in-flight work settles and lands"
    );
    assert!(
        st.tasks[1..].iter().all(|t| t.kind() == Phase::Ready),
        "{:?}",
        phases(&st)
    );
    assert!(
        st.stopped_by
            .as_deref()
            .unwrap()
            .starts_with("guard max-iterations")
    );
    assert!(decisions(&d).contains(" blocked: guard max-iterations: 1 task(s) started"));
}

/// Guards --max-consecutive-blockers: two parks in a row stop the run; the third task never starts.
#[test]
fn consecutive_blockers_stop_the_run_blocked() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 3, "true");
    let mut ops = lanes(&d, implementer(3, 100, &[1, 2, 3]));
    let u = Unattended {
        guards: Guards {
            max_consecutive_blockers: 2,
            ..Guards::default()
        },
        ..Default::default()
    };
    let st = runner::run(&mut ops, config(&d, &repo, &charter, u), |m| {
        eprintln!("loop: {m}")
    })
    .unwrap();
    assert_eq!(st.state.as_str(), "blocked");
    let p = phases(&st);
    assert_eq!(
        (p[0].1, p[1].1, p[2].1),
        (Phase::Parked, Phase::Parked, Phase::Ready),
        "{p:?}"
    );
    assert!(decisions(&d).contains("blocked: guard max-consecutive-blockers: 2 blockers in a row"));
}

/// Guards --wall-clock-s on a fast clock: a turn longer than the budget is
/// cancelled when the budget runs out, its task deferred, decision `blocked`.
#[test]
fn the_wall_clock_budget_bounds_a_turn() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 2, "true");
    let mut ops = lanes(&d, implementer(2, 20_000, &[]));
    let u = Unattended {
        clock: Arc::new(clock::FastClock::new(chrono::Utc::now(), 120)),
        guards: Guards {
            wall_clock: Some(Duration::from_secs(600)),
            max_consecutive_blockers: 0,
            ..Guards::default()
        },
        ..Default::default()
    };
    let mut cfg = config(&d, &repo, &charter, u);
    cfg.turn_timeout = Duration::from_secs(24 * 3600);
    let st = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}")).unwrap();
    assert_eq!(st.state.as_str(), "blocked");
    assert!(
        st.stopped_by
            .as_deref()
            .unwrap()
            .starts_with("guard wall-clock"),
        "{st:?}"
    );
    let t1 = &st.tasks[0];
    assert_eq!(t1.kind(), Phase::Parked);
    assert!(
        t1.note()
            .reason
            .as_deref()
            .unwrap()
            .contains("wall-clock budget ran out"),
        "{t1:?}"
    );
    assert_eq!(
        st.tasks[1].kind(),
        Phase::Ready,
        "nothing starts past the budget"
    );
}

/// Runs a loop on this thread while `control` acts on it from another.
fn with_control(
    d: &Drover,
    n: u32,
    gate: &str,
    work_ms: u64,
    control: impl FnOnce(&Path, std::sync::mpsc::Receiver<String>) + Send + 'static,
) -> RunStatus {
    let (repo, charter) = setup(d, n, gate);
    let mut ops = lanes(d, implementer(n, work_ms, &[]));
    let (tx, rx) = std::sync::mpsc::channel();
    let state = d.state.clone();
    let h = std::thread::spawn(move || {
        let run = state.join("loop1");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| control(&state, rx)));
        if r.is_err() {
            // Never leave the loop paused or running behind a failed check.
            let _ = control::write(&run, Control::EmergencyStop, "the test's check failed");
        }
        r
    });
    let st = runner::run(
        &mut ops,
        config(d, &repo, &charter, Unattended::default()),
        move |m| {
            eprintln!("loop: {m}");
            let _ = tx.send(m.to_string());
        },
    )
    .unwrap();
    if let Err(e) = h.join().unwrap() {
        std::panic::resume_unwind(e);
    }
    st
}

fn wait_line(rx: &std::sync::mpsc::Receiver<String>, pred: impl Fn(&str) -> bool) -> String {
    loop {
        let m = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the loop said it");
        if pred(&m) {
            return m;
        }
    }
}

/// Guards pause: in-flight work settles, `PAUSED: <reason>`, nothing starts until resume; then all land.
#[test]
fn pause_settles_then_resume_goes_on() {
    let d = Drover::new();
    let st = with_control(&d, 2, "true", 300, |state, rx| {
        let run = state.join("loop1");
        wait_line(&rx, |m| m.starts_with("TASK-1: implementing"));
        control::write(&run, Control::Pause, "lunch").unwrap();
        let paused = wait_line(&rx, |m| m.starts_with("PAUSED:"));
        assert_eq!(paused, "PAUSED: lunch");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
        assert_eq!(v["state"], "paused");
        // Paused: TASK-1 settled (landed), TASK-2 not started.
        let phases: Vec<&str> = v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["phase"].as_str().unwrap())
            .collect();
        assert_eq!(phases, ["landed", "ready"]);
        control::write(&run, Control::Resume, "back").unwrap();
    });
    assert_eq!(st.state.as_str(), "closed");
    assert!(
        st.tasks.iter().all(|t| t.kind() == Phase::Landed),
        "{:?}",
        phases(&st)
    );
    let dec = decisions(&d);
    assert!(
        dec.contains(" control: pause: lunch") && dec.contains(" control: resume"),
        "{dec}"
    );
}

/// Guards close-out: the task in flight finishes and lands, nothing new starts.
#[test]
fn close_out_lets_in_flight_work_land() {
    let d = Drover::new();
    let st = with_control(&d, 3, "true", 300, |state, rx| {
        wait_line(&rx, |m| m.starts_with("TASK-1: implementing"));
        control::write(&state.join("loop1"), Control::CloseOut, "morning").unwrap();
    });
    assert_eq!(st.state.as_str(), "closed");
    assert_eq!(st.stopped_by.as_deref(), Some("control close-out: morning"));
    let p = phases(&st);
    assert_eq!(
        (p[0].1, p[1].1, p[2].1),
        (Phase::Landed, Phase::Ready, Phase::Ready),
        "{p:?}"
    );
}

/// Guards emergency stop during a landing: the landing's gate is ended and
/// the landing dropped as one unit (nothing of it on the integration
/// branch; issue 24 item 5), then everything stops — nothing else is
/// dispatched or landed, every lane is down, the close-out is written.
#[test]
fn emergency_stop_during_a_landing() {
    let d = Drover::new();
    let flag = d.scratch().join("landing.flag");
    let gate = format!(
        "case \"$PWD\" in *-integration) touch {}; sleep 2;; esac; true",
        flag.display()
    );
    let st = with_control(&d, 3, &gate, 200, move |state, _rx| {
        assert!(
            wait_until(Duration::from_secs(120), || flag.exists()),
            "a landing started"
        );
        control::write(&state.join("loop1"), Control::EmergencyStop, "fire").unwrap();
    });
    assert_eq!(st.state.as_str(), "stopped");
    assert_eq!(
        st.stopped_by.as_deref(),
        Some("control emergency-stop: fire")
    );
    let p = phases(&st);
    assert_eq!(
        p[0].1,
        Phase::Landing,
        "the landing under way was ended whole, its candidate still queued: {p:?}"
    );
    assert_eq!(loop_common::trailers(&st.repo, 1), vec![(1, 0)]);
    assert_ne!(p[1].1, Phase::Landed, "{p:?}");
    assert_eq!(
        p[2].1,
        Phase::Ready,
        "nothing new started after the stop: {p:?}"
    );
    assert_eq!(st.landings, 1);
    assert!(d.state.join("loop1/closeout.md").is_file());
    let panes: Vec<serde_json::Value> =
        serde_json::from_str(&d.ok(&["pane", "ls", "--json"])).unwrap();
    assert!(
        panes
            .iter()
            .all(|p| !p["exit"].is_null() || !p["name"].as_str().unwrap_or("").starts_with("l1-")),
        "{panes:?}"
    );
}
