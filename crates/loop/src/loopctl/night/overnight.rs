//! Owner present or overnight (`LOOP.md`, "Overnight mode"): with
//! `--overnight [--until HH:MM]` the loop asks nothing — an escalation goes
//! to `QUESTIONS.md` with a recommendation and a notification, and its task
//! is parked (the lane does not wait for a human); without it an escalation
//! holds its lane for the owner and notifies. When overnight ends (the
//! `--until` time on the loop's clock) the questions held overnight are
//! listed first. The decisions here are pure; the runner acts on them.

use crate::agent::BlockedKind;
use chrono::{DateTime, Duration as CDuration, NaiveTime, TimeZone, Utc};

/// Whether the owner is there to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The default: an escalation holds its lane and notifies.
    #[default]
    OwnerPresent,
    /// Ask nothing until `until` (or the end of the run when `None`).
    Overnight { until: Option<DateTime<Utc>> },
}

impl Mode {
    /// STATE.md's `mode:` value.
    pub fn label(self) -> String {
        match self {
            Mode::OwnerPresent => "owner-present".into(),
            Mode::Overnight { until: None } => "overnight".into(),
            Mode::Overnight { until: Some(t) } => {
                format!(
                    "overnight until {}",
                    crate::loopctl::night::clock::rfc3339(t)
                )
            }
        }
    }

    pub fn is_overnight(self) -> bool {
        matches!(self, Mode::Overnight { .. })
    }

    /// True when overnight mode is over at `now` (its `--until` is reached).
    pub fn ended(self, now: DateTime<Utc>) -> bool {
        matches!(self, Mode::Overnight { until: Some(t) } if now >= t)
    }
}

/// `HH:MM` (24 h) as a time of day.
pub fn parse_hhmm(s: &str) -> Option<NaiveTime> {
    let (h, m) = s.trim().split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    NaiveTime::from_hms_opt(h.parse().ok()?, m.parse().ok()?, 0)
}

/// The next `HH:MM` in the owner's zone `tz` after `now`, in UTC (a time
/// already past today is tomorrow's; a time a DST gap skips is taken an
/// hour later).
pub fn until_utc<Z: TimeZone>(now: DateTime<Utc>, at: NaiveTime, tz: &Z) -> DateTime<Utc> {
    let local_now = now.with_timezone(tz).naive_local();
    let mut day = local_now.date();
    for _ in 0..3 {
        let naive = day.and_time(at);
        let t = tz.from_local_datetime(&naive).earliest().or_else(|| {
            tz.from_local_datetime(&(naive + CDuration::hours(1)))
                .earliest()
        });
        if let Some(t) = t.map(|t| t.with_timezone(&Utc))
            && t > now
        {
            return t;
        }
        day = day.succ_opt().unwrap_or(day);
    }
    now + CDuration::days(1)
}

/// What the loop does with an escalation it cannot rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Owner present: the lane waits for the owner; the job stays watched.
    Hold,
    /// Overnight: the question is held in QUESTIONS.md, the task parked, the lane stopped.
    Park,
}

/// The route of an escalation in `mode` (usage limits never come here:
/// the loop rules them itself by parking and resuming the lane).
pub fn route(mode: Mode) -> Route {
    if mode.is_overnight() {
        Route::Park
    } else {
        Route::Hold
    }
}

/// The recommendation written with an escalation's question (pure): what
/// the owner is advised to do, by the blocked kind the lane shows.
pub fn recommendation(
    kind: Option<BlockedKind>,
    lane: &str,
    task: &str,
    overnight: bool,
) -> String {
    let act = match kind {
        Some(BlockedKind::Permission) => format!(
            "read the command in lane {lane} (drover attach {lane}); approve it only if the charter's scope covers it, else deny"
        ),
        Some(BlockedKind::Question) => format!("answer the agent's question in lane {lane}"),
        Some(BlockedKind::Setup) => format!("finish the agent's setup or login in lane {lane}"),
        _ => format!("look at lane {lane} (drover attach {lane}) and answer it"),
    };
    if overnight {
        format!("{act}; the task was parked overnight: rerun {task} after answering")
    } else {
        format!("{act}; the lane is held until then")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn hhmm_parses_strictly() {
        assert_eq!(parse_hhmm("07:30"), NaiveTime::from_hms_opt(7, 30, 0));
        assert_eq!(parse_hhmm("7:05"), NaiveTime::from_hms_opt(7, 5, 0));
        for bad in ["24:00", "7", "07:3", "07:60", "ab:cd", "", "007:30"] {
            assert_eq!(parse_hhmm(bad), None, "{bad}");
        }
    }

    #[test]
    fn until_is_the_next_such_time_in_the_owners_zone() {
        let at = parse_hhmm("07:00").unwrap();
        // 23:00 UTC: 07:00 is tomorrow.
        assert_eq!(
            until_utc(t("2026-12-01T23:00:00Z"), at, &Utc),
            t("2026-12-02T07:00:00Z")
        );
        // 05:00 UTC: 07:00 is today.
        assert_eq!(
            until_utc(t("2026-12-01T05:00:00Z"), at, &Utc),
            t("2026-12-01T07:00:00Z")
        );
        // The owner is at UTC-8: 07:00 there is 15:00 UTC.
        let pst = chrono::FixedOffset::west_opt(8 * 3600).unwrap();
        assert_eq!(
            until_utc(t("2026-12-01T06:00:00Z"), at, &pst),
            t("2026-12-01T15:00:00Z")
        );
    }

    #[test]
    fn overnight_parks_and_owner_present_holds() {
        assert_eq!(route(Mode::OwnerPresent), Route::Hold);
        assert_eq!(route(Mode::Overnight { until: None }), Route::Park);
        let m = Mode::Overnight {
            until: Some(t("2026-12-02T07:00:00Z")),
        };
        assert!(!m.ended(t("2026-12-02T06:59:59Z")));
        assert!(m.ended(t("2026-12-02T07:00:00Z")));
        assert!(!Mode::Overnight { until: None }.ended(t("2030-01-01T00:00:00Z")));
        assert_eq!(m.label(), "overnight until 2026-12-02T07:00:00Z");
        assert!(
            recommendation(Some(BlockedKind::Permission), "l1-impl-t", "T", true)
                .contains("rerun T")
        );
        assert!(recommendation(Some(BlockedKind::Question), "l1", "T", false).contains("held"));
    }
}
