//! Lane autotune on sim agents in real panes, real worktrees and a real
//! board: a lane much slower than its agent's others is stepped down one
//! effort level, and the next lane of that (role, agent) is launched with
//! the effort flag (the sim names the level it was started with in its
//! report); without `--lane-autotune` no lane gets one.

use crate::common;
use crate::loop_common;

use common::Drover;
use drover::loopctl::night::settings::Unattended;
use drover::loopctl::run::runner::{self, Phase, RunStatus};
use loop_common::REVIEWER_PASS;
use std::time::Duration;

const TASKS: u32 = 6;
/// TASK-3's implementer works this long; every other turn about 0.1 s.
const SLOW_MS: u64 = 12_000;

/// Every task's implementer turn: work, write its file, report, finish.
fn implementer() -> String {
    (1..=TASKS)
        .map(|k| {
            let ms = if k == 3 { SLOW_MS } else { 100 };
            format!(
                "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = {ms} }}, {{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
            )
        })
        .collect()
}

fn run(d: &Drover, autotune: bool) -> (RunStatus, String) {
    let (repo, charter) =
        loop_common::board_repo(d, TASKS, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let mut ops = loop_common::sim_lanes(d, implementer(), REVIEWER_PASS.into());
    let u = Unattended {
        autotune,
        ..Default::default()
    };
    let cfg = loop_common::run_config(d, &repo, &charter, 2, Duration::from_secs(600), u);
    let st = runner::run(&mut ops, cfg, |m| eprintln!("loop: {m}")).unwrap();
    assert!(
        st.tasks.iter().all(|t| t.kind() == Phase::Landed),
        "every task lands: {st:?}"
    );
    let dec = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    (st, dec)
}

/// The effort a lane's sim reported it was started with.
fn effort(d: &Drover, lane: &str, report: &str) -> Option<String> {
    let p = d.state.join("loop1").join(lane).join(report);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["effort"].as_str().map(str::to_string)
}

fn lanes_of(k: u32) -> [(String, &'static str); 2] {
    [
        (format!("l1-impl-task-{k}"), "report-i1.json"),
        (format!("l1-rev-task-{k}"), "report-v1.json"),
    ]
}

/// Guards the actuation of lane autotune: TASK-3's implementer lane takes
/// far more than twice its agent's median, passes, so its (role, agent) is
/// accelerated one step (recorded in DECISIONS.md, actuated), and the next
/// implementer lane of that agent starts with the effort flag; the lanes
/// before carry none.
#[test]
fn a_slow_lane_is_accelerated_and_the_next_lane_starts_at_the_lower_effort() {
    let d = Drover::new();
    let (st, dec) = run(&d, true);
    let tunes: Vec<&str> = dec.lines().filter(|l| l.contains(" autotune: ")).collect();
    eprintln!("{}", tunes.join("\n"));
    let slow = st.tasks.iter().find(|t| t.id == "TASK-3").unwrap();
    let agent = slow.agent.unwrap();
    let (from, to) = match agent {
        drover::registry::Agent::Claude => ("high", "medium"),
        drover::registry::Agent::Codex => ("medium", "low"),
    };
    let key = format!("implementer/{}", agent.as_str());
    let line = tunes
        .iter()
        .find(|l| l.contains(&format!("before iteration 4: {key}: ")))
        .unwrap_or_else(|| panic!("no decision on {key}:\n{dec}"));
    assert!(
        line.contains(&format!("accelerate {from} → {to}"))
            && line.contains(&format!("actuated: the next {key} lane starts at {to}")),
        "{line}"
    );
    // Too few timed lanes before iteration 2: recorded, not actuated.
    assert!(
        tunes
            .iter()
            .any(|l| l.contains("before iteration 2: ") && l.contains("not actuated: 1 timed")),
        "{dec}"
    );
    for k in 1..=3 {
        for (lane, report) in lanes_of(k) {
            assert_eq!(
                effort(&d, &lane, report),
                None,
                "{lane} ran before any change"
            );
        }
    }
    let next = st
        .tasks
        .iter()
        .filter(|t| t.id.as_str() > "TASK-3" && t.agent == Some(agent))
        .map(|t| t.id.clone())
        .min()
        .unwrap_or_else(|| panic!("no later task implemented by {agent}: {st:?}"));
    let lane = format!("l1-impl-{}", next.to_lowercase());
    assert_eq!(
        effort(&d, &lane, "report-i1.json").as_deref(),
        Some(to),
        "{lane} is the next {key} lane"
    );
    let kept = st
        .autotune
        .iter()
        .find(|s| s.role == drover::loopctl::ops::Role::Implementer && s.agent == agent)
        .unwrap_or_else(|| panic!("run.json keeps the effort for a resume: {:?}", st.autotune));
    assert_eq!(kept.effort, to);
    let events =
        std::fs::read_to_string(drover::statedir::StateDir::new(&d.state).registry_events())
            .unwrap_or_default();
    assert!(
        events.contains("loop.autotune") && events.contains("\"actuated\":true"),
        "the recommendation is an event too"
    );
}

/// Guards "off, nothing changes": the same run without `--lane-autotune`
/// records no autotune entry and starts every lane without an effort flag.
#[test]
fn without_the_flag_no_lane_gets_an_effort() {
    let d = Drover::new();
    let (_, dec) = run(&d, false);
    assert!(!dec.contains(" autotune: "), "{dec}");
    let run_json = std::fs::read_to_string(d.state.join("loop1/run.json")).unwrap();
    assert!(!run_json.contains("\"autotune\""), "{run_json}");
    for k in 1..=TASKS {
        for (lane, report) in lanes_of(k) {
            assert_eq!(effort(&d, &lane, report), None, "{lane}");
        }
    }
}

/// Guards the actuation on real lanes (`drover loop run --lane-autotune`):
/// the lane record (`lanes.json`) of the next implementer lane of the
/// slowed agent carries the effort flag in its launch argv; the lanes
/// before it carry none.
#[test]
fn the_cli_records_the_effort_in_the_next_lanes_argv() {
    let d = Drover::new();
    let (repo, charter) =
        loop_common::board_repo(&d, TASKS, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let root = d.scratch();
    let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp, implementer()).unwrap();
    std::fs::write(&rev, REVIEWER_PASS).unwrap();
    // Every lane record seen while the run goes: lane id → argv.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
        String,
        Vec<String>,
    >::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (seen, stop, state) = (seen.clone(), stop.clone(), d.state.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(doc) = drover::lane::load(drover::statedir::StateDir::new(&state)) {
                    let mut s = seen.lock().unwrap();
                    for l in doc.lanes {
                        s.entry(l.lane_id).or_insert(l.argv);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let out = d.run(&[
        "loop",
        "run",
        "--repo",
        &repo.display().to_string(),
        "--charter",
        &charter.display().to_string(),
        "--sim-implementer",
        &imp.display().to_string(),
        "--sim-reviewer",
        &rev.display().to_string(),
        "--lane-autotune",
        "--autotune-k",
        "2",
    ]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let st: RunStatus =
        serde_json::from_str(&std::fs::read_to_string(d.state.join("loop1/run.json")).unwrap())
            .unwrap();
    let agent = st.tasks[2].agent.unwrap();
    let (flag, to) = match agent {
        drover::registry::Agent::Claude => (vec!["--effort", "medium"], "medium"),
        drover::registry::Agent::Codex => (vec!["-c", "model_reasoning_effort=low"], "low"),
    };
    let dec = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(
        dec.contains(&format!(
            "actuated: the next implementer/{} lane starts at {to}",
            agent.as_str()
        )),
        "{dec}"
    );
    let next = st.tasks[3..]
        .iter()
        .find(|t| t.agent == Some(agent))
        .map(|t| format!("l1-impl-{}", t.id.to_lowercase()))
        .expect("a later task of the same agent");
    let seen = seen.lock().unwrap();
    let argv = seen
        .get(&next)
        .unwrap_or_else(|| panic!("{next} never seen in lanes.json: {seen:?}"));
    assert_eq!(argv[argv.len() - 2..], flag, "{argv:?}");
    for k in 1..=3 {
        let lane = format!("l1-impl-task-{k}");
        if let Some(a) = seen.get(&lane) {
            assert!(
                !a.iter()
                    .any(|x| x == "--effort" || x.starts_with("model_reasoning_effort")),
                "{lane}: {a:?}"
            );
        }
    }
}
