//! What a red-team pass broke in pane input and pane creation: an input
//! queue bounded by count (not bytes) whose writer outlived `pane kill`, and
//! exec failures reported as created panes.

use crate::common;
use common::*;
use drover::daemon::client::Client;
use serde_json::json;

/// Resident memory of a process in KiB.
fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// Names of the supervisor's threads.
fn threads(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

/// Guards: the input queue is bounded in bytes (not in writes), a refusal is
/// "not reading its input" with exit 5, and `pane kill` ends the writer
/// thread and frees what it held.
#[test]
fn input_queue_is_bounded_in_bytes_and_its_writer_ends_on_kill() {
    let d = Drover::new();
    // Raw mode without echo: the terminal keeps (not discards) what is not
    // read, so the pane's input really backs up.
    d.new_pane(
        "deaf",
        &[],
        &["sh", "-c", "stty raw -echo; echo ready; exec sleep 100000"],
    );
    d.wait_text("deaf", "ready", T);
    let pid = d.server_pid().unwrap();
    let before = rss_kib(pid);
    let mut c = Client::connect(&d.socket()).unwrap();
    // 1 MiB writes: a count bound of 64 took 64 MiB before refusing.
    let mib = "a".repeat(1 << 20);
    let mut accepted = 0;
    let refusal = loop {
        match c.call_raw(
            "pane.send",
            json!({"pane": "deaf", "text": mib, "enter": false}),
        ) {
            Ok(_) => accepted += 1,
            Err(e) => break e,
        }
        assert!(accepted < 64, "64 MiB queued for a pane that never reads");
    };
    assert!(accepted <= 8, "{accepted} MiB queued before a refusal");
    assert!(
        refusal.to_string().contains("not reading its input"),
        "{refusal}"
    );
    assert_eq!(refusal.exit_code(), 5, "{refusal}");
    // The CLI says the same with exit 5 (transport), not 2 (usage).
    let out = d.run(&["pane", "send", "deaf", "one more"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("not reading its input"));

    // Big sends (15 MB each, as the red team did) are refused once one is
    // queued: memory stays near what one holds.
    let big = "b".repeat(15_000_000);
    for _ in 0..6 {
        let _ = c.call_raw(
            "pane.send",
            json!({"pane": "deaf", "text": big, "enter": false}),
        );
    }
    let after = rss_kib(pid);
    eprintln!("supervisor RSS: {before} KiB before, {after} KiB after the sends");
    assert!(
        after < before + 96 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    assert!(threads(pid).iter().any(|t| t == "pty-write-deaf"));
    d.ok(&["pane", "kill", "deaf"]);
    let ended = wait_until(T, || !threads(pid).iter().any(|t| t == "pty-write-deaf"));
    assert!(
        ended,
        "writer thread outlived pane kill: {:?}",
        threads(pid)
    );
    eprintln!("supervisor RSS after pane kill: {} KiB", rss_kib(pid));
}

/// Guards: a script whose `#!` interpreter does not exist fails `pane new`
/// with exit 1 and the cause, and leaves no pane (it used to print "created
/// pane" while the child died in the standard library's exec-error path).
#[test]
fn pane_new_of_a_script_with_a_missing_interpreter_fails_and_leaves_no_pane() {
    let d = Drover::new();
    let script = d.scratch().join("broken.sh");
    std::fs::write(&script, "#!/nonexistent/interp\necho never\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = script.display().to_string();
    let out = d.run(&["pane", "new", "broken", "--", &s]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("/nonexistent/interp"), "{err}");
    assert!(err.contains("not found"), "{err}");
    assert!(!stdout(&out).contains("created"), "{}", stdout(&out));
    // No pane left, nor the supervisor the command started for it.
    assert_eq!(d.run(&["status"]).status.code(), Some(5));
    // The name is free again.
    d.new_pane("broken", &[], &["sleep", "100"]);
}

/// Guards: an argument or env value over the kernel's limit (E2BIG) fails
/// `pane new` with exit 1 naming the cause, leaving no pane.
#[test]
fn pane_new_with_an_element_over_the_kernel_limit_fails_and_leaves_no_pane() {
    let d = Drover::new();
    d.serve();
    let huge = "x".repeat(200_000); // over MAX_ARG_STRLEN (128 KiB)
    let spec = |name: &str, argv: Vec<String>, env: Vec<(String, String)>| json!({"spec": {"name": name, "argv": argv, "env": env, "cols": 120, "rows": 40, "agent": "shell"}});
    let cases = [
        ("bigarg", vec!["echo".to_string(), huge.clone()], vec![]),
        (
            "bigenv",
            vec!["true".to_string()],
            vec![("BIG".to_string(), huge.clone())],
        ),
    ];
    for (name, argv, env) in cases {
        let mut c = Client::connect(&d.socket()).unwrap();
        let err = c
            .call_raw("pane.new", spec(name, argv, env))
            .expect_err("pane.new of an over-long element succeeded");
        assert_eq!(err.exit_code(), 1, "{name}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("Argument list too long"), "{name}: {msg}");
        assert!(msg.contains("limit"), "{name}: {msg}");
        assert!(!msg.contains(&huge[..100]), "the value leaked: {name}");
        assert!(d.pane(name).is_none(), "{name} left a pane");
    }
}
