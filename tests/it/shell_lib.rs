//! `shell/lib.sh` drives the real CLI from bash under `set -euo pipefail`.

use crate::common;

use common::Drover;
use std::process::Command;

fn bash(script: &str, state: &std::path::Path) -> std::process::Output {
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/shell/lib.sh");
    Command::new("bash")
        .arg("-c")
        .arg(format!("set -euo pipefail\nsource '{lib}'\n{script}"))
        .env("DROVER_BIN", env!("CARGO_BIN_EXE_drover"))
        .env("DROVER_STATE_DIR", state)
        .output()
        .unwrap()
}

#[test]
fn helpers_create_send_wait_read_and_stop() {
    let d = Drover::new();
    let out = bash(
        r#"
drover_new_session sh1 shell --env GREETING=from-lib -- sh -c 'echo "$GREETING"; exec cat'
drover_wait sh1 idle 10000 >/dev/null
drover_read sh1
drover_stop sh1
"$DROVER_BIN" kill-server
"#,
        &d.state,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("from-lib"), "{stdout}");
}

/// `drover_wait --fresh` after `drover_send` waits for the command the send
/// started, not the idle state from before it.
#[test]
fn fresh_wait_after_a_send_sees_the_command_finish() {
    let d = Drover::new();
    let out = bash(
        r#"
drover_new_session sh2 shell -- bash --norc --noprofile
drover_wait sh2 idle 30000 >/dev/null
drover_send sh2 'sleep 1; echo fin$((4+4))' >/dev/null
drover_wait --fresh sh2 idle 60000 >/dev/null
drover_read sh2
"$DROVER_BIN" kill-server
"#,
        &d.state,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.lines().any(|l| l.trim() == "fin8"), "{stdout}");
}

#[test]
fn version_mismatch_refuses_with_one_line() {
    let d = Drover::new();
    let out = bash("DROVER_SH_VERSION=0.0.0\ndrover_read x", &d.state);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("version mismatch"), "{err}");
    assert_eq!(err.trim().lines().count(), 1);
}

#[test]
fn helpers_never_swallow_a_failure() {
    let d = Drover::new();
    let out = bash(
        "drover_wait nope idle 100 || code=$?\necho \"code=${code:-0}\"\n\"$DROVER_BIN\" kill-server",
        &d.state,
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("code=5"));
}
