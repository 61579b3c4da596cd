//! Owner present or overnight, the convergence tripwire and stalls, with sim
//! agents in real panes, real git worktrees and a real board on a fast clock.

use crate::common;
use crate::loop_common;

use common::Drover;
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::night::clock::Clock;
use drover::loopctl::night::guards::Guards;
use drover::loopctl::night::overnight::Mode;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::run::runner::{self, Phase, RunConfig, RunStatus};
use drover::loopctl::{night::clock, night::notify};
use loop_common::REVIEWER_PASS as REVIEWER;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A repo with `n` tasks, TASK-k claiming `f<k>.txt`, and a charter.
fn setup(d: &Drover, n: u32, pool: u32) -> (PathBuf, PathBuf) {
    loop_common::board_repo(
        d,
        n,
        &format!("- lanes: 4\n- pool: {pool}\n- gate: `true`\n"),
    )
}

fn lanes(d: &Drover, imp: String, rev: String) -> SimLanes {
    loop_common::sim_lanes(d, imp, rev)
}

fn config(d: &Drover, repo: &Path, charter: &Path, u: Unattended) -> RunConfig {
    loop_common::run_config(d, repo, charter, 3, Duration::from_secs(24 * 3600), u)
}

/// TASK-k's turn: `pre` steps, then write its file, report, finish.
fn turn(k: u32, pre: &str) -> String {
    format!(
        "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{pre}{{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
    )
}

fn fast(scale: u32, notify_to: Option<&Path>) -> (Unattended, Arc<clock::FastClock>) {
    let c = Arc::new(clock::FastClock::new(chrono::Utc::now(), scale));
    let u = Unattended {
        clock: c.clone(),
        guards: Guards {
            max_consecutive_blockers: 0,
            ..Guards::default()
        },
        notify: notify::Targets {
            cmd: notify_to.map(|p| format!("cat >> {}; echo >> {}", p.display(), p.display())),
            url: None,
            first_retry: Some(Duration::from_millis(50)),
            ..Default::default()
        },
        ..Default::default()
    };
    (u, c)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn run_collect(ops: &mut SimLanes, cfg: RunConfig) -> (RunStatus, Vec<String>) {
    let mut said = Vec::new();
    let st = runner::run(ops, cfg, |m| {
        eprintln!("loop: {m}");
        said.push(m.to_string());
    })
    .unwrap();
    (st, said)
}

/// Guards overnight mode: a permission escalation asks nothing — it goes to
/// QUESTIONS.md with a recommendation and a notification, its task is parked
/// and its lane stopped, the other task lands; when `--until` is reached on
/// the loop's clock the held question is listed first (the loop's output,
/// the close-out's For ratification, `loop status`).
#[test]
fn overnight_holds_the_question_and_lists_it_first_when_it_ends() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 2, 2);
    let notes = d.scratch().join("notes.jsonl");
    // TASK-2 works 40 min of the loop's clock (4 s real at 600×): past the end of overnight.
    let imp =
        turn(1, "{ work = 200 }, { ask = \"rm -rf build\" }, ") + &turn(2, "{ work = 4000 }, ");
    let mut ops = lanes(&d, imp, REVIEWER.into());
    let (mut u, c) = fast(600, Some(&notes));
    u.mode = Mode::Overnight {
        until: Some(c.now() + chrono::Duration::minutes(20)),
    };
    let (st, said) = run_collect(&mut ops, config(&d, &repo, &charter, u));
    let t1 = &st.tasks[0];
    assert_eq!(t1.kind(), Phase::Parked, "{t1:?}");
    assert!(
        t1.note()
            .reason
            .as_deref()
            .unwrap()
            .starts_with("permission escalation held in QUESTIONS.md (overnight)"),
        "{t1:?}"
    );
    assert_eq!(st.tasks[1].kind(), Phase::Landed, "{:?}", st.tasks[1]);
    let q = read(&d.state.join("loop1/QUESTIONS.md"));
    let qline = q
        .lines()
        .find(|l| l.contains(" TASK-1: "))
        .expect("a question");
    assert!(
        qline.contains("(permission)") && qline.contains(" — recommendation: "),
        "{q}"
    );
    let pos = |p: &str| said.iter().position(|m| m.starts_with(p));
    assert!(
        pos("TASK-1: parked: ") < pos("TASK-2: landed"),
        "parked at once, not held: {said:?}"
    );
    // The end of overnight lists the held question first.
    let over = said
        .iter()
        .position(|m| m.starts_with("OVERNIGHT OVER: 1 question(s)"))
        .expect("overnight ended on the loop's clock");
    assert!(said[over + 1].starts_with("QUESTION: TASK-1 "), "{said:?}");
    let dec = read(&d.state.join("loop1/DECISIONS.md"));
    assert!(dec.contains(" overnight: overnight mode until "), "{dec}");
    assert!(
        dec.contains(" overnight: overnight mode ended; 1 question(s)"),
        "{dec}"
    );
    let close = read(&d.state.join("loop1/closeout.md"));
    let ratify = close
        .split("## For ratification\n")
        .nth(1)
        .and_then(|s| s.lines().next())
        .unwrap();
    assert!(
        ratify.starts_with("- question held overnight (") && ratify.contains("on TASK-1"),
        "{close}"
    );
    let status = d.ok(&["loop", "status"]);
    assert!(
        status.starts_with("Questions held overnight (1):\n- "),
        "{status}"
    );
    let n = read(&notes);
    assert!(
        n.lines()
            .any(|l| l.contains("\"event\":\"escalation\"") && l.contains("TASK-1")),
        "{n}"
    );
}

/// Guards owner-present mode: a permission escalation holds its lane (no
/// park) and notifies; once the owner approves in the pane the job goes on
/// and the task lands.
#[test]
fn owner_present_holds_the_lane_until_the_owner_answers() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 1, 1);
    let notes = d.scratch().join("notes.jsonl");
    let imp = turn(1, "{ work = 200 }, { ask = \"make deploy\" }, ");
    let mut ops = lanes(&d, imp, REVIEWER.into());
    let (u, _) = fast(60, Some(&notes));
    let mut cfg = config(&d, &repo, &charter, u);
    // The owner's wait ends at the turn timeout (an hour here: a minute real).
    cfg.turn_timeout = Duration::from_secs(3600);
    let state = d.state.clone();
    let bin = common::BIN.to_string();
    let owner = std::thread::spawn(move || {
        let q = state.join("loop1/QUESTIONS.md");
        let asked = common::wait_until(Duration::from_secs(120), || read(&q).contains(" TASK-1: "));
        // The owner takes five minutes of this clock (five real seconds).
        std::thread::sleep(Duration::from_secs(5));
        let out = std::process::Command::new(&bin)
            .args(["approve", "l1-impl-task-1"])
            .env("DROVER_STATE_DIR", &state)
            .output()
            .unwrap();
        (asked, out)
    });
    let (st, said) = run_collect(&mut ops, cfg);
    let (asked, out) = owner.join().unwrap();
    assert!(asked, "the question reached QUESTIONS.md");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(st.tasks[0].kind(), Phase::Landed, "{:?}", st.tasks[0]);
    assert!(
        said.iter().any(
            |m| m.starts_with("TASK-1: lane l1-impl-task-1 is held for the owner (permission)")
        ),
        "{said:?}"
    );
    let dec = read(&d.state.join("loop1/DECISIONS.md"));
    assert!(
        dec.contains("lane l1-impl-task-1 held for the owner"),
        "{dec}"
    );
    assert!(!dec.contains(" park: "), "{dec}");
    let n = read(&notes);
    assert!(n.contains("\"event\":\"escalation\""), "{n}");
}

/// Guards the tripwire on new classes of finding: two failed review rounds
/// that each opened a new class → a `tripwire` decision and, overnight, a
/// park until the owner is back (no third round).
#[test]
fn two_rounds_with_new_findings_trip_and_park_overnight() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 1, 1);
    let imp = turn(1, "{ work = 100 }, ");
    let fail = |class: &str| {
        format!(
            "{{ heartbeat = {{ status = \"fail\" }} }}, {{ report = {{ path = \"{{report}}\", fields = {{ findings = \"bad {class}\", class = \"{class}\" }} }} }}, \"finish\""
        )
    };
    let rev = format!(
        "[[turn]]\nmatch = \"round=1 \"\nsteps = [{{ work = 100 }}, {}]\n[[turn]]\nmatch = \"round=2 \"\nsteps = [{{ work = 100 }}, {}]\n{REVIEWER}",
        fail("naming"),
        fail("tests")
    );
    let mut ops = lanes(&d, imp, rev);
    let (mut u, _) = fast(60, None);
    u.mode = Mode::Overnight { until: None };
    let (st, _) = run_collect(&mut ops, config(&d, &repo, &charter, u));
    let t = &st.tasks[0];
    assert_eq!(t.kind(), Phase::Parked, "{t:?}");
    assert_eq!(t.round(), 2, "no third round: {t:?}");
    assert!(
        t.note()
            .resume
            .as_deref()
            .unwrap()
            .starts_with("until the owner is back"),
        "{t:?}"
    );
    let dec = read(&d.state.join("loop1/DECISIONS.md"));
    let trip = dec
        .lines()
        .find(|l| l.contains(" tripwire: TASK-1: "))
        .expect(&dec);
    assert!(
        trip.contains(
            "2 failed rounds each opened a new class of finding (review:naming, review:tests)"
        ) && trip.contains("call: park; recommended: split"),
        "{trip}"
    );
}

/// Guards the tripwire's four hours and the stall class on a fast clock: a
/// lane that only animates its spinner is `stalled` (recorded, not killed);
/// four active hours after its first dispatch the task trips and is parked
/// overnight; a lane that writes output meanwhile is never stalled.
#[test]
fn four_hours_trip_a_spinning_lane_recorded_stalled_not_killed() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, 2, 2);
    // TASK-1 spins 6 h of the clock (18 s real at 1200×); TASK-2 writes a line every 10 min.
    let talk: String = (0..12)
        .map(|i| format!("{{ work = 500 }}, {{ say = \"step {i} done\" }}, "))
        .collect();
    let imp = turn(1, "{ work = 18000 }, ") + &turn(2, &talk);
    let mut ops = lanes(&d, imp, REVIEWER.into());
    let (mut u, _) = fast(1200, None);
    u.mode = Mode::Overnight { until: None };
    u.stall_after = Duration::from_secs(15 * 60);
    let (st, _) = run_collect(&mut ops, config(&d, &repo, &charter, u));
    let (t1, t2) = (&st.tasks[0], &st.tasks[1]);
    assert_eq!(t1.kind(), Phase::Parked, "{t1:?}");
    assert!(
        t1.note()
            .reason
            .as_deref()
            .unwrap()
            .starts_with("tripwire: "),
        "{t1:?}"
    );
    assert_eq!(t2.kind(), Phase::Landed, "{t2:?}");
    let dec = read(&d.state.join("loop1/DECISIONS.md"));
    assert!(
        dec.contains(
            "stall: TASK-1: lane l1-impl-task-1 is stalled: working with no output change for"
        ),
        "{dec}"
    );
    assert!(
        !dec.contains("stall: TASK-2: lane l1-impl-task-2 is stalled"),
        "{dec}"
    );
    assert!(!dec.contains("interrupted once"), "nothing killed: {dec}");
    let trip = dec
        .lines()
        .find(|l| l.contains(" tripwire: TASK-1: "))
        .expect(&dec);
    assert!(
        trip.contains("call: park; recommended: new approach"),
        "{trip}"
    );
}
