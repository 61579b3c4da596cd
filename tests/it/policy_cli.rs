//! `drover policy eval|check` as a user runs them: the real binary, real files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn drover(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn drover");
    if let Some(text) = stdin
        && let Some(mut pipe) = child.stdin.take()
    {
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("wait for drover")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scenarios")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name)).expect("read fixture")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A temp dir holding the named fixtures, the last one rewritten by `mutate`.
fn dir_with(names: &[&str], mutate: impl FnOnce(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let (last, rest) = names.split_last().expect("at least one fixture");
    for n in rest {
        std::fs::write(dir.path().join(n), fixture(n)).expect("write");
    }
    std::fs::write(dir.path().join(last), mutate(fixture(last))).expect("write");
    dir
}

/// Guards the fixture set itself: every scenario agrees with its expected decision.
#[test]
fn check_passes_on_the_fixture_set() {
    let dir = fixtures();
    let out = drover(
        &["policy", "check", dir.to_str().expect("utf-8 path")],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("finished-clean.json"), "{stdout}");
    let count = std::fs::read_dir(&dir)
        .expect("list fixtures")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json"))
        })
        .count();
    assert!(
        count >= 15,
        "docs/policy.md asks for at least fifteen scenarios, found {count}"
    );
    assert!(
        stdout.contains(&format!("{count} scenario(s), {count} agree")),
        "{stdout}"
    );
}

/// Guards the lint: a wrong expectation fails with exit 3 naming the file.
#[test]
fn check_fails_on_a_mutated_expectation() {
    let dir = dir_with(&["finished-clean.json", "blocked-agent.json"], |s| {
        s.replace("\"escalate_blocked\"", "\"complete\"")
    });
    let out = drover(
        &["policy", "check", dir.path().to_str().expect("utf-8")],
        None,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("blocked-agent.json: expected complete"),
        "{stderr}"
    );
    assert!(stderr.contains("decided escalate_blocked"), "{stderr}");
    assert!(text(&out.stdout).contains("MISMATCH"));
}

/// Guards `--json`: one array, the mismatch marked.
#[test]
fn check_json_lists_each_result() {
    let dir = dir_with(&["finished-clean.json", "paused-report.json"], |s| {
        s.replace("\"hold_unfinalized\"", "\"hold_busy\"")
    });
    let out = drover(
        &[
            "policy",
            "check",
            "--json",
            dir.path().to_str().expect("utf-8"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json stdout");
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), 2);
    let paused = rows
        .iter()
        .find(|r| r["file"] == "paused-report.json")
        .expect("row");
    assert_eq!(paused["ok"], false);
    assert_eq!(paused["decision"]["decision"], "hold_unfinalized");
    assert_eq!(paused["expected"]["decision"], "hold_busy");
}

/// Guards the validator through the CLI: a malformed fixture is exit 2 naming the field,
/// and wins over a mismatch elsewhere.
#[test]
fn check_refuses_a_malformed_fixture() {
    let dir = dir_with(&["blocked-agent.json", "finished-clean.json"], |s| {
        s.replace("\"kind\": \"transport\"", "\"kind\": \"heartbeat\"")
    });
    std::fs::write(
        dir.path().join("blocked-agent.json"),
        fixture("blocked-agent.json").replace("\"escalate_blocked\"", "\"complete\""),
    )
    .expect("write");
    let out = drover(
        &["policy", "check", dir.path().to_str().expect("utf-8")],
        None,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("finished-clean.json: timeline[3].kind: unknown event kind \"heartbeat\""),
        "{stderr}"
    );
}

/// Guards the fixture naming rule: a scenario named unlike its file is refused.
#[test]
fn check_refuses_a_name_that_differs_from_the_file() {
    let dir = dir_with(&["finished-clean.json"], |s| s);
    std::fs::rename(
        dir.path().join("finished-clean.json"),
        dir.path().join("other.json"),
    )
    .expect("rename");
    let out = drover(
        &["policy", "check", dir.path().to_str().expect("utf-8")],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("other.json: name:"),
        "{}",
        text(&out.stderr)
    );
}

/// Guards against a vacuous pass: a directory with no scenarios is a usage error.
#[test]
fn check_refuses_an_empty_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = drover(
        &["policy", "check", dir.path().to_str().expect("utf-8")],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no *.json scenario"));
}

#[test]
fn eval_prints_decision_and_reason() {
    let path = fixtures().join("transport-error-then-silence.json");
    let out = drover(&["policy", "eval", path.to_str().expect("utf-8")], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["decision"], "hold_reconnect");
    assert!(
        v["reason"].as_str().is_some_and(|r| r.contains("t=54000")),
        "{v}"
    );
    assert_eq!(v.as_object().map(|o| o.len()), Some(2));
}

#[test]
fn eval_reads_stdin() {
    let out = drover(
        &["policy", "eval", "-"],
        Some(&fixture("finished-clean.json")),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["decision"], "complete");
}

/// Guards exit 2 and a one-line message naming the field, for each kind of breakage.
#[test]
fn eval_malformed_input_exits_2_naming_the_field() {
    let clean = fixture("finished-clean.json");
    let cases = [
        (
            clean.replace("\"state\": \"working\"", "\"state\": \"busy\""),
            "timeline[2].state",
        ),
        (
            clean.replace("\"result\": \"timeout\"", "\"result\": \"lost\""),
            "timeline[3].result",
        ),
        (
            // Out of time order is valid; a negative time is not.
            clean.replace("\"t_ms\": 40000", "\"t_ms\": -400"),
            "timeline[3].t_ms",
        ),
        (
            clean.replace("\"now_ms\": 60000", "\"now_ms\": 50000"),
            "timeline[5].t_ms",
        ),
        (without_dispatch_record(&clean), "dispatch: missing"),
        (
            clean.replace("\"kind\": \"dispatch\"", "\"kind\": \"execution_anchor\""),
            "timeline: no event of kind \"dispatch\"",
        ),
        ("{\"name\": ".to_string(), "not valid JSON"),
    ];
    for (input, field) in cases {
        let out = drover(&["policy", "eval", "-"], Some(&input));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{field}: {stderr}");
        assert!(stderr.contains(field), "{field}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

fn without_dispatch_record(text: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).expect("fixture is JSON");
    v.as_object_mut().map(|o| o.remove("dispatch"));
    v.to_string()
}

#[test]
fn eval_missing_file_is_a_usage_error() {
    let out = drover(&["policy", "eval", "no-such-scenario.json"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no-such-scenario.json"));
}

/// Guards scenarios whose events are not in time order (several writers append
/// to one evidence file): they were rejected as malformed; "newest" is the
/// greatest `t_ms`, not the last line.
#[test]
fn events_out_of_time_order_are_valid_and_newest_is_by_time() {
    for (name, want) in [
        ("events-out-of-time-order.json", "complete"),
        (
            "events-out-of-time-order-newest-blocked.json",
            "escalate_blocked",
        ),
    ] {
        let path = fixtures().join(name);
        let out = drover(
            &["policy", "eval", path.to_str().expect("utf-8 path")],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["decision"], want, "{name}: {v}");
    }
}

/// Guards `policy eval /dev/urandom`: it read forever. The read is bounded and
/// an endless input is a usage error.
#[test]
fn eval_of_an_endless_input_is_a_usage_error_not_a_hang() {
    let out = drover(&["policy", "eval", "/dev/zero"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("larger than"),
        "{}",
        text(&out.stderr)
    );
}
