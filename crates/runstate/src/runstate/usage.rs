//! What a run's tasks cost (LOOP.md, "What a task cost"): each task
//! keeps the usage its lanes' agents reported over its jobs
//! ([`super::task::TaskState::usage`]); the run's figure is their sum,
//! with how many tasks reported usage and how many a cost, since a cost
//! summed over some tasks only is a floor, not the run's cost.

use crate::proto::usage::Usage;
use crate::runstate::task::TaskState;
use serde::{Deserialize, Serialize};

/// A run's usage: its tasks' figures summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunUsage {
    /// The tasks whose lanes reported usage.
    pub tasks_reported: u32,
    /// Of those, the tasks whose lanes reported a cost (`cost_usd` is
    /// summed over these only).
    pub tasks_with_cost: u32,
    /// The sum (fields absent when no task reported them).
    #[serde(flatten)]
    pub total: Usage,
}

impl RunUsage {
    /// The sum over `tasks` (a task with no figure adds nothing).
    pub fn of(tasks: &[TaskState]) -> RunUsage {
        let mut r = RunUsage::default();
        for u in tasks.iter().filter_map(|t| t.usage.as_ref()) {
            r.tasks_reported += 1;
            r.tasks_with_cost += u32::from(u.cost_usd.is_some());
            r.total = r.total.plus(u);
        }
        r
    }

    /// One line for people: `12.3k in · 4.5k out · $0.42 (3 of 4 task(s)
    /// reported, 3 a cost)`, or `not reported`.
    pub fn line(&self, tasks: usize) -> String {
        if self.tasks_reported == 0 {
            return "not reported".into();
        }
        format!(
            "{} ({} of {tasks} task(s) reported, {} a cost)",
            self.total.brief(),
            self.tasks_reported,
            self.tasks_with_cost
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_sums_the_tasks_that_reported_and_counts_them() {
        let mut a = TaskState::new("T-1", "a", None);
        a.usage = Some(Usage {
            input_tokens: Some(100),
            output_tokens: Some(10),
            cached_tokens: None,
            cost_usd: Some(0.25),
        });
        let mut b = TaskState::new("T-2", "b", None);
        b.usage = Some(Usage {
            input_tokens: Some(50),
            output_tokens: Some(5),
            cached_tokens: Some(40),
            cost_usd: None,
        });
        let c = TaskState::new("T-3", "c", None);
        let r = RunUsage::of(&[a, b, c.clone()]);
        assert_eq!(r.tasks_reported, 2);
        assert_eq!(r.tasks_with_cost, 1);
        assert_eq!(r.total.input_tokens, Some(150));
        assert_eq!(r.total.cached_tokens, Some(40));
        assert_eq!(r.total.cost_usd, Some(0.25));
        assert_eq!(
            r.line(3),
            "150 in · 15 out · $0.25 (2 of 3 task(s) reported, 1 a cost)"
        );
        let none = RunUsage::of(&[c]);
        assert_eq!(none.line(1), "not reported");
        assert_eq!(
            serde_json::to_value(&none).ok(),
            Some(serde_json::json!({"tasks_reported": 0, "tasks_with_cost": 0}))
        );
    }

    #[test]
    fn a_task_without_usage_has_none_on_disk_and_an_old_record_still_reads() {
        let t = TaskState::new("T-1", "a", None);
        let v = serde_json::to_value(&t).unwrap_or_default();
        assert!(v.get("usage").is_none(), "{v}");
        let back: TaskState = serde_json::from_value(v).expect("reads without usage");
        assert_eq!(back.usage, None);
        let mut t = t;
        t.usage = Some(Usage {
            output_tokens: Some(7),
            ..Usage::default()
        });
        let v = serde_json::to_value(&t).unwrap_or_default();
        assert_eq!(v["usage"], serde_json::json!({"output_tokens": 7}));
        let back: TaskState = serde_json::from_value(v).expect("reads with usage");
        assert_eq!(back, t);
    }
}
