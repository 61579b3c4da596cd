//! A rebase round on the real Claude Code and Codex TUIs with the model
//! that knows nothing but the brief (`drover mock-model --follow-brief`):
//! three tasks create the same file, one at a time (`--pool 1`, so each
//! starts from the base and conflicts with what landed before it); the
//! second and the third get a rebase round and, told only what the brief
//! says, resolve the markers and report; all land. The agent mix gives the
//! tasks Claude, Codex, Claude: each agent resolves a rebase round. Ignored by plain `cargo
//! test` (it needs the agents from `scripts/install-agents.sh`).

use crate::real_loop_brief::{TaskSpec, all_landed, pairs, run_loop};

const SAME_FILE: [TaskSpec; 3] = [
    TaskSpec {
        n: 1,
        title: "Add one",
        file: "TASK-shared.txt",
        line: "one",
        more: &[],
    },
    TaskSpec {
        n: 2,
        title: "Add two",
        file: "TASK-shared.txt",
        line: "two",
        more: &[],
    },
    TaskSpec {
        n: 3,
        title: "Add three",
        file: "TASK-shared.txt",
        line: "three",
        more: &[],
    },
];

/// Guards LOOP.md "The merge queue" on real TUIs: a conflicting candidate is
/// rebased by its lane through the brief alone (no permission asked) and
/// lands, the close-out saying "rebased" — once by Claude, once by Codex.
#[test]
#[ignore = "needs the supported real agents: scripts/install-agents.sh"]
fn a_real_agent_resolves_a_rebase_round_through_the_brief_alone() {
    for (c, x) in pairs() {
        let r = run_loop(&c, &x, "command", &SAME_FILE, &["--pool", "1"]);
        all_landed(&r, &SAME_FILE);
        let decisions = std::fs::read_to_string(r.run_dir.join("DECISIONS.md")).unwrap();
        let rebased = r.out.lines().filter(|l| l.ends_with(", rebased")).count();
        assert_eq!(rebased, 2, "two tasks were rebased: {}", r.why);
        assert!(decisions.contains(" rebase: "), "{}", r.why);
        assert!(
            !decisions.contains(" question: ") && !decisions.contains(" stall: "),
            "a lane asked for something: {}",
            r.why
        );
        let st: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(r.run_dir.join("run.json")).unwrap())
                .unwrap();
        let by: Vec<String> = st["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["rebases"] == 1)
            .map(|t| format!("{} by {}", t["id"], t["agent"]))
            .collect();
        eprintln!("claude {c} + codex {x}: rebased {by:?} in {:.1} s", r.secs);
        for agent in ["claude", "codex"] {
            assert!(
                by.iter().any(|b| b.ends_with(&format!("\"{agent}\""))),
                "{agent} resolved a rebase round: {by:?}: {}",
                r.why
            );
        }
    }
}
