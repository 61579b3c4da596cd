//! `drover report` proves who it is and trusts nothing else (LOOP.md, "How
//! a lane's identity is established"). Each attack runs as an agent would
//! run it, from the shell in a real pane: a fake state dir, a forged lane
//! id, a report after completion (and racing it), a caller outside every
//! lane's tree, records naming paths outside the state dir, no supervisor
//! to reach; and the lane's drop box, attributed by who holds it open.

use crate::common;
use crate::report_cli::{in_pane, lane_with_report_at, running_job, shell_pane, words, worktree};
use drover::engine::{Action, Actor, Engine, Request};
use std::path::Path;

/// A fake state dir an agent can make inside its own worktree: job `F1`
/// running on `lane-a`, its dispatch naming a report file outside
/// (`target`) and a worktree whose git config runs `touch marker`.
fn fake_state(root: &Path, target: &Path, marker: &Path) -> std::path::PathBuf {
    let fake = root.join("fake-state");
    let evil = root.join("evil-wt");
    worktree(&evil);
    common::git(
        &evil,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}", marker.display()),
        ],
    );
    running_job(&fake, "F1", "lane-a", target, &evil);
    fake
}

/// Attack (a): `--state-dir <fake>` (which Claude's allow rule matches) is
/// exit 2 with a sentence; `DROVER_STATE_DIR=<fake>` is a claim that
/// disagrees, also exit 2; either way no file is written and no git runs
/// in the fake's worktree.
#[test]
fn a_fake_state_dir_is_refused_and_runs_nothing() {
    let l = lane_with_report_at(None);
    let root = l.d.scratch();
    let target = root.join("home-bashrc");
    let marker = root.join("marker");
    let fake = fake_state(&root, &target, &marker);
    let bin = common::BIN;
    let fk = fake.display();
    let o = in_pane(
        &l.d,
        "lane-a",
        &root,
        1,
        &format!(
            "{bin} report failed --reason '$(touch {m})' --state-dir {fk}",
            m = marker.display()
        ),
    );
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("takes no state dir from its caller"),
        "{}",
        o.stderr
    );
    let o = in_pane(
        &l.d,
        "lane-a",
        &root,
        2,
        &format!("DROVER_STATE_DIR={fk} {bin} report failed --reason x"),
    );
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("report takes no lane or state dir from its caller"),
        "{}",
        o.stderr
    );
    assert!(
        !target.exists(),
        "the file the fake record names was written"
    );
    assert!(!marker.exists(), "git ran in the fake's worktree");
    assert!(!l.report.exists(), "the real lane's report was written");
}

/// Attack (b): a forged `DROVER_LANE_ID` naming another lane is refused
/// (exit 2), and that lane's report is not written.
#[test]
fn a_forged_lane_id_is_refused_and_the_other_lane_is_untouched() {
    let l = lane_with_report_at(None);
    let root = l.d.scratch();
    let wt_b = root.join("wt-b");
    worktree(&wt_b);
    let report_b = l.state.join("lanes").join("lane-b").join("report-i1.json");
    std::fs::create_dir_all(report_b.parent().unwrap()).unwrap();
    running_job(&l.state, "J2", "lane-b", &report_b, &wt_b);
    shell_pane(&l.d, "lane-b", &wt_b, "lane-b");
    let o = in_pane(
        &l.d,
        "lane-a",
        &root,
        1,
        &format!("DROVER_LANE_ID=lane-b {} report done", common::BIN),
    );
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("this process is in lane lane-a"),
        "{}",
        o.stderr
    );
    assert!(!report_b.exists(), "lane-b's report was written by lane-a");
    assert!(!l.report.exists());
}

/// Attack (d): a process outside every lane's tree — this test, with the
/// lane's env copied — is refused with exit 3.
#[test]
fn a_caller_outside_every_lane_tree_is_refused() {
    let l = lane_with_report_at(None);
    let o = std::process::Command::new(common::BIN)
        .args(["report", "done"])
        .env("DROVER_LANE_ID", "lane-a")
        .env("DROVER_SESSION_ID", "implementer")
        .env("DROVER_STATE_DIR", &l.state)
        .current_dir(&l.wt)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("not in any lane's pane"));
    assert!(!l.report.exists());
}

/// Bad input (e): a dispatch record naming a worktree outside the state
/// dir (and not the lane's own) is refused with a sentence; no git runs
/// there and nothing is written.
#[test]
fn a_worktree_outside_the_state_dir_is_refused() {
    let d = common::Drover::new();
    let root = d.scratch();
    let wt = root.join("wt");
    worktree(&wt);
    let marker = root.join("marker");
    let other = root.join("other-wt");
    worktree(&other);
    common::git(
        &other,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}", marker.display()),
        ],
    );
    let report = d.state.join("lanes").join("lane-a").join("report-i1.json");
    std::fs::create_dir_all(report.parent().unwrap()).unwrap();
    running_job(&d.state, "J1", "lane-a", &report, &other);
    shell_pane(&d, "lane-a", &wt, "lane-a");
    let o = in_pane(
        &d,
        "lane-a",
        &root,
        1,
        &format!("{} report done", common::BIN),
    );
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "names the worktree {}, which is not inside the state dir",
            other.display()
        )),
        "{}",
        o.stderr
    );
    assert!(!report.exists());
    assert!(!marker.exists(), "git ran in the worktree the record named");
}

/// Bad input (e): no supervisor to reach (an empty socket dir, then a
/// stale socket nobody listens on) is exit 5 with a sentence.
#[test]
fn no_supervisor_to_reach_is_exit_5() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir_all(run.join("drover")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(run.join("drover"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let go = || {
        std::process::Command::new(common::BIN)
            .args(["report", "done"])
            .env("XDG_RUNTIME_DIR", &run)
            .env_remove("DROVER_STATE_DIR")
            .output()
            .unwrap()
    };
    let o = go();
    assert_eq!(o.status.code(), Some(5), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("cannot reach a drover supervisor"));
    // A socket whose listener is gone refuses at once.
    let stale = run.join("drover").join("0000000000000000.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let o = go();
    assert_eq!(o.status.code(), Some(5), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("cannot reach a drover supervisor"));
    // A socket dir others may enter is not trusted with the request.
    std::fs::set_permissions(run.join("drover"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = go();
    assert_eq!(o.status.code(), Some(5), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("is not yours and private"),
        "{}",
        common::stderr(&o)
    );
    // No socket dir at all: said so, and none is made.
    std::fs::remove_dir_all(run.join("drover")).unwrap();
    let o = go();
    assert_eq!(o.status.code(), Some(5), "{}", common::stderr(&o));
    assert!(
        !run.join("drover").exists(),
        "drover report made the socket dir"
    );
}

/// Attack (c), raced: `write_for_lane` (the supervisor's side) keeps
/// writing while the job completes; once the completion has returned, the
/// report never changes again.
#[test]
fn a_report_never_changes_after_completion() {
    for round in 0..40 {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().canonicalize().unwrap().join("state");
        let wt = state.join("worktrees").join("lane-a");
        worktree(&wt);
        let report = state.join("lanes").join("lane-a").join("report-i1.json");
        std::fs::create_dir_all(report.parent().unwrap()).unwrap();
        let attempt = running_job(&state, "J1", "lane-a", &report, &wt);
        let writer = {
            let state = state.clone();
            std::thread::spawn(move || {
                let said = drover::report::Said::Done {
                    summary: Some("x".into()),
                };
                let bounds = drover::report::Bounds::default();
                let mut n = 0;
                while drover::report::write_for_lane(
                    drover::statedir::StateDir::new(&state),
                    "lane-a",
                    &bounds,
                    &said,
                )
                .is_ok()
                {
                    n += 1;
                }
                n
            })
        };
        // Let the writer get going (a first report), then complete.
        assert!(common::wait_until(
            std::time::Duration::from_secs(10),
            || report.exists()
        ));
        // Not a settle: a jitter of 0-600 µs so the rounds hit the race at
        // different points of the writer's loop.
        std::thread::sleep(std::time::Duration::from_micros(100 * (round % 7)));
        Engine::open(drover::statedir::StateDir::new(&state))
            .unwrap()
            .transition(
                &Request::new("J1", Action::Complete { reason: None }, Actor::supervisor())
                    .expect_attempt(attempt),
            )
            .unwrap();
        let at_completion = std::fs::read(&report).unwrap();
        let n = writer.join().unwrap();
        assert!(n >= 1);
        assert_eq!(
            std::fs::read(&report).unwrap(),
            at_completion,
            "round {round}: the report changed after the job completed"
        );
    }
}

/// The drop box (for an agent whose sandbox forbids `connect`): a request
/// written into the lane dir's FIFO by a process of the lane's tree is
/// answered and the report written; the same request written by a process
/// outside the tree is refused.
#[test]
fn the_drop_box_answers_only_the_lanes_own_tree() {
    let l = lane_with_report_at(None);
    let mut c = drover::daemon::Client::connect(&l.d.socket()).unwrap();
    c.call_raw(
        "evidence.watch",
        serde_json::json!({"job_id": "J1", "attempt_id": l.attempt, "session_id": "implementer",
            "pane": "lane-a", "generation": 1, "autocomplete": false}),
    )
    .unwrap();
    let dir = l.report.parent().unwrap().to_path_buf();
    let req = dir.join(drover::report::drop_box::REQUEST);
    let ans = dir.join(drover::report::drop_box::ANSWER);
    assert!(common::wait_until(
        std::time::Duration::from_secs(10),
        || req.exists()
    ));
    let line = r#"{"outcome":"done","summary":"via the box","claims":{}}"#;
    // From outside the tree (a child of this test): refused.
    let py = |who: &str| {
        format!(
            "python3 -c \"import os,sys\nr=os.open('{a}',os.O_RDONLY|os.O_NONBLOCK)\nw=os.open('{q}',os.O_WRONLY|os.O_NONBLOCK)\nos.write(w,sys.argv[1].encode()+b'\\n')\nimport select\nselect.select([r],[],[],30)\nprint(os.read(r,65536).decode())\" {who}",
            a = ans.display(),
            q = req.display()
        )
    };
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(py(&words(&[line])))
        .output()
        .unwrap();
    let s = common::stdout(&out);
    assert!(
        s.contains("not in any lane's pane"),
        "{s}{}",
        common::stderr(&out)
    );
    assert!(!l.report.exists());
    // From the lane's shell: written.
    let o = in_pane(&l.d, "lane-a", &l.d.scratch(), 9, &py(&words(&[line])));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("\"ok\":true"), "{}", o.stdout);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&l.report).unwrap()).unwrap();
    assert_eq!(v["summary"], "via the box");
}
