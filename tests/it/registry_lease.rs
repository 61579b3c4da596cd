//! Write leases against real git worktrees: ownership, one per task,
//! borrow/return exclusivity, expiry and recovery-needed, claimed_files scope.

use crate::registry_common;

use registry_common::*;
use serde_json::{Value, json};
use std::path::Path;

fn leases(e: &Env) -> Vec<Value> {
    e.json(&["lease", "ls", "--json"])
        .as_array()
        .expect("list")
        .clone()
}

fn lease_for<'a>(all: &'a [Value], task: &str) -> &'a Value {
    all.iter()
        .find(|l| l["task_id"] == task)
        .unwrap_or_else(|| panic!("no lease for {task}: {all:?}"))
}

/// Move every lease's expiry into the past, as if its holder went away.
fn expire_all(e: &Env) {
    let mut doc = e.read_doc("leases.json");
    for l in doc["leases"].as_array_mut().unwrap() {
        l["expires_at"] = json!(ago_rfc3339(60));
    }
    e.write_doc("leases.json", &doc);
}

/// Only the Implementer claims; one lease per task; a repeat claim renews.
#[test]
fn claim_rules() {
    let e = Env::new();
    e.stderr(1, &["lease", "claim", "--task", "T-1"]); // no registry yet
    e.init("expanded-eight");
    for reader in ["reviewer", "planner-triage", "orchestrator"] {
        let err = e.stderr(3, &["lease", "claim", "--task", "T-1", "--session", reader]);
        assert!(err.contains("only the Implementer"), "{err}");
    }
    let err = e.stderr(
        2,
        &["lease", "claim", "--task", "T-1", "--session", "ghost"],
    );
    assert!(err.contains("--session"), "{err}");
    let wt = e.path("wt1");
    let c = e.json(&[
        "lease",
        "claim",
        "--task",
        "T-1",
        "--branch",
        "feature/T-1",
        "--worktree",
        wt.to_str().unwrap(),
        "--file",
        "src/a.rs",
        "--json",
    ]);
    assert_eq!(c["outcome"], "claimed");
    let l = &c["lease"];
    assert_eq!(l["lease_type"], "write");
    assert_eq!(l["owner_session"], "implementer");
    assert_eq!(l["active_agent"], Value::Null);
    assert_eq!(l["state"], "active");
    for k in [
        "lease_id",
        "task_id",
        "branch",
        "worktree",
        "claimed_files",
        "expires_at",
        "recovery_command",
    ] {
        assert!(l.get(k).is_some(), "lease has {k}");
    }
    let again = e.json(&[
        "lease", "claim", "--task", "T-1", "--file", "src/b.rs", "--json",
    ]);
    assert_eq!(again["outcome"], "renewed");
    assert_eq!(again["lease"]["lease_id"], l["lease_id"]);
    assert_eq!(
        again["lease"]["claimed_files"],
        json!(["src/a.rs", "src/b.rs"])
    );
    let err = e.stderr(
        3,
        &[
            "lease",
            "claim",
            "--task",
            "T-1",
            "--worktree",
            e.path("other").to_str().unwrap(),
        ],
    );
    assert!(err.contains("release it first"), "{err}");
    assert_eq!(leases(&e).len(), 1);
    for (args, field) in [
        (&["lease", "claim", "--task", "T 1"][..], "--task"),
        (
            &["lease", "claim", "--task", "T-2", "--file", "../etc/passwd"],
            "--file",
        ),
        (
            &["lease", "claim", "--task", "T-2", "--file", "/abs"],
            "--file",
        ),
        (
            &["lease", "claim", "--task", "T-2", "--ttl-s", "0"],
            "--ttl-s",
        ),
    ] {
        let err = e.stderr(2, args);
        assert!(err.contains(field), "{args:?}: {err}");
    }
    assert_eq!(
        e.expect(0, &["lease", "release", "--task", "T-1"]).trim(),
        "released the lease of T-1"
    );
    assert!(
        e.expect(0, &["lease", "release", "--task", "T-1"])
            .contains("nothing to release"),
        "idempotent"
    );
}

/// Claude and Codex never hold a lease at once.
#[test]
fn borrow_and_return_are_exclusive() {
    let e = Env::new();
    e.init("four-role");
    e.stderr(3, &["lease", "borrow", "--task", "T-1", "--agent", "codex"]); // no lease
    e.expect(0, &["lease", "claim", "--task", "T-1"]);
    e.expect(0, &["lease", "borrow", "--task", "T-1", "--agent", "codex"]);
    assert!(
        e.expect(0, &["lease", "borrow", "--task", "T-1", "--agent", "codex"])
            .contains("already")
    );
    let err = e.stderr(
        3,
        &["lease", "borrow", "--task", "T-1", "--agent", "claude"],
    );
    assert!(err.contains("never hold a lease at once"), "{err}");
    e.stderr(
        3,
        &["lease", "return", "--task", "T-1", "--agent", "claude"],
    );
    let err = e.stderr(3, &["lease", "release", "--task", "T-1"]);
    assert!(
        err.contains("return"),
        "a borrowed lease is not released under the agent: {err}"
    );
    assert_eq!(lease_for(&leases(&e), "T-1")["active_agent"], "codex");
    e.expect(0, &["lease", "return", "--task", "T-1", "--agent", "codex"]);
    assert!(
        e.expect(0, &["lease", "return", "--task", "T-1", "--agent", "codex"])
            .contains("not borrowed")
    );
    e.expect(
        0,
        &["lease", "borrow", "--task", "T-1", "--agent", "claude"],
    );
    assert_eq!(lease_for(&leases(&e), "T-1")["active_agent"], "claude");
}

/// A lease without a task_id is never eligible: not borrowed, not counted.
#[test]
fn lease_without_task_is_never_eligible() {
    let e = Env::new();
    e.init("four-role");
    e.write_doc(
        "leases.json",
        &json!({"schema_version": 1, "leases": [{"lease_id": "lease-orphan", "task_id": null, "branch": null,
            "worktree": null, "claimed_files": [], "owner_session": "implementer", "lease_type": "write",
            "active_agent": null, "expires_at": "2999-01-01T00:00:00Z", "recovery_command": null, "state": "active"}]}),
    );
    assert!(e.expect(0, &["lease", "ls"]).contains("ineligible"));
    e.stderr(2, &["lease", "borrow", "--task", "", "--agent", "codex"]); // no way to name it
    let r: Value = serde_json::from_str(&e.expect(3, &["gate", "check", "--json"])).unwrap();
    assert_eq!(
        r["reasons"][0]["check"], "task",
        "the orphan is not taken as the gate's task: {r}"
    );
    e.expect(0, &["lease", "claim", "--task", "T-1"]);
    assert_eq!(leases(&e).len(), 2);
}

struct Trees {
    clean: String,
    dirty: String,
    detached: String,
    missing: String,
    not_git: String,
    wrong_branch: String,
}

fn trees(e: &Env) -> Trees {
    let repo = e.path("repo");
    git_repo(&repo);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mk = |name: &str| {
        let p = e.path(name);
        git_worktree(&repo, &p, &format!("feature/{name}"));
        p
    };
    let clean = mk("clean");
    let dirty = mk("dirty");
    std::fs::write(dirty.join("new.txt"), "untracked\n").unwrap();
    let detached = mk("detached");
    let head = git(&detached, &["rev-parse", "HEAD"]);
    git(&detached, &["checkout", "-q", "--detach", head.trim()]);
    let missing = mk("missing");
    let wrong = mk("wrong");
    git(&wrong, &["checkout", "-q", "-b", "elsewhere"]);
    let not_git = e.path("plain");
    std::fs::create_dir_all(&not_git).unwrap();
    let t = Trees {
        clean: s(&clean),
        dirty: s(&dirty),
        detached: s(&detached),
        missing: s(&missing),
        not_git: s(&not_git),
        wrong_branch: s(&wrong),
    };
    // Removed after the claim below would also work; removing the directory first
    // is what a crashed lane whose worktree was cleaned up looks like.
    std::fs::remove_dir_all(&missing).unwrap();
    t
}

/// An expired lease whose worktree is dirty, detached, on another branch,
/// missing or not inspectable becomes recovery-needed and is never
/// reassigned; a clean one just expires and can be claimed again.
#[test]
fn expiry_inspects_real_worktrees() {
    let e = Env::new();
    e.init("four-role");
    let t = trees(&e);
    let cases = [
        ("T-clean", &t.clean, "feature/clean", None),
        ("T-dirty", &t.dirty, "feature/dirty", Some("dirty")),
        (
            "T-detached",
            &t.detached,
            "feature/detached",
            Some("detached"),
        ),
        ("T-missing", &t.missing, "feature/missing", Some("missing")),
        (
            "T-plain",
            &t.not_git,
            "feature/plain",
            Some("cannot be inspected"),
        ),
        (
            "T-wrong",
            &t.wrong_branch,
            "feature/wrong",
            Some("elsewhere"),
        ),
    ];
    for (task, wt, branch, _) in &cases {
        e.expect(
            0,
            &[
                "lease",
                "claim",
                "--task",
                task,
                "--worktree",
                wt,
                "--branch",
                branch,
            ],
        );
    }
    assert!(leases(&e).iter().all(|l| l["state"] == "active"));
    expire_all(&e);
    let before = std::fs::read(e.reg_file("leases.json")).unwrap();
    let all = leases(&e);
    assert_eq!(
        std::fs::read(e.reg_file("leases.json")).unwrap(),
        before,
        "ls only reads"
    );
    for (task, _, _, why) in &cases {
        let l = lease_for(&all, task);
        match why {
            None => assert_eq!(l["state"], "expired", "{task}"),
            Some(w) => {
                assert_eq!(l["state"], "recovery-needed", "{task}: {l}");
                assert!(
                    l["recovery_reason"].as_str().unwrap().contains(w),
                    "{task}: {l}"
                );
            }
        }
    }
    // The clean one can be claimed again; the others are never reassigned.
    let c = e.json(&[
        "lease",
        "claim",
        "--task",
        "T-clean",
        "--worktree",
        &t.clean,
        "--json",
    ]);
    assert_eq!(c["outcome"], "claimed");
    for (task, _, _, why) in &cases[1..] {
        let err = e.stderr(3, &["lease", "claim", "--task", task]);
        assert!(
            err.contains("needs recovery") && err.contains(why.unwrap()),
            "{task}: {err}"
        );
    }
    // Sticky: cleaning the worktree afterwards does not make it eligible again.
    std::fs::remove_file(Path::new(&t.dirty).join("new.txt")).unwrap();
    e.stderr(3, &["lease", "claim", "--task", "T-dirty"]);
    assert_eq!(
        lease_for(
            &e.read_doc("leases.json")["leases"]
                .as_array()
                .unwrap()
                .clone(),
            "T-dirty"
        )["state"],
        "recovery-needed"
    );
    e.stderr(
        3,
        &["lease", "borrow", "--task", "T-dirty", "--agent", "codex"],
    );
    // The gate names it.
    for id in ["reviewer", "ci-eval-auditor"] {
        e.expect(
            0,
            &[
                "session-heartbeat",
                "--session",
                id,
                "--task",
                "T-dirty",
                "--status",
                "passed",
            ],
        );
    }
    let r: Value =
        serde_json::from_str(&e.expect(3, &["gate", "check", "--task", "T-dirty", "--json"]))
            .unwrap();
    assert_eq!(r["reasons"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["reasons"][0]["check"], "lease");
    // Only an operator's --force clears it.
    let err = e.stderr(3, &["lease", "release", "--task", "T-dirty"]);
    assert!(err.contains("--force"), "{err}");
    e.expect(0, &["lease", "release", "--task", "T-dirty", "--force"]);
    e.expect(0, &["gate", "check", "--task", "T-dirty"]);
    // Expired while clean, dirtied afterwards: the next claim looks again and refuses.
    let later = e.path("later");
    git_worktree(&e.path("repo"), &later, "feature/later");
    let later = later.to_string_lossy().into_owned();
    e.expect(
        0,
        &["lease", "claim", "--task", "T-later", "--worktree", &later],
    );
    expire_all(&e);
    e.expect(0, &["lease", "claim", "--task", "T-other"]); // a writer stores T-later as expired
    assert_eq!(
        lease_for(
            &e.read_doc("leases.json")["leases"]
                .as_array()
                .unwrap()
                .clone(),
            "T-later"
        )["state"],
        "expired"
    );
    std::fs::write(Path::new(&later).join("README"), "changed\n").unwrap();
    let err = e.stderr(
        3,
        &["lease", "claim", "--task", "T-later", "--worktree", &later],
    );
    assert!(
        err.contains("needs recovery") && err.contains("dirty"),
        "{err}"
    );
    assert_eq!(
        lease_for(&leases(&e), "T-later")["state"],
        "recovery-needed"
    );
    // inspect shows the live worktree check.
    let i = e.json(&["lease", "inspect", "T-detached", "--json"]);
    assert_eq!(i["worktree_check"]["check"], "detached");
    let i = e.json(&["lease", "inspect", "T-clean", "--json"]);
    assert_eq!(
        i["worktree_check"],
        json!({"check": "clean", "branch": "feature/clean"})
    );
    e.stderr(3, &["lease", "inspect", "T-none"]);
}

/// check-scope exits 3 naming every file outside claimed_files.
#[test]
fn check_scope_names_files_out_of_scope() {
    let e = Env::new();
    e.init("four-role");
    e.stderr(3, &["lease", "check-scope", "T-1", "src/a.rs"]); // no lease
    e.expect(0, &["lease", "claim", "--task", "T-0"]);
    let err = e.stderr(0, &["lease", "check-scope", "T-0", "anything.rs"]);
    assert!(err.contains("not enforced"), "{err}");
    e.expect(
        0,
        &[
            "lease",
            "claim",
            "--task",
            "T-1",
            "--file",
            "src/registry/",
            "--file",
            "tests/registry_*.rs",
            "--file",
            "docs/registry.md",
        ],
    );
    e.expect(
        0,
        &[
            "lease",
            "check-scope",
            "T-1",
            "src/registry/mod.rs",
            "./docs/registry.md",
            "tests/registry_cli.rs",
        ],
    );
    let err = e.stderr(
        3,
        &[
            "lease",
            "check-scope",
            "T-1",
            "src/registry/mod.rs",
            "src/main.rs",
            "tests/other.rs",
        ],
    );
    assert!(
        err.contains("src/main.rs") && err.contains("tests/other.rs") && !err.contains("mod.rs"),
        "{err}"
    );
    let o = e.run(&["lease", "check-scope", "T-1", "src/main.rs", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["out_of_scope"], json!(["src/main.rs"]));
    e.stderr(2, &["lease", "check-scope", "T-1", "../x"]);
}
