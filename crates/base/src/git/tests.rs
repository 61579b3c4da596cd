use super::hostile::{hostile_repo, repo, sh};
use super::*;
use std::fs;

fn args_of(c: &Command) -> Vec<String> {
    c.get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_call_pins_the_hardening_flags() {
    let a = args_of(&Git::new(Path::new("/x")).args(["status"]).command());
    for kv in [
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "commit.gpgSign=false",
        "tag.gpgSign=false",
        "diff.noprefix=false",
        "color.ui=never",
    ] {
        let i = a
            .iter()
            .position(|x| x == kv)
            .unwrap_or_else(|| panic!("{kv} in {a:?}"));
        assert_eq!(a[i - 1], "-c");
    }
    assert_eq!(&a[..3], ["--no-pager", "-C", "/x"]);
    let d = args_of(
        &Git::new(Path::new("/x"))
            .args(["diff", "--cached"])
            .command(),
    );
    let i = d.iter().position(|x| x == "diff").unwrap();
    assert_eq!(d[i + 1..i + 1 + DIFF_FLAGS.len()], DIFF_FLAGS);
    assert_eq!(d.last().map(String::as_str), Some("--cached"));
    let s = args_of(
        &Git::new(Path::new("/x"))
            .sign(true)
            .args(["commit"])
            .command(),
    );
    let on = s.iter().rposition(|x| x == "commit.gpgSign=true").unwrap();
    let off = s.iter().position(|x| x == "commit.gpgSign=false").unwrap();
    assert!(on > off, "the opt-in comes after the pin: {s:?}");
}

/// Run in a child process by [`a_parents_repository_variables_are_ignored`]:
/// with a parent environment pointing git at another repository, the
/// runner still works on the repository it names.
#[test]
fn child_sees_the_repository_it_names() {
    let Ok(mine) = std::env::var("DROVER_TEST_GIT_MINE") else {
        return;
    };
    let mine = PathBuf::from(mine);
    let top = Git::new(&mine)
        .args(["rev-parse", "--show-toplevel"])
        .line()
        .unwrap();
    assert_eq!(
        fs::canonicalize(top).unwrap(),
        fs::canonicalize(&mine).unwrap()
    );
    fs::write(mine.join("new.txt"), "x\n").unwrap();
    Git::new(&mine).args(["add", "-A"]).run().unwrap();
    let staged = Git::new(&mine)
        .args(["diff", "--cached", "--name-only"])
        .line()
        .unwrap();
    assert_eq!(staged, "new.txt");
    // Its objects went to its own object store.
    let blob = Git::new(&mine)
        .args(["rev-parse", ":new.txt"])
        .line()
        .unwrap();
    assert!(
        mine.join(".git/objects")
            .join(&blob[..2])
            .join(&blob[2..])
            .is_file(),
        "GIT_OBJECT_DIRECTORY was not scrubbed"
    );
    for probe in ["drover.probe", "drover.probe2"] {
        let leaked = Git::new(&mine)
            .args(["config", "--get", probe])
            .output()
            .unwrap();
        assert!(
            !leaked.status.success(),
            "{probe} reached git from the environment"
        );
    }
    let hooks = Git::new(&mine)
        .args(["config", "core.hooksPath"])
        .line()
        .unwrap();
    assert_eq!(hooks, "/dev/null", "GIT_CONFIG_PARAMETERS was not scrubbed");
    // A command that is not drover's git (the gate) loses them too.
    let mut gate = Command::new("sh");
    gate.args([
        "-c",
        "echo ${GIT_DIR-no}${GIT_INDEX_FILE-no}${GIT_CONFIG_KEY_0-no}",
    ]);
    scrub_repository_env(&mut gate);
    let out = gate.output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "nonono");
}

#[test]
fn a_parents_repository_variables_are_ignored() {
    let d = tempfile::tempdir().unwrap();
    let (mine, other) = (d.path().join("mine"), d.path().join("other"));
    repo(&mine);
    repo(&other);
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "git::tests::child_sees_the_repository_it_names"])
        .env("DROVER_TEST_GIT_MINE", &mine)
        .env("GIT_DIR", other.join(".git"))
        .env("GIT_WORK_TREE", &other)
        .env("GIT_INDEX_FILE", d.path().join("elsewhere.index"))
        .env("GIT_OBJECT_DIRECTORY", other.join(".git/objects"))
        .env(
            "GIT_CONFIG_PARAMETERS",
            "'core.hookspath'='/tmp' 'drover.probe'='leaked'",
        )
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "drover.probe2")
        .env("GIT_CONFIG_VALUE_0", "leaked")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("1 passed"), "{text}");
    // Nothing reached the other repository.
    assert_eq!(sh(&other, &["status", "--porcelain"]), "");
    assert!(!d.path().join("elsewhere.index").exists());
}

#[test]
fn a_hostile_repository_runs_nothing_and_the_users_filter_runs() {
    let d = tempfile::tempdir().unwrap();
    let (r, marker) = hostile_repo(d.path());
    // The user's global configuration: its filter must run.
    let ran = d.path().join("filter-ran");
    let global = d.path().join("gitconfig");
    fs::write(
        &global,
        format!(
            "[filter \"user\"]\n\tclean = \"touch '{}'; cat\"\n",
            ran.display()
        ),
    )
    .unwrap();
    let g = |args: &[&str]| {
        let mut g = Git::new(&r).args(args.iter().copied()).drover_identity();
        g.env
            .push(("GIT_CONFIG_GLOBAL".into(), global.clone().into()));
        g
    };
    fs::write(r.join("a.txt"), "one\nTWO\nthree\n").unwrap();
    fs::write(r.join("b.dat"), "data\n").unwrap();
    g(&["add", "-A"]).run().unwrap();
    g(&["status", "--porcelain"]).run().unwrap();
    let patch = g(&["diff", "--cached", "--binary", "HEAD"]).text().unwrap();
    assert!(patch.starts_with("diff --git a/"), "{patch}");
    assert!(patch.contains("+TWO"), "{patch}");
    g(&["commit", "-q", "-m", "side"]).run().unwrap();
    g(&["checkout", "-q", "-b", "other", "HEAD~1"])
        .run()
        .unwrap();
    fs::write(r.join("a.txt"), "one\n2\nthree\n").unwrap();
    g(&["commit", "-q", "-am", "other"]).run().unwrap();
    let merged = g(&["merge", "-q", "--no-edit", "main"]).output().unwrap();
    assert!(!merged.status.success(), "the text merge conflicts");
    g(&["merge", "--abort"]).run().unwrap();
    g(&["worktree", "add", "-q", "../w", "main"]).run().unwrap();
    g(&["log", "-p", "-1"]).run().unwrap();
    g(&["show", "HEAD:a.txt"]).run().unwrap();
    assert!(!marker.exists(), "a repository-defined program ran");
    assert!(ran.exists(), "the user's global filter did not run");
}

#[test]
fn a_failure_carries_gits_first_line() {
    let d = tempfile::tempdir().unwrap();
    repo(d.path());
    let e = Git::new(d.path())
        .args(["rev-parse", "--verify", "nope"])
        .run()
        .unwrap_err();
    let GitError::Failed { args, message, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(args, "rev-parse --verify nope");
    assert!(message.starts_with("fatal:"), "{message}");
}

#[test]
fn signing_that_cannot_work_is_told_up_front() {
    let d = tempfile::tempdir().unwrap();
    repo(d.path());
    sh(
        d.path(),
        &["config", "user.signingKey", "nobody@nowhere.invalid"],
    );
    let e = check_signing(d.path()).unwrap_err();
    assert!(e.contains("signing does not work here"), "{e}");
}
