//! The signals folder's life (`<state>/signals/<pane>/`, Claude's settings
//! file): it goes with its pane (`pane kill` of a wired pane) and with its
//! lane (`lane down`); a Claude pane started again after it went (a lane's
//! reconcile, a respawn) gets it written again, since Claude Code does not
//! start on a missing `--settings` file. Nothing else under the state dir
//! is touched.

use crate::common::{self, Drover};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An executable `name` in `dir` that stays up (a stand-in for the agent's
/// program: only its argv is looked at).
fn program(dir: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A stand-in `claude` in the scratch dir's `bin`; its path.
fn claude_in_scratch(d: &Drover) -> String {
    let bin = d.scratch().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    program(&bin, "claude").display().to_string()
}

fn settings(d: &Drover, pane: &str) -> PathBuf {
    d.state
        .join("signals")
        .join(pane)
        .join("claude-settings.json")
}

/// `pane kill` of a wired Claude pane removes its folder only; a pane not
/// wired (`--no-signals`) leaves a folder of its name alone; a respawn
/// after the file went writes it again.
#[test]
fn pane_kill_removes_a_wired_panes_folder_and_respawn_writes_it_again() {
    let d = Drover::new();
    let claude = claude_in_scratch(&d);
    d.new_pane("c1", &["--agent", "claude"], &[&claude]);
    d.new_pane("c2", &["--agent", "claude"], &[&claude]);
    d.new_pane("n", &["--agent", "claude", "--no-signals"], &[&claude]);
    let foreign = d.state.join("signals/n/kept.txt");
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    std::fs::write(&foreign, "not drover's to remove").unwrap();
    assert!(settings(&d, "c1").is_file() && settings(&d, "c2").is_file());

    d.ok(&["pane", "kill", "c1"]);
    assert!(!d.state.join("signals/c1").exists());
    assert!(settings(&d, "c2").is_file());
    d.ok(&["pane", "kill", "n"]);
    assert!(
        foreign.is_file(),
        "a pane not wired keeps the folder of its name"
    );

    std::fs::remove_file(settings(&d, "c2")).unwrap();
    d.ok(&["pane", "respawn", "c2"]);
    assert!(settings(&d, "c2").is_file(), "respawn wrote it again");
}

/// A bin dir with `git`, `sh`, `sleep` and a stand-in `claude`.
fn path_with(root: &Path) -> PathBuf {
    let bin = root.join("bin-lane");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh", "sleep"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8(found.stdout).unwrap();
        std::os::unix::fs::symlink(path.trim(), bin.join(tool)).unwrap();
    }
    program(&bin, "claude");
    bin
}

/// A lane's Claude pane killed loses its folder; the lane's reconcile
/// starts it again with the file written again; `lane down` with no
/// supervisor running removes the lane and its folder.
#[test]
fn a_lanes_folder_comes_back_on_reconcile_and_goes_with_lane_down() {
    let d = Drover::new();
    let repo = crate::lanes_common::repo(&d);
    let path = path_with(&d.scratch());
    let out = d
        .cmd()
        .args(["lane", "up", "--topology", "four-role", "--repo"])
        .arg(&repo)
        .args(["--agents", "claude", "--sessions", "implementer"])
        .args(["--timeout-ms", "1000"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let lane = "implementer-claude";
    assert!(
        settings(&d, lane).is_file(),
        "lane up: {}",
        common::stderr(&out)
    );
    d.ok(&["pane", "kill", lane]);
    assert!(!d.state.join("signals").join(lane).exists());

    let out = d
        .cmd()
        .args(["lane", "reconcile"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(d.pane(lane).is_some(), "reconcile started the lane's pane");
    assert!(settings(&d, lane).is_file(), "reconcile wrote it again");

    // Without a supervisor (no pane kill on the way), lane down still
    // removes the lane's folder with the lane.
    d.ok(&["kill-server"]);
    assert!(settings(&d, lane).is_file(), "kill-server leaves it");
    let out = d
        .cmd()
        .args(["lane", "down", "--all"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(crate::lanes_common::records(&d).is_empty());
    assert!(!d.state.join("signals").join(lane).exists());
    assert!(
        d.state.join("signals").is_dir(),
        "only the lane's folder goes"
    );
}

/// A supervisor stopped by `kill -9` leaves its wired panes' folders
/// behind; the next supervisor sweeps them before it takes a request, and
/// a pane started again under the same name (its client wrote the file
/// before the supervisor started) still comes up with its file.
#[test]
fn a_killed_supervisors_folders_are_swept_and_a_new_pane_keeps_its_file() {
    let d = Drover::new();
    let claude = claude_in_scratch(&d);
    d.serve();
    d.new_pane("k1", &["--agent", "claude"], &[&claude]);
    d.new_pane("k2", &["--agent", "claude"], &[&claude]);
    assert!(settings(&d, "k1").is_file() && settings(&d, "k2").is_file());
    d.kill_supervisor();
    // Not a pane's folder: a file drover did not write stays.
    let stray = d.state.join("signals/README");
    std::fs::write(&stray, "x").unwrap();

    // The client wires k1 again, then starts the supervisor itself.
    d.new_pane("k1", &["--agent", "claude"], &[&claude]);
    assert!(settings(&d, "k1").is_file(), "the new k1 keeps its file");
    assert!(
        !d.state.join("signals/k2").exists(),
        "the killed supervisor's k2 folder was swept"
    );
    assert!(stray.is_file());
    let k1 = d.pane("k1").unwrap();
    assert_ne!(k1["observation"]["state"], "exited", "{k1:#}");
}
