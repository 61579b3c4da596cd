//! Why a task is held or parked, as the run decides on it: the reason's
//! text beside it is for people and is never matched. The cause as
//! `run.json` holds it is [`crate::runstate::cause`]'s.

pub use crate::runstate::cause::TaskCause;

/// The cause an error parks a task for, where the run acts on it.
pub fn of_error(e: &crate::loopctl::LoopError) -> Option<TaskCause> {
    match e {
        crate::loopctl::LoopError::LeaseRefused(_) => Some(TaskCause::LeaseRefused),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::TaskCause;
    use crate::loopctl::run::runner::RunStatus;
    use serde_json::{Value, json};

    /// A `run.json` with these tasks, as the loop writes it.
    fn run_with(tasks: Value) -> RunStatus {
        let doc = json!({
            "schema_version": 1, "run": 1, "state": "closed", "repo": "/r",
            "charter": "/r/CHARTER.md", "charter_sha256": "", "base": "main",
            "base_sha": "", "integration_branch": "drover/loop1",
            "integration_worktree": "/r/wt", "pool": 1, "lanes_cap": 2,
            "landings": 0, "started_at": "2026-12-05T00:00:00Z",
            "finished_at": null, "closeout": null, "tasks": tasks, "notes": [],
            "stopped_by": null, "iterations": 0,
        });
        serde_json::from_value(doc).unwrap_or_else(|e| panic!("run.json: {e}"))
    }

    fn task(id: &str, phase: &str, reason: &str, resume: &str, cause: Option<&str>) -> Value {
        let mut t = json!({
            "id": id, "title": id, "phase": phase, "tier": null, "agent": null,
            "reviewer": null, "round": u32::from(!matches!(phase, "held" | "ready")),
            "lane": null, "job": null,
            "worktree": null, "branch": null, "candidate_sha256": null,
            "sha": null, "reason": reason, "resume": resume, "limit_parks": 0,
            "stall": null,
        });
        match cause {
            Some(c @ ("lease-refused" | "limit-wait")) => t["cause"] = json!(c),
            Some(held) => t["cause"] = json!({ "held": held }),
            None => {}
        }
        t
    }

    /// Guards issue 38: a lane's own words that quote "lease claim …
    /// refused" do not make its task a stale hold; the recorded cause does.
    #[test]
    fn stale_holds_follow_the_cause_not_the_reason_text() {
        let st = run_with(json!([
            task(
                "T-1",
                "parked",
                "could not start: lease claim T-1 refused: held by loop0",
                "fix the cause, then rerun",
                Some("lease-refused"),
            ),
            task(
                "T-2",
                "parked",
                "job loop1-t-2-i1 failed: my lease claim was refused, I think",
                "rerun the task",
                None,
            ),
        ]));
        let ids: Vec<String> = st.stale_holds().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, ["T-1"]);
    }

    /// A run written before causes were recorded keeps working: its
    /// lease-refused, limit-waiting and held tasks get their causes on load.
    #[test]
    fn a_run_file_without_causes_gets_them_on_load() {
        let mut st = run_with(json!([
            task(
                "T-1",
                "parked",
                "could not start: lease claim T-1 refused: held by loop0",
                "fix the cause, then rerun",
                None,
            ),
            task(
                "T-2",
                "parked",
                "usage limit on lane l (no reset time shown); limit #1",
                "resumes at 2026-12-05T01:00:00Z",
                None,
            ),
            task("T-3", "held", "is labelled needs-owner", "", None),
            task(
                "T-4",
                "parked",
                "job j failed: no reason given",
                "rerun the task",
                None
            ),
        ]));
        st.fill_legacy_causes();
        let causes: Vec<Option<TaskCause>> = st.tasks.iter().map(|t| t.cause()).collect();
        assert_eq!(
            causes,
            [
                Some(TaskCause::LeaseRefused),
                Some(TaskCause::LimitWait),
                Some(TaskCause::Held(
                    crate::loopctl::board::ready::HoldCause::NeedsOwner
                )),
                None,
            ]
        );
        assert_eq!(st.stale_holds().len(), 1);
    }

    /// Guards issue 38: a task held for a dependency whose id holds
    /// "needs-owner" is told to wait for its dependencies, not for an owner.
    #[test]
    fn the_closeout_resume_follows_the_hold_cause() {
        let st = run_with(json!([
            task(
                "T-1",
                "held",
                "depends on needs-owner-docs (not Done)",
                "",
                Some("dependencies")
            ),
            task(
                "T-2",
                "held",
                "is labelled needs-owner",
                "",
                Some("needs-owner")
            ),
            task(
                "T-3",
                "held",
                "is excluded by the charter",
                "",
                Some("excluded")
            ),
        ]));
        let said: Vec<Option<String>> = st
            .tasks
            .iter()
            .map(|t| {
                let mut t = t.clone();
                t.note_mut().resume = None;
                super::super::finish::closeout_resume(&t)
            })
            .collect();
        assert_eq!(
            said,
            [
                Some("its dependencies are Done".to_string()),
                Some("an owner ruling removes the needs-owner label".to_string()),
                None,
            ]
        );
    }

    /// The run's times read from the form run.json has always had (to the
    /// second, `Z`) and are written back the same.
    #[test]
    fn run_times_round_trip_in_their_written_form() {
        let mut st = run_with(json!([]));
        st.clock_at = crate::time::parse("2026-12-05T01:02:03Z").ok();
        let v = serde_json::to_value(&st).unwrap_or_default();
        assert_eq!(v["started_at"], "2026-12-05T00:00:00Z");
        assert_eq!(v["finished_at"], Value::Null);
        assert_eq!(v["clock_at"], "2026-12-05T01:02:03Z");
        let back: RunStatus = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, st);
    }

    /// A task without a cause is written as before: no `cause` key.
    #[test]
    fn a_task_without_a_cause_writes_no_cause_key() {
        let st = run_with(json!([task("T-1", "parked", "r", "s", None)]));
        let v = serde_json::to_value(&st.tasks[0]).unwrap_or_default();
        assert!(v.get("cause").is_none(), "{v}");
    }
}
