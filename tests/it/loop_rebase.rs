//! The merge queue's rounds through the loop on sim lanes (LOOP.md "The
//! merge queue"): a candidate dropped at landing goes back to its lane — a
//! repair round with the gate's evidence when it is green alone and red
//! together with what landed, a rebase round when it conflicts.

use crate::common::{Drover, git};
use crate::loop_common::{self, REVIEWER_PASS, task_file};
use drover::loopctl::run::runner::{self, Phase, RunStatus};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A repo whose `shared.txt` has eight lines, tasks 1 and 2 claiming `files`
/// (one list per task), and a charter with `gate`.
fn setup(d: &Drover, files: [&[&str]; 2], gate: &str) -> (PathBuf, PathBuf) {
    let root = d.scratch();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("shared.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task_file(&tasks, 1, "First", files[0]);
    task_file(&tasks, 2, "Second", files[1]);
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        format!("# Merge queue\n\n- lanes: 4\n- pool: 2\n- gate: `{gate}`\n"),
    )
    .unwrap();
    (repo, charter)
}

fn run(d: &Drover, repo: &Path, charter: &Path, imp: &str, rev: &str, rounds: u32) -> RunStatus {
    let mut lanes = loop_common::sim_lanes(d, imp.into(), rev.into());
    let cfg = loop_common::run_config(
        d,
        repo,
        charter,
        rounds,
        Duration::from_secs(20),
        Default::default(),
    );
    runner::run(&mut lanes, cfg, |m| eprintln!("loop: {m}")).unwrap()
}

fn decisions(d: &Drover) -> String {
    std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap()
}

/// Each alone passes; together (`a.txt` and `b.txt` both `on`) the gate is red.
const TOGETHER_RED: &str = "! { grep -qs on a.txt && grep -qs on b.txt; }";

/// TASK-1 turns `a.txt` on; TASK-2, slower, turns `b.txt` on, and in a
/// repair round that names the red gate, turns it off.
const SEMANTIC: &str = r#"
[[turn]]
match = "task=TASK-1 "
steps = [{ work = 200 }, { write = { path = "a.txt", content = "on\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "turns the gate red (exit 1)"
steps = [{ work = 200 }, { write = { path = "b.txt", content = "off\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-2 "
steps = [{ work = 2500 }, { write = { path = "b.txt", content = "on\n" } }, { report = { path = "{report}" } }, "finish"]
"#;

/// Guards LOOP.md "The merge queue" (gated on the tree it lands on): two
/// candidates each green on their own base and red together. The second
/// is caught before it lands, goes back as a repair round with the gate's
/// evidence and the integration head merged into its worktree, and lands
/// once green; no commit on the integration branch has the gate red.
#[test]
fn a_semantic_conflict_is_caught_before_landing_and_repaired() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, [&["a.txt"], &["b.txt"]], TOGETHER_RED);
    let st = run(
        &d,
        &repo,
        &charter,
        SEMANTIC,
        REVIEWER_PASS,
        runner::DEFAULT_REPAIR_ROUNDS,
    );
    let t2 = st.tasks.iter().find(|t| t.id == "TASK-2").unwrap();
    for t in &st.tasks {
        assert_eq!(t.kind(), Phase::Landed, "{t:?}");
    }
    assert_eq!(t2.round(), 2, "{t2:?}");
    let branch = "drover/integration/loop1";
    assert_eq!(git(&repo, &["show", &format!("{branch}:a.txt")]), "on");
    assert_eq!(git(&repo, &["show", &format!("{branch}:b.txt")]), "off");
    // Every landed commit's tree passes the gate.
    let log = git(&repo, &["log", "--format=%H", &format!("main..{branch}")]);
    for sha in log.lines() {
        let a = git(&repo, &["show", &format!("{sha}:a.txt")]);
        let b = std::process::Command::new("git")
            .args([
                "-C",
                repo.to_str().unwrap(),
                "show",
                &format!("{sha}:b.txt"),
            ])
            .output()
            .unwrap();
        assert!(
            !(a == "on" && String::from_utf8_lossy(&b.stdout).trim() == "on"),
            "{sha} has the gate red"
        );
    }
    let dec = decisions(&d);
    assert!(
        dec.contains("TASK-2: round 1: dropped at landing ")
            && dec.contains("turns the gate red (exit 1)")
            && dec.contains("merged into its branch cleanly"),
        "{dec}"
    );
    let review = std::fs::read_to_string(d.state.join("loop1/l1-impl-task-2/review.md")).unwrap();
    assert!(review.contains("gate evidence under "), "{review}");
    assert_eq!(loop_common::trailers(&repo, 2), vec![(1, 1), (2, 1)]);
}

/// Guards LOOP.md "The merge queue": with its rounds spent, a candidate red
/// together with what landed is parked with the gate's evidence, not landed.
#[test]
fn a_semantic_conflict_with_no_rounds_left_is_parked_with_the_evidence() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, [&["a.txt"], &["b.txt"]], TOGETHER_RED);
    let st = run(&d, &repo, &charter, SEMANTIC, REVIEWER_PASS, 0);
    let t2 = st.tasks.iter().find(|t| t.id == "TASK-2").unwrap();
    assert_eq!(t2.kind(), Phase::Parked, "{t2:?}");
    let why = t2.note().reason.clone().unwrap();
    assert!(
        why.contains("turns the gate red (exit 1)") && why.contains("gate evidence under"),
        "{why}"
    );
    assert_eq!(loop_common::trailers(&repo, 2), vec![(1, 1), (2, 0)]);
}

/// TASK-1 and TASK-2 (slower) change the same line of `shared.txt`;
/// TASK-2's rebase round does `rebase_steps` — chosen only when the prompt
/// names the conflicted file and the commits that caused it, as the brief
/// must.
fn conflicting(rebase_steps: &str) -> String {
    format!(
        r#"
[[turn]]
match = "task=TASK-1 "
steps = [{{ work = 200 }}, {{ write = {{ path = "shared.txt", content = "one\nTWO (first)\nthree\nfour\n" }} }}, {{ report = {{ path = "{{report}}" }} }}, "finish"]
[[turn]]
match = "the merge stopped with conflict markers in: shared.txt. The commits that changed them: "
steps = {rebase_steps}
[[turn]]
match = "task=TASK-2 "
steps = [{{ work = 2500 }}, {{ write = {{ path = "shared.txt", content = "one\ntwo (second)\nthree\nfour\n" }} }}, {{ report = {{ path = "{{report}}" }} }}, "finish"]
"#
    )
}

/// Guards LOOP.md "The merge queue" (a rebase round): a candidate that
/// conflicts even three-way goes back to its lane with the integration head
/// merged in; the lane resolves the markers as the brief says, the
/// candidate is re-captured against that head, is not reviewed again (it
/// only resolved the conflict), and lands; the close-out says "rebased".
#[test]
fn a_conflict_goes_back_to_its_lane_as_a_rebase_round_and_lands() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, [&["shared.txt"], &["shared.txt"]], "test -f shared.txt");
    let imp = conflicting(
        r#"[{ work = 200 }, { resolve = { path = "shared.txt", keep = "both" } }, { report = { path = "{report}" } }, "finish"]"#,
    );
    let st = run(
        &d,
        &repo,
        &charter,
        &imp,
        REVIEWER_PASS,
        runner::DEFAULT_REPAIR_ROUNDS,
    );
    for t in &st.tasks {
        assert_eq!(t.kind(), Phase::Landed, "{t:?}");
    }
    let t2 = st.tasks.iter().find(|t| t.id == "TASK-2").unwrap();
    assert_eq!(
        (t2.round(), t2.work().map_or(0, |w| w.rebases)),
        (2, 1),
        "{t2:?}"
    );
    assert_eq!(
        git(&repo, &["show", "drover/integration/loop1:shared.txt"]),
        "one\ntwo (second)\nTWO (first)\nthree\nfour"
    );
    let dec = decisions(&d);
    let first = st.tasks[0].sha().unwrap().to_string();
    assert!(
        dec.contains("conflicts in shared.txt (from ")
            && dec.contains(&format!("{} TASK-1: First)", &first[..7])),
        "{dec}"
    );
    assert!(
        dec.contains("changed nothing else: not reviewed again"),
        "{dec}"
    );
    assert!(
        !d.state
            .join("loop1/l1-rev-task-2/candidate-v2.patch")
            .exists()
    );
    let closeout = std::fs::read_to_string(d.state.join("loop1/closeout.md")).unwrap();
    assert!(
        closeout.contains(&format!(
            "- TASK-2 (Second), {}, rebased",
            t2.sha().unwrap()
        )),
        "{closeout}"
    );
    assert_eq!(loop_common::trailers(&repo, 2), vec![(1, 1), (2, 1)]);
    // Its worktree held only drover's commits and the landed work: removed.
    assert!(!d.state.join("worktrees/loop1-task-2").exists());
}

/// Guards LOOP.md "The merge queue": a rebase round that changes more than the
/// conflict's resolution (a line neither side had) is reviewed again, and
/// the reviewer is shown the candidate from before the rebase too.
#[test]
fn a_rebase_round_that_changes_more_is_reviewed_again_with_both_diffs() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, [&["shared.txt"], &["shared.txt"]], "test -f shared.txt");
    let imp = conflicting(
        r#"[{ work = 200 }, { write = { path = "shared.txt", content = "one\nTWO (first)\ntwo (second), and more\nthree\nfour\n" } }, { report = { path = "{report}" } }, "finish"]"#,
    );
    let rev = r#"
[[turn]]
match = "before the rebase it was "
steps = [{ work = 100 }, { heartbeat = { status = "pass" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-2 round=2 role=reviewer"
steps = [{ work = 100 }, { heartbeat = { status = "fail" } }, { report = { path = "{report}", fields = { findings = "show me the diff from before the rebase" } } }, "finish"]
[[turn]]
steps = [{ work = 100 }, { heartbeat = { status = "pass" } }, { report = { path = "{report}" } }, "finish"]
"#;
    let st = run(
        &d,
        &repo,
        &charter,
        &imp,
        rev,
        runner::DEFAULT_REPAIR_ROUNDS,
    );
    let t2 = st.tasks.iter().find(|t| t.id == "TASK-2").unwrap();
    assert_eq!(t2.kind(), Phase::Landed, "{t2:?}");
    let dec = decisions(&d);
    assert!(
        dec.contains("changed more than the conflicts' resolution (shared.txt): reviewed again"),
        "{dec}"
    );
    let before = std::fs::read_to_string(
        d.state
            .join("loop1/l1-rev-task-2/candidate-v2-before-rebase.patch"),
    )
    .unwrap();
    assert!(before.contains("+two (second)"), "{before}");
    assert_eq!(
        git(&repo, &["show", "drover/integration/loop1:shared.txt"]),
        "one\nTWO (first)\ntwo (second), and more\nthree\nfour"
    );
}

/// Guards LOOP.md "The merge queue": a lane that reports without resolving the
/// markers is refused — the task parked with the conflicted file named, its
/// worktree kept — and nothing with markers lands.
#[test]
fn a_rebase_round_that_leaves_markers_is_refused_with_the_files_named() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, [&["shared.txt"], &["shared.txt"]], "test -f shared.txt");
    let imp = conflicting(r#"[{ work = 100 }, { report = { path = "{report}" } }, "finish"]"#);
    let st = run(
        &d,
        &repo,
        &charter,
        &imp,
        REVIEWER_PASS,
        runner::DEFAULT_REPAIR_ROUNDS,
    );
    let t2 = st.tasks.iter().find(|t| t.id == "TASK-2").unwrap();
    assert_eq!(t2.kind(), Phase::Parked, "{t2:?}");
    let why = t2.note().reason.clone().unwrap();
    assert!(
        why.starts_with("conflict markers left in shared.txt after its rebase round"),
        "{why}"
    );
    assert!(
        t2.note()
            .resume
            .clone()
            .unwrap()
            .starts_with("resolve the conflict markers in shared.txt in ")
    );
    let wt = d.state.join("worktrees/loop1-task-2/shared.txt");
    assert!(std::fs::read_to_string(wt).unwrap().contains("<<<<<<< "));
    assert_eq!(loop_common::trailers(&repo, 2), vec![(1, 1), (2, 0)]);
}

/// One run of the measure of issue 26: 12 tasks, tasks 2k-1 and 2k both
/// changing line 2 of `p<k>.txt` (6 conflicting pairs), the second of each
/// pair slower and resolving its rebase round by keeping both lines.
/// Returns (tasks landed, landing gate runs, wall seconds).
fn twelve_tasks(batch: usize) -> (usize, u32, f64) {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for k in 1..=6 {
        std::fs::write(repo.join(format!("p{k}.txt")), "one\ntwo\nthree\n").unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let mut imp = String::new();
    for n in 1..=12u32 {
        let f = format!("p{}.txt", n.div_ceil(2));
        task_file(&tasks, n, &format!("Task {n}"), &[&f]);
        let work = if n % 2 == 0 { 1500 } else { 200 };
        imp.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{n} round=2 role=implementer rebase\"\nsteps = [{{ work = 100 }}, {{ resolve = {{ path = \"{f}\", keep = \"both\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n[[turn]]\nmatch = \"task=TASK-{n} \"\nsteps = [{{ work = {work} }}, {{ write = {{ path = \"{f}\", content = \"one\\ntwo by {n}\\nthree\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
        ));
    }
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Twelve\n\n- lanes: 8\n- pool: 4\n- gate: `! grep -q '<<<<<<<' p*.txt`\n",
    )
    .unwrap();
    let mut lanes = loop_common::sim_lanes(&d, imp, REVIEWER_PASS.into());
    let mut cfg = loop_common::run_config(
        &d,
        &repo,
        &charter,
        runner::DEFAULT_REPAIR_ROUNDS,
        Duration::from_secs(30),
        Default::default(),
    );
    cfg.unattended.land_batch = batch;
    let t = std::time::Instant::now();
    let st = runner::run(&mut lanes, cfg, |m| eprintln!("loop: {m}")).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let landed = st
        .tasks
        .iter()
        .filter(|t| t.kind() == Phase::Landed)
        .count();
    for t in &st.tasks {
        assert_eq!(t.kind(), Phase::Landed, "{t:?}");
    }
    for k in 1..=6 {
        let text = git(
            &repo,
            &["show", &format!("drover/integration/loop1:p{k}.txt")],
        );
        assert_eq!(text.lines().count(), 4, "both changes of pair {k}: {text}");
    }
    (landed, st.gate_runs, secs)
}

/// Guards the measure of issue 26: of 12 tasks in 6 pairs that touch the
/// same lines, all 12 land without a human, with and without batching; the
/// figures (gate runs per landed task, wall time) are printed.
#[test]
fn twelve_tasks_in_six_conflicting_pairs_all_land_without_a_human() {
    for batch in [4, 1] {
        let (landed, runs, secs) = twelve_tasks(batch);
        eprintln!(
            "--land-batch {batch}: {landed}/12 landed, {runs} landing gate runs ({:.2} per landed task), {secs:.1} s",
            runs as f64 / landed as f64
        );
        assert_eq!(landed, 12);
    }
}

/// Guards a resume in the middle of a rebase round: the loop killed (-9)
/// while TASK-2's lane resolves its conflict is resumed, and the round is
/// re-run with what it was told — the rebase text, not the brief alone,
/// which would have the lane redo its task over the other side's line and
/// land a candidate that reverts TASK-1's work.
#[test]
fn a_rebase_round_cut_short_by_kill_9_is_resumed_as_a_rebase_round() {
    let d = Drover::new();
    let (repo, charter) = setup(&d, [&["shared.txt"], &["shared.txt"]], "test -f shared.txt");
    let root = d.scratch();
    let imp = conflicting(
        r#"[{ work = 15000 }, { resolve = { path = "shared.txt", keep = "both" } }, { report = { path = "{report}" } }, "finish"]"#,
    );
    let (imp_p, rev_p) = (root.join("imp.toml"), root.join("rev.toml"));
    std::fs::write(&imp_p, imp).unwrap();
    std::fs::write(&rev_p, REVIEWER_PASS).unwrap();
    let (imp_s, rev_s) = (imp_p.display().to_string(), rev_p.display().to_string());
    let (repo_s, charter_s) = (repo.display().to_string(), charter.display().to_string());
    let common = [
        "--sim-implementer",
        imp_s.as_str(),
        "--sim-reviewer",
        rev_s.as_str(),
    ];
    let mut first = vec!["loop", "run", "--repo", &repo_s, "--charter", &charter_s];
    first.extend(common);
    let log = root.join("loop.log");
    let mut child = loop_common::spawn_loop(&d, &first, &log);
    let dec = d.state.join("loop1/DECISIONS.md");
    // Killed once the round is dispatched and recorded (run.json), while
    // its lane works.
    let sent = crate::common::wait_until(Duration::from_secs(60), || {
        let v = loop_common::run_json(&d);
        v["tasks"].as_array().into_iter().flatten().any(|t| {
            t["id"] == "TASK-2"
                && t["phase"] == "implementing"
                && t["round"] == 2
                && t["job"].is_string()
        })
    });
    assert!(
        sent,
        "no rebase round: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let mut resume = vec!["loop", "run", "--resume", "1"];
    resume.extend(common);
    let mut child = loop_common::spawn_loop(&d, &resume, &log);
    let status = loop_common::wait_exit(&mut child, Duration::from_secs(120))
        .expect("the resumed run did not finish");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{status:?}: {text}");
    let dec = std::fs::read_to_string(&dec).unwrap();
    assert!(
        dec.contains("TASK-2: its round 2 is re-run in lane"),
        "{dec}"
    );
    assert_eq!(
        loop_common::trailers(&repo, 2),
        vec![(1, 1), (2, 1)],
        "{text}"
    );
    assert_eq!(
        git(&repo, &["show", "drover/integration/loop1:shared.txt"]),
        "one\ntwo (second)\nTWO (first)\nthree\nfour",
        "TASK-1's line survives the resumed rebase round: {text}"
    );
}

/// Each alone passes; `f1.txt` and `f2.txt` both `on` turn the gate red.
/// The gate takes two seconds, so reviews that end while one gate runs are
/// taken in together and their candidates land as one batch.
const BATCH_RED: &str = "sleep 2; ! { grep -qs on f1.txt && grep -qs on f2.txt; }";

/// TASK-k turns `f<k>.txt` on, all alike; in a repair round (whichever of
/// TASK-1 and TASK-2 comes second in the batch is the culprit) it turns
/// it off.
fn batch_script() -> String {
    let turn = |m: String, k: u32, content: &str| {
        format!(
            "[[turn]]\nmatch = \"{m}\"\nsteps = [{{ work = 100 }}, {{ write = {{ path = \"f{k}.txt\", content = \"{content}\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
        )
    };
    let repairs = (1..=2).map(|k| turn(format!("task=TASK-{k} round=2"), k, "off"));
    let firsts = (1..=3).map(|k| turn(format!("task=TASK-{k} "), k, "on"));
    repairs.chain(firsts).collect()
}

/// Guards LOOP.md "The merge queue" (batches that bisect) through the whole
/// loop: candidates queued together land as one batch; a batch that is red
/// (two candidates each green alone) is bisected, the rest land in that
/// landing, and the culprit goes back to its lane as a repair round with
/// the gate's evidence, then lands; no landed commit has the gate red.
#[test]
fn a_red_batch_in_the_loop_lands_the_rest_and_repairs_the_culprit() {
    let d = Drover::new();
    let (repo, charter) = loop_common::board_repo(
        &d,
        3,
        &format!("- lanes: 6\n- pool: 3\n- gate: `{BATCH_RED}`\n"),
    );
    let st = run(
        &d,
        &repo,
        &charter,
        &batch_script(),
        REVIEWER_PASS,
        runner::DEFAULT_REPAIR_ROUNDS,
    );
    for t in &st.tasks {
        assert_eq!(t.kind(), Phase::Landed, "{t:?}");
    }
    let dec = decisions(&d);
    // A landing of two or more in which fewer landed: a red batch, bisected.
    let bisected = dec.lines().any(|l| {
        let Some(rest) = l.split(" landing: landing ").nth(1) else {
            return false;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let (landed, of) = (words.get(1), words.get(4));
        matches!((landed.and_then(|w| w.parse::<u32>().ok()), of.and_then(|w| w.parse::<u32>().ok())),
            (Some(l), Some(o)) if o >= 2 && l >= 1 && l < o)
    });
    assert!(bisected, "no red batch was bisected: {dec}");
    let repaired: Vec<_> = st.tasks.iter().filter(|t| t.round() == 2).collect();
    assert_eq!(repaired.len(), 1, "one culprit: {:?}", st.tasks);
    let culprit = &repaired[0].id;
    assert!(culprit == "TASK-1" || culprit == "TASK-2", "{culprit}");
    assert!(
        dec.contains(&format!("{culprit}: round 1: dropped at landing "))
            && dec.contains("turns the gate red (exit 1)"),
        "{dec}"
    );
    let branch = "drover/integration/loop1";
    let show = |sha: &str, f: &str| {
        let o = std::process::Command::new("git")
            .args(["-C", repo.to_str().unwrap(), "show", &format!("{sha}:{f}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let log = git(&repo, &["log", "--format=%H", &format!("main..{branch}")]);
    assert_eq!(log.lines().count(), 3, "one commit per task: {log}");
    for sha in log.lines() {
        assert!(
            !(show(sha, "f1.txt") == "on" && show(sha, "f2.txt") == "on"),
            "{sha} has the gate red"
        );
    }
    assert_eq!(
        loop_common::trailers(&repo, 3),
        vec![(1, 1), (2, 1), (3, 1)]
    );
}
