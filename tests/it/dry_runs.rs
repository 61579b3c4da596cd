//! Every `--dry-run` changes nothing and says what the real command would
//! do: `lane reconcile --dry-run` starts no supervisor and touches no lane,
//! and `lane gc --dry-run` lists as removed what the real `gc` removes.
//! Real sim lanes, a real supervisor, real git worktrees and branches.

use crate::common;
use crate::lanes_common;

use common::{Drover, stderr};
use lanes_common::{drover_branches, git, lane_ids, records, repo, up};
use serde_json::Value;

fn generations(d: &Drover) -> Vec<u64> {
    records(d)
        .iter()
        .map(|l| l["generation"].as_u64().unwrap_or(0))
        .collect()
}

/// Guards issue 28 item 1: with no supervisor running, `lane reconcile
/// --dry-run` started one, whose startup reconcile respawned every lane,
/// while the table still said `ok` (`lane ls` then showed GEN 3).
#[test]
fn reconcile_dry_run_with_no_supervisor_starts_none_and_changes_nothing() {
    let d = Drover::new();
    let r = repo(&d);
    up(&d, &r, "reviewer", &[]);
    let before = generations(&d);
    d.ok(&["kill-server"]);
    let out = d.run(&["lane", "reconcile", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    for id in lane_ids(&d) {
        let row = table.lines().find(|l| l.starts_with(&id)).unwrap_or("");
        assert!(
            row.contains("would "),
            "what a real run does to {id}: {table}"
        );
    }
    assert!(
        stderr(&out).contains("no supervisor is running"),
        "{}",
        stderr(&out)
    );
    let st = d.run(&["status"]);
    assert_eq!(st.status.code(), Some(5), "no supervisor was started");
    assert_eq!(generations(&d), before, "no lane was respawned");
}

/// Guards issue 28 item 1: `lane gc --dry-run` said a branch checked out in
/// a worktree it would remove was `kept`, and the real `gc` deleted it.
#[test]
fn gc_dry_run_lists_as_removed_what_gc_removes() {
    let d = Drover::new();
    let r = repo(&d);
    // A clean, merged worktree no lane owns, on a drover branch.
    let wt = d.state.join("worktrees").join("stray");
    git(
        &r,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "drover/stray/x",
            wt.to_str().unwrap(),
            "main",
        ],
    );
    let dry: Value = serde_json::from_str(&d.ok(&["lane", "gc", "--dry-run", "--json"])).unwrap();
    let action = |v: &Value, name: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .filter(|i| i["name"] == name)
            .map(|i| i["action"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(action(&dry, "stray"), ["would-remove"], "{dry}");
    assert!(
        !action(&dry, "drover/stray/x").contains(&"kept".to_string()),
        "a dry run never keeps what the real run deletes: {dry}"
    );
    assert!(wt.is_dir() && drover_branches(&r).contains(&"drover/stray/x".into()));
    d.ok(&["lane", "gc"]);
    assert!(!wt.exists(), "the real gc removed the worktree");
    assert!(
        !drover_branches(&r).contains(&"drover/stray/x".into()),
        "and its branch"
    );
}
