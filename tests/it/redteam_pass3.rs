//! What the third red-team pass broke in the loop, its landing and its
//! secrets (issue 37 items 1, 2, 3, 5, 6, 8), one regression test each, on
//! `drover loop run` with sim lanes in real panes, real git worktrees and a
//! real board.

use crate::common;
use crate::loop_common;

use common::{Drover, git, stderr, stdout};
use loop_common::{REVIEWER_PASS, board_repo, in_phase, run_json, task_file};
use std::path::{Path, PathBuf};

/// `drover loop run` over `repo`'s board with these sim scripts and flags;
/// returns its output.
fn loop_run(
    d: &Drover,
    repo: &Path,
    charter: &Path,
    imp: &str,
    flags: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let dir = d.scratch();
    let (ip, rp) = (dir.join("imp.toml"), dir.join("rev.toml"));
    std::fs::write(&ip, imp).unwrap();
    std::fs::write(&rp, REVIEWER_PASS).unwrap();
    let mut args = vec![
        "loop".to_string(),
        "run".into(),
        "--charter".into(),
        charter.display().to_string(),
        "--repo".into(),
        repo.display().to_string(),
        "--sim-implementer".into(),
        ip.display().to_string(),
        "--sim-reviewer".into(),
        rp.display().to_string(),
    ];
    args.extend(flags.iter().map(|s| s.to_string()));
    let mut c = d.cmd();
    c.args(&args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn file(d: &Drover, name: &str) -> String {
    std::fs::read_to_string(d.state.join("loop1").join(name)).unwrap_or_default()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(files_under(&p)),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

const GATE_SECRET: &str = "s3kr1t-GATE-value-42";
const FILE_SECRET: &str = "zq7Kx9-envfile-value";
const KEY_SECRET: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv";

/// Guards issue 37 items 1, 5 and 6: a lane that reports `blocked` with a
/// reason is parked with its own words, as `blocked` (not `job … failed: ,`);
/// a value given with `--env K` that the gate prints, and an `--env-file`
/// value and an API key in a lane's reason, reach none of the copies drover
/// shows or stores: DECISIONS.md, closeout.md, run.json, STATE.md, QUEUE.md,
/// gate.log, stdout, supervisor.log, jobs/audit.jsonl, shadow/decisions.jsonl.
#[test]
fn a_lanes_reason_is_kept_and_given_secrets_are_redacted_everywhere() {
    let d = Drover::new();
    let gate = "echo \"the gate saw $SEKRIT_ENV\"; exit 1";
    let (repo, charter) = board_repo(&d, 2, &format!("- lanes: 4\n- pool: 1\n- gate: `{gate}`\n"));
    let env_file = d.scratch().join("lane.env");
    std::fs::write(&env_file, format!("STAGING_TOKEN={FILE_SECRET}\n")).unwrap();
    std::fs::set_permissions(
        &env_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let reason = format!("needs the staging database URL; tried {FILE_SECRET} and {KEY_SECRET}");
    let imp = format!(
        "[[turn]]\nmatch = \"task=TASK-1 \"\nsteps = [{{ work = 100 }}, {{ report = {{ path = \"{{report}}\", fields = {{ outcome = \"blocked\", reason = \"{reason}\" }} }} }}, \"finish\"]\n\
         [[turn]]\nsteps = [{{ work = 100 }}, {{ write = {{ path = \"f2.txt\", content = \"two\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
    );
    let out = loop_run(
        &d,
        &repo,
        &charter,
        &imp,
        &[
            "--env",
            "SEKRIT_ENV",
            "--env-file",
            env_file.to_str().unwrap(),
            "--repair-rounds",
            "1",
        ],
        &[("SEKRIT_ENV", GATE_SECRET)],
    );
    let v = run_json(&d);
    assert_eq!(v["state"], "closed", "{}", stderr(&out));
    assert_eq!(in_phase(&v, "parked").len(), 2, "{v}");

    // Item 1: the lane's own words, as `blocked`.
    let decisions = file(&d, "DECISIONS.md");
    let closeout = file(&d, "closeout.md");
    for (name, text) in [("DECISIONS.md", &decisions), ("closeout.md", &closeout)] {
        assert!(
            text.contains("blocked: needs the staging database URL; tried"),
            "{name} lost the lane's reason:\n{text}"
        );
        assert!(!text.contains("failed: ,"), "{name}:\n{text}");
    }
    assert!(
        decisions.contains("TASK-2") && decisions.contains("[redacted:env]"),
        "the red gate's repair names its redacted output:\n{decisions}"
    );

    // Items 5 and 6: no copy holds a given value or the key.
    let mut copies: Vec<(String, Vec<u8>)> = vec![
        ("stdout".into(), out.stdout.clone()),
        ("stderr".into(), out.stderr.clone()),
    ];
    for p in files_under(&d.state) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        // The agent's own files: its program and the report it wrote.
        if name == "script.toml" || name.starts_with("report-i") {
            continue;
        }
        copies.push((
            p.display().to_string(),
            std::fs::read(&p).unwrap_or_default(),
        ));
    }
    let leaks: Vec<String> = copies
        .iter()
        .flat_map(|(name, bytes)| {
            [GATE_SECRET, FILE_SECRET, KEY_SECRET]
                .into_iter()
                .filter(|s| contains(bytes, s))
                .map(move |s| format!("{name}: {s}"))
        })
        .collect();
    assert!(leaks.is_empty(), "secrets copied: {leaks:#?}");
    for must in [
        "loop1/DECISIONS.md",
        "loop1/closeout.md",
        "loop1/run.json",
        "loop1/STATE.md",
        "loop1/QUEUE.md",
        "loop1/l1-rev-task-2/gate.log",
        "logs/supervisor.log",
        "jobs/audit.jsonl",
        "shadow/decisions.jsonl",
    ] {
        assert!(d.state.join(must).is_file(), "{must} was not written");
    }
    assert!(
        file(&d, "l1-rev-task-2/gate.log").contains("the gate saw [redacted:env]"),
        "{}",
        file(&d, "l1-rev-task-2/gate.log")
    );
    let _ = stdout(&out);
}

/// Guards issue 37 item 2: a task whose agent leaves a repository without a
/// commit (`git init vendor/lib`) or a `.GIT/…` path in its worktree stopped
/// the whole run (`git add -A` failed), taking every lane in flight down;
/// now such a candidate parks its task, saying why, and the run goes on.
#[test]
fn a_candidate_git_cannot_stage_parks_its_task_and_the_run_goes_on() {
    let d = Drover::new();
    let (repo, charter) = board_repo(&d, 3, "- lanes: 6\n- pool: 3\n- gate: `true`\n");
    let imp = "[[turn]]\nmatch = \"task=TASK-1 \"\nsteps = [{ work = 100 }, { write = { path = \"f1.txt\", content = \"one\\n\" } }, { write = { path = \"vendor/lib/.git/HEAD\", content = \"ref: refs/heads/main\\n\" } }, { write = { path = \"vendor/lib/.git/objects/.keep\", content = \"\" } }, { write = { path = \"vendor/lib/.git/refs/.keep\", content = \"\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n\
        [[turn]]\nmatch = \"task=TASK-2 \"\nsteps = [{ work = 100 }, { write = { path = \"f2.txt\", content = \"two\\n\" } }, { write = { path = \".GIT/hooks/post-commit\", content = \"#!/bin/sh\\ntouch owned\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n\
        [[turn]]\nsteps = [{ work = 1500 }, { write = { path = \"f3.txt\", content = \"three\\n\" } }, { report = { path = \"{report}\" } }, \"finish\"]\n";
    let out = loop_run(&d, &repo, &charter, imp, &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = run_json(&d);
    assert_eq!(v["state"], "closed", "{v}");
    assert_eq!(in_phase(&v, "landed"), ["TASK-3"], "{v}");
    let decisions = file(&d, "DECISIONS.md");
    for (task, why) in [
        ("TASK-1", "does not have a commit checked out"),
        ("TASK-2", "invalid path '.GIT/hooks/post-commit'"),
    ] {
        assert!(
            decisions.lines().any(|l| l.contains(&format!(
                "park: {task}: blocked: the candidate cannot be captured"
            )) && l.contains(why)),
            "{task} not parked saying why:\n{decisions}"
        );
    }
}

/// Guards issue 37 item 8: a nested repository with commits in a worktree
/// is refused, not captured as a bare gitlink without its files.
#[test]
fn a_nested_repository_with_commits_is_refused_not_captured_as_a_gitlink() {
    let d = Drover::new();
    let root = d.scratch();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "initial"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let nested = repo.join("vendor/lib");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q", "-b", "main"]);
    std::fs::write(nested.join("lib.rs"), "fn f() {}\n").unwrap();
    git(&nested, &["add", "lib.rs"]);
    git(
        &nested,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "lib",
        ],
    );
    std::fs::write(repo.join("f1.txt"), "one\n").unwrap();
    let lane_dir = root.join("lane");
    std::fs::create_dir_all(&lane_dir).unwrap();
    let claimed = vec!["f1.txt".to_string(), "vendor/**".to_string()];
    let got = drover::loopctl::land::capture::capture("TASK-1", &repo, &base, &claimed, &lane_dir)
        .unwrap();
    match got {
        Err(r) => {
            let why = r.describe();
            assert!(
                why.contains("nested git repositories") && why.contains("vendor/lib"),
                "{why}"
            );
        }
        other => panic!("a nested repository was captured: {other:?}"),
    }
    assert!(!lane_dir.join("candidate.patch").exists());
}

/// Guards issue 37 item 3: the gate ran in the task's worktree and what it
/// wrote stayed there, so a repair round's candidate held it — `.coverage`
/// outside the claim parked a correct fix, a file inside the claim would
/// land as the agent's change. Now the gate runs on a checkout of the
/// candidate of its own: both tasks land, neither file does.
#[test]
fn what_the_gate_writes_never_enters_a_candidate() {
    let d = Drover::new();
    let gate = "if [ -f f2.txt ]; then echo generated > gen.txt; else echo run >> .coverage; fi; ! grep -qs broken f1.txt f2.txt";
    let (repo, charter) = board_repo(&d, 2, &format!("- lanes: 4\n- pool: 1\n- gate: `{gate}`\n"));
    // TASK-2 claims the file its gate generates.
    task_file(
        &repo.join("backlog/tasks"),
        2,
        "Task 2",
        &["f2.txt", "gen.txt"],
    );
    let mut imp = String::new();
    for k in 1..=2 {
        imp.push_str(&format!(
            "[[turn]]\nmatch = \"task=TASK-{k} round=1 \"\nsteps = [{{ work = 100 }}, {{ write = {{ path = \"f{k}.txt\", content = \"broken\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n\
             [[turn]]\nmatch = \"task=TASK-{k} \"\nsteps = [{{ work = 100 }}, {{ write = {{ path = \"f{k}.txt\", content = \"fixed\\n\" }} }}, {{ report = {{ path = \"{{report}}\" }} }}, \"finish\"]\n"
        ));
    }
    let out = loop_run(&d, &repo, &charter, &imp, &["--repair-rounds", "2"], &[]);
    let v = run_json(&d);
    assert_eq!(
        in_phase(&v, "landed"),
        ["TASK-1", "TASK-2"],
        "{}\n{}",
        file(&d, "DECISIONS.md"),
        stderr(&out)
    );
    let tree = git(
        &repo,
        &["ls-tree", "-r", "--name-only", "drover/integration/loop1"],
    );
    let names: Vec<&str> = tree.lines().collect();
    assert!(
        names.contains(&"f1.txt") && names.contains(&"f2.txt"),
        "{tree}"
    );
    for never in [".coverage", "gen.txt"] {
        assert!(!names.contains(&never), "{never} landed: {tree}");
    }
    assert!(
        !d.state.join("worktrees/loop1-task-1.gate").exists()
            && !d.state.join("worktrees/loop1-task-2.gate").exists(),
        "the gate's checkouts are removed"
    );
}
