//! Issue 42, pass 3 (items 1, 2, 4 and 6): a newcomer's own small repository
//! under `loop run --sim` — the default sim keeps it working, a red gate is
//! said in words, sim runs resume and close as they were started, a new run
//! after a crash names the crashed one before creating anything, and one
//! night carries on from the last. Real panes, git, gates and a real board.

use crate::common::{self, Drover, git, stderr, stdout};
use crate::loop_common::{in_phase, run_json, spawn_loop, task_file, wait_exit};
use std::path::{Path, PathBuf};
use std::time::Duration;

const CALC: &str = "def add(a, b):\n    return a + b\n";
const TEST_CALC: &str =
    "from calc import add\n\nassert add(2, 3) == 5, 'add is wrong'\nprint('ok')\n";

/// A small Python project with a real gate, its board's tasks claiming
/// `claims` (one task each); (repo, charter).
fn python_repo(d: &Drover, claims: &[&str], gate: &str) -> (PathBuf, PathBuf) {
    let root = d.scratch();
    let repo = root.join("calc");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("calc.py"), CALC).unwrap();
    std::fs::write(repo.join("test_calc.py"), TEST_CALC).unwrap();
    std::fs::write(repo.join("README.md"), "# calc\n\nAdds numbers.\n").unwrap();
    std::fs::write(
        repo.join("check.sh"),
        "echo first line\necho second line\necho third line\nexit 1\n",
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "calc"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    for (k, f) in claims.iter().enumerate() {
        task_file(&tasks, k as u32 + 1, &format!("Change {k}"), &[f]);
    }
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        format!("# Calc night\nlanes: 4\npool: 3\ngate: {gate}\n"),
    )
    .unwrap();
    (repo, charter)
}

fn base_args<'a>(repo: &'a Path, charter: &'a Path) -> Vec<&'a str> {
    vec![
        "loop",
        "run",
        "--charter",
        charter.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--turn-timeout-s",
        "60",
    ]
}

fn show(repo: &Path, spec: &str) -> Option<String> {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["show", spec])
        .output()
        .unwrap();
    o.status.success().then(|| stdout(&o))
}

/// Guards issue 42 item 1: the default sim implementer replaced all of a
/// claimed `calc.py` with one line, so every code task went red and parked.
#[test]
fn plain_sim_keeps_a_python_repo_working_and_lands_every_task() {
    let d = Drover::new();
    let (repo, charter) = python_repo(
        &d,
        &["calc.py", "test_calc.py", "README.md"],
        "python3 test_calc.py",
    );
    let mut args = base_args(&repo, &charter);
    args.push("--sim");
    let out = d.run(&args);
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(text.contains("## Parked\n- none\n"), "{text}");
    for id in ["TASK-1", "TASK-2", "TASK-3"] {
        assert!(text.contains(&format!("- {id} (")), "{id} landed: {text}");
    }
    let calc = show(&repo, "drover/integration/loop1:calc.py").unwrap();
    assert!(calc.starts_with(CALC), "calc.py keeps its code: {calc}");
    assert!(
        calc.contains("# TASK-1: done by drover's simulated implementer"),
        "{calc}"
    );
}

/// Guards issue 42 item 1: a red gate was never said on the console, and
/// the park reason read `exit Some(1)` with the gate's lines reversed.
#[test]
fn a_red_gate_is_said_and_parked_in_words_with_its_tail_in_order() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, &["calc.py"], "sh check.sh");
    let mut args = base_args(&repo, &charter);
    args.extend(["--sim", "--repair-rounds", "0"]);
    let out = d.run(&args);
    let err = stderr(&out);
    assert!(
        err.contains("TASK-1: gate red on the candidate (it exited with code 1)"),
        "{err}"
    );
    let v = run_json(&d);
    let reason = v["tasks"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains("(it exited with code 1): first line / second line / third line"),
        "{reason}"
    );
    assert!(!reason.contains("Some("), "{reason}");
}

/// Guards issue 42 item 2: `--sim-implementer` alone was refused for want of
/// `--sim-reviewer`; the reviewer now defaults to the passing sim.
#[test]
fn sim_implementer_alone_is_accepted() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, &["notes.md"], "python3 test_calc.py");
    let imp = d.scratch().join("imp.toml");
    std::fs::write(
        &imp,
        "[[turn]]\nsteps = [{ write = { path = \"notes.md\", content = \"hi\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n",
    )
    .unwrap();
    let mut args = base_args(&repo, &charter);
    args.extend(["--sim-implementer", imp.to_str().unwrap()]);
    let out = d.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("## Parked\n- none\n"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        show(&repo, "drover/integration/loop1:notes.md").as_deref(),
        Some("hi\n")
    );
}

/// A sim run (implementer script `imp`, which works for a minute) killed
/// with `kill -9` while TASK-1 is implementing; its lane pane stays live.
fn crashed_sim_run(d: &Drover, repo: &Path, charter: &Path, imp: &Path) {
    std::fs::write(
        imp,
        "[[turn]]\nsteps = [{ work = 60000 }, { report = { path = \"{report}\" } }, \"finish\"]\n",
    )
    .unwrap();
    // Both scripts: what is tested here holds for the old flag rules too.
    let rev = imp.with_file_name("rev.toml");
    std::fs::write(&rev, crate::loop_common::REVIEWER_PASS).unwrap();
    let mut args = base_args(repo, charter);
    args.extend([
        "--sim-implementer",
        imp.to_str().unwrap(),
        "--sim-reviewer",
        rev.to_str().unwrap(),
    ]);
    let log = d.scratch().join("loop1.log");
    let mut child = spawn_loop(d, &args, &log);
    let started = common::wait_until(Duration::from_secs(60), || {
        !in_phase(&run_json(d), "implementing").is_empty()
    });
    assert!(
        started,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    child.kill().unwrap();
    wait_exit(&mut child, Duration::from_secs(10)).expect("the loop ends at SIGKILL");
}

/// The names of the live panes.
fn live_panes(d: &Drover) -> Vec<String> {
    let out = d.run(&["pane", "ls", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["exit"].is_null())
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

/// Guards issue 42 item 4: after a `kill -9` of `loop run`, a new run
/// made loop2 and its branch and parked every task on the dead run's leases.
#[test]
fn after_a_crash_a_new_run_names_the_crashed_one_and_creates_nothing() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, &["notes.md"], "python3 test_calc.py");
    let imp = d.scratch().join("imp.toml");
    crashed_sim_run(&d, &repo, &charter, &imp);
    let panes = live_panes(&d);
    assert!(panes.iter().any(|p| p.starts_with("l1-impl-")), "{panes:?}");
    let mut args = base_args(&repo, &charter);
    args.push("--sim");
    let out = d.run(&args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("loop1") && err.contains("`drover loop run --resume 1`"),
        "{err}"
    );
    let pane = panes.iter().find(|p| p.starts_with("l1-impl-")).unwrap();
    assert!(err.contains(pane.as_str()), "names the live pane: {err}");
    assert!(!d.state.join("loop2").exists(), "no run dir was created");
    assert!(
        show(&repo, "drover/integration/loop2").is_none(),
        "no integration branch was created"
    );
}

/// Guards issue 42 item 2: the hint printed at a stop, `drover loop run
/// --resume 1`, dropped a sim run's flags (and asked for Claude and Codex).
#[test]
fn the_resume_of_a_sim_run_runs_its_recorded_sim() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, &["notes.md"], "python3 test_calc.py");
    let imp = d.scratch().join("imp.toml");
    crashed_sim_run(&d, &repo, &charter, &imp);
    // The resume runs the recorded sim (its script, now quick), not Claude.
    std::fs::write(
        &imp,
        "[[turn]]\nsteps = [{ write = { path = \"notes.md\", content = \"resumed\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n",
    )
    .unwrap();
    let out = d.run(&["loop", "run", "--resume", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        show(&repo, "drover/integration/loop1:notes.md").as_deref(),
        Some("resumed\n")
    );
}

/// Guards issue 42 item 2: `loop control N close-out` on an interrupted run
/// was refused with "resume it".
#[test]
fn close_out_closes_an_interrupted_run_without_resuming_it() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, &["notes.md"], "python3 test_calc.py");
    let imp = d.scratch().join("imp.toml");
    crashed_sim_run(&d, &repo, &charter, &imp);
    let out = d.run(&[
        "loop",
        "control",
        "1",
        "close-out",
        "--reason",
        "done for tonight",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = run_json(&d);
    assert!(v["finished_at"].is_string(), "{v}");
    assert_eq!(v["resumes"], 0, "{v}");
    let closeout = std::fs::read_to_string(d.state.join("loop1/closeout.md")).unwrap();
    assert!(
        closeout.contains("- TASK-1, the run closed before it finished"),
        "{closeout}"
    );
    let panes = live_panes(&d);
    assert!(!panes.iter().any(|p| p.starts_with("l1-")), "{panes:?}");
    // Nothing holds the repository any more: a new run starts and lands it.
    let mut args = base_args(&repo, &charter);
    args.push("--sim");
    let out = d.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(show(&repo, "drover/integration/loop2:notes.md").is_some());
}

/// Guards issue 42 item 6: a second night started again from main, and the
/// close-out did not say how to take the work or commit the board.
#[test]
fn a_run_carries_on_from_the_last_and_says_how_to_take_the_work() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, &["one.md"], "python3 test_calc.py");
    let mut args = base_args(&repo, &charter);
    args.push("--sim");
    let out = d.run(&args);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let take = format!(
        "`git -C {} merge --ff-only drover/integration/loop1`",
        repo.display()
    );
    assert!(text.contains("## Take the work\n"), "{text}");
    assert!(text.contains(&take), "{text}");
    assert!(text.contains("commit the board's marks: `git -C"), "{text}");
    assert!(text.contains("--base drover/integration/loop1`"), "{text}");
    // The next night: one more task, from loop1's branch.
    task_file(&repo.join("backlog/tasks"), 2, "Change two", &["two.md"]);
    let mut args = base_args(&repo, &charter);
    args.extend(["--sim", "--base", "drover/integration/loop1"]);
    let out = d.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        show(&repo, "drover/integration/loop2:one.md").is_some(),
        "loop1's work is in loop2"
    );
    assert!(show(&repo, "drover/integration/loop2:two.md").is_some());
    // The commands work as printed: main takes the work fast-forward.
    git(
        &repo,
        &["merge", "-q", "--ff-only", "drover/integration/loop2"],
    );
    assert!(repo.join("two.md").exists());
}

/// `demo --loop` removes its repository when it ends: its close-out shows no
/// `## Take the work` commands naming it.
#[test]
fn the_loop_demo_shows_no_commands_for_the_repository_it_removes() {
    let d = Drover::new();
    let out = d.run(&["demo", "--loop"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("## Notes\n"), "{text}");
    assert!(!text.contains("## Take the work"), "{text}");
}
