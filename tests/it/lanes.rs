//! `drover lane up|ls|down|reconcile|gc` against real git repositories and
//! real sim-agent panes.

use crate::common;
use crate::lanes_common;

use common::{Drover, stderr, wait_until};
use lanes_common::*;
use serde_json::Value;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn lane<'a>(ls: &'a [Value], id: &str) -> &'a Value {
    ls.iter().find(|l| l["lane_id"] == id).unwrap()
}

#[test]
fn lane_up_makes_worktrees_branches_and_ready_panes_with_the_lane_env() {
    let d = Drover::new();
    let r = repo(&d);
    std::fs::write(r.join(".gitignore"), ".env\nbuild.log\n").unwrap();
    std::fs::write(r.join(".worktreeinclude"), ".env\nREADME.md\n").unwrap();
    git(&r, &["add", ".gitignore", ".worktreeinclude"]);
    git(&r, &["commit", "-q", "-m", "ignore"]);
    std::fs::write(r.join(".env"), "TOKEN=x\n").unwrap();
    std::fs::write(r.join("build.log"), "noise\n").unwrap();
    let base = git(&r, &["rev-parse", "main"]);
    up(&d, &r, "implementer,reviewer", &["--env", "FOO=bar"]);

    let recs = records(&d);
    assert_eq!(recs.len(), 4);
    for rec in &recs {
        let id = rec["lane_id"].as_str().unwrap();
        assert_eq!(rec["base_sha"], base.as_str());
        assert_eq!(rec["generation"], 1);
        assert_eq!(rec["phase"], "up");
        assert!(rec["boot_id"].is_string());
        assert!(
            rec["agent_version"].as_str() == Some(env!("CARGO_PKG_VERSION")),
            "{rec}"
        );
        let wt = d.state.join("worktrees").join(id);
        assert_eq!(rec["worktree"], wt.display().to_string());
        assert_eq!(git(&wt, &["rev-parse", "HEAD"]), base);
        // Only the ignored file .worktreeinclude lists was copied.
        assert_eq!(
            std::fs::read_to_string(wt.join(".env")).unwrap(),
            "TOKEN=x\n"
        );
        assert!(!wt.join("build.log").exists());
        // drover's marker never counts as dirt.
        assert!(wt.join(".drover-lane").exists());
        assert_eq!(git(&wt, &["status", "--porcelain"]), "");
        let pid = rec["pid"].as_i64().unwrap() as i32;
        let env = environ(pid);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("DROVER_LANE_ID").as_deref(), Some(id));
        assert_eq!(
            get("DROVER_SESSION_ID"),
            rec["session_id"].as_str().map(String::from)
        );
        assert_eq!(get("DROVER_STATE_DIR"), Some(d.state.display().to_string()));
        assert!(get("DROVER_SOCKET").is_some_and(|s| !s.is_empty()));
        assert_eq!(get("FOO").as_deref(), Some("bar"));
    }
    assert_eq!(
        lane(&recs, "implementer-codex")["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|kv| kv[0] == "DROVER_ROLE")
            .unwrap()[1],
        "Implementer"
    );
    // Regression: lanes.json held every `--env` value; only the names are kept.
    let lanes_json = std::fs::read_to_string(d.state.join("registry/lanes.json")).unwrap();
    assert!(
        !lanes_json.contains("bar"),
        "an --env value reached the disk"
    );
    assert_eq!(
        lane(&recs, "implementer-codex")["user_env"],
        serde_json::json!(["FOO"])
    );
    let mut branches = drover_branches(&r);
    branches.sort();
    assert_eq!(
        branches,
        [
            "drover/implementer/claude",
            "drover/implementer/codex",
            "drover/reviewer/claude",
            "drover/reviewer/codex"
        ]
    );
    let ls = lanes(&d);
    for l in &ls {
        assert_eq!(l["agent_state"], "idle", "{l}");
        assert_eq!(l["worktree_state"], "clean");
    }

    // Idempotent: a second lane up changes nothing.
    let out = up(&d, &r, "implementer,reviewer", &["--env", "FOO=bar"]);
    assert!(out.contains("4 unchanged"), "{out}");
    let again = records(&d);
    for (a, b) in recs.iter().zip(&again) {
        assert_eq!(a["generation"], b["generation"]);
        assert_eq!(a["pid"], b["pid"]);
    }
    d.ok(&["lane", "down", "--all"]);
    assert!(drover_branches(&r).is_empty());
    assert!(linked_worktrees(&r).is_empty());
}

#[test]
fn lane_ls_shows_dirty_ahead_and_how_far_the_base_is_behind_upstream() {
    let d = Drover::new();
    let r = repo(&d);
    // An upstream two commits ahead of the local main.
    let remote = d.scratch().join("remote.git");
    git(
        &d.scratch(),
        &[
            "clone",
            "-q",
            "--bare",
            &r.display().to_string(),
            &remote.display().to_string(),
        ],
    );
    let other = d.scratch().join("other");
    git(
        &d.scratch(),
        &[
            "clone",
            "-q",
            &remote.display().to_string(),
            &other.display().to_string(),
        ],
    );
    for i in 0..2 {
        std::fs::write(other.join(format!("f{i}")), "x").unwrap();
        git(&other, &["add", "."]);
        git(&other, &["commit", "-q", "-m", "upstream"]);
    }
    git(&other, &["push", "-q", "origin", "main"]);
    git(
        &r,
        &["remote", "add", "origin", &remote.display().to_string()],
    );
    git(&r, &["fetch", "-q", "origin"]);
    git(
        &r,
        &["branch", "-q", "--set-upstream-to=origin/main", "main"],
    );

    let rs = r.display().to_string();
    let out = d.run(&[
        "lane",
        "up",
        "--topology",
        "four-role",
        "--repo",
        &rs,
        "--sim",
        "--sessions",
        "implementer",
        "--agents",
        "claude",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("2 commit(s) behind origin/main"),
        "{}",
        stderr(&out)
    );
    let wt = d.state.join("worktrees").join("implementer-claude");
    std::fs::write(wt.join("a.txt"), "a").unwrap();
    git(&wt, &["add", "a.txt"]);
    git(&wt, &["commit", "-q", "-m", "lane work"]);
    std::fs::write(wt.join("b.txt"), "b").unwrap();
    let ls = lanes(&d);
    let l = lane(&ls, "implementer-claude");
    assert_eq!(l["worktree_state"], "dirty");
    assert_eq!(l["ahead"], 1);
    assert_eq!(l["behind"], 0);
    assert_eq!(l["base_behind_upstream"], 2);
    let table = d.ok(&["lane", "ls"]);
    assert!(
        table.contains("+1/-0") && table.contains("dirty"),
        "{table}"
    );
}

/// Guards: a cleanup must never reap uncommitted or unmerged work.
#[test]
fn lane_down_and_gc_keep_uncommitted_unmerged_and_in_use_worktrees() {
    let d = Drover::new();
    let r = repo(&d);
    up(
        &d,
        &r,
        "implementer,reviewer,orchestrator",
        &["--agents", "claude"],
    );
    let wt = |id: &str| d.state.join("worktrees").join(id);
    std::fs::write(wt("implementer-claude").join("work.txt"), "uncommitted").unwrap();
    std::fs::write(wt("reviewer-claude").join("c.txt"), "c").unwrap();
    git(&wt("reviewer-claude"), &["add", "c.txt"]);
    git(&wt("reviewer-claude"), &["commit", "-q", "-m", "unmerged"]);
    let mut squatter = std::process::Command::new("sleep")
        .arg("60")
        .current_dir(wt("orchestrator-claude"))
        .spawn()
        .unwrap();

    let out = d.ok(&["lane", "down", "--all"]);
    assert!(
        out.contains("implementer-claude: down; worktree and branch kept: uncommitted work"),
        "{out}"
    );
    assert!(out.contains("reviewer-claude: down; worktree and branch kept: branch drover/reviewer/claude has 1 commit(s) not merged"), "{out}");
    assert!(out.contains(&format!("orchestrator-claude: down; worktree and branch kept: live process(es) working there (pid {})", squatter.id())), "{out}");
    assert!(d.ls().is_empty(), "every pane stopped");

    let gc = d.ok(&["lane", "gc"]);
    assert!(wt("implementer-claude").join("work.txt").exists(), "{gc}");
    assert!(wt("reviewer-claude").join("c.txt").exists());
    assert_eq!(drover_branches(&r).len(), 3, "{gc}");
    // A lane taken down stays down through reconcile.
    let rec = d.ok(&["lane", "reconcile"]);
    assert!(rec.matches("stays down").count() == 3, "{rec}");
    assert!(d.ls().is_empty());

    // Once the squatter leaves and the work is merged, gc removes them.
    let _ = squatter.kill();
    let _ = squatter.wait();
    git(&r, &["merge", "-q", "--ff-only", "drover/reviewer/claude"]);
    let gc = d.ok(&["lane", "gc"]);
    assert!(!wt("orchestrator-claude").exists(), "{gc}");
    assert!(!wt("reviewer-claude").exists(), "{gc}");
    assert!(wt("implementer-claude").join("work.txt").exists());
    assert_eq!(drover_branches(&r), ["drover/implementer/claude"]);
}

#[test]
fn lane_gc_sweeps_unowned_merged_branches_and_keeps_the_rest() {
    let d = Drover::new();
    let r = repo(&d);
    up(&d, &r, "implementer", &["--agents", "codex"]);
    git(&r, &["branch", "drover/old/claude", "main"]);
    git(&r, &["checkout", "-q", "-b", "drover/old/codex"]);
    std::fs::write(r.join("x"), "x").unwrap();
    git(&r, &["add", "x"]);
    git(&r, &["commit", "-q", "-m", "unmerged"]);
    git(&r, &["checkout", "-q", "main"]);
    let dry: Value = serde_json::from_str(&d.ok(&["lane", "gc", "--dry-run", "--json"])).unwrap();
    let item = |v: &Value, name: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(item(&dry, "drover/old/claude")["action"], "would-remove");
    assert_eq!(item(&dry, "drover/old/codex")["action"], "kept");
    assert_eq!(item(&dry, "implementer-codex")["action"], "kept");
    assert_eq!(drover_branches(&r).len(), 3, "a dry run removes nothing");
    let done: Value = serde_json::from_str(&d.ok(&["lane", "gc", "--json"])).unwrap();
    assert_eq!(item(&done, "drover/old/claude")["action"], "removed");
    let mut b = drover_branches(&r);
    b.sort();
    assert_eq!(b, ["drover/implementer/codex", "drover/old/codex"]);
    assert_eq!(lanes(&d).len(), 1, "the live lane is untouched");
}

#[test]
fn reconcile_respawns_a_killed_lane_as_a_new_generation_idempotently() {
    let d = Drover::new();
    let r = repo(&d);
    up(&d, &r, "reviewer", &[]);
    d.ok(&["pane", "kill", "reviewer-codex"]);
    let dry = d.ok(&["lane", "reconcile", "--dry-run"]);
    assert!(dry.contains("would start pane"), "{dry}");
    assert!(
        d.pane("reviewer-codex").is_none(),
        "a dry run changes nothing"
    );
    let out = d.ok(&["lane", "reconcile"]);
    assert!(out.contains("generation 2"), "{out}");
    assert!(wait_until(T, || d
        .pane("reviewer-codex")
        .is_some_and(|p| p["observation"]["state"] == "idle")));
    let again = d.ok(&["lane", "reconcile"]);
    assert_eq!(again.matches(" ok").count(), 2, "{again}");
    let recs = records(&d);
    assert_eq!(lane(&recs, "reviewer-codex")["generation"], 2);
    assert_eq!(lane(&recs, "reviewer-claude")["generation"], 1);
    // A worktree deleted from under a lane is remade from its branch.
    d.ok(&["pane", "kill", "reviewer-claude"]);
    git(
        &r,
        &[
            "worktree",
            "remove",
            "--force",
            &d.state
                .join("worktrees/reviewer-claude")
                .display()
                .to_string(),
        ],
    );
    let out = d.ok(&["lane", "reconcile"]);
    assert!(
        out.contains("make worktree and pane: worktree missing"),
        "{out}"
    );
    assert!(d.state.join("worktrees/reviewer-claude/README.md").exists());
    d.ok(&["lane", "down", "--all"]);
    assert!(drover_branches(&r).is_empty() && linked_worktrees(&r).is_empty());
}
