//! A night's run simulated on a fast clock (`--clock-scale 600`: an hour in
//! six seconds): 12 sim tasks in real panes, real worktrees and a real
//! board; two lanes hit a usage limit whose menu puts "Upgrade your plan"
//! first (a blind Enter would end the sim with code 3), one lane only spins
//! its spinner (stalled, never killed), and the loop is killed with SIGKILL
//! once and resumed. The close-out accounts for every task.

use crate::common;
use crate::loop_common;

use common::{Drover, git, wait_until};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TASKS: u32 = 12;
const SCALE: i64 = 600;
/// (task, hours after the start on the loop's clock when its limit resets)
const LIMITS: [(u32, i64); 2] = [(3, 2), (9, 8)];
const STALL: u32 = 5;

fn task_file(dir: &Path, n: u32) {
    std::fs::write(
        dir.join(format!("task-{n} - Task-{n}.md")),
        format!("---\nid: TASK-{n}\ntitle: Task {n}\nstatus: To Do\nlabels: []\ndependencies: []\nmodified_files:\n  - f{n}.txt\npriority: medium\n---\n\n## Description\n\nTask {n}.\n\n## Acceptance Criteria\n- [ ] #1 done\n"),
    )
    .unwrap();
}

fn finish(n: u32) -> String {
    format!(
        "{{ write = {{ path = \"f{n}.txt\", content = \"{n}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\""
    )
}

/// The implementer's script: most tasks report progress every 0.8 s (8 min
/// of the clock) for 4 s; the limit tasks stop at their limit first; the
/// stall task spins 4 s (40 min) without a line.
fn implementer(start: chrono::DateTime<chrono::Utc>) -> String {
    let mut s = String::new();
    let talk: String = (0..5)
        .map(|i| format!("{{ work = 950 }}, {{ say = \"step {i} done\" }}, "))
        .collect();
    for n in 1..=TASKS {
        if let Some((_, h)) = LIMITS.iter().find(|(t, _)| *t == n) {
            let at = start + chrono::Duration::hours(*h);
            let resets = at.format("%-I:%M%P (UTC)").to_string();
            s.push_str(&format!(
                "[[turn]]\nmatch = \"task=TASK-{n} round=1 role=implementer continue\"\nsteps = [{talk}{}]\n",
                finish(n)
            ));
            s.push_str(&format!(
                "[[turn]]\nmatch = \"task=TASK-{n} \"\nsteps = [{{ work = 500 }}, {{ limit = {{ ms = 3000, resets = \"{resets}\", menu = [\"Upgrade your plan\", \"Add funds to continue with extra usage\", \"Stop and wait for limit to reset\"] }} }}]\n"
            ));
        } else if n == STALL {
            s.push_str(&format!(
                "[[turn]]\nmatch = \"task=TASK-{n} \"\nsteps = [{{ work = 4000 }}, {}]\n",
                finish(n)
            ));
        } else {
            s.push_str(&format!(
                "[[turn]]\nmatch = \"task=TASK-{n} \"\nsteps = [{talk}{}]\n",
                finish(n)
            ));
        }
    }
    s
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn at_of(line: &str) -> chrono::DateTime<chrono::Utc> {
    let t = line.split_whitespace().nth(2).unwrap();
    chrono::DateTime::parse_from_rfc3339(t)
        .unwrap()
        .with_timezone(&chrono::Utc)
}

/// Guards the overnight run as a whole: 12 tasks, two usage limits resumed
/// after `resets_at` by the menu's label, one stall recorded and not killed,
/// one kill -9 and `--resume`; every task lands once, every limit park and
/// resume is one DECISIONS.md line and one event.
#[test]
fn eight_hours_on_a_fast_clock_with_limits_a_stall_and_a_crash() {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    for n in 1..=TASKS {
        task_file(&tasks, n);
    }
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Night\n\n- lanes: 4\n- pool: 2\n- gate: `true`\n",
    )
    .unwrap();
    // Every implementer is Claude (its limit menu is the one chosen by label).
    d.ok(&[
        "registry",
        "init",
        "--topology",
        "four-role",
        "--agent-mix",
        "claude=12",
    ]);
    // The loop's clock starts at the wall clock's now (the first run's).
    let start = chrono::Utc::now();
    let imp: PathBuf = root.join("imp.toml");
    std::fs::write(&imp, implementer(start)).unwrap();
    let rev = root.join("rev.toml");
    std::fs::write(
        &rev,
        "[[turn]]\nsteps = [{ work = 200 }, { heartbeat = { status = \"pass\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n",
    )
    .unwrap();
    let log = root.join("loop.log");
    let s = |p: &Path| p.display().to_string();
    let common: Vec<String> = [
        "--sim-implementer",
        &s(&imp),
        "--sim-reviewer",
        &s(&rev),
        "--clock-scale",
        &SCALE.to_string(),
        "--overnight",
        "--max-consecutive-blockers",
        "0",
        "--turn-timeout-s",
        "36000",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    let mut first: Vec<String> = [
        "loop",
        "run",
        "--repo",
        &s(&repo),
        "--charter",
        &s(&charter),
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    first.extend(common.clone());
    let wall = Instant::now();
    let mut child = loop_common::spawn_loop(
        &d,
        &first.iter().map(String::as_str).collect::<Vec<_>>(),
        &log,
    );
    // The crash: once TASK-3 is back from its limit and something landed.
    // Its resume is a DECISIONS.md line, then an event: the kill waits for
    // both (a kill between the two writes would lose that one event, and
    // the count below would be off by one: a flake, not a finding).
    let decisions = d.state.join("loop1/DECISIONS.md");
    let events = d.state.join("registry/events.jsonl");
    assert!(
        wait_until(Duration::from_secs(300), || {
            let t = read(&decisions);
            t.contains(" resume: TASK-3: ")
                && t.contains(" landing: ")
                && read(&events)
                    .lines()
                    .any(|l| l.contains("\"loop.limit.resume\"") && l.contains("\"TASK-3\""))
        }),
        "TASK-3 resumed: {}",
        read(&log)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let mut resume: Vec<String> = ["loop", "run", "--resume", "1"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    resume.extend(common);
    let mut child = loop_common::spawn_loop(
        &d,
        &resume.iter().map(String::as_str).collect::<Vec<_>>(),
        &log,
    );
    let status = loop_common::wait_exit(&mut child, Duration::from_secs(600))
        .expect("the run did not finish");
    let out = read(&log);
    assert!(status.success(), "{status:?}: {out}");
    let v: serde_json::Value =
        serde_json::from_str(&read(&d.state.join("loop1/run.json"))).unwrap();
    let t = |k: &str| {
        chrono::DateTime::parse_from_rfc3339(v[k].as_str().unwrap())
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let simulated = t("finished_at") - t("started_at");
    eprintln!(
        "simulated {:.1} h of loop in {:.1} s of wall time",
        simulated.num_seconds() as f64 / 3600.0,
        wall.elapsed().as_secs_f64()
    );
    // A whole night: the second limit resets eight hours in, and the run goes on after it.
    assert!(
        simulated >= chrono::Duration::hours(8),
        "the simulated run covered only {simulated}"
    );
    let dec = read(&decisions);
    let close = read(&d.state.join("loop1/closeout.md"));
    // Every task accounted for: all landed, nothing parked.
    let landed = close.split("## Landed\n").nth(1).unwrap();
    for n in 1..=TASKS {
        assert!(
            landed.contains(&format!("- TASK-{n} (Task {n}), ")),
            "TASK-{n}: {close}\n{dec}"
        );
    }
    assert!(close.contains("## Parked\n- none\n"), "{close}");
    assert_eq!(v["resumes"], 1);
    // Each limit parked, then resumed after its resets_at by the menu's label.
    for (n, h) in LIMITS {
        let resets = start + chrono::Duration::hours(h);
        let resets = resets
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%dT%H:%M:00Z")
            .to_string();
        let park = dec
            .lines()
            .find(|l| l.contains(&format!(" park: TASK-{n}: usage limit ")))
            .unwrap_or_else(|| panic!("TASK-{n} parked: {dec}"));
        assert!(park.contains(&format!("resets {resets}")), "{park}");
        let resumed = dec
            .lines()
            .find(|l| l.contains(&format!(" resume: TASK-{n}: ")))
            .unwrap_or_else(|| panic!("TASK-{n} resumed: {dec}"));
        assert!(
            resumed.contains("chose \"Stop and wait for limit to reset\""),
            "{resumed}"
        );
        let r = chrono::DateTime::parse_from_rfc3339(&resets).unwrap();
        assert!(
            at_of(resumed) >= r + chrono::Duration::minutes(1),
            "{resumed}"
        );
    }
    // One DECISIONS.md line and one event per limit park and resume.
    let events = read(&d.state.join("registry/events.jsonl"));
    let count = |s: &str| events.lines().filter(|l| l.contains(s)).count();
    let parks = dec
        .lines()
        .filter(|l| l.contains(": usage limit on lane "))
        .count();
    let resumes = dec
        .lines()
        .filter(|l| l.contains(" after its usage limit"))
        .count();
    assert!(parks >= 2 && resumes >= 2, "{dec}");
    assert_eq!(count("\"loop.limit.park\""), parks, "{dec}");
    assert_eq!(count("\"loop.limit.resume\""), resumes, "{dec}");
    // The spinning lane: stalled, recorded, not killed, and it landed.
    assert!(
        dec.contains(&format!(
            "stall: TASK-{STALL}: lane l1-impl-task-{STALL} is stalled: working with no output change"
        )),
        "{dec}"
    );
    assert!(!dec.contains("interrupted once"), "{dec}");
    eprintln!("{close}");
}
