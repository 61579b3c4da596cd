//! Regression: env verification raced a wrapper script's own `exec` — /proc
//! showed an empty environment for an instant and the pane was refused with
//! "env … did not reach the child". A mismatch now has to persist.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
fn wrapper_scripts_that_exec_at_once_get_their_env_verified() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let script = dir.path().join("wrapper");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_drover"))
            .arg("--state-dir")
            .arg(&state)
            .args(args)
            .output()
            .unwrap()
    };
    let script = script.display().to_string();
    let mut refused = Vec::new();
    for i in 0..40 {
        let name = format!("w{i}");
        let out = run(&[
            "pane",
            "new",
            &name,
            "--env",
            "XDG_CONFIG_HOME=/x/y",
            "--env",
            "K=v=w",
            "--",
            &script,
        ]);
        if !out.status.success() {
            refused.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let _ = run(&["pane", "kill", &name]);
    }
    let _ = run(&["kill-server"]);
    assert!(
        refused.is_empty(),
        "{} of 40 refused: {:?}",
        refused.len(),
        refused.first()
    );
}
