//! `shell/lib.sh` drives the real CLI from bash under `set -euo pipefail`.

use std::process::Command;

/// Stops the test's supervisor however the test ends.
struct StopOnDrop<'a>(&'a std::path::Path);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = Command::new(env!("CARGO_BIN_EXE_drover"))
            .arg("--state-dir")
            .arg(self.0)
            .arg("kill-server")
            .output();
    }
}

fn bash(script: &str, state: &std::path::Path) -> std::process::Output {
    let _stop = StopOnDrop(state);
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
    let d = tempfile::tempdir().unwrap();
    let out = bash(
        r#"
drover_new_session sh1 shell --env GREETING=from-lib -- sh -c 'echo "$GREETING"; exec cat'
drover_wait sh1 idle 10000 >/dev/null
drover_read sh1
drover_stop sh1
"$DROVER_BIN" kill-server
"#,
        d.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("from-lib"), "{stdout}");
}

#[test]
fn version_mismatch_refuses_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let out = bash("DROVER_SH_VERSION=0.0.0\ndrover_read x", d.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("version mismatch"), "{err}");
    assert_eq!(err.trim().lines().count(), 1);
}

#[test]
fn helpers_never_swallow_a_failure() {
    let d = tempfile::tempdir().unwrap();
    let out = bash(
        "drover_wait nope idle 100 || code=$?\necho \"code=${code:-0}\"\n\"$DROVER_BIN\" kill-server",
        d.path(),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("code=5"));
}
