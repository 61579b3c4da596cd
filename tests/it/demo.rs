//! `drover demo --keep`: the commands it prints work as printed, and the
//! state they show agrees with the summary it printed.

use crate::common;

use common::{BIN, stderr};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn path_with_drover() -> String {
    let dir = Path::new(BIN).parent().expect("the binary's dir");
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Run a printed command line with `drover` on PATH.
fn sh(line: &str) -> std::process::Output {
    Command::new("bash")
        .args(["-c", line])
        .env("PATH", path_with_drover())
        .env_remove("DROVER_STATE_DIR")
        .env_remove("DROVER_AUTOCOMPLETE")
        .output()
        .expect("bash")
}

/// The printed line that starts with `prefix` (indentation and comment cut).
fn printed<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .map(str::trim)
        .find(|l| l.starts_with(prefix))
        .map(|l| l.split("  #").next().unwrap_or(l).trim())
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{out}"))
}

/// Guards: after `demo --keep`, `drover attach asks` said "no pane named
/// asks" (the demo's state dir is not the default).
#[test]
fn demo_keep_prints_commands_that_work_and_agree_with_its_summary() {
    let out = Command::new(BIN)
        .args(["demo", "--keep"])
        .env_remove("DROVER_STATE_DIR")
        .env_remove("DROVER_AUTOCOMPLETE")
        .output()
        .expect("demo");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}{text}", stderr(&out));
    // Guards issue 42 item 10: "every lane reported and finished its turn"
    // was followed by a `lane ls` whose DECISION said `hold_busy`.
    let lanes = text
        .split("every lane reported and finished its turn")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let ls = lanes.split("\n\n").next().unwrap_or_default();
    assert!(!ls.contains("hold_busy"), "{ls}");
    let kill = printed(&text, "drover --state-dir").replace(" status", " kill-server");
    let rm = printed(&text, "rm -rf ").to_string();
    let status_line = printed(&text, "drover --state-dir");
    let attach_line = text
        .lines()
        .map(str::trim)
        .find(|l| l.contains(" attach asks"))
        .expect("an attach line")
        .to_string();
    let result = std::panic::catch_unwind(|| {
        assert!(
            attach_line.starts_with("drover --state-dir "),
            "{attach_line}"
        );
        let st = sh(&format!("{status_line} --json"));
        assert!(st.status.success(), "`{status_line}`: {}", stderr(&st));
        let v: Value = serde_json::from_slice(&st.stdout).expect("status --json");
        let asks = v["panes"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "asks"))
            .unwrap_or_else(|| panic!("no pane asks: {v}"));
        assert_eq!(asks["observation"]["state"], "blocked", "{asks}");
        // Guards issue 42 item 10: the README said `--keep` leaves "the
        // lanes" running; it leaves three panes, and says so.
        assert_eq!(v["panes"].as_array().map(Vec::len), Some(3), "{v}");
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(
            "`drover demo --keep` leaves the supervisor and its three sim panes running"
        ));
        // The summary's NOW column is what the engine says.
        let all = sh(&format!("{status_line} --all --json"));
        let v: Value = serde_json::from_slice(&all.stdout).expect("status --all --json");
        for job in v["jobs"].as_array().expect("jobs") {
            let id = job["job_id"].as_str().unwrap_or_default();
            let row = text
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{id} ")))
                .unwrap_or_else(|| panic!("{id} not in the summary"));
            let now = row.split_whitespace().last().unwrap_or_default();
            assert_eq!(now, job["status"], "{id}: summary says {now}");
        }
    });
    let stopped = sh(&kill);
    let _ = sh(&rm);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    assert!(stopped.status.success(), "`{kill}`: {}", stderr(&stopped));
}
