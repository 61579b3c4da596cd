//! The loop end to end on simulated lanes: a real supervisor, real panes
//! running `drover sim-agent` in real git worktrees, jobs through the engine,
//! dispatch with confirmed delivery, the shadow policy deciding and
//! auto-completion completing, a Backlog.md board and a charter.

use crate::common;
use crate::loop_common;

use common::Drover;
use drover::loopctl::lanes::simlanes::SimLanes;
use drover::loopctl::ops::LaneSpec;
use drover::loopctl::run::runner::{self, Phase, RunConfig};
use drover::loopctl::{board::charter, ops::Role};
use loop_common::task_file;
use std::path::PathBuf;
use std::time::Duration;

use common::git;

/// The implementer's script: what each task's lane writes.
const IMPLEMENTER: &str = r#"
[[turn]]
match = "task=TASK-2 round=2"
steps = [{ work = 200 }, { write = { path = "b.txt", content = "beta, fixed\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-1 "
steps = [{ work = 300 }, { write = { path = "a.txt", content = "alpha\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-2 "
steps = [{ work = 300 }, { write = { path = "b.txt", content = "beta\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-3 "
steps = [{ work = 200 }, { write = { path = "c.txt", content = "gamma\n" } }, { write = { path = "other.txt", content = "not mine\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-4 "
steps = [{ work = 200 }, { write = { path = "shared.txt", content = "four\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-5 round=2 role=implementer rebase"
steps = [{ work = 100 }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-5 "
steps = [{ work = 2500 }, { write = { path = "shared.txt", content = "five\n" } }, { report = { path = "{report}" } }, "finish"]
"#;

/// The reviewer's script: TASK-2's first review fails, everything else passes.
const REVIEWER: &str = r#"
[[turn]]
match = "task=TASK-2 round=1 role=reviewer"
steps = [{ work = 200 }, { heartbeat = { status = "fail" } }, { report = { path = "{report}", fields = { findings = "b.txt must say it is fixed" } } }, "finish"]
[[turn]]
steps = [{ work = 200 }, { heartbeat = { status = "pass" } }, { report = { path = "{report}" } }, "finish"]
"#;

fn scripts(spec: &LaneSpec) -> String {
    match spec.role {
        Role::Implementer => IMPLEMENTER.to_string(),
        Role::Reviewer => REVIEWER.to_string(),
    }
}

/// Guards the whole pipeline: five tasks, pool 2 — a clean one, one the
/// reviewer fails once, one outside its claim (blocked), one clean, one that
/// conflicts at landing (dropped and returned); the close-out line by line.
#[test]
fn five_tasks_pool_two_land_block_repair_and_drop() {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("greeter");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("shared.txt"), "base\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task_file(&tasks, 1, "Add alpha", &["a.txt"]);
    task_file(&tasks, 2, "Add beta", &["b.txt"]);
    task_file(&tasks, 3, "Add gamma", &["c.txt"]);
    task_file(&tasks, 4, "Shared four", &["shared.txt"]);
    task_file(&tasks, 5, "Shared five", &["shared.txt"]);
    let charter_path = root.join("CHARTER.md");
    std::fs::write(
        &charter_path,
        "# Greeter tidy-up\n\n- lanes: 4\n- pool: 2\n- gate: `test -f shared.txt`\n- guarded-paths: none\n",
    )
    .unwrap();
    let charter = charter::load(&charter_path).unwrap();

    let exe = PathBuf::from(common::BIN);
    let client = drover::daemon::Client::connect_or_start(
        drover::statedir::StateDir::new(&d.state),
        &d.socket(),
        Some(&exe),
    )
    .unwrap();
    let mut lanes = SimLanes::new(
        drover::statedir::StateDir::new(&d.state),
        client,
        &exe,
        Box::new(scripts),
    );
    let cfg = RunConfig {
        state_dir: d.state.clone(),
        repo: repo.clone(),
        board_dir: repo.join("backlog"),
        charter: charter.clone(),
        base: None,
        pool: None,
        ship_cmd: Some("test -n \"$DROVER_INTEGRATION_SHA\"".into()),
        autocomplete: true,
        repair_rounds: runner::DEFAULT_REPAIR_ROUNDS,
        turn_timeout: Duration::from_secs(5),
        unattended: Default::default(),
    };
    let status = runner::run(&mut lanes, cfg, |m| eprintln!("loop: {m}")).unwrap();

    let by = |id: &str| status.tasks.iter().find(|t| t.id == id).unwrap().clone();
    for id in ["TASK-1", "TASK-2", "TASK-4"] {
        assert_eq!(by(id).kind(), Phase::Landed, "{id}: {:?}", by(id));
    }
    assert_eq!(by("TASK-2").round(), 2, "the reviewer failed TASK-2 once");
    let t3 = by("TASK-3");
    assert_eq!(t3.kind(), Phase::Parked);
    let r3 = t3.note().reason.clone().unwrap();
    assert!(
        r3.contains("outside its claim") && r3.contains("other.txt") && !r3.contains("c.txt"),
        "{r3}"
    );
    let t5 = by("TASK-5");
    assert_eq!(t5.kind(), Phase::Parked);
    assert!(
        t5.note().reason.clone().unwrap().starts_with(
            "conflict markers left in shared.txt after its rebase round (dropped at landing"
        ),
        "{t5:?}"
    );

    // The integration branch: one commit per landed task with its trailer, on the base.
    let branch = "drover/integration/loop1";
    let log = git(
        &repo,
        &[
            "log",
            "--format=%H %(trailers:key=Task,valueonly,separator=)",
            &format!("{base}..{branch}"),
        ],
    );
    let mut commits: Vec<(String, String)> = log
        .lines()
        .map(|l| {
            let (sha, t) = l.split_once(' ').unwrap();
            (t.trim().to_string(), sha.to_string())
        })
        .collect();
    commits.sort();
    assert_eq!(
        commits.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        vec!["TASK-1", "TASK-2", "TASK-4"]
    );
    for (t, sha) in &commits {
        assert_eq!(by(t).sha(), Some(sha.as_str()));
    }
    assert_eq!(
        git(&repo, &["show", &format!("{branch}:b.txt")]),
        "beta, fixed"
    );
    assert_eq!(
        git(&repo, &["show", &format!("{branch}:shared.txt")]),
        "four"
    );
    assert_eq!(
        git(&repo, &["rev-parse", "main"]),
        base,
        "main is never touched"
    );

    // The board: landed tasks Done with criteria checked, the rest as they were.
    let board = drover::loopctl::board::load(&repo.join("backlog")).unwrap();
    for t in &board.tasks {
        let landed = ["TASK-1", "TASK-2", "TASK-4"].contains(&t.id.as_str());
        assert_eq!(t.is_done(), landed, "{}", t.id);
        assert!(t.criteria.iter().all(|c| c.checked == landed), "{}", t.id);
    }

    // The close-out, line by line.
    let run_dir = d.state.join("loop1");
    let text = std::fs::read_to_string(run_dir.join("closeout.md")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let sha = |id: &str| by(id).sha().unwrap().to_string();
    let integ_head = git(&repo, &["rev-parse", branch]);
    let expect_head = vec![
        format!("# Closeout: greeter loop1 · Charter: {}", charter.sha256),
        String::new(),
        "## Landed".into(),
        format!("- TASK-1 (Add alpha), {}", sha("TASK-1")),
        format!("- TASK-2 (Add beta), {}", sha("TASK-2")),
        format!("- TASK-4 (Shared four), {}", sha("TASK-4")),
        String::new(),
        "## Parked".into(),
        "- TASK-3, blocked: the candidate touches files outside its claim: other.txt, resume: claim the files in modified_files or narrow the change, then rerun".into(),
    ];
    assert_eq!(
        lines[..expect_head.len()],
        expect_head.iter().map(String::as_str).collect::<Vec<_>>()[..],
        "{text}"
    );
    let rest = &lines[expect_head.len()..];
    assert!(
        rest[0].starts_with("- TASK-5, conflict markers left in shared.txt after its rebase round (dropped at landing ")
            && rest[0].contains("does not apply, not even three-way: conflicts in shared.txt"),
        "{text}"
    );
    assert!(
        rest[0].contains("resume: resolve the conflict markers in shared.txt in ")
            && rest[0].ends_with(", then rerun"),
        "{text}"
    );
    assert_eq!(
        rest[1..6],
        ["", "## For ratification", "- none", "", "## Notes"][..],
        "{text}"
    );
    assert_eq!(
        rest[6],
        format!(
            "- integration branch {branch} at {integ_head}; nothing was pushed and main was not touched"
        )
    );
    assert!(
        rest[7].contains("landing(s); gate evidence under "),
        "{text}"
    );
    assert!(
        rest.iter()
            .any(|l| l.starts_with("- ship command at ") && l.ends_with(": exit 0")),
        "{text}"
    );
    assert!(
        rest.iter()
            .any(|l| l.contains("TASK-3: worktree") && l.contains("kept with its unlanded work")),
        "{text}"
    );

    // Run files.
    let queue = std::fs::read_to_string(run_dir.join("QUEUE.md")).unwrap();
    assert!(
        queue.contains("## Hold\n- TASK-3: blocked") && queue.contains("## Landing\n"),
        "{queue}"
    );
    let decisions = std::fs::read_to_string(run_dir.join("DECISIONS.md")).unwrap();
    assert!(
        decisions.lines().any(|l| l
            .contains(" repair: TASK-2: round 1: the review failed: b.txt must say it is fixed")),
        "{decisions}"
    );
    assert!(
        decisions
            .lines()
            .any(|l| l.contains(" park: TASK-5: conflict markers left in shared.txt")),
        "{decisions}"
    );
    let ev = std::fs::read_dir(run_dir.join("gate-evidence"))
        .unwrap()
        .count();
    assert!(ev >= 2, "one evidence dir per landing");
    let e1: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("gate-evidence/1/evidence.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(e1["gate_runs"][0]["green"], true);
    assert!(run_dir.join("gate-evidence/1/evidence.md").is_file());
    let ret5 = std::fs::read_to_string(run_dir.join("l1-impl-task-5/return.md")).unwrap();
    assert!(ret5.contains("dropped at landing"), "{ret5}");
    let state = std::fs::read_to_string(run_dir.join("STATE.md")).unwrap();
    assert!(state.len() <= 8192 && state.starts_with("# State: loop1\n"));

    // Landed worktrees removed, unlanded ones kept; no lane left running.
    let wts = d.state.join("worktrees");
    assert!(!wts.join("loop1-task-1").exists() && !wts.join("loop1-task-4").exists());
    assert!(wts.join("loop1-task-3").join("other.txt").exists());
    assert!(wts.join("loop1-task-5").join("shared.txt").exists());
    let panes: Vec<serde_json::Value> =
        serde_json::from_str(&d.ok(&["pane", "ls", "--json"])).unwrap();
    assert!(
        panes
            .iter()
            .all(|p| !p["name"].as_str().unwrap_or("").starts_with("l1-")),
        "{panes:?}"
    );
    // Every lease the run took is gone; the mix ledger counts the landed work.
    let leases = drover::registry::lease::list(
        drover::statedir::StateDir::new(&d.state),
        chrono::Utc::now(),
    )
    .unwrap();
    assert!(leases.is_empty(), "{leases:?}");
    let mix = drover::registry::mix::load(drover::statedir::StateDir::new(&d.state))
        .unwrap()
        .unwrap();
    assert_eq!(mix.spent.claude + mix.spent.codex, 3);
}

/// Guards escalation with the owner present: a lane stuck on a permission
/// prompt is held for the owner with a question and a recommendation in
/// QUESTIONS.md (and up for ratification); with no answer by the turn
/// timeout its task is parked, the lane kept until the close-out stops it,
/// and nothing lands.
#[test]
fn a_permission_prompt_parks_the_task_and_asks() {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("asker");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task_file(&tasks, 1, "Clean build", &["build.txt"]);
    let charter_path = root.join("CHARTER.md");
    std::fs::write(&charter_path, "aim: clean\ngate: true\n").unwrap();
    let exe = PathBuf::from(common::BIN);
    let client = drover::daemon::Client::connect_or_start(
        drover::statedir::StateDir::new(&d.state),
        &d.socket(),
        Some(&exe),
    )
    .unwrap();
    let script = |s: &LaneSpec| match s.role {
        Role::Implementer => {
            "[[turn]]\nsteps = [{ work = 200 }, { ask = \"rm -rf build/\" }, \"finish\"]\n"
                .to_string()
        }
        Role::Reviewer => REVIEWER.to_string(),
    };
    let mut lanes = SimLanes::new(
        drover::statedir::StateDir::new(&d.state),
        client,
        &exe,
        Box::new(script),
    );
    let cfg = RunConfig {
        state_dir: d.state.clone(),
        repo: repo.clone(),
        board_dir: repo.join("backlog"),
        charter: charter::load(&charter_path).unwrap(),
        base: None,
        pool: None,
        ship_cmd: None,
        autocomplete: true,
        repair_rounds: 1,
        turn_timeout: Duration::from_secs(5),
        unattended: Default::default(),
    };
    let status = runner::run(&mut lanes, cfg, |m| eprintln!("loop: {m}")).unwrap();
    let t = &status.tasks[0];
    assert_eq!(t.kind(), Phase::Parked);
    assert!(
        t.note()
            .reason
            .as_deref()
            .unwrap()
            .starts_with("no answer from the owner within 5 s"),
        "{t:?}"
    );
    let questions = std::fs::read_to_string(d.state.join("loop1/QUESTIONS.md")).unwrap();
    let q: Vec<&str> = questions.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(q.len(), 1, "{questions}");
    assert!(
        q[0].contains(" TASK-1: lane l1-impl-task-1 is waiting for a human (permission)"),
        "{questions}"
    );
    assert!(
        q[0].ends_with("approve it only if the charter's scope covers it, else deny; the lane is held until then"),
        "{questions}"
    );
    let closeout = std::fs::read_to_string(d.state.join("loop1/closeout.md")).unwrap();
    assert!(closeout.contains("## Landed\n- none\n"), "{closeout}");
    assert!(
        closeout.contains("## For ratification\n- question (")
            && closeout.contains(" on TASK-1: lane l1-impl-task-1 is waiting"),
        "{closeout}"
    );
    let panes: Vec<serde_json::Value> =
        serde_json::from_str(&d.ok(&["pane", "ls", "--json"])).unwrap();
    assert!(
        panes.is_empty(),
        "the close-out stops the lane it kept for a human: {panes:?}"
    );
}
