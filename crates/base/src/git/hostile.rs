//! A hostile repository for tests, here and in the crates above (their
//! dev-dependency on drover-base turns on the `test-support` feature).

use super::*;
use std::fs;

/// The test's own git, with none of the hostile configuration: a config
/// of its own, identity given.
pub fn sh(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Make `dir` a repository with one commit of `a.txt` on `main`.
pub fn repo(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    sh(dir, &["init", "-q", "-b", "main"]);
    fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    sh(dir, &["add", "-A"]);
    sh(dir, &["commit", "-q", "-m", "init"]);
}

/// A repository whose own configuration and attributes make git run a
/// program at every turn, and a user whose global configuration defines a
/// clean filter: drover's calls run none of the repository's, the user's
/// filter runs.
/// Make `<root>/r`, a repository whose configuration and attributes run
/// a program (which touches `<root>/marker`) at every turn of git; returns
/// the repository and the marker. Other modules' tests use it to show
/// their git runs none of it.
pub fn hostile_repo(root: &Path) -> (PathBuf, PathBuf) {
    let r = root.join("r");
    repo(&r);
    let marker = root.join("marker");
    let m = marker.display().to_string();
    let touch = format!("touch '{m}'; false");
    let hooks = r.join(".husky");
    fs::create_dir_all(&hooks).unwrap();
    for h in [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "post-merge",
        "pre-merge-commit",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc",
    ] {
        let p = hooks.join(h);
        fs::write(&p, format!("#!/bin/sh\ntouch '{m}'\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let cfg = |k: &str, v: &str| sh(&r, &["config", k, v]);
    cfg("core.hooksPath", ".husky");
    cfg("core.fsmonitor", &format!("touch '{m}'; echo"));
    cfg("diff.external", &format!("touch '{m}'; echo"));
    cfg("diff.evil.textconv", &format!("touch '{m}'; cat"));
    cfg("diff.evil.command", &format!("touch '{m}'; echo"));
    cfg("merge.evil.driver", &touch);
    cfg("filter.evil.clean", &format!("touch '{m}'; cat"));
    cfg("filter.evil.smudge", &format!("touch '{m}'; cat"));
    cfg("filter.evil.required", "true");
    cfg("filter.user.clean", &format!("touch '{m}'; cat"));
    cfg("gpg.program", &format!("touch '{m}'; false"));
    fs::write(
        r.join(".gitattributes"),
        "*.txt diff=evil merge=evil filter=evil\n*.dat filter=user\n",
    )
    .unwrap();
    (r, marker)
}
