//! What a real Claude Code pane used, across a `/clear` (docs/agents.md,
//! "What a task cost"): its status line, wired by drover, reports the
//! session's running totals; `/clear` starts a session whose tokens count
//! from zero again (and its cost too in 2.1.332, not in 2.1.197), and the
//! pane's tally (`agent explain`'s `usage`) counts each turn once. Against drover's mock
//! model, on each supported version; ignored by plain `cargo test`.

use crate::common;
use crate::real_agents::{Agent, Run};
use crate::real_signals_wired::wired;
use serde_json::Value;
use std::time::Duration;

fn explain(r: &Run) -> Value {
    serde_json::from_str(&r.drover(&["agent", "explain", &r.pane, "--json"])).unwrap()
}

fn tokens(u: &Value) -> u64 {
    u["input_tokens"].as_u64().unwrap_or(0) + u["output_tokens"].as_u64().unwrap_or(0)
}

/// Wait until `agent explain` satisfies `cond`; its last answer.
fn explain_until(r: &Run, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let ok = common::wait_until(Duration::from_secs(60), || {
        last = explain(r);
        cond(&last)
    });
    assert!(ok, "never {what}: {last:#}");
    last
}

#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn claude_usage_adds_up_across_a_clear() {
    for v in Agent::Claude.versions() {
        let mut r = wired(&common::backend(), Agent::Claude, &v, "usage", &[]);
        r.expect_state("idle");
        r.prompt("say hello");
        r.expect_state("done");
        let x = explain_until(&r, "a first usage figure", |x| tokens(&x["usage"]) > 0);
        let first = x["usage"].clone();
        let first_session = x["view"]["session"].clone();

        r.prompt("/clear");
        r.expect_state("idle");
        r.prompt("say hello");
        r.expect_state("done");
        // The new session's own figures, once its turn is counted.
        let x = explain_until(&r, "the new session's usage", |x| {
            x["view"]["session"] != first_session && tokens(&x["view"]["usage"]) > 0
        });
        let now = &x["view"]["usage"];
        assert_eq!(
            tokens(now),
            tokens(&first),
            "claude {v}: the cleared session's tokens count from zero: first {first}, now {now}"
        );
        // The same prompt twice: the tally is twice the first turn, tokens
        // and cost, whether the agent keeps its cost across `/clear`
        // (2.1.197) or starts it again (2.1.332).
        let total = &x["usage"];
        assert_eq!(tokens(total), 2 * tokens(&first), "claude {v}: {total}");
        let cost = |u: &Value| u["cost_usd"].as_f64().unwrap_or(-1.0);
        assert!(
            (cost(total) - 2.0 * cost(&first)).abs() < 1e-9,
            "claude {v}: first {first}, session now {now}, total {total}"
        );
    }
}

/// Codex's rollout gives its session's tokens and no cost; a respawn (a new
/// process, a new thread) counts from zero again, and the tally adds both.
#[test]
#[ignore = "needs the real agents (scripts/install-agents.sh)"]
fn codex_usage_has_tokens_no_cost_and_adds_up_across_a_respawn() {
    for v in Agent::Codex.versions() {
        let mut r = wired(&common::backend(), Agent::Codex, &v, "usage", &[]);
        r.expect_state("idle");
        r.prompt("say hello");
        r.expect_state("done");
        let x = explain_until(&r, "a first usage figure", |x| tokens(&x["usage"]) > 0);
        let first = x["usage"].clone();
        assert_eq!(
            first.get("cost_usd"),
            None,
            "codex {v}: no cost, not $0: {first}"
        );

        r.drover(&["pane", "respawn", &r.pane]);
        r.expect_state("idle");
        r.prompt("say hello");
        r.expect_state("done");
        // The same prompt twice: twice the first turn's tokens.
        let x = explain_until(&r, "the second process's usage", |x| {
            tokens(&x["usage"]) > tokens(&first)
        });
        let total = &x["usage"];
        assert_eq!(
            tokens(total),
            2 * tokens(&first),
            "codex {v}: first {first}, total {total}"
        );
        assert_eq!(total.get("cost_usd"), None, "codex {v}: {total}");
    }
}
