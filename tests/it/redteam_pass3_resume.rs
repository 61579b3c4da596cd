//! What the third red-team pass broke in resuming a run (issue 37 items 4
//! and 7): `loop run --resume` at once after `kill -9` of the loop and its
//! supervisor, and the close-out after a stop and a resume.

use crate::common;
use crate::loop_common;

use common::{Drover, wait_until};
use loop_common::{REVIEWER_PASS, board_repo, in_phase, run_json, spawn_loop, trailers, wait_exit};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::time::Duration;

const TASKS: u32 = 3;

/// A board of `TASKS` tasks, each implementer working `work_ms`; the loop's
/// first and resume argv.
fn setup(d: &Drover, work_ms: u64) -> (std::path::PathBuf, Vec<String>, Vec<String>) {
    let (repo, charter) = board_repo(d, TASKS, "- lanes: 4\n- pool: 1\n- gate: `true`\n");
    let dir = d.scratch();
    let (ip, rp) = (dir.join("imp.toml"), dir.join("rev.toml"));
    let mut imp = String::new();
    for k in 1..=TASKS {
        imp.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = {work_ms} }}, {{ write = {{ path = \"f{k}.txt\", content = \"{k}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
        ));
    }
    std::fs::write(&ip, imp).unwrap();
    std::fs::write(&rp, REVIEWER_PASS).unwrap();
    let scripts = vec![
        "--sim-implementer".to_string(),
        ip.display().to_string(),
        "--sim-reviewer".into(),
        rp.display().to_string(),
    ];
    let mut first: Vec<String> = ["loop", "run", "--repo"].map(String::from).to_vec();
    first.extend([
        repo.display().to_string(),
        "--charter".into(),
        charter.display().to_string(),
    ]);
    first.extend(scripts.clone());
    let mut resume: Vec<String> = ["loop", "run", "--resume", "1"].map(String::from).to_vec();
    resume.extend(scripts);
    (repo, first, resume)
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Guards issue 37 item 4: `kill -9` of the loop and the supervisor, then
/// `loop run --resume` at once, failed half the time (exit 5: `Connection
/// reset by peer` from the dying supervisor's socket, or `no supervisor
/// running`). Ten times in a row, each resume must take the run back (its
/// `resumes` count moves on), and the last one finishes it, every task
/// landed once.
#[test]
fn a_resume_right_after_kill_9_of_loop_and_supervisor_works_every_time() {
    let d = Drover::new();
    let (repo, first, resume) = setup(&d, 4000);
    let log = d.scratch().join("loop.log");
    let mut child = spawn_loop(&d, &strs(&first), &log);
    for k in 1..=10u64 {
        // A lane in flight, the supervisor serving it.
        assert!(
            wait_until(Duration::from_secs(60), || {
                run_json(&d)["resumes"].as_u64().unwrap_or(0) + 1 == k
                    && !in_phase(&run_json(&d), "implementing").is_empty()
                    && d.server_pid().is_some()
            }),
            "try {k}: no lane in flight: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        if let Some(sup) = d.server_pid() {
            let _ = kill(Pid::from_raw(sup), Signal::SIGKILL);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // At once: no wait for the supervisor's death.
        child = spawn_loop(&d, &strs(&resume), &log);
        let mut exited = None;
        assert!(
            wait_until(Duration::from_secs(60), || {
                exited = child.try_wait().unwrap();
                exited.is_some() || run_json(&d)["resumes"].as_u64() == Some(k)
            }),
            "try {k}: the resume never took the run back"
        );
        if let Some(st) = exited {
            assert!(
                st.success() && run_json(&d)["resumes"].as_u64() == Some(k),
                "try {k}: the resume failed ({st:?}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            break;
        }
        if in_phase(&run_json(&d), "landed").len() == TASKS as usize {
            break;
        }
    }
    let st = wait_exit(&mut child, Duration::from_secs(300)).expect("the run did not finish");
    eprintln!("{} resume(s) right after kill -9", run_json(&d)["resumes"]);
    assert!(
        st.success(),
        "{st:?}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(
        trailers(&repo, TASKS),
        (1..=TASKS).map(|n| (n, 1)).collect::<Vec<_>>()
    );
}

/// Guards issue 37 item 7: after a stop (SIGTERM) and `--resume`, the
/// close-out said `worktree …/loop1-task-1 kept (git add -A: fatal: cannot
/// change to …)` for a landed task's worktree the unclosed close-out had
/// already removed. Now a worktree that is gone is not named kept.
#[test]
fn a_worktree_removed_before_a_resume_is_not_named_kept() {
    let d = Drover::new();
    let (_repo, first, resume) = setup(&d, 3000);
    let log = d.scratch().join("loop.log");
    let mut child = spawn_loop(&d, &strs(&first), &log);
    assert!(
        wait_until(Duration::from_secs(120), || {
            let v = run_json(&d);
            in_phase(&v, "landed").contains(&"TASK-1".to_string())
                && !in_phase(&v, "implementing").is_empty()
        }),
        "TASK-1 never landed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    wait_exit(&mut child, Duration::from_secs(60)).expect("the stop did not end the loop");
    let wt = d.state.join("worktrees/loop1-task-1");
    assert!(
        !wt.exists(),
        "the unclosed close-out removes a landed task's worktree"
    );
    let mut child = spawn_loop(&d, &strs(&resume), &log);
    let st = wait_exit(&mut child, Duration::from_secs(300)).expect("the resume did not finish");
    assert!(
        st.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let closeout = std::fs::read_to_string(d.state.join("loop1/closeout.md")).unwrap();
    assert!(
        !closeout.contains("TASK-1: worktree"),
        "a removed worktree is named:\n{closeout}"
    );
}
