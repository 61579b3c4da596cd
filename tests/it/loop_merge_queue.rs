//! The merge queue (LOOP.md "The merge queue"), on real git repos and
//! through the loop with sim lanes: a candidate that no longer applies is
//! applied three-way against the base it was captured on.

use crate::common::{Drover, git};
use crate::loop_common::{self, REVIEWER_PASS, task_file};
use drover::loopctl::land::capture;
use drover::loopctl::land::{self, Fate, Queued};
use drover::loopctl::run::runner::{self, Phase};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The base file both tasks edit: a non-UTF-8 line in it, so bytes are
/// checked end to end.
const BASE: &[u8] = b"one\ntwo\nthree\nfour\nfive caf\xe9\nsix\nseven\neight\n";

struct Repo {
    root: PathBuf,
    repo: PathBuf,
    base: String,
}

fn repo(d: &Drover) -> Repo {
    let root = d.scratch();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("shared.txt"), BASE).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    Repo { root, repo, base }
}

fn worktree(r: &Repo, name: &str) -> PathBuf {
    let wt = r.root.join(name);
    let p = wt.to_str().unwrap().to_string();
    git(
        &r.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("drover/{name}"),
            &p,
            &r.base,
        ],
    );
    wt
}

/// A candidate of `name` writing `files` in its own worktree from the base.
fn candidate(r: &Repo, name: &str, files: &[(&str, &[u8])]) -> Queued {
    let wt = worktree(r, name);
    for (f, bytes) in files {
        std::fs::write(wt.join(f), bytes).unwrap();
    }
    let lane = r.root.join(format!("lane-{name}"));
    std::fs::create_dir_all(&lane).unwrap();
    let claim: Vec<String> = files.iter().map(|(f, _)| f.to_string()).collect();
    let c = capture::capture(name, &wt, &r.base, &claim, &lane)
        .unwrap()
        .unwrap();
    Queued {
        task: name.to_string(),
        title: format!("{name} title"),
        patch: c.patch_path,
        base: Some(c.base),
    }
}

fn show(dir: &Path, what: &str) -> Vec<u8> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["show", what])
        .output()
        .unwrap();
    assert!(out.status.success(), "git show {what}");
    out.stdout
}

/// Guards LOOP.md "The merge queue" (three-way first): a candidate whose
/// context an earlier landing changed fails `git apply --check` but lands
/// three-way against its recorded base, byte for byte (a Latin-1 line and a
/// binary file); one that changes the same line conflicts and is dropped
/// with the conflicted file named; the integration worktree is left clean.
#[test]
fn a_candidate_that_no_longer_applies_lands_three_way_byte_for_byte() {
    let d = Drover::new();
    let r = repo(&d);
    let first = candidate(
        &r,
        "T-1",
        &[(
            "shared.txt",
            b"one\nTWO\nthree\nfour\nfive caf\xe9\nsix\nseven\neight\n",
        )],
    );
    let bin: Vec<u8> = (0u8..=255).rev().collect();
    let second_bytes: &[u8] = b"one\ntwo\nthree\nFOUR\nfive caf\xe9\nsix\nseven\neight\n";
    let second = candidate(
        &r,
        "T-2",
        &[("shared.txt", second_bytes), ("blob.bin", &bin)],
    );
    let clash = candidate(
        &r,
        "T-3",
        &[(
            "shared.txt",
            b"one\ntwo, again\nthree\nfour\nfive caf\xe9\nsix\nseven\neight\n",
        )],
    );
    let integ = worktree(&r, "integration");
    let ev = r.root.join("evidence");
    let l1 = land::land(&integ, "drover/integration", &[first], "true", &ev, 1).unwrap();
    assert!(
        matches!(
            &l1.fates[0].1,
            Fate::Landed {
                three_way: false,
                ..
            }
        ),
        "{:?}",
        l1.fates
    );
    // The second no longer applies as it was written: its context changed.
    let p = second.patch.to_string_lossy().to_string();
    let check = std::process::Command::new("git")
        .arg("-C")
        .arg(&integ)
        .args(["apply", "--check", &p])
        .output()
        .unwrap();
    assert!(!check.status.success(), "the plain apply must fail here");
    let l2 = land::land(
        &integ,
        "drover/integration",
        &[second, clash],
        "true",
        &ev,
        2,
    )
    .unwrap();
    assert!(
        matches!(
            &l2.fates[0].1,
            Fate::Landed {
                three_way: true,
                ..
            }
        ),
        "{:?}",
        l2.fates
    );
    let Fate::Dropped {
        reason, conflicts, ..
    } = &l2.fates[1].1
    else {
        panic!("{:?}", l2.fates)
    };
    assert_eq!(conflicts, &vec!["shared.txt".to_string()]);
    assert!(reason.contains("not even three-way"), "{reason}");
    let both: &[u8] = b"one\nTWO\nthree\nFOUR\nfive caf\xe9\nsix\nseven\neight\n";
    assert_eq!(show(&integ, "drover/integration:shared.txt"), both);
    assert_eq!(show(&integ, "drover/integration:blob.bin"), bin);
    assert_eq!(git(&integ, &["status", "--porcelain"]), "", "left clean");
    let md = std::fs::read_to_string(l2.evidence_dir.join("evidence.md")).unwrap();
    assert!(
        md.contains("- T-2: landed as ") && md.contains("(applied three-way)"),
        "{md}"
    );
}

/// Guards LOOP.md "The merge queue" through the loop: two tasks edit one file
/// (different lines) from the same base; the slower one's candidate no
/// longer applies once the first has landed, lands three-way, and the run
/// says so. Nothing is parked.
#[test]
fn the_loop_lands_a_stale_candidate_three_way() {
    let d = Drover::new();
    let r = repo(&d);
    let tasks = r.repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task_file(&tasks, 1, "Shout two", &["shared.txt"]);
    task_file(&tasks, 2, "Shout four", &["shared.txt"]);
    let charter = r.root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Merge queue\n\n- lanes: 4\n- pool: 2\n- gate: `test -f shared.txt`\n",
    )
    .unwrap();
    let imp = r#"
[[turn]]
match = "task=TASK-1 "
steps = [{ work = 200 }, { write = { path = "shared.txt", content = "one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-2 "
steps = [{ work = 2500 }, { write = { path = "shared.txt", content = "one\ntwo\nthree\nFOUR\nfive\nsix\nseven\neight\n" } }, { report = { path = "{report}" } }, "finish"]
"#;
    // The base's line five is Latin-1; the tasks' line five is plain ASCII
    // in both, so the two changes stay apart from each other.
    std::fs::write(
        r.repo.join("shared.txt"),
        b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n",
    )
    .unwrap();
    git(&r.repo, &["commit", "-q", "-am", "ascii base"]);
    let mut lanes = loop_common::sim_lanes(&d, imp.into(), REVIEWER_PASS.into());
    let cfg = loop_common::run_config(
        &d,
        &r.repo,
        &charter,
        runner::DEFAULT_REPAIR_ROUNDS,
        Duration::from_secs(20),
        Default::default(),
    );
    let st = runner::run(&mut lanes, cfg, |m| eprintln!("loop: {m}")).unwrap();
    for t in &st.tasks {
        assert_eq!(t.kind(), Phase::Landed, "{t:?}");
    }
    assert_eq!(
        git(&r.repo, &["show", "drover/integration/loop1:shared.txt"]),
        "one\nTWO\nthree\nFOUR\nfive\nsix\nseven\neight"
    );
    let decisions = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(
        decisions.contains(
            "TASK-2: its candidate no longer applied to the integration head; applied three-way"
        ),
        "{decisions}"
    );
    assert_eq!(loop_common::trailers(&r.repo, 2), vec![(1, 1), (2, 1)]);
}

fn kinds(l: &land::Landing) -> Vec<(String, &'static str)> {
    l.fates
        .iter()
        .map(|(t, f)| {
            let k = match f {
                Fate::Landed { .. } => "landed",
                Fate::Dropped { .. } => "dropped",
                Fate::Stopped { .. } => "stopped",
                Fate::TimedOut { .. } => "timed-out",
            };
            (t.clone(), k)
        })
        .collect()
}

/// Guards LOOP.md "The merge queue" (batches that bisect): four candidates
/// gated as one tree; red, the batch is bisected to its one culprit, which
/// is dropped with the gate's evidence, and the other three land one commit
/// each in queue order — in fewer gate runs than one per candidate plus one,
/// each run recorded in the landing's evidence.
#[test]
fn a_red_batch_is_bisected_to_its_culprit_and_the_rest_land_in_order() {
    let d = Drover::new();
    let r = repo(&d);
    let q: Vec<Queued> = (1..=4)
        .map(|k| {
            let body: &[u8] = if k == 3 { b"BROKEN\n" } else { b"fine\n" };
            candidate(&r, &format!("T-{k}"), &[(&format!("f{k}.txt"), body)])
        })
        .collect();
    let integ = worktree(&r, "integration");
    let gate = "echo checking; ! grep -qs BROKEN f*.txt";
    let l = land::land(
        &integ,
        "drover/integration",
        &q,
        gate,
        &r.root.join("ev"),
        1,
    )
    .unwrap();
    assert_eq!(
        kinds(&l),
        vec![
            ("T-1".into(), "landed"),
            ("T-2".into(), "landed"),
            ("T-3".into(), "dropped"),
            ("T-4".into(), "landed"),
        ]
    );
    let Fate::Dropped {
        reason, gate_tail, ..
    } = &l.fates[2].1
    else {
        unreachable!()
    };
    assert!(
        reason.starts_with("turns the gate red (exit 1)"),
        "{reason}"
    );
    assert!(gate_tail.as_deref().is_some_and(|t| t.contains("checking")));
    assert!(l.gates.len() < 5, "{} gate runs", l.gates.len());
    let trailers = git(
        &integ,
        &[
            "log",
            "--reverse",
            "--format=%(trailers:key=Task,valueonly,separator=)",
            &format!("{}..drover/integration", r.base),
        ],
    );
    let t: Vec<&str> = trailers.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(t, vec!["T-1", "T-2", "T-4"]);
    // The branch's tree is the one the last green run saw.
    let last_green = l.gates.iter().rev().find(|g| g.green).unwrap();
    assert_eq!(
        git(&integ, &["rev-parse", "drover/integration^{tree}"]),
        last_green.tree
    );
    let ev: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(l.evidence_dir.join("evidence.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ev["gate_runs"].as_array().unwrap().len(), l.gates.len());
}

/// Guards "a gate that times out during bisection parks the batch, not the
/// run": what was found good before lands, the culprit found is dropped,
/// and the candidates the timed-out gate could not decide are `TimedOut`.
#[test]
fn a_gate_that_times_out_during_bisection_parks_the_undecided() {
    let d = Drover::new();
    let r = repo(&d);
    let files: [(&str, &[u8]); 4] = [
        ("f1.txt", b"fine\n"),
        ("f2.txt", b"BROKEN\n"),
        ("slow.txt", b"slow\n"),
        ("f4.txt", b"fine\n"),
    ];
    let q: Vec<Queued> = files
        .iter()
        .enumerate()
        .map(|(i, (f, b))| candidate(&r, &format!("T-{}", i + 1), &[(f, b)]))
        .collect();
    let integ = worktree(&r, "integration");
    let gate = "! grep -qs BROKEN f*.txt && { test ! -f slow.txt || sleep 30; }";
    let bounds = drover::loopctl::child::Bounds::timeout(Duration::from_secs(2));
    let l = land::land_bounded(
        &integ,
        "drover/integration",
        &q,
        gate,
        &r.root.join("ev"),
        1,
        &bounds,
    )
    .unwrap();
    assert_eq!(
        kinds(&l),
        vec![
            ("T-1".into(), "landed"),
            ("T-2".into(), "dropped"),
            ("T-3".into(), "timed-out"),
            ("T-4".into(), "timed-out"),
        ]
    );
    assert_eq!(show(&integ, "drover/integration:f1.txt"), b"fine\n");
    assert_eq!(git(&integ, &["status", "--porcelain"]), "");
}
