//! The user's git configuration and a repository an agent wrote change
//! nothing drover captures, applies or commits (issue 35 items 3 and 4,
//! docs/git-config.md): real `drover loop run`s with sim lanes, the merge
//! queue's three-way apply and a rebase round included, under a HOME of
//! the test's own. The test's own git calls never see that HOME.

use crate::common::{Drover, git, stderr, stdout};
use crate::loop_common::{REVIEWER_PASS, task_file};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// TASK-1 and TASK-2 change the same line of `shared.txt` (TASK-2 later:
/// it conflicts at landing, three-way too, and goes back as a rebase round
/// that keeps both); TASK-1 also writes `data.dat`; TASK-3 writes a file
/// with a non-ASCII name and CRLF line ends.
const IMPLEMENTER: &str = r#"
[[turn]]
match = "task=TASK-1 "
steps = [{ work = 200 }, { write = { path = "shared.txt", content = "one\nTWO (first)\nthree\nfour\n" } }, { write = { path = "data.dat", content = "data\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "the merge stopped with conflict markers in: shared.txt. The commits that changed them: "
steps = [{ work = 200 }, { resolve = { path = "shared.txt", keep = "both" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-2 "
steps = [{ work = 2500 }, { write = { path = "shared.txt", content = "one\ntwo (second)\nthree\nfour\n" } }, { report = { path = "{report}" } }, "finish"]
[[turn]]
match = "task=TASK-3 "
steps = [{ work = 200 }, { write = { path = "café ü.txt", content = "crlf\r\nline\r\n" } }, { report = { path = "{report}" } }, "finish"]
"#;

/// The test's scratch: the repo with its board, the charter, the sim
/// scripts, a HOME for drover's processes, and a marker path.
struct Field {
    root: PathBuf,
    repo: PathBuf,
    charter: PathBuf,
    home: PathBuf,
    marker: PathBuf,
}

fn exec(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A repo (committed with the test's own git, before any hostile config)
/// with `.gitattributes`, a husky-style `.husky/` of hooks that touch the
/// marker, `shared.txt` and a board of three tasks.
fn field(d: &Drover) -> Field {
    let root = d.scratch();
    let repo = root.join("repo");
    let home = root.join("home");
    let marker = root.join("marker");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    std::fs::create_dir_all(repo.join(".husky")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("shared.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    std::fs::write(
        repo.join(".gitattributes"),
        "*.txt diff=evil merge=evil filter=evil\n*.dat filter=user\n",
    )
    .unwrap();
    let m = marker.display();
    for h in [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "post-merge",
        "pre-merge-commit",
        "post-rewrite",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc",
    ] {
        exec(
            &repo.join(".husky").join(h),
            &format!("touch '{m}'\nexit 1"),
        );
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "--no-verify", "-m", "initial"]);
    let tasks = repo.join("backlog").join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    task_file(&tasks, 1, "First", &["shared.txt", "data.dat"]);
    task_file(&tasks, 2, "Second", &["shared.txt"]);
    task_file(&tasks, 3, "Third", &["café ü.txt"]);
    let charter = root.join("CHARTER.md");
    std::fs::write(
        &charter,
        "# Field\n\n- lanes: 4\n- pool: 2\n- gate: `test -f shared.txt`\n",
    )
    .unwrap();
    std::fs::write(root.join("imp.toml"), IMPLEMENTER).unwrap();
    std::fs::write(root.join("rev.toml"), REVIEWER_PASS).unwrap();
    Field {
        root,
        repo,
        charter,
        home,
        marker,
    }
}

/// `drover loop run` with sim lanes, its processes (the supervisor, the
/// panes) in the test's HOME.
fn loop_run(d: &Drover, f: &Field, extra: &[&str]) -> Output {
    let imp = f.root.join("imp.toml");
    let rev = f.root.join("rev.toml");
    let mut args = vec![
        "loop",
        "run",
        "--charter",
        f.charter.to_str().unwrap(),
        "--repo",
        f.repo.to_str().unwrap(),
        "--turn-timeout-s",
        "60",
        "--sim-implementer",
        imp.to_str().unwrap(),
        "--sim-reviewer",
        rev.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    d.cmd()
        .args(&args)
        .env("HOME", &f.home)
        .env("XDG_CONFIG_HOME", f.home.join(".config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_CONFIG_GLOBAL")
        .env_remove("EMAIL")
        .output()
        .unwrap()
}

/// A blob on run 1's integration branch, read without textconv or filters.
fn landed(repo: &Path, path: &str) -> Option<Vec<u8>> {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args([
            "cat-file",
            "blob",
            &format!("drover/integration/loop1:{path}"),
        ])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    o.status.success().then_some(o.stdout)
}

/// Every task landed, TASK-2 after a rebase round, the files as written,
/// by drover's identity, unsigned.
fn assert_all_landed(d: &Drover, f: &Field, out: &Output) {
    assert_landed_as(d, f, out, false);
}

/// [`assert_all_landed`], the commits `signed` or not.
fn assert_landed_as(d: &Drover, f: &Field, out: &Output, signed: bool) {
    let text = stdout(out);
    assert!(
        out.status.success(),
        "{text}\n{}\n{}",
        stderr(out),
        std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap_or_default()
    );
    assert!(text.contains("## Parked\n- none\n"), "{text}");
    let how = if signed { "signed" } else { "unsigned" };
    assert!(
        text.contains(&format!("- drover's commits on drover/integration/loop1 are by drover loop <loop@drover.invalid>, {how}")),
        "{text}"
    );
    assert!(
        text.contains(", rebased"),
        "TASK-2 went through a rebase round: {text}"
    );
    let shared = landed(&f.repo, "shared.txt").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&shared),
        "one\ntwo (second)\nTWO (first)\nthree\nfour\n"
    );
    assert_eq!(landed(&f.repo, "data.dat").unwrap(), b"data\n");
    assert!(landed(&f.repo, "café ü.txt").is_some(), "{text}");
    let who = git(
        &f.repo,
        &[
            "log",
            "--format=%an <%ae>",
            "main..drover/integration/loop1",
        ],
    );
    assert!(
        !who.is_empty()
            && who
                .lines()
                .all(|l| l == "drover loop <loop@drover.invalid>"),
        "{who}"
    );
    let head = git(&f.repo, &["cat-file", "commit", "drover/integration/loop1"]);
    assert_eq!(
        head.contains("-----BEGIN PGP SIGNATURE-----"),
        signed,
        "{head}"
    );
    let said = if signed {
        "signed with your key"
    } else {
        "unsigned"
    };
    assert!(
        stderr(out).contains(&format!(
            "commits on the integration branch are by drover loop <loop@drover.invalid>, {said}"
        )),
        "{}",
        stderr(out)
    );
}

/// Guards issue 35 item 3: a repository whose own config (as an agent can
/// write it from its worktree) and attributes set fsmonitor, a husky-style
/// hooks path, an external diff, a textconv, a diff command, a merge driver
/// and a required clean filter, each to touch a marker; the user's global
/// config defines the clean filter of `*.dat`. Through capture, review,
/// gate, the merge queue's three-way apply, a rebase round and landing, no
/// marker appears, the user's filter ran, every task landed.
#[test]
fn a_repository_that_runs_programs_runs_none_and_the_users_filter_runs() {
    let d = Drover::new();
    let f = field(&d);
    let m = f.marker.display().to_string();
    let fsmon = f.root.join("fsmonitor");
    exec(&fsmon, &format!("touch '{m}'\nexit 1"));
    let ran = f.root.join("filter-ran");
    for (k, v) in [
        ("core.hooksPath", ".husky".to_string()),
        ("core.fsmonitor", fsmon.display().to_string()),
        ("diff.external", format!("touch '{m}'; echo")),
        ("diff.evil.textconv", format!("touch '{m}'; cat")),
        ("diff.evil.command", format!("touch '{m}'; echo")),
        ("merge.evil.driver", format!("touch '{m}'; false")),
        ("filter.evil.clean", format!("touch '{m}'; cat")),
        ("filter.evil.smudge", format!("touch '{m}'; cat")),
        ("filter.evil.required", "true".into()),
        ("filter.user.clean", format!("touch '{m}'; cat")),
        ("gpg.program", format!("touch '{m}'; false")),
    ] {
        git(&f.repo, &["config", k, &v]);
    }
    std::fs::write(
        f.home.join(".gitconfig"),
        format!(
            "[user]\n\tname = Field User\n\temail = user@field.invalid\n[filter \"user\"]\n\tclean = \"touch '{}'; cat\"\n",
            ran.display()
        ),
    )
    .unwrap();
    let out = loop_run(&d, &f, &[]);
    assert!(
        !f.marker.exists(),
        "a program the repository's config names ran: {}",
        stderr(&out)
    );
    assert!(ran.exists(), "the user's global clean filter did not run");
    assert_all_landed(&d, &f, &out);
}

/// The configuration a real user has, hostile to what drover parses:
/// written as `[section]` text into `file`.
fn users_config(f: &Field) -> String {
    let gpg = f.root.join("gpg-no-key");
    exec(
        &gpg,
        "echo 'gpg: signing failed: No secret key' >&2\nexit 2",
    );
    let difft = f.root.join("difft");
    exec(&difft, "echo \"$1 --- 1/1 --- Text (difftastic-like)\"");
    let hooks = f.root.join("global-hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for h in [
        "pre-commit",
        "post-commit",
        "reference-transaction",
        "post-checkout",
    ] {
        exec(&hooks.join(h), "exit 1");
    }
    format!(
        "[diff]\n\tnoprefix = true\n\texternal = {difft}\n\tmnemonicPrefix = true\n\trenames = copies\n\talgorithm = histogram\n\tcontext = 1\n\
         [commit]\n\tgpgsign = true\n\tverbose = true\n[tag]\n\tgpgsign = true\n[gpg]\n\tprogram = {gpg}\n\
         [color]\n\tui = always\n\tdiff = always\n\tstatus = always\n\tbranch = always\n\
         [core]\n\tquotePath = false\n\tautocrlf = true\n\thooksPath = {hooks}\n\tpager = less\n\
         [merge]\n\tconflictStyle = zdiff3\n\tff = only\n[pull]\n\trebase = true\n[rebase]\n\tautoStash = true\n\
         [init]\n\tdefaultBranch = trunk\n[user]\n\tuseConfigOnly = true\n\
         [status]\n\tshowUntrackedFiles = no\n\trelativePaths = true\n[log]\n\tshowSignature = true\n\tdecorate = full\n\
         [apply]\n\twhitespace = error\n[advice]\n\tdetachedHead = true\n",
        difft = difft.display(),
        gpg = gpg.display(),
        hooks = hooks.display(),
    )
}

/// Guards issue 35 item 4 (the user's global config): `~/.gitconfig` with
/// diff.noprefix, a difftastic-like diff.external and commit.gpgsign with a
/// gpg that has no key (each of which parked a task or stopped the run),
/// and colour always, mnemonic prefixes, copies, histogram, one line of
/// context, quotePath off, autocrlf, zdiff3, ff=only, pull.rebase,
/// init.defaultBranch, useConfigOnly with no name, no untracked files in
/// status, a global hooks path of failing hooks, showSignature, whitespace
/// errors: every task lands, a three-way apply and a rebase round included,
/// with drover's identity, unsigned.
#[test]
fn a_users_global_git_config_changes_nothing() {
    let d = Drover::new();
    let f = field(&d);
    std::fs::write(f.home.join(".gitconfig"), users_config(&f)).unwrap();
    let out = loop_run(&d, &f, &[]);
    assert_all_landed(&d, &f, &out);
}

/// The same configuration in the repository's own config (with an
/// ordinary HOME, no identity).
#[test]
fn a_repositorys_own_git_config_changes_nothing() {
    let d = Drover::new();
    let f = field(&d);
    let cfg = users_config(&f);
    let local = f.repo.join(".git/config");
    let mut text = std::fs::read_to_string(&local).unwrap();
    text.push_str(&cfg);
    std::fs::write(&local, text).unwrap();
    let out = loop_run(&d, &f, &[]);
    assert_all_landed(&d, &f, &out);
}

/// Guards issue 35 item 4 (`--sign`): with a gpg that cannot sign, `loop run
/// --sign` is exit 2 with a sentence before any lane starts.
#[test]
fn sign_that_cannot_work_is_refused_before_any_lane_starts() {
    let d = Drover::new();
    let f = field(&d);
    std::fs::write(f.home.join(".gitconfig"), users_config(&f)).unwrap();
    let out = loop_run(&d, &f, &["--sign"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--sign: signing does not work here") && err.contains("No secret key"),
        "{err}"
    );
    assert!(!d.state.join("loop1").exists(), "no run started");
    assert!(!d.state.join("worktrees").exists(), "no lane started");
}

/// Ends the gpg-agent a test's GNUPGHOME started.
struct Agent(PathBuf);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = std::process::Command::new("gpgconf")
            .args(["--kill", "gpg-agent"])
            .env("GNUPGHOME", &self.0)
            .output();
    }
}

/// Guards issue 35 item 4 (`--sign` opted in): with a key that works (no
/// passphrase, in a GNUPGHOME of the test's own, named by `user.signingKey`
/// in the user's global config), every task lands and the integration
/// branch's commits carry a signature.
#[test]
fn sign_with_a_key_that_works_signs_the_landings() {
    let d = Drover::new();
    let f = field(&d);
    let gnupg = f.root.join("gnupg");
    std::fs::create_dir_all(&gnupg).unwrap();
    std::fs::set_permissions(&gnupg, std::fs::Permissions::from_mode(0o700)).unwrap();
    let _agent = Agent(gnupg.clone());
    let made = std::process::Command::new("gpg")
        .args(["--batch", "--passphrase", "", "--quick-gen-key"])
        .args([
            "drover loop <loop@drover.invalid>",
            "ed25519",
            "sign",
            "never",
        ])
        .env("GNUPGHOME", &gnupg)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    std::fs::write(
        f.home.join(".gitconfig"),
        "[user]\n\tsigningKey = loop@drover.invalid\n",
    )
    .unwrap();
    let (imp, rev) = (f.root.join("imp.toml"), f.root.join("rev.toml"));
    let out = d
        .cmd()
        .args(["loop", "run", "--sign", "--turn-timeout-s", "60"])
        .arg("--charter")
        .arg(&f.charter)
        .arg("--repo")
        .arg(&f.repo)
        .arg("--sim-implementer")
        .arg(&imp)
        .arg("--sim-reviewer")
        .arg(&rev)
        .env("HOME", &f.home)
        .env("XDG_CONFIG_HOME", f.home.join(".config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GNUPGHOME", &gnupg)
        .output()
        .unwrap();
    assert_landed_as(&d, &f, &out, true);
}
