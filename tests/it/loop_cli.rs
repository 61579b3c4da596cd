//! The loop's command line: `loop lint queue`, `loop run` on sim-agent lanes with
//! `loop status`, and `demo --loop`.

use crate::common;

use common::{Drover, stderr, stdout};
use std::path::Path;
use std::time::Instant;

use common::git;

fn task(dir: &Path, id: &str, status: &str, labels: &str, files: &str) {
    std::fs::write(
        dir.join(format!("{} - T.md", id.to_lowercase())),
        format!("---\nid: {id}\ntitle: Task {id}\nstatus: {status}\nlabels: [{labels}]\ndependencies: []\nmodified_files: [{files}]\n---\n\n## Description\nDo {id}.\n\n## Acceptance Criteria\n- [ ] #1 {id} done\n"),
    )
    .unwrap();
}

/// Guards `loop lint queue`: each offence listed with its line, exit 3; a clean queue exits 0.
#[test]
fn lint_queue_refuses_excluded_done_and_needs_owner_rows() {
    let d = Drover::new();
    let root = d.scratch();
    let tasks = root.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task(&tasks, "TASK-1", "To Do", "", "a.txt");
    task(&tasks, "TASK-2", "Done", "", "b.txt");
    task(&tasks, "TASK-3", "To Do", "needs-owner", "c.txt");
    task(&tasks, "TASK-4", "To Do", "", "d.txt");
    let charter = root.join("CHARTER.md");
    std::fs::write(&charter, "aim: tidy\nexclude: TASK-4\ngate: true\n").unwrap();
    let queue = root.join("QUEUE.md");
    std::fs::write(&queue, "# Queue\n\n## Ready\n- TASK-1 (ok)\n- TASK-2 (done)\n- TASK-3 (owner)\n- TASK-4 (excluded)\n\n## Hold\n- TASK-2: fine here\n\n## Landing\n").unwrap();
    let board = root.join("backlog");
    let args = [
        "loop",
        "lint",
        "queue",
        charter.to_str().unwrap(),
        queue.to_str().unwrap(),
        "--board",
        board.to_str().unwrap(),
    ];
    let out = d.run(&args);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    let q = queue.display();
    assert_eq!(
        lines,
        vec![
            format!("{q}:5: TASK-2 is Done"),
            format!("{q}:6: TASK-3 is labelled needs-owner"),
            format!("{q}:7: TASK-4 is excluded by the charter"),
        ]
    );
    assert!(stderr(&out).contains("3 offence(s)"), "{}", stderr(&out));
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let v: serde_json::Value = serde_json::from_str(&stdout(&d.run(&json_args))).unwrap();
    assert_eq!(v["offences"].as_array().unwrap().len(), 3);
    std::fs::write(&queue, "## Ready\n- TASK-1 (ok)\n").unwrap();
    let out = d.run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Guards issue 42 item 10: success printed nothing, and an id two files
    // say was "not on the board".
    assert_eq!(
        stdout(&out),
        format!("{q}: 1 task(s) in ## Ready, none to take out\n")
    );
    std::fs::write(
        tasks.join("task-9 - Again.md"),
        std::fs::read_to_string(tasks.join("task-1 - T.md")).unwrap(),
    )
    .unwrap();
    let out = d.run(&args);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains("TASK-1 is left out of the board: ") && said.contains("is also the id of"),
        "{said}"
    );
}

/// Guards `loop run` from the command line and `loop status` on what it wrote.
#[test]
fn loop_run_on_sim_lanes_then_status() {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("r");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task(&tasks, "TASK-1", "To Do", "", "a.txt");
    let charter = root.join("CHARTER.md");
    std::fs::write(&charter, "# One task\nlanes: 2\ngate: test -f a.txt\n").unwrap();
    let imp = root.join("imp.toml");
    std::fs::write(&imp, "[[turn]]\nsteps = [{ work = 200 }, { write = { path = \"a.txt\", content = \"a\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n").unwrap();
    let rev = root.join("rev.toml");
    std::fs::write(&rev, "[[turn]]\nsteps = [{ work = 200 }, { heartbeat = { status = \"pass\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n").unwrap();

    // Real agents are the default; with neither on PATH the run refuses
    // before it starts anything and names --sim.
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let git_bin = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let git_bin = String::from_utf8_lossy(&git_bin.stdout).trim().to_string();
    std::os::unix::fs::symlink(&git_bin, bin.join("git")).unwrap();
    let out = d
        .cmd()
        .env("PATH", &bin)
        .args([
            "loop",
            "run",
            "--charter",
            charter.to_str().unwrap(),
            "--repo",
            repo.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("claude and codex not found on PATH")
            && stderr(&out).contains("--sim"),
        "{}",
        stderr(&out)
    );
    assert!(!d.state.join("loop1").exists(), "nothing was started");

    let out = d.run(&[
        "loop",
        "run",
        "--charter",
        charter.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--pool",
        "-3",
        "--sim-implementer",
        imp.to_str().unwrap(),
        "--sim-reviewer",
        rev.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("# Closeout: r loop1 · Charter: "),
        "{text}"
    );
    assert!(
        text.contains("## Landed\n- TASK-1 (Task TASK-1), "),
        "{text}"
    );

    let v: serde_json::Value = serde_json::from_str(&d.ok(&["loop", "status", "--json"])).unwrap();
    assert_eq!(v["state"], "closed");
    assert_eq!(v["pool"], 1, "a pool ≤ 0 is floored to 1");
    assert_eq!(v["tasks"][0]["phase"], "landed");
    let human = d.ok(&["loop", "status", "loop1"]);
    assert!(human.starts_with("loop1 · closed · charter "), "{human}");
    assert!(
        human.contains("TASK-1") && human.contains("landed"),
        "{human}"
    );
    let out = d.run(&["loop", "status", "7"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Guards `drover demo --loop`: three tasks on sim lanes, every one landed
/// (TASK-3 after a rebase round), the close-out printed.
#[test]
fn demo_loop_prints_the_closeout() {
    let d = Drover::new();
    let t = Instant::now();
    let out = d.run(&["demo", "--loop"]);
    let secs = t.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    eprintln!("demo --loop took {secs:.1} s");
    assert!(
        text.contains("\n# Closeout: greeter loop1 · Charter: "),
        "{text}"
    );
    assert!(
        text.contains("## Landed\n- TASK-1 (Describe the greeter), "),
        "{text}"
    );
    assert!(text.contains("- TASK-2 (Add a greeting), "), "{text}");
    // Issue 26: the conflicting task is rebased by its lane and lands.
    let landed = text.split("## Parked").next().unwrap_or("");
    assert!(
        landed
            .lines()
            .any(|l| l.starts_with("- TASK-3 (Retitle the README), ") && l.ends_with(", rebased")),
        "{text}"
    );
    assert!(text.contains("## Parked\n- none\n"), "{text}");
    assert!(text.contains("TASK-2: repair round 1"), "{text}");
    assert!(text.contains("TASK-3: rebase round 1"), "{text}");
}

/// Guards `--autotune-k`: a multiple under 1 is a usage error (exit 2, one
/// line saying what to give), and the flag needs `--lane-autotune`.
#[test]
fn a_bad_autotune_k_is_a_usage_error() {
    let d = Drover::new();
    let charter = d.scratch().join("CHARTER.md");
    std::fs::write(&charter, "# C\n\n- gate: `true`\n").unwrap();
    let c = charter.display().to_string();
    let out = d.run(&[
        "loop",
        "run",
        "--charter",
        &c,
        "--sim",
        "--lane-autotune",
        "--autotune-k",
        "0.5",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("--autotune-k 0.5"),
        "{}",
        common::stderr(&out)
    );
    let out = d.run(&["loop", "run", "--charter", &c, "--sim", "--autotune-k", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
}
