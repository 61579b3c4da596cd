//! `drover loop run --resume` after `kill -9` of the loop process, with sim
//! agents in real panes, real git worktrees and a real board: the loop is
//! killed at random points 20 times; after each kill the run files hold
//! (DECISIONS.md only grew, its entries numbered without a gap, no task
//! committed twice on the integration branch) and `--resume` goes on; at the
//! end every task landed exactly once and no lane of the run is left.

use crate::common;
use crate::loop_common;

use common::{Drover, git};
use loop_common::{spawn_loop, trailers, wait_exit};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TASKS: u32 = 8;
const KILLS: u32 = 20;

fn setup(d: &Drover) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let root = d.scratch();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let mut imp = String::new();
    for n in 1..=TASKS {
        std::fs::write(
            tasks.join(format!("task-{n} - Task-{n}.md")),
            format!("---\nid: TASK-{n}\ntitle: Task {n}\nstatus: To Do\nlabels: []\ndependencies: []\nmodified_files:\n  - f{n}.txt\npriority: medium\n---\n\n## Description\n\nTask {n}.\n\n## Acceptance Criteria\n- [ ] #1 done\n"),
        )
        .unwrap();
        imp.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{n} \"\nsteps = [{{ work = 800 }}, {{ write = {{ path = \"f{n}.txt\", content = \"{n}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
        ));
    }
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Crash run\n\n- lanes: 4\n- pool: 2\n- gate: `true`\n",
    )
    .unwrap();
    let imp_path = root.join("imp.toml");
    std::fs::write(&imp_path, imp).unwrap();
    let rev_path = root.join("rev.toml");
    std::fs::write(
        &rev_path,
        "[[turn]]\nsteps = [{ work = 100 }, { heartbeat = { status = \"pass\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n",
    )
    .unwrap();
    (repo, charter, imp_path, rev_path)
}

/// A small deterministic generator (the seed is printed to replay a failure).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        lo + (self.0 >> 33) % (hi - lo)
    }
}

/// DECISIONS.md only grew since `before`, and its entries are D1..Dk in order.
fn check_decisions(before: &str, now: &str) {
    assert!(now.starts_with(before), "DECISIONS.md was rewritten");
    assert!(now.ends_with('\n'), "a torn last line: {now}");
    for (i, l) in now.lines().filter(|l| l.starts_with("- D")).enumerate() {
        assert!(
            l.starts_with(&format!("- D{} ", i + 1)),
            "entry {} is {l:?}",
            i + 1
        );
    }
}

/// Guards resume after kill -9: 20 kills of the loop at random points, each
/// followed by `--resume`; every task lands exactly once, DECISIONS.md stays
/// append-only, no lane of the run is left.
#[test]
fn kill_9_at_random_points_then_resume_lands_every_task_once() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("seed {seed}");
    let mut rng = Lcg(seed);
    let started = Instant::now();
    // A run that finishes before all its kills is checked, and the kills go
    // on in a fresh run.
    let mut kills = 0;
    let mut runs = 0;
    while kills < KILLS {
        kills += crash_run(&mut rng, KILLS - kills);
        runs += 1;
    }
    eprintln!(
        "{kills} kills over {runs} run(s) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// One run killed up to `max_kills` times and resumed after each; returns
/// the kills made.
fn crash_run(rng: &mut Lcg, max_kills: u32) -> u32 {
    let d = Drover::new();
    let (repo, charter, imp, rev) = setup(&d);
    let log = d.scratch().join("loop.log");
    let (imp, rev) = (imp.display().to_string(), rev.display().to_string());
    let common = [
        "--sim-implementer",
        imp.as_str(),
        "--sim-reviewer",
        rev.as_str(),
        "--clock-scale",
        "60",
    ];
    let started = Instant::now();
    let (repo_s, charter_s) = (repo.display().to_string(), charter.display().to_string());
    let mut first: Vec<&str> = vec!["loop", "run", "--repo", &repo_s, "--charter", &charter_s];
    first.extend(common);
    let mut resume: Vec<&str> = vec!["loop", "run", "--resume", "1"];
    resume.extend(common);
    let decisions = d.state.join("loop1/DECISIONS.md");
    let mut child = spawn_loop(&d, &first, &log);
    let mut before = String::new();
    let mut kills = 0;
    while kills < max_kills {
        let at = Duration::from_millis(rng.next(300, 2000));
        std::thread::sleep(at);
        if child.try_wait().unwrap().is_some() {
            break; // the run finished before this kill
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        let now = std::fs::read_to_string(&decisions).unwrap_or_default();
        check_decisions(&before, &now);
        before = now;
        for (n, c) in trailers(&repo, TASKS) {
            assert!(c <= 1, "TASK-{n} committed {c} times after kill {kills}");
        }
        child = spawn_loop(&d, &resume, &log);
    }
    let status =
        wait_exit(&mut child, Duration::from_secs(600)).expect("the resumed run did not finish");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{status:?}: {text}");
    eprintln!(
        "{kills} kills; the run finished after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let now = std::fs::read_to_string(&decisions).unwrap();
    check_decisions(&before, &now);
    assert_eq!(
        trailers(&repo, TASKS),
        (1..=TASKS).map(|n| (n, 1)).collect::<Vec<_>>(),
        "every task landed exactly once: {text}\n{now}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.state.join("loop1/run.json")).unwrap())
            .unwrap();
    assert_eq!(v["state"], "closed", "{v}");
    assert!(
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["phase"] == "landed"),
        "{v}"
    );
    let close = std::fs::read_to_string(d.state.join("loop1/closeout.md")).unwrap();
    assert_eq!(
        close
            .split("## Landed\n")
            .nth(1)
            .unwrap()
            .lines()
            .take_while(|l| l.starts_with("- TASK-"))
            .count(),
        TASKS as usize,
        "{close}"
    );
    let panes: Vec<serde_json::Value> =
        serde_json::from_str(&d.ok(&["pane", "ls", "--json"])).unwrap();
    assert!(
        panes
            .iter()
            .all(|p| !p["exit"].is_null() || !p["name"].as_str().unwrap_or("").starts_with("l1-")),
        "a lane of the run is left: {panes:?}"
    );
    assert!(
        kills == 0 || now.contains(" recover: resume #"),
        "the resumes are recorded"
    );
    kills
}

/// A `run.json` whose task holds a `first_dispatch` that is no time is
/// refused on `--resume` with what is wrong, and left as it is (before,
/// it loaded and the tripwire silently skipped the task).
#[test]
fn a_run_json_with_an_unreadable_first_dispatch_is_refused_on_resume() {
    let d = Drover::new();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-json/05.json");
    let text = std::fs::read_to_string(fixture).unwrap().replacen(
        "\"first_dispatch\": \"2026-",
        "\"first_dispatch\": \"yesterday-",
        1,
    );
    assert!(
        text.contains("yesterday-"),
        "the fixture has a dispatched task"
    );
    let run = d.state.join("loop1");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("run.json"), &text).unwrap();
    let out = d.run(&["loop", "run", "--resume", "1", "--sim"]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("first_dispatch \"yesterday-") && err.contains("is not an RFC 3339 time"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(run.join("run.json")).unwrap(),
        text,
        "the file is left as it was"
    );
}
