//! `pane new`: environment by creation only, and every kind of bad input.

use crate::common;
use common::*;

/// The child's environment as (name, value) pairs.
fn environ(pid: i32) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter_map(|kv| {
            let s = String::from_utf8_lossy(kv);
            let (k, v) = s.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// Env reaches the child through creation, never through argv: the values are
/// in /proc/<pid>/environ (a value with `=` intact), no `K=V` token in cmdline.
#[test]
fn env_reaches_child_only_by_creation() {
    let d = Drover::new();
    let info = d.new_pane(
        "envp",
        &["--env", "DROVER_T1=hello", "--env", "DROVER_T2=A=B=C"],
        &["sleep", "1000"],
    );
    let pid = pid_of(&info);
    assert_eq!(info["env_verified"], true, "{info}");
    assert_eq!(
        info["env_names"],
        serde_json::json!(["DROVER_T1", "DROVER_T2"])
    );
    let env = environ(pid);
    assert!(
        env.contains(&("DROVER_T1".into(), "hello".into())),
        "{env:?}"
    );
    assert!(
        env.contains(&("DROVER_T2".into(), "A=B=C".into())),
        "{env:?}"
    );
    assert!(
        !env.iter().any(|(k, _)| k == "TMUX" || k == "TMUX_PANE"),
        "TMUX must not leak into a pane"
    );
    let argv = cmdline(pid).unwrap();
    assert_eq!(argv, ["sleep", "1000"]);
    assert!(
        !argv
            .iter()
            .any(|a| a.contains("DROVER_T1") || a.contains('=')),
        "env token in argv: {argv:?}"
    );
    // Values are never written to the state dir (logs included).
    let mut stack = vec![d.state.clone()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap().flatten() {
            let path = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(path);
            } else if !ft.is_file() {
                // A FIFO or socket holds nothing at rest (and reading one blocks).
            } else if let Ok(body) = std::fs::read(&path) {
                let body = String::from_utf8_lossy(&body);
                assert!(!body.contains("A=B=C"), "env value in {}", path.display());
            }
        }
    }
}

/// A later `--env` of the same name wins, as on a command line.
#[test]
fn repeated_env_name_last_wins() {
    let d = Drover::new();
    let info = d.new_pane(
        "dup",
        &["--env", "DROVER_X=one", "--env", "DROVER_X=two"],
        &["sleep", "1000"],
    );
    let env = environ(pid_of(&info));
    let vals: Vec<_> = env.iter().filter(|(k, _)| k == "DROVER_X").collect();
    assert_eq!(vals, [&("DROVER_X".to_string(), "two".to_string())]);
}

fn assert_usage_and_no_pane(d: &Drover, args: &[&str], needle: &str) {
    let out = d.run(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: stderr {}",
        stderr(&out)
    );
    let err = stderr(&out);
    assert!(
        err.to_lowercase().contains(&needle.to_lowercase()),
        "{args:?}: stderr {err:?} should mention {needle:?}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one-line error: {err:?}");
    assert!(stdout(&out).is_empty(), "{args:?} printed data");
}

#[test]
fn invalid_env_names_are_usage_errors() {
    let d = Drover::new();
    d.serve();
    for bad in ["1X=v", "=V", "A-B=v", "NOEQUALS"] {
        assert_usage_and_no_pane(&d, &["pane", "new", "p", "--env", bad, "--", "true"], "env");
    }
    assert!(d.ls().is_empty());
}

#[test]
fn invalid_pane_names_are_usage_errors() {
    let d = Drover::new();
    let long = "x".repeat(65);
    for bad in ["a b", "a/b", "..", ".", "", "ä", "a\nb", long.as_str()] {
        assert_usage_and_no_pane(&d, &["pane", "new", bad, "--", "true"], "name");
    }
    // 64 characters is still fine.
    let ok = "y".repeat(64);
    d.new_pane(&ok, &[], &["sleep", "1000"]);
    assert_eq!(d.ls().len(), 1);
}

#[test]
fn missing_cwd_nonexistent_command_and_bad_size_leave_no_pane() {
    let d = Drover::new();
    d.serve();
    let missing = d.scratch().join("no-such-dir");
    let missing = missing.to_str().unwrap();
    assert_usage_and_no_pane(
        &d,
        &["pane", "new", "p", "--cwd", missing, "--", "true"],
        "cwd",
    );
    assert_usage_and_no_pane(
        &d,
        &["pane", "new", "p", "--", "drover-no-such-command-xyz"],
        "not found",
    );
    assert_usage_and_no_pane(
        &d,
        &["pane", "new", "p", "--", "./relative-missing"],
        "not found",
    );
    for size in ["0x0", "80x0", "0x24", "80", "axb", "99999x10"] {
        assert_usage_and_no_pane(
            &d,
            &["pane", "new", "p", "--size", size, "--", "true"],
            "size",
        );
    }
    assert_usage_and_no_pane(
        &d,
        &[
            "pane", "new", "p", "--agent", "claude", "--size", "40x10", "--", "true",
        ],
        "80x24",
    );
    assert_usage_and_no_pane(
        &d,
        &["pane", "new", "p", "--agent", "vim", "--", "true"],
        "agent",
    );
    assert!(d.ls().is_empty(), "{:?}", d.ls());
    // No zombie pane: the name is still free.
    d.new_pane("p", &[], &["sleep", "1000"]);
}

/// A non-executable file is not a command either (exec would fail in the child).
#[test]
fn non_executable_file_is_not_a_command() {
    let d = Drover::new();
    d.serve();
    let f = d.scratch().join("script.sh");
    std::fs::write(&f, "#!/bin/sh\necho hi\n").unwrap();
    assert_usage_and_no_pane(
        &d,
        &["pane", "new", "p", "--", f.to_str().unwrap()],
        "not found",
    );
    assert!(d.ls().is_empty());
}

#[test]
fn duplicate_name_is_refused_and_first_pane_survives() {
    let d = Drover::new();
    let first = d.new_pane("twin", &[], &["sleep", "1000"]);
    let out = d.run(&["pane", "new", "twin", "--", "sleep", "1000"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    let ls = d.ls();
    assert_eq!(ls.len(), 1);
    assert_eq!(ls[0]["pid"], first["pid"]);
    assert!(pid_alive(pid_of(&first)));
}

/// `--cwd` sets the child's working directory.
#[test]
fn cwd_is_the_childs_working_directory() {
    let d = Drover::new();
    let dir = d.scratch();
    let info = d.new_pane("cwd", &["--cwd", dir.to_str().unwrap()], &["sleep", "1000"]);
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", pid_of(&info))).unwrap();
    assert_eq!(cwd, dir);
}

/// A pane that exits at once is seen as exited with its code; its last
/// output stays readable; input to it is refused (pane gone, exit 5).
#[test]
fn pane_that_exits_immediately_is_seen_exited_with_code() {
    let d = Drover::new();
    d.new_pane("quick", &[], &["sh", "-c", "echo bye-now; exit 7"]);
    let out = d.wait_state(&["quick"], "exited", 10_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let snap: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(snap["state"], "exited");
    assert_eq!(snap["exit_code"], 7);
    let p = d.pane("quick").unwrap();
    assert_eq!(p["exit"]["code"], 7, "{p}");
    assert!(d.read("quick").contains("bye-now"), "{}", d.read("quick"));
    let sent = d.run(&["pane", "send", "quick", "hello"]);
    assert_eq!(sent.status.code(), Some(5), "{}", stderr(&sent));
    assert!(stderr(&sent).contains("exited"), "{}", stderr(&sent));
    // `true` (no output at all) also ends as exited(0).
    d.new_pane("t", &[], &["true"]);
    let out = d.wait_state(&["t"], "exited", 10_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("\"exit_code\":0"), "{}", stdout(&out));
}

/// Operations on a pane that does not exist: exit 5 with a clear message.
#[test]
fn unknown_pane_is_transport_error() {
    let d = Drover::new();
    d.serve();
    for args in [
        vec!["pane", "read", "ghost"],
        vec!["pane", "send", "ghost", "x"],
        vec!["pane", "keys", "ghost", "Enter"],
        vec!["pane", "resize", "ghost", "80x24"],
        vec!["pane", "kill", "ghost"],
        vec!["pane", "respawn", "ghost"],
    ] {
        let out = d.run(&args);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("ghost"), "{args:?}: {}", stderr(&out));
    }
}

/// Regression: creating a pane whose command is a `#!` script (as Claude Code
/// is: `#!/usr/bin/env node`) took 2 s and held the pane table meanwhile,
/// because exec was only recognised when the new cmdline began with the argv
/// we gave, while /proc shows the interpreter. Env still reaches the child.
#[test]
fn shebang_script_pane_is_created_promptly_with_env() {
    let d = Drover::new();
    d.serve();
    let script = d.scratch().join("agent.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"agent-$DROVER_S\"\nexec sleep 1000\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    d.ok(&["pane", "ls"]);
    let start = std::time::Instant::now();
    let info = d.new_pane("sb", &["--env", "DROVER_S=ok"], &[script.to_str().unwrap()]);
    let took = start.elapsed();
    assert!(
        took < std::time::Duration::from_millis(1500),
        "pane new took {took:?}"
    );
    assert_eq!(info["env_verified"], true, "{info}");
    d.wait_text("sb", "agent-ok", T);
}

/// A signal mask field of /proc/PID/status (`SigIgn`, `SigBlk`) as bits:
/// bit n-1 is signal n.
fn signal_mask(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {status}"));
    u64::from_str_radix(hex.trim(), 16).unwrap()
}

/// A pane's command starts as from a user's shell: no signal blocked and
/// none ignored but what the backend itself leaves ignored in its panes
/// (tmux 3.3a: SIGTTIN and SIGTTOU, in a user's own tmux as much). Not
/// what the supervisor's way of spawning left: its tmux server, started
/// by `posix_spawn`, had glibc's internal signals 32 and 33 ignored, and
/// every pane's command with them.
#[test]
fn a_panes_command_starts_with_no_signal_ignored_or_blocked() {
    let d = Drover::new();
    let info = d.new_pane("sigs", &[], &["sleep", "1000"]);
    let pid = pid_of(&info);
    // On tmux the pane's process is its start gate until it execs.
    assert!(
        wait_until(T, || cmdline(pid).is_some_and(|a| a == ["sleep", "1000"])),
        "{:?}",
        cmdline(pid)
    );
    // What the backend itself ignores: nothing on a drover PTY.
    let own = match d.pane("sigs").expect("listed")["backend"].as_str() {
        Some("tmux") => (1u64 << (nix::libc::SIGTTIN - 1)) | (1u64 << (nix::libc::SIGTTOU - 1)),
        _ => 0,
    };
    let ignored = signal_mask(pid, "SigIgn");
    assert_eq!(
        ignored & !own,
        0,
        "ignored in the pane: {ignored:#x} (the backend's own: {own:#x})"
    );
    assert_eq!(signal_mask(pid, "SigBlk"), 0, "blocked in the pane");
}
