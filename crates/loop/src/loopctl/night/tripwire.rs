//! The convergence tripwire (`LOOP.md`, "Convergence tripwire"): a task
//! whose failed repair rounds each opened a new class of finding, twice, or
//! that has been worked for four hours since its first dispatch (time paused,
//! held for the owner or parked at a usage limit excluded), stops being
//! repaired. The call is recorded in `DECISIONS.md` — a new approach, a
//! split, an escalation to the owner, or a park — and overnight it is a park
//! until the owner is back. Pure decisions; the runner acts on them.

use std::time::Duration;

/// Active time since a task's first dispatch after which it trips.
pub const MAX_ACTIVE: Duration = Duration::from_secs(4 * 3600);
/// Failed rounds, each opening a new class of finding, after which it trips.
pub const NEW_CLASS_ROUNDS: u32 = 2;

pub use crate::runstate::records::{Findings, REBASE_CLASS};

/// The class of a failed round's finding: the reviewer's `class` field when
/// its report names one, else where it came from (`review`, `gate`).
pub fn finding_class(source: &str, report_class: Option<&str>) -> String {
    match report_class.map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) => format!("{source}:{}", c.to_ascii_lowercase()),
        None => source.to_string(),
    }
}

/// Why a task tripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Failed rounds kept opening new classes of finding.
    NewClasses { classes: Vec<String> },
    /// Worked this long since its first dispatch (pauses excluded).
    Time { active: Duration },
}

impl Reason {
    pub fn describe(&self) -> String {
        match self {
            Reason::NewClasses { classes } => format!(
                "{} failed rounds each opened a new class of finding ({})",
                classes.len(),
                classes.join(", ")
            ),
            Reason::Time { active } => format!(
                "{} min of work since its first dispatch (pauses excluded) without converging",
                active.as_secs() / 60
            ),
        }
    }
}

/// Whether a task trips now.
pub fn check(f: &Findings, active: Duration) -> Option<Reason> {
    if f.new_class_rounds >= NEW_CLASS_ROUNDS {
        return Some(Reason::NewClasses {
            classes: f.classes.iter().cloned().collect(),
        });
    }
    (active >= MAX_ACTIVE).then_some(Reason::Time { active })
}

/// The call recorded when a task trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Try the task another way (recommended when it ran out of time).
    NewApproach,
    /// Split the task (recommended when each round found something new).
    Split,
    /// Put it to the owner now (owner present).
    Escalate,
    /// Park it until the owner is back (overnight).
    Park,
}

impl Call {
    pub fn as_str(self) -> &'static str {
        match self {
            Call::NewApproach => "new approach",
            Call::Split => "split",
            Call::Escalate => "escalation",
            Call::Park => "park",
        }
    }
}

/// The call (what the loop does now) and the recommendation (what it
/// advises the owner) for a trip.
pub fn call(reason: &Reason, overnight: bool) -> (Call, Call) {
    let rec = match reason {
        Reason::NewClasses { .. } => Call::Split,
        Reason::Time { .. } => Call::NewApproach,
    };
    let now = if overnight {
        Call::Park
    } else {
        Call::Escalate
    };
    (now, rec)
}

/// Active time: from the first dispatch to now, less the time excluded.
pub fn active(since_first_dispatch: Duration, excluded: Duration) -> Duration {
    since_first_dispatch.saturating_sub(excluded)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3600;

    #[test]
    fn two_rounds_with_new_classes_trip_and_repeats_do_not() {
        let mut f = Findings::default();
        assert!(f.failed(&finding_class("review", Some("Naming"))));
        assert_eq!(check(&f, Duration::ZERO), None, "one new class");
        assert!(!f.failed("review:naming"), "the same class again");
        assert_eq!(
            check(&f, Duration::ZERO),
            None,
            "a repeat is converging work"
        );
        assert!(f.failed(&finding_class("gate", None)));
        assert_eq!(
            check(&f, Duration::ZERO),
            Some(Reason::NewClasses {
                classes: vec!["gate".into(), "review:naming".into()]
            })
        );
    }

    /// Regression: one failed review, then one conflict with a task that
    /// landed meanwhile, tripped the task ("2 failed rounds each opened a
    /// new class": `rebase` counted as a finding) and parked it overnight.
    #[test]
    fn a_rebase_round_opens_no_class() {
        let mut f = Findings::default();
        assert!(f.failed(&finding_class("review", Some("naming"))));
        assert!(!f.failed(REBASE_CLASS));
        assert!(!f.failed(REBASE_CLASS));
        assert_eq!(check(&f, Duration::ZERO), None, "{f:?}");
        assert!(!f.classes.contains(REBASE_CLASS));
    }

    #[test]
    fn four_active_hours_trip_and_paused_time_does_not_count() {
        let f = Findings::default();
        let a = active(Duration::from_secs(5 * H), Duration::from_secs(2 * H));
        assert_eq!(check(&f, a), None, "3 active hours");
        let a = active(Duration::from_secs(5 * H), Duration::from_secs(H));
        assert!(matches!(check(&f, a), Some(Reason::Time { .. })));
        assert_eq!(
            active(Duration::from_secs(H), Duration::from_secs(2 * H)),
            Duration::ZERO
        );
    }

    #[test]
    fn overnight_parks_owner_present_escalates() {
        let t = Reason::Time {
            active: Duration::from_secs(4 * H),
        };
        let n = Reason::NewClasses { classes: vec![] };
        assert_eq!(call(&t, true), (Call::Park, Call::NewApproach));
        assert_eq!(call(&n, false), (Call::Escalate, Call::Split));
        assert_eq!(finding_class("review", Some("  ")), "review");
    }
}
