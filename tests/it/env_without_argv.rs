//! Secrets reach a pane's (and a lane's) environment without passing
//! through drover's argv: `--env K` takes K's value from drover's own
//! environment, `--env-file F` reads `K=V` lines from a file only its owner
//! can read. Real PTYs on the test's supervisor.

use crate::common;

use common::{Drover, stderr};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const SECRET: &str = "s3cr3t-value-9f8e7d";

/// Guards issue 24 item 9: `pane new --env K` and `--env-file F` (0600)
/// set the pane's environment; the value is in no drover argv.
#[test]
fn env_from_drovers_environment_and_from_a_private_file() {
    let d = Drover::new();
    let f = d.scratch().join("lane.env");
    std::fs::write(
        &f,
        "# the lane's keys\nFROM_FILE=file-value-1a2b\n\nexport ALSO=two\n",
    )
    .unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = d
        .cmd()
        .env("FROM_ENV", SECRET)
        .args([
            "pane",
            "new",
            "e1",
            "--json",
            "--env",
            "FROM_ENV",
            "--env-file",
        ])
        .arg(&f)
        .args([
            "--",
            "sh",
            "-c",
            "echo \"[$FROM_ENV|$FROM_FILE|$ALSO]\"; sleep 30",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    d.wait_text(
        "e1",
        &format!("[{SECRET}|file-value-1a2b|two]"),
        Duration::from_secs(10),
    );
}

/// Guards issue 24 item 9: a file others may read is refused, naming it
/// and never a value; an unset `--env K` is refused by name.
#[test]
fn a_readable_env_file_and_an_unset_name_are_refused() {
    let d = Drover::new();
    let f = d.scratch().join("open.env");
    std::fs::write(&f, format!("K={SECRET}\n")).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    for args in [
        vec![
            "pane",
            "new",
            "e2",
            "--env-file",
            f.to_str().unwrap(),
            "--",
            "true",
        ],
        vec![
            "lane",
            "up",
            "--topology",
            "four-role",
            "--env-file",
            f.to_str().unwrap(),
        ],
        vec![
            "loop",
            "run",
            "--charter",
            "x.md",
            "--env-file",
            f.to_str().unwrap(),
        ],
    ] {
        let out = d.cmd().args(&args).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(
            e.contains("open.env") && e.contains("0600"),
            "{args:?}: {e}"
        );
        assert!(!e.contains(SECRET), "{e}");
    }
    let out = d
        .cmd()
        .env_remove("NOT_SET_HERE")
        .args(["pane", "new", "e3", "--env", "NOT_SET_HERE", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("NOT_SET_HERE"), "{}", stderr(&out));
}
