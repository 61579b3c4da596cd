//! The header's word on the ship gate (`drover gate check`, docs/registry.md):
//! whether the task holding the write lease may ship, that is whether every
//! blocking review session has passed it, no lease of it needs recovery and
//! the event log's privacy audit is clean. Said in words, not as a count of
//! reasons: in a loop the gate that decides a landing is the charter's
//! `gate:` command, and this one usually has no single task to check.

use crate::gate::{GateReport, Verdict};

/// One phrase per kind of reason, with how many, after the task (pure).
pub fn words(r: &GateReport) -> String {
    let task = r.task.as_deref().unwrap_or("-");
    if r.verdict == Verdict::Ready {
        return format!("ship gate: {task} may ship");
    }
    let count = |check: &str| r.reasons.iter().filter(|x| x.check == check).count();
    let mut said: Vec<String> = Vec::new();
    if count("registry") > 0 {
        said.push("no registry".into());
    }
    if count("task") > 0 {
        said.push("no single task to check".into());
    }
    match count("session") {
        0 => {}
        1 => said.push(format!("{task} waits for 1 review")),
        k => said.push(format!("{task} waits for {k} reviews")),
    }
    if count("lease") > 0 {
        said.push(format!("a lease of {task} needs recovery"));
    }
    match count("privacy") {
        0 => {}
        1 => said.push("1 privacy finding in the event log".into()),
        k => said.push(format!("{k} privacy findings in the event log")),
    }
    if said.is_empty() {
        said.push(format!("blocked ({})", r.reasons.len()));
    }
    format!("ship gate: {}", said.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{GateInput, evaluate};

    fn report(task: Option<&str>) -> GateReport {
        evaluate(&GateInput {
            registry: None,
            leases: &[],
            audit: Ok(Vec::new()),
            task,
            load_bearing: false,
            now: chrono::Utc::now(),
        })
    }

    #[test]
    fn the_gate_says_what_blocks_it() {
        assert_eq!(words(&report(None)), "ship gate: no registry");
        let mut r = report(Some("T7"));
        r.reasons.clear();
        r.verdict = Verdict::Ready;
        assert_eq!(words(&r), "ship gate: T7 may ship");
    }
}
