//! `drover status`: what an operator looks at first — every pane with its
//! agent state and since when, and every running job with the shadow policy's
//! latest word on it.

use super::{Ctx, client_err};
use drover::engine::{Engine, Status};
use drover::exit;
use drover::shadow::ShadowDecision;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub fn run(json_out: bool, ctx: &Ctx) -> anyhow::Result<u8> {
    let state_dir = ctx.state_dir()?;
    let mut c = ctx.client()?;
    let panes = c.call("pane.ls", json!({})).map_err(client_err)?;
    let jobs = running_jobs(&state_dir);
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"panes": panes, "jobs": jobs}))?
        );
        return Ok(exit::OK);
    }
    super::pane::print_table(&panes);
    if !jobs.is_empty() {
        println!();
        println!(
            "{:<16} {:<14} {:<10} {:<18} REASON",
            "JOB", "SESSION", "ATTEMPT", "DECISION"
        );
        for j in &jobs {
            let mut reason = j["reason"].as_str().unwrap_or("-").to_string();
            if reason.chars().count() > 60 {
                reason = reason.chars().take(59).collect::<String>() + "…";
            }
            println!(
                "{:<16} {:<14} {:<10} {:<18} {}",
                j["job_id"].as_str().unwrap_or("?"),
                j["session_id"].as_str().unwrap_or("-"),
                j["attempt_id"]
                    .as_str()
                    .map(|a| &a[..a.len().min(8)])
                    .unwrap_or("-"),
                j["decision"].as_str().unwrap_or("(none yet)"),
                reason
            );
        }
    }
    Ok(exit::OK)
}

/// Running jobs with their newest shadow decision for the current attempt.
fn running_jobs(state_dir: &std::path::Path) -> Vec<Value> {
    if !state_dir.join("jobs").is_dir() {
        return Vec::new();
    }
    let Ok(engine) = Engine::open(state_dir) else {
        return Vec::new();
    };
    let records = engine.list().unwrap_or_default();
    let decisions = drover::store::read_jsonl::<ShadowDecision>(
        &state_dir.join("shadow").join("decisions.jsonl"),
    )
    .map(|r| r.records)
    .unwrap_or_default();
    let mut latest: BTreeMap<(String, String), &ShadowDecision> = BTreeMap::new();
    for d in &decisions {
        latest.insert((d.job_id.clone(), d.attempt_id.clone()), d);
    }
    records
        .into_iter()
        .filter(|r| r.status == Status::Running)
        .map(|r| {
            let d = r
                .attempt_id
                .as_ref()
                .and_then(|a| latest.get(&(r.job_id.clone(), a.clone())));
            json!({
                "job_id": r.job_id,
                "session_id": r.session_id,
                "attempt_id": r.attempt_id,
                "decision": d.map(|d| d.decision.clone()),
                "reason": d.map(|d| d.reason.clone()),
                "decided_at": d.map(|d| d.at.clone()),
            })
        })
        .collect()
}
