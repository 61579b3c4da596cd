//! One grammar (docs/cli.md), through the real binary: renamed flags keep
//! their old spellings, `--json` is one document and `--jsonl` a stream,
//! commands that change something say so unless `-q`, long text comes from a
//! file or stdin, statuses are checked, completions and man pages generate,
//! and verbosity reaches a supervisor the command starts.

use crate::common;

use common::{Drover, stderr, stdout, wait_until};
use serde_json::Value;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

fn code(o: &std::process::Output) -> Option<i32> {
    o.status.code()
}

fn registry(d: &Drover) {
    d.ok(&["registry", "init", "--topology", "four-role"]);
}

/// Every rename keeps its old spelling as a hidden alias.
#[test]
fn renamed_flags_and_commands_keep_their_old_spellings() {
    let d = Drover::new();
    registry(&d);
    for flag in ["--session", "--session-id"] {
        d.ok(&[
            "session-heartbeat",
            flag,
            "reviewer",
            "--task",
            "T-1",
            "--status",
            "working",
        ]);
    }
    let wt = d.scratch().display().to_string();
    d.ok(&[
        "lease",
        "claim",
        "--task",
        "T-1",
        "--worktree",
        &wt,
        "--file",
        "src/",
    ]);
    let new: Value =
        serde_json::from_str(&d.ok(&["lease", "show", "--task", "T-1", "--json"])).unwrap();
    let old: Value = serde_json::from_str(&d.ok(&["lease", "inspect", "T-1", "--json"])).unwrap();
    assert_eq!(new["lease"]["lease_id"], old["lease"]["lease_id"]);
    d.ok(&["lease", "check-scope", "--task", "T-1", "src/a.rs"]);
    d.ok(&["lease", "check-scope", "T-1", "src/a.rs"]);
    let out = d.run(&["lease", "check-scope", "--task", "T-1", "README.md"]);
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    // The old spellings are not advertised.
    let help = d.ok(&["session-heartbeat", "--help"]);
    assert!(!help.contains("session-id"), "{help}");
    assert!(!d.ok(&["lease", "--help"]).contains("inspect"));
}

/// Guards: `events --json` printed lines; `--json` is one document.
#[test]
fn json_is_one_document_and_jsonl_one_object_per_line() {
    let d = Drover::new();
    registry(&d);
    d.ok(&[
        "session-heartbeat",
        "--session",
        "reviewer",
        "--status",
        "active",
    ]);
    let doc: Value = serde_json::from_str(&d.ok(&["events", "--json"])).unwrap();
    let n = doc.as_array().expect("one array").len();
    assert!(n >= 2, "{doc}");
    let lines = d.ok(&["events", "--jsonl"]);
    assert_eq!(lines.lines().count(), n);
    for l in lines.lines() {
        let v: Value = serde_json::from_str(l).expect("each line is JSON");
        assert!(v["seq"].is_u64());
    }
    let out = d.run(&["events", "--follow", "--json"]);
    assert_eq!(code(&out), Some(2), "a stream is --jsonl: {}", stderr(&out));
    let out = d.run(&["shadow", "run", "--json"]);
    assert_eq!(code(&out), Some(2), "--json needs --once: {}", stderr(&out));
}

/// Guards: `session-heartbeat --status bogus` succeeded.
#[test]
fn heartbeat_statuses_are_the_documented_ones() {
    let d = Drover::new();
    registry(&d);
    let out = d.run(&[
        "session-heartbeat",
        "--session",
        "reviewer",
        "--status",
        "bogus",
    ]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("pass-class"), "{}", stderr(&out));
    for s in ["passed", "failed", "active", "working"] {
        d.ok(&["session-heartbeat", "--session", "reviewer", "--status", s]);
    }
}

/// Guards: `lease claim --worktree ../wt` stored an unresolved, nonexistent path.
#[test]
fn a_lease_worktree_is_resolved_and_a_missing_one_is_named() {
    let d = Drover::new();
    registry(&d);
    let sub = d.scratch().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let out = d
        .cmd()
        .current_dir(&sub)
        .args([
            "lease",
            "claim",
            "--task",
            "T-1",
            "--worktree",
            "../wt",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let want = d.scratch().join("wt");
    assert_eq!(v["lease"]["worktree"], want.to_str().unwrap(), "{v}");
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

/// Quiet commands say what they did, unless `-q`.
#[test]
fn commands_that_change_something_say_so_unless_quiet() {
    let d = Drover::new();
    d.new_pane("q", &[], &["sh"]);
    assert!(
        d.ok(&["pane", "send", "q", "true"])
            .contains("sent 4 bytes to q")
    );
    assert!(
        d.ok(&["pane", "keys", "q", "Enter"])
            .contains("sent Enter to q")
    );
    assert_eq!(d.ok(&["-q", "pane", "send", "q", "true"]), "");
    assert!(d.ok(&["pane", "kill", "q"]).contains("killed pane q"));
    assert!(d.ok(&["kill-server"]).contains("stopped the supervisor"));
}

/// `pane send` and `send` take the text from a file or stdin: argv cannot
/// carry more than 128 KiB.
#[test]
fn long_text_comes_from_a_file_or_stdin() {
    let d = Drover::new();
    d.new_pane("cat", &[], &["sh", "-c", "stty -echo; exec cat"]);
    let big = "x".repeat(200 * 1024);
    let f = d.scratch().join("big.txt");
    std::fs::write(&f, format!("{big}\nfile-end")).unwrap();
    let out = d.ok(&["pane", "send", "cat", "--file", f.to_str().unwrap()]);
    assert!(
        out.contains(&format!("sent {} bytes", big.len() + 9)),
        "{out}"
    );
    d.wait_text("cat", "file-end", Duration::from_secs(30));
    let mut child = d
        .cmd()
        .args(["pane", "send", "cat", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from-stdin")
        .unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    d.wait_text("cat", "from-stdin", Duration::from_secs(30));
    let out = d.run(&["pane", "send", "cat", "--file", "/nonexistent/file"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
}

#[test]
fn completions_and_man_pages_generate() {
    let d = Drover::new();
    for (shell, needle) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef drover"),
        ("fish", "complete -c drover"),
    ] {
        let out = d.ok(&["completions", shell]);
        assert!(
            out.contains(needle),
            "{shell}: {}",
            &out[..out.len().min(200)]
        );
        assert!(out.contains("heartbeat"), "{shell} completes the commands");
    }
    let man = d.ok(&["man"]);
    assert!(
        man.starts_with(".ie") || man.contains(".TH"),
        "{}",
        &man[..200]
    );
    assert!(man.contains("drover"));
    let dir = d.scratch().join("man");
    let listed = d.ok(&["man", "--out-dir", dir.to_str().unwrap()]);
    assert!(dir.join("drover.1").is_file());
    assert!(dir.join("drover-pane-new.1").is_file());
    assert!(
        listed.lines().any(|l| l.ends_with("drover-pane-new.1")),
        "--out-dir lists what it wrote: {listed}"
    );
}

/// Regression (first hour, pass 2): `drover man` printed only the top page,
/// which points to `drover-pane(1)` and the rest, pages that existed only
/// with `--out-dir`; and completions offered no values for `--until`,
/// `--backend` or `pane new --agent`.
#[test]
fn man_prints_every_page_and_completions_offer_the_values() {
    let d = Drover::new();
    let all = d.ok(&["man"]);
    for title in [
        ".TH drover ",
        ".TH drover-pane-new ",
        ".TH drover-loop-run ",
    ] {
        assert!(all.contains(title), "`drover man` has {title}");
    }
    let one = d.ok(&["man", "pane", "new"]);
    assert!(one.contains(".TH drover-pane-new "), "{one}");
    // Guards issue 42 item 10: the footer said `"new 0.1.0"` and the
    // synopsis dropped each flag's value (`[--cwd]`).
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        one.contains(&format!("\"drover {version}\"")),
        "{}",
        &one[..one.len().min(300)]
    );
    let run = d.ok(&["man", "loop", "run"]);
    let synopsis = run
        .split(".SH SYNOPSIS\n")
        .nth(1)
        .and_then(|t| t.split("\n.SH ").next())
        .unwrap_or_default();
    assert!(
        synopsis.contains("[\\fB\\-\\-charter\\fR <\\fIFILE\\fR>]"),
        "{synopsis}"
    );
    assert!(!one.contains(".TH drover "), "only the page asked for");
    let bad = d.run(&["man", "pane", "nosuch"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("pane nosuch"), "{}", stderr(&bad));

    let bash = d.ok(&["completions", "bash"]);
    for value in ["blocked:usage_limit", "herdr", "codex"] {
        assert!(bash.contains(value), "bash completes {value}");
    }
    let fish = d.ok(&["completions", "fish"]);
    assert!(
        fish.contains("blocked:permission"),
        "fish completes --until"
    );

    // The values are checked as they were: combinations and the docs'
    // spelling still parse, a typo names what is accepted.
    let typo = d.run(&["wait", "p", "--until", "idle,dnoe"]);
    assert_eq!(typo.status.code(), Some(2), "{}", stderr(&typo));
    assert!(stderr(&typo).contains("dnoe"), "{}", stderr(&typo));
    let backend = d.run(&["pane", "new", "p", "--backend", "tmx", "--", "true"]);
    assert_eq!(backend.status.code(), Some(2), "{}", stderr(&backend));
    assert!(stderr(&backend).contains("herdr"), "{}", stderr(&backend));
    let docs = d.run(&[
        "wait",
        "nopane",
        "--until",
        "blocked{permission},idle",
        "--timeout-ms",
        "1",
    ]);
    assert_ne!(
        docs.status.code(),
        Some(2),
        "the docs' spelling parses: {}",
        stderr(&docs)
    );
}

/// `drover --help` lists the exit codes; a command's help has an example
/// and lists the values it accepts.
#[test]
fn help_lists_exit_codes_examples_and_values() {
    let d = Drover::new();
    let top = d.ok(&["--help"]);
    assert!(
        top.contains("Exit codes:") && top.contains("5  transport"),
        "{top}"
    );
    let wait = d.ok(&["wait", "--help"]);
    assert!(
        wait.contains("Example:") && wait.contains("blocked:permission"),
        "{wait}"
    );
    let keys = d.ok(&["pane", "keys", "--help"]);
    assert!(
        keys.contains("PageDown") && keys.contains("C-<x>"),
        "{keys}"
    );
}

/// Guards: `-v` never reached a supervisor started by autostart, and the
/// default log stayed empty across pane creation and kills.
#[test]
fn the_supervisor_logs_lifecycle_events_and_takes_the_verbosity() {
    let d = Drover::new();
    d.ok(&["-vv", "pane", "new", "lg", "--", "sleep", "100"]);
    let pid = d.server_pid().expect("a supervisor");
    let argv = common::cmdline(pid).unwrap_or_default();
    assert!(
        argv.iter().any(|a| a == "-vv"),
        "-vv did not reach the supervisor: {argv:?}"
    );
    d.ok(&["pane", "kill", "lg"]);
    let log = d.state.join("logs").join("supervisor.log");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(10), || read().contains("pane killed")),
        "{}",
        read()
    );
    assert!(read().contains("pane created"), "{}", read());
}

/// Guards issue 42 item 10: `drover loop rn` said only "unrecognized
/// subcommand" (clap suggests nothing for a word that short), where `pane
/// lst` gets its tip.
#[test]
fn a_short_mistyped_subcommand_gets_a_did_you_mean() {
    let d = Drover::new();
    let rn = d.run(&["loop", "rn"]);
    assert_eq!(rn.status.code(), Some(2), "{}", stderr(&rn));
    assert!(
        stderr(&rn).contains("did you mean `drover loop run`?"),
        "{}",
        stderr(&rn)
    );
    let lst = d.run(&["pane", "lst"]);
    assert_eq!(lst.status.code(), Some(2));
    assert!(stderr(&lst).contains("'ls'"), "{}", stderr(&lst));
}
