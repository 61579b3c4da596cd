//! `loop run --sim` as a new user first runs it: with no scripts each sim
//! lane is a minimal obedient agent, and the example scripts LOOP.md shows
//! run as written. Real panes, real git worktrees, a real board.

use crate::common;

use crate::loop_common::at_integration;
use common::{Drover, git, stderr, stdout};
use std::path::{Path, PathBuf};

fn task(dir: &Path, id: &str, files: &str) {
    std::fs::write(
        dir.join(format!("{} - T.md", id.to_lowercase())),
        format!("---\nid: {id}\ntitle: Task {id}\nstatus: To Do\nlabels: []\ndependencies: []\nmodified_files: [{files}]\n---\n\n## Description\nDo {id}.\n"),
    )
    .unwrap();
}

/// A repo with a board of TASK-1 and TASK-2 claiming `files1` and `files2`,
/// and a charter; (repo, charter).
fn board(d: &Drover, files1: &str, files2: &str) -> (PathBuf, PathBuf) {
    let root = d.scratch();
    let repo = root.join("r");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task(&tasks, "TASK-1", files1);
    task(&tasks, "TASK-2", files2);
    let charter = root.join("CHARTER.md");
    std::fs::write(&charter, "# Two tasks\nlanes: 4\npool: 2\ngate: true\n").unwrap();
    (repo, charter)
}

fn run(d: &Drover, repo: &Path, charter: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "loop",
        "run",
        "--charter",
        charter.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--turn-timeout-s",
        "60",
    ];
    args.extend_from_slice(extra);
    let out = d.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// Guards issue 28 item 4: `loop run --sim` without scripts hung for the
/// 30-minute turn timeout (`hold_unfinalized … no report`).
#[test]
fn sim_lanes_given_no_script_are_obedient_agents_and_land_every_task() {
    let d = Drover::new();
    let (repo, charter) = board(&d, "a.txt, b.txt", "notes/TASK-2.md");
    let text = run(&d, &repo, &charter, &["--sim"]);
    assert!(
        text.contains("- TASK-1 (Task TASK-1)") && text.contains("- TASK-2 (Task TASK-2)"),
        "{text}"
    );
    assert!(text.contains("## Parked\n- none\n"), "{text}");
    assert!(
        at_integration(&repo, "a.txt"),
        "TASK-1 wrote the first file it claims"
    );
    assert!(!at_integration(&repo, "b.txt"), "and only that one");
    assert!(
        at_integration(&repo, "notes/TASK-2.md"),
        "in a new directory"
    );
}

/// The ```toml blocks of LOOP.md that follow `marker`.
fn loop_md_scripts(marker: &str) -> Vec<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("LOOP.md")).unwrap();
    let from = doc.find(marker).expect("LOOP.md shows the example scripts");
    doc[from..]
        .split("```toml\n")
        .skip(1)
        .take(2)
        .map(|b| b.split("```").next().unwrap().to_string())
        .collect()
}

/// Guards issue 28 item 11 for LOOP.md's example scripts: saved as shown,
/// they run a board to the end (TASK-2 failed by its reviewer once, then
/// repaired and landed).
#[test]
fn the_example_scripts_of_loop_md_run_as_written() {
    let d = Drover::new();
    let (repo, charter) = board(&d, "notes/TASK-1.md", "greet.txt");
    let scripts = loop_md_scripts("A pair of scripts to start from");
    assert_eq!(scripts.len(), 2, "{scripts:?}");
    let root = d.scratch();
    let (imp, rev) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp, &scripts[0]).unwrap();
    std::fs::write(&rev, &scripts[1]).unwrap();
    let text = run(
        &d,
        &repo,
        &charter,
        &[
            "--sim-implementer",
            imp.to_str().unwrap(),
            "--sim-reviewer",
            rev.to_str().unwrap(),
        ],
    );
    assert!(
        text.contains("- TASK-1 (Task TASK-1)") && text.contains("- TASK-2 (Task TASK-2)"),
        "{text}"
    );
    assert!(text.contains("## Parked\n- none\n"), "{text}");
    assert!(at_integration(&repo, "greet.txt"));
    assert!(at_integration(&repo, "notes/TASK-1.md"));
    let decisions = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(
        decisions.contains("TASK-2") && decisions.contains("repair"),
        "{decisions}"
    );
}

/// Guards the close-out's resume hint for a task that claims no files: it
/// said "its dependencies are Done", which is not what holds it.
#[test]
fn a_task_claiming_no_files_is_told_to_claim_them() {
    let d = Drover::new();
    let (repo, charter) = board(&d, "a.txt", "");
    let text = run(&d, &repo, &charter, &["--sim"]);
    assert!(
        text.contains("- TASK-2, names no modified_files (the files its lease claims), resume: add `modified_files:`"),
        "{text}"
    );
}
