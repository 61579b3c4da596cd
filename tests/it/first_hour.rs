//! What bit a new user in the first hour, each fixed with the test that
//! would have caught it.

use crate::common;
use std::path::Path;
use std::process::{Command, Output};

/// drover run from `dir` with no `--state-dir` (the default state dir).
fn drover_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .current_dir(dir)
        .args(args)
        .env_remove("DROVER_STATE_DIR")
        .output()
        .unwrap()
}

fn repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    common::git(tmp.path(), &["init", "-q", "-b", "main"]);
    common::git(
        tmp.path(),
        &["commit", "-q", "--allow-empty", "-m", "initial"],
    );
    tmp
}

/// Guards `?? .drover/` in `git status` after the first drover command in a
/// repository: the state dir keeps itself out of git without a tracked file
/// of the user's being edited.
#[test]
fn the_default_state_dir_is_not_in_git_status() {
    let tmp = repo();
    let out = drover_in(tmp.path(), &["job", "create", "J1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tmp.path().join(".drover").is_dir());
    let status = common::git(
        tmp.path(),
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert_eq!(status, "", "git status shows drover's own dir");
    assert!(
        !tmp.path().join(".gitignore").exists(),
        "the user's files are not edited"
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(tmp.path().join(".drover/.gitignore"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(
        mode & 0o077,
        0,
        "private like everything in the state dir: {mode:o}"
    );
}

/// Guards the raw OS error of a missing board or charter (`…/tasks: No such
/// file or directory (os error 2)`): the flag and what was looked for are
/// named, as a usage error, before any supervisor starts.
#[test]
fn a_missing_board_or_charter_names_its_flag() {
    let tmp = repo();
    let state = tmp.path().join("state");
    let st = state.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["--state-dir", st, "loop", "run", "--sim"];
        all.extend_from_slice(args);
        drover_in(tmp.path(), &all)
    };
    let out = run(&["--charter", "nope.md"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--charter") && err.contains("nope.md"),
        "{err}"
    );
    assert!(!err.contains("os error"), "{err}");

    std::fs::write(tmp.path().join("CHARTER.md"), "# Aim\n\ngate: true\n").unwrap();
    let out = run(&["--charter", "CHARTER.md"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no --board given") && err.contains("backlog/tasks"),
        "{err}"
    );
    let out = run(&["--charter", "CHARTER.md", "--board", "elsewhere"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--board elsewhere") && !err.contains("os error"),
        "{err}"
    );
    assert!(!state.join("logs").exists(), "no supervisor was started");
}

/// Guards `loop control 1 pasue` answering `CONTROL "pasue" is one of …`:
/// a near miss gets a suggestion.
#[test]
fn a_mistyped_control_gets_a_suggestion() {
    let tmp = repo();
    let out = drover_in(tmp.path(), &["loop", "control", "1", "pasue"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown control \"pasue\"; did you mean pause?"),
        "{err}"
    );
    let out = drover_in(tmp.path(), &["loop", "control", "1", "zzz"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("it is one of pause, resume, close-out, emergency-stop"),
        "{err}"
    );
}

/// Guards the rehearsal quick start's `pane send` to Claude: the text sat
/// in the composer and the wait timed out. `pane send` to an agent pane
/// warns that it does not confirm submission and names `drover send`; to a
/// shell pane it says nothing more.
#[test]
fn pane_send_to_an_agent_pane_warns_and_names_drover_send() {
    let d = common::Drover::new();
    d.new_pane("agent", &["--agent", "claude"], &["cat"]);
    d.new_pane("sh", &[], &["cat"]);
    let out = d.run(&["pane", "send", "agent", "hello"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("does not confirm that claude took the prompt")
            && err.contains("drover send agent"),
        "{err}"
    );
    let out = d.run(&["pane", "send", "sh", "hello"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hint =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rehearsal.md"))
            .unwrap();
    assert!(
        !hint.contains("drover pane send rehearse-"),
        "the quick start submits with drover send"
    );
}

/// Guards issue 28 item 13: `demo --loop` without `--keep` printed paths to
/// files it then deleted (`written to …/closeout.md`) as if they were there;
/// `demo --keep` still ended with "Run `drover demo --keep`".
#[test]
fn the_demos_point_only_to_files_that_are_still_there() {
    let d = common::Drover::new();
    let out = d.run(&["demo", "--loop"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("(written to "), "{text}");
    // Guards issue 42 item 10: "4 landing(s)" for 3 tasks, with nothing to
    // say that one landing turned a task back.
    assert!(text.contains("- 3 task(s) landed, in "), "{text}");
    assert!(
        text.trim_end().ends_with(
            "removed now with its repo and state dir; `drover demo --loop --keep` keeps them)"
        ),
        "{text}"
    );
    let out = d.run(&["demo", "--keep"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("Run `drover demo --keep`"), "{text}");
    // What --keep kept is stopped and removed as it says.
    let sd = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("drover --state-dir "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the kept state dir")
        .trim_matches('\'')
        .to_string();
    let kill = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["--state-dir", &sd, "kill-server"])
        .output()
        .unwrap();
    assert!(kill.status.success());
    if let Some(tmp) = Path::new(&sd).parent() {
        let _ = std::fs::remove_dir_all(tmp);
    }
}

/// Guards issue 28 item 16: `pane new --backend herdr` without herdr failed
/// but left the supervisor it had started running, with nothing in it.
#[test]
fn a_pane_that_cannot_be_made_leaves_no_supervisor_behind() {
    let d = common::Drover::new();
    let out = d
        .cmd()
        .env("DROVER_HERDR", d.scratch().join("no-herdr-here"))
        .env("PATH", "/usr/bin:/bin")
        .args([
            "pane",
            "new",
            "h",
            "--backend",
            "herdr",
            "--",
            "sleep",
            "60",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let st = d.run(&["status"]);
    assert_eq!(
        st.status.code(),
        Some(5),
        "the supervisor it started is stopped: {}",
        String::from_utf8_lossy(&st.stdout)
    );
}

/// Guards issue 28 item 16: `kill-server` left drover's tmux socket file
/// behind (tmux does not remove it when killed or when its last session
/// ends).
#[test]
fn kill_server_leaves_no_tmux_socket_file() {
    let d = common::Drover::new();
    let p = d.new_pane("t", &["--backend", "tmux"], &["sleep", "600"]);
    let name = p["attach_command"]
        .as_str()
        .and_then(|c| c.split_whitespace().nth(2))
        .expect("tmux -L NAME attach …")
        .to_string();
    let dir = std::env::var_os("TMUX_TMPDIR")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || std::path::PathBuf::from("/tmp"),
            std::path::PathBuf::from,
        );
    let socket = dir
        .join(format!("tmux-{}", nix::unistd::getuid()))
        .join(&name);
    assert!(socket.exists(), "{}", socket.display());
    d.ok(&["kill-server"]);
    assert!(!socket.exists(), "{} is left", socket.display());
}

/// Guards issue 28 item 9: `lane ls` showed TASK-1's lease on both
/// implementer lanes (matched by session alone), and a long value broke
/// the columns after it.
#[test]
fn lane_ls_shows_a_lease_on_its_own_lane_and_stays_aligned() {
    let d = common::Drover::new();
    let r = crate::lanes_common::repo(&d);
    crate::lanes_common::up(&d, &r, "implementer", &[]);
    let lanes = crate::lanes_common::lanes(&d);
    let wt = lanes
        .iter()
        .find(|l| l["lane_id"] == "implementer-claude")
        .and_then(|l| l["worktree"].as_str())
        .unwrap()
        .to_string();
    d.ok(&[
        "lease",
        "claim",
        "--task",
        "TASK-1",
        "--session",
        "implementer",
        "--worktree",
        &wt,
        "--file",
        "a.txt",
    ]);
    let lanes = crate::lanes_common::lanes(&d);
    let lease = |id: &str| {
        lanes
            .iter()
            .find(|l| l["lane_id"] == id)
            .map(|l| l["lease"].clone())
            .unwrap()
    };
    assert_eq!(lease("implementer-claude"), "TASK-1 active", "{lanes:?}");
    assert!(lease("implementer-codex").is_null(), "{lanes:?}");
    let table = d.ok(&["lane", "ls"]);
    let lines: Vec<&str> = table.lines().collect();
    let phase_at = lines[0].find("PHASE").unwrap();
    for l in &lines[1..] {
        assert!(
            l.get(phase_at..).is_some_and(|s| s.starts_with("up")),
            "columns stay aligned:\n{table}"
        );
    }
}

/// Guards issue 28 item 17: per-command help mixed the global flags with
/// the command's own; the command's come first, the globals under their
/// own heading.
#[test]
fn command_help_lists_its_own_options_before_the_global_ones() {
    for cmd in [&["lease", "claim"][..], &["pane", "new"], &["loop", "run"]] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(&args)
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        let own = help.find("\nOptions:").expect("an Options heading");
        let global = help
            .find("\nGlobal options:")
            .expect("a Global options heading");
        let state = help.find("--state-dir").unwrap();
        assert!(own < global && global < state, "{cmd:?}:\n{help}");
    }
}

/// Guards issue 28 item 14: there was no CONTRIBUTING.md. Every file and
/// script it names is there, and the suites it runs as examples exist.
#[test]
fn contributing_names_only_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    for path in [
        "tests/it/main.rs",
        "tests/it/common",
        "scripts/agent-versions",
        "scripts/install-agents.sh",
        "scripts/canary.sh",
        "docs/architecture.md",
        "docs/rehearsal.md",
        "docs/performance.md",
        "docs/cli.md",
        ".ci/run",
        "tests/fixtures",
    ] {
        assert!(text.contains(path), "CONTRIBUTING.md names {path}");
        assert!(root.join(path).exists(), "{path} exists");
    }
    let main = std::fs::read_to_string(root.join("tests/it/main.rs")).unwrap();
    for suite in ["pane_io", "loop_stop", "real_agents", "real_loop_brief"] {
        assert!(main.contains(&format!("mod {suite};")), "suite {suite}");
    }
}
