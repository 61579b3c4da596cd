//! What lands is exactly what the agent wrote: a candidate's patch is bytes
//! end to end (non-UTF-8 text, binary files), and secret redaction touches
//! the copies drover shows, never the patch it applies. Real git repos and
//! worktrees.

use drover::loopctl::land::capture;
use drover::loopctl::land::{self, Fate, Queued};
use std::path::{Path, PathBuf};
use std::process::Command;

fn git_out(dir: &Path, args: &[&str]) -> Vec<u8> {
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
    out.stdout
}

fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_out(dir, args))
        .trim()
        .to_string()
}

struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    base: String,
}

/// A repo whose first commit holds `files`.
fn repo(files: &[(&str, &[u8])]) -> Repo {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("keep.txt"), "keep\n").unwrap();
    for (f, c) in files {
        std::fs::write(repo.join(f), c).unwrap();
    }
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

/// Capture `files` written in a fresh worktree, then land the candidate
/// with `gate`; returns the candidate, the fate and the integration worktree.
fn capture_and_land(
    r: &Repo,
    files: &[(&str, &[u8])],
    gate: &str,
) -> (capture::Candidate, Fate, PathBuf) {
    let wt = worktree(r, "t1");
    for (f, c) in files {
        std::fs::write(wt.join(f), c).unwrap();
    }
    let lane = r.root.join("lane");
    std::fs::create_dir_all(&lane).unwrap();
    let claim: Vec<String> = files.iter().map(|(f, _)| f.to_string()).collect();
    let c = capture::capture("T-1", &wt, &r.base, &claim, &lane)
        .unwrap()
        .unwrap();
    let integ = worktree(r, "integration");
    let q = vec![Queued {
        task: "T-1".into(),
        title: "t".into(),
        patch: c.patch_path.clone(),
        base: Some(c.base.clone()),
    }];
    let l = land::land(
        &integ,
        "drover/integration",
        &q,
        gate,
        &r.root.join("ev"),
        1,
    )
    .unwrap();
    (c, l.fates[0].1.clone(), integ)
}

/// Guards issue 24 item 3: `printf 'caf\xe9\n'` (Latin-1) and a binary file
/// land byte for byte — the gate sees those bytes, the commit holds them.
#[test]
fn non_utf8_text_and_binary_files_land_byte_for_byte() {
    let r = repo(&[]);
    let latin1: &[u8] = b"caf\xe9\n";
    let bin: Vec<u8> = (0u8..=255).chain([0, 0xff, 0xfe]).collect();
    let gate = "printf 'caf\\351\\n' | cmp - f1.txt";
    let (_, fate, integ) = capture_and_land(&r, &[("f1.txt", latin1), ("f2.bin", &bin)], gate);
    assert!(matches!(fate, Fate::Landed { .. }), "{fate:?}");
    assert_eq!(git_out(&integ, &["show", "HEAD:f1.txt"]), latin1);
    assert_eq!(git_out(&integ, &["show", "HEAD:f2.bin"]), bin);
}

/// Guards issue 24 item 6: "Bearer authentication" and a test key land as
/// written — also when a context line of the patch already holds such text
/// — while the copy shown to the reviewer is redacted.
#[test]
fn secret_looking_text_lands_as_written_and_only_the_shown_copy_is_redacted() {
    let doc: &[u8] = b"# Auth\nUse Bearer authentication for the API.\nold line\n";
    let r = repo(&[("auth.md", doc)]);
    let key = "sk-test-abcdefghijklmnop1234";
    let new = format!("# Auth\nUse Bearer authentication for the API.\nnew line, test key {key}\n");
    let (c, fate, integ) = capture_and_land(&r, &[("auth.md", new.as_bytes())], "true");
    assert!(matches!(fate, Fate::Landed { .. }), "{fate:?}");
    assert_eq!(git_out(&integ, &["show", "HEAD:auth.md"]), new.as_bytes());
    assert!(!c.redactions.is_empty(), "the secret-looking text is named");
    let patch = std::fs::read(&c.patch_path).unwrap();
    let shown = String::from_utf8(capture::shown_copy(&patch)).unwrap();
    assert!(
        !shown.contains(key) && shown.contains("[redacted"),
        "{shown}"
    );
}
