//! Capture and landing on real git repos and worktrees: fail-closed capture,
//! claim checks, secret detection, and a landing that drops the candidate turning the
//! gate red while the others land.

use drover::loopctl::land::capture::{self, Refusal};
use drover::loopctl::land::{self, Fate, Queued};
use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    base: String,
}

fn repo() -> Repo {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("keep.txt"), "keep\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    Repo {
        _tmp: tmp,
        root,
        repo,
        base,
    }
}

fn worktree(r: &Repo, name: &str) -> PathBuf {
    let wt = r.root.join(name);
    git(
        &r.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("drover/{name}"),
            wt.to_str().unwrap(),
            &r.base,
        ],
    );
    wt
}

fn captured(
    r: &Repo,
    name: &str,
    files: &[(&str, &str)],
    claim: &[&str],
) -> Result<capture::Candidate, Refusal> {
    let wt = worktree(r, name);
    for (f, c) in files {
        std::fs::write(wt.join(f), c).unwrap();
    }
    let lane = r.root.join(format!("lane-{name}"));
    std::fs::create_dir_all(&lane).unwrap();
    let claim: Vec<String> = claim.iter().map(|s| s.to_string()).collect();
    capture::capture(name, &wt, &r.base, &claim, &lane).unwrap()
}

/// Guards capture: new files are included, a file outside the claim blocks,
/// an empty claim or an empty change blocks, a missing merge-base fails closed,
/// and secrets are named and redacted in the copy shown.
#[test]
fn capture_includes_new_files_and_fails_closed() {
    let r = repo();
    let c = captured(&r, "t1", &[("new.txt", "new\n")], &["new.txt"]).unwrap();
    assert_eq!(c.files, vec!["new.txt"]);
    assert_eq!(c.base, r.base);
    let patch = std::fs::read_to_string(&c.patch_path).unwrap();
    assert!(
        patch.contains("+++ b/new.txt") && patch.contains("+new"),
        "{patch}"
    );

    let e = captured(
        &r,
        "t2",
        &[("mine.txt", "x\n"), ("yours.txt", "y\n")],
        &["mine.txt"],
    )
    .unwrap_err();
    assert_eq!(
        e,
        Refusal::OutOfScope {
            files: vec!["yours.txt".into()]
        }
    );
    assert!(matches!(
        captured(&r, "t3", &[("a.txt", "a\n")], &[]),
        Err(Refusal::OutOfScope { .. })
    ));
    assert_eq!(
        captured(&r, "t4", &[], &["a.txt"]).unwrap_err(),
        Refusal::Empty
    );

    let secret = format!("key = \"sk-{}\"\n", "a1B2".repeat(8));
    let c = captured(&r, "t5", &[("cfg.txt", &secret)], &["cfg.txt"]).unwrap();
    // The patch lands as written; the copy shown is redacted (issue 24 item 6).
    let patch = std::fs::read(&c.patch_path).unwrap();
    let shown = String::from_utf8(capture::shown_copy(&patch)).unwrap();
    assert!(
        !shown.contains("a1B2a1B2") && shown.contains("[redacted:sk]"),
        "{shown}"
    );
    assert!(String::from_utf8_lossy(&patch).contains("a1B2a1B2"));
    assert_eq!(c.redactions, vec!["openai-key"]);

    // A worktree whose history shares nothing with the base: no merge-base.
    let orphan = worktree(&r, "t6");
    git(&orphan, &["checkout", "-q", "--orphan", "lonely"]);
    std::fs::write(orphan.join("x.txt"), "x\n").unwrap();
    git(&orphan, &["add", "-A"]);
    git(&orphan, &["commit", "-q", "-m", "orphan"]);
    let lane = r.root.join("lane-t6");
    std::fs::create_dir_all(&lane).unwrap();
    let e = capture::capture("t6", &orphan, &r.base, &["x.txt".into()], &lane).unwrap_err();
    assert!(e.to_string().contains("fails closed"), "{e}");
    assert!(!lane.join("candidate.patch").exists());
}

/// Guards landing: a candidate that turns the gate red is dropped, one that
/// does not apply is dropped, the rest land one commit each with the trailer,
/// and the evidence says so.
#[test]
fn landing_drops_the_red_and_the_conflicting_and_keeps_the_rest() {
    let r = repo();
    let good = captured(&r, "good", &[("good.txt", "fine\n")], &["good.txt"]).unwrap();
    let red = captured(&r, "red", &[("bad.txt", "BROKEN\n")], &["bad.txt"]).unwrap();
    let also = captured(
        &r,
        "also",
        &[("keep.txt", "kept, changed\n")],
        &["keep.txt"],
    )
    .unwrap();
    let clash = captured(
        &r,
        "clash",
        &[("keep.txt", "other change\n")],
        &["keep.txt"],
    )
    .unwrap();
    let integ = worktree(&r, "integration");
    let q = |t: &str, c: &capture::Candidate| Queued {
        task: t.into(),
        title: format!("{t} title"),
        patch: c.patch_path.clone(),
        base: Some(c.base.clone()),
    };
    let queued = vec![
        q("T-1", &good),
        q("T-2", &red),
        q("T-3", &also),
        q("T-4", &clash),
    ];
    let gate = "! grep -q BROKEN *.txt";
    let ev = r.root.join("evidence");
    let l = land::land(&integ, "drover/integration", &queued, gate, &ev, 1).unwrap();
    let fates: Vec<(&str, &str)> = l
        .fates
        .iter()
        .map(|(t, f)| {
            (
                t.as_str(),
                match f {
                    Fate::Landed { .. } => "landed",
                    Fate::Dropped { .. } => "dropped",
                    Fate::Stopped { .. } => "stopped",
                    Fate::TimedOut { .. } => "timed-out",
                },
            )
        })
        .collect();
    assert_eq!(
        fates,
        vec![
            ("T-1", "landed"),
            ("T-2", "dropped"),
            ("T-3", "landed"),
            ("T-4", "dropped")
        ]
    );
    let Fate::Dropped { reason, .. } = &l.fates[1].1 else {
        unreachable!()
    };
    assert!(
        reason.starts_with("turns the gate red (exit 1)"),
        "{reason}"
    );
    let Fate::Dropped { reason, .. } = &l.fates[3].1 else {
        unreachable!()
    };
    assert!(reason.starts_with("does not apply"), "{reason}");
    let trailers = git(
        &integ,
        &[
            "log",
            "--format=%(trailers:key=Task,valueonly,separator=)",
            &format!("{}..HEAD", r.base),
        ],
    );
    assert_eq!(
        trailers
            .lines()
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>(),
        vec!["T-3", "T-1"]
    );
    assert!(!integ.join("bad.txt").exists());
    assert_eq!(
        std::fs::read_to_string(integ.join("keep.txt")).unwrap(),
        "kept, changed\n"
    );
    assert!(l.gates.last().unwrap().green);
    assert_eq!(
        l.gates.last().unwrap().head,
        git(&integ, &["rev-parse", "HEAD"])
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ev.join("1/evidence.json")).unwrap())
            .unwrap();
    assert_eq!(doc["candidates"].as_array().unwrap().len(), 4);
    let md = std::fs::read_to_string(ev.join("1/evidence.md")).unwrap();
    assert!(
        md.contains("- T-2: dropped, turns the gate red")
            && md.contains("red, exit 1")
            && md.contains("green"),
        "{md}"
    );
    assert_eq!(
        git(&r.repo, &["rev-parse", "main"]),
        r.base,
        "main untouched"
    );
}
