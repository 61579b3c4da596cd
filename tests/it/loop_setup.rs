//! The charter's `setup:` (issue 42 item 11): a small Python project whose
//! gate imports a module only its setup makes (ignored by git, so never in
//! a fresh worktree), run with `loop run --sim` — real git worktrees, real
//! panes, the real gate; and each live lane's `DROVER_PORT_BASE`.

use crate::common;
use crate::lanes_common;
use crate::loop_common::at_integration;

use common::{Drover, git, stderr, stdout};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn task(dir: &Path, id: &str, files: &str) {
    std::fs::write(
        dir.join(format!("{} - T.md", id.to_lowercase())),
        format!("---\nid: {id}\ntitle: Task {id}\nstatus: To Do\nlabels: []\ndependencies: []\nmodified_files: [{files}]\n---\n\n## Description\nDo {id}.\n"),
    )
    .unwrap();
}

/// A Python repo whose test needs `generated.py` (ignored), a board of
/// `tasks` tasks each claiming a new note, and a charter with `extra`
/// lines; (repo, charter).
fn python_repo(d: &Drover, tasks: usize, extra: &str) -> (PathBuf, PathBuf) {
    let root = d.scratch();
    let repo = root.join("calc");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(".gitignore"), "generated.py\n__pycache__/\n").unwrap();
    std::fs::write(
        repo.join("calc.py"),
        "from generated import BASE\n\n\ndef add(a, b):\n    return BASE + a + b\n",
    )
    .unwrap();
    std::fs::write(
        repo.join("test_calc.py"),
        "import calc\n\nassert calc.add(1, 2) == 3, calc.add(1, 2)\nprint('ok')\n",
    )
    .unwrap();
    let dir = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&dir).unwrap();
    for n in 1..=tasks {
        task(&dir, &format!("TASK-{n}"), &format!("notes/TASK-{n}.md"));
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "calc"]);
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        format!("# Calc\nlanes: 4\ngate: `python3 test_calc.py`\n{extra}"),
    )
    .unwrap();
    (repo, charter)
}

fn run(d: &Drover, repo: &Path, charter: &Path) -> std::process::Output {
    d.run(&[
        "loop",
        "run",
        "--charter",
        charter.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--turn-timeout-s",
        "60",
        "--sim",
    ])
}

fn lane_file(d: &Drover, task: u32, name: &str) -> String {
    std::fs::read_to_string(d.state.join(format!("loop1/l1-impl-task-{task}/{name}")))
        .unwrap_or_default()
}

/// The setup makes what the gate imports, in the task's worktree (with the
/// lane's port base), the gate's checkout and the integration worktree:
/// the task lands; without `setup:` the same board does not (its gate is red).
#[test]
fn a_setup_makes_what_the_gate_needs_and_the_task_lands() {
    let d = Drover::new();
    let setup =
        "setup: `echo \"port base $DROVER_PORT_BASE\"; printf 'BASE = 0\\n' > generated.py`\n";
    let (repo, charter) = python_repo(&d, 1, &format!("pool: 1\n{setup}"));
    let out = run(&d, &repo, &charter);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("## Parked\n- none\n"), "{text}");
    assert!(at_integration(&repo, "notes/TASK-1.md"), "{text}");
    // The lane's setup ran with its port base; the gate's checkout and the
    // integration worktree were set up too, their output kept.
    let log = lane_file(&d, 1, "setup.log");
    assert!(log.starts_with("port base 20000"), "{log:?}");
    // The gate's checkout is set up in the lane dir its gate log goes to.
    let gate_logs: Vec<String> = std::fs::read_dir(d.state.join("loop1"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("gate-setup.log")).ok())
        .collect();
    assert_eq!(gate_logs.len(), 1, "{gate_logs:?}");
    assert!(gate_logs[0].starts_with("port base "), "{gate_logs:?}");
    assert!(d.state.join("loop1/integration-setup.log").is_file());

    // The same board without `setup:` does not land: the gate cannot
    // import what only the setup makes.
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, 1, "pool: 1\n");
    let text = stdout(&run(&d, &repo, &charter));
    assert!(!at_integration(&repo, "notes/TASK-1.md"), "{text}");
    assert!(text.contains("generated"), "{text}");
}

/// A failing setup parks its task with the end of its output (in order,
/// control characters gone), and the task's agent never starts.
#[test]
fn a_failing_setup_parks_the_task_with_its_tail_and_starts_no_agent() {
    let d = Drover::new();
    let (repo, charter) = python_repo(
        &d,
        1,
        "setup: `echo preparing; printf '\\033[31mno requirements.txt\\033[0m\\n' >&2; exit 3`\n",
    );
    let out = run(&d, &repo, &charter);
    let text = stdout(&out);
    assert!(
        text.contains("setup failed in the worktree (exit 3): preparing / no requirements.txt"),
        "{text}{}",
        stderr(&out)
    );
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(lane_file(&d, 1, "setup.log").contains("no requirements.txt"));
    // No pane was made for the lane, no job dispatched, no lane recorded.
    let events = std::fs::read_to_string(d.state.join("registry/events.jsonl")).unwrap_or_default();
    assert!(
        !events
            .lines()
            .any(|l| l.contains("pane.created") && l.contains("l1-impl-task-1")),
        "{events}"
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.state.join("loop1/run.json")).unwrap())
            .unwrap();
    let t = &run_json["tasks"][0];
    assert!(t["first_dispatch"].is_null(), "{t}");
    assert!(lanes_common::records(&d).is_empty());
}

/// A setup past its `setup-timeout:` is ended (with what it started) and
/// parks its task.
#[test]
fn a_setup_over_its_time_bound_is_ended_and_parks() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, 1, "setup-timeout: 1\nsetup: `echo slow; sleep 60`\n");
    let t0 = Instant::now();
    let out = run(&d, &repo, &charter);
    let text = stdout(&out);
    assert!(
        text.contains("setup failed in the worktree (timed out after 1 s): slow"),
        "{text}{}",
        stderr(&out)
    );
    assert!(t0.elapsed() < Duration::from_secs(50), "{:?}", t0.elapsed());
}

/// Two live lanes never share a port base; a lane brought up after another
/// went down takes the freed one (two tasks at once, then one at a time).
#[test]
fn live_lanes_have_their_own_port_base_and_a_freed_one_is_reused() {
    let bases = |pool: u32| {
        let d = Drover::new();
        let setup =
            "setup: `echo \"port base $DROVER_PORT_BASE\"; printf 'BASE = 0\\n' > generated.py`\n";
        let (repo, charter) = python_repo(&d, 2, &format!("pool: {pool}\n{setup}"));
        let out = run(&d, &repo, &charter);
        assert!(at_integration(&repo, "notes/TASK-2.md"), "{}", stdout(&out));
        [1, 2].map(|n| {
            lane_file(&d, n, "setup.log")
                .lines()
                .next()
                .map(str::to_string)
        })
    };
    let [a, b] = bases(2);
    assert_eq!(a.as_deref(), Some("port base 20000"));
    assert_eq!(b.as_deref(), Some("port base 20100"));
    let [a, b] = bases(1);
    assert_eq!(a.as_deref(), Some("port base 20000"));
    assert_eq!(b.as_deref(), Some("port base 20000"));
}

/// The port base reaches each lane's pane (its agent's env) and is distinct
/// among live lanes; `lane down` frees it for the next `lane up`.
#[test]
fn lane_up_gives_each_pane_its_own_port_base() {
    let d = Drover::new();
    let r = lanes_common::repo(&d);
    lanes_common::up(&d, &r, "implementer", &[]);
    let base_of = |id: &str| {
        let recs = lanes_common::records(&d);
        let rec = recs.iter().find(|x| x["lane_id"] == id).unwrap().clone();
        let pid = rec["pid"].as_i64().unwrap() as i32;
        lanes_common::environ(pid)
            .into_iter()
            .find(|(k, _)| k == "DROVER_PORT_BASE")
            .map(|(_, v)| v)
    };
    let (c, x) = (base_of("implementer-claude"), base_of("implementer-codex"));
    assert!(c.is_some() && x.is_some() && c != x, "{c:?} {x:?}");
    d.ok(&["lane", "down", "implementer-claude"]);
    lanes_common::up(&d, &r, "reviewer", &[]);
    let taken: Vec<Option<String>> = ["reviewer-claude", "reviewer-codex"]
        .iter()
        .map(|id| base_of(id))
        .collect();
    assert!(
        taken.contains(&c),
        "the freed base is reused: {taken:?} {c:?}"
    );
    assert!(!taken.contains(&x), "{taken:?} {x:?}");
    d.ok(&["lane", "down", "--all"]);
}

/// A port range start that is not a port is refused before a run starts
/// (exit 2), not found lane by lane.
#[test]
fn a_bad_port_range_start_is_refused_before_the_run() {
    let d = Drover::new();
    let (repo, charter) = python_repo(&d, 1, "");
    let out = d
        .cmd()
        .env("DROVER_PORT_START", "eighty")
        .args([
            "loop",
            "run",
            "--charter",
            charter.to_str().unwrap(),
            "--repo",
            repo.to_str().unwrap(),
            "--sim",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("DROVER_PORT_START"),
        "{}",
        stderr(&out)
    );
    assert!(!d.state.join("loop1").exists());
}
