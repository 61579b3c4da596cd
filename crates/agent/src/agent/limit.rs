//! When a usage limit resets, read from the limit line on screen (see
//! docs/agents.md): Claude `resets 12:50am (America/Los_Angeles)`, `resets Dec 3,
//! 10:22am (…)`, `resets May 5 at 9pm (…)`; Codex `try again at 12:48 PM.`,
//! `try again at Jun 18th, 2026 8:41 AM.`, localized `10 de jul. de 2026, 11:52`.
//! Claude names an IANA zone (resolved with chrono-tz); Codex prints local time.
//! Pure: the caller passes the clock and the local zone.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use regex::Regex;
use std::sync::OnceLock;

/// The bottom rows searched for the limit line (it may wrap over two).
pub const LIMIT_ROWS: usize = 16;
/// A time-only reset that lies this far in the past is taken for tomorrow's.
const PAST_SLACK_MIN: i64 = 10;

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

fn month(name: &str) -> Option<u32> {
    let n = name.trim_end_matches('.').to_lowercase();
    let n: String = n.chars().take(3).collect();
    const TABLE: [(&str, u32); 22] = [
        ("jan", 1),
        ("ene", 1),
        ("feb", 2),
        ("fev", 2),
        ("mar", 3),
        ("apr", 4),
        ("abr", 4),
        ("may", 5),
        ("mai", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("ago", 8),
        ("sep", 9),
        ("set", 9),
        ("oct", 10),
        ("out", 10),
        ("nov", 11),
        ("dec", 12),
        ("dez", 12),
        ("dic", 12),
        ("ags", 8),
    ];
    TABLE.iter().find(|(k, _)| *k == n).map(|(_, v)| *v)
}

/// `9pm`, `12:50am`, `8:41 AM`, `11:52` (24 h).
fn clock(h: &str, m: Option<&str>, ampm: Option<&str>) -> Option<NaiveTime> {
    let mut h: u32 = h.parse().ok()?;
    let m: u32 = m.map_or(Some(0), |m| m.parse().ok())?;
    match ampm.map(str::to_ascii_lowercase).as_deref() {
        Some("am") if h == 12 => h = 0,
        Some("pm") if h < 12 => h += 12,
        Some("am" | "pm") | None => {}
        Some(_) => return None,
    }
    NaiveTime::from_hms_opt(h, m, 0)
}

/// What the screen says, before a zone is applied.
#[derive(Debug, Clone, PartialEq)]
struct Said {
    /// Month and day, and the year when given.
    date: Option<(Option<i32>, u32, u32)>,
    time: NaiveTime,
    /// An IANA zone name, when given.
    zone: Option<String>,
}

fn claude(text: &str) -> Option<Said> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let r = re(
        &RE,
        r"(?i)\bresets\s+(?:(?P<mon>[A-Za-z]{3,9})\s+(?P<day>\d{1,2})(?:,|\s+at)?\s+)?(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ap>am|pm)\b(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\))?",
    )?;
    let c = r.captures(text)?;
    let time = clock(&c["h"], c.name("m").map(|m| m.as_str()), Some(&c["ap"]))?;
    let date = match (c.name("mon"), c.name("day")) {
        (Some(mon), Some(day)) => Some((None, month(mon.as_str())?, day.as_str().parse().ok()?)),
        _ => None,
    };
    Some(Said {
        date,
        time,
        zone: c.name("zone").map(|z| z.as_str().to_string()),
    })
}

fn codex(text: &str) -> Option<Said> {
    static EN: OnceLock<Option<Regex>> = OnceLock::new();
    static LOCALIZED: OnceLock<Option<Regex>> = OnceLock::new();
    let en = re(
        &EN,
        r"(?i)\btry again at\s+(?:(?P<mon>[A-Za-z]{3,9})\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<year>\d{4}),?\s+)?(?P<h>\d{1,2}):(?P<m>\d{2})\s*(?P<ap>AM|PM)?",
    )?;
    if let Some(c) = en.captures(text) {
        let time = clock(&c["h"], Some(&c["m"]), c.name("ap").map(|a| a.as_str()))?;
        let date = match (c.name("mon"), c.name("day"), c.name("year")) {
            (Some(mon), Some(day), Some(y)) => Some((
                Some(y.as_str().parse().ok()?),
                month(mon.as_str())?,
                day.as_str().parse().ok()?,
            )),
            _ => None,
        };
        return Some(Said {
            date,
            time,
            zone: None,
        });
    }
    let loc = re(
        &LOCALIZED,
        r"(?i)\b(?P<day>\d{1,2})\s+de\s+(?P<mon>[a-z]{3,9})\.?\s+de\s+(?P<year>\d{4}),?\s+(?P<h>\d{1,2}):(?P<m>\d{2})",
    )?;
    let c = loc.captures(text)?;
    Some(Said {
        date: Some((
            Some(c["year"].parse().ok()?),
            month(&c["mon"])?,
            c["day"].parse().ok()?,
        )),
        time: clock(&c["h"], Some(&c["m"]), None)?,
        zone: None,
    })
}

fn resolve<Z: TimeZone>(z: &Z, said: &Said, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local_now = now.with_timezone(z).naive_local();
    let at = |d: NaiveDate| -> Option<DateTime<Utc>> {
        z.from_local_datetime(&NaiveDateTime::new(d, said.time))
            .earliest()
            .map(|t| t.with_timezone(&Utc))
    };
    let slack = Duration::minutes(PAST_SLACK_MIN);
    match said.date {
        Some((Some(y), m, d)) => at(NaiveDate::from_ymd_opt(y, m, d)?),
        Some((None, m, d)) => {
            let this = at(NaiveDate::from_ymd_opt(local_now.year(), m, d)?)?;
            if this + Duration::days(1) < now {
                at(NaiveDate::from_ymd_opt(local_now.year() + 1, m, d)?)
            } else {
                Some(this)
            }
        }
        None => {
            let today = at(local_now.date())?;
            if today + slack < now {
                at(local_now.date().succ_opt()?)
            } else {
                Some(today)
            }
        }
    }
}

/// When the limit named in `text` resets, if it says. A Claude time carries
/// its zone (an unknown zone name gives `None`); a Codex time is in `local`.
pub fn resets_at<L: TimeZone>(text: &str, now: DateTime<Utc>, local: &L) -> Option<DateTime<Utc>> {
    if let Some(said) = claude(text) {
        return match &said.zone {
            Some(name) if name.eq_ignore_ascii_case("utc") => resolve(&Utc, &said, now),
            Some(name) => {
                let tz: chrono_tz::Tz = name.parse().ok()?;
                resolve(&tz, &said, now)
            }
            None => resolve(local, &said, now),
        };
    }
    let said = codex(text)?;
    resolve(local, &said, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        // 2026-12-01 10:49 UTC = 02:49 in Los Angeles.
        Utc.with_ymd_and_hms(2026, 12, 1, 10, 49, 0).unwrap()
    }

    fn rfc(t: Option<DateTime<Utc>>) -> String {
        t.map(|t| t.to_rfc3339()).unwrap_or_default()
    }

    #[test]
    fn claude_time_only_is_the_next_one_in_its_zone() {
        let t = resets_at(
            "You've hit your session limit · resets 12:50am (America/Los_Angeles)",
            now(),
            &Utc,
        );
        // 02:49 in LA is past 00:50: tomorrow's, 08:50 UTC on Dec 2.
        assert_eq!(rfc(t), "2026-12-02T08:50:00+00:00");
        let t = resets_at(
            "You've hit your weekly limit · resets 3am (Europe/London)",
            now(),
            &Utc,
        );
        assert_eq!(rfc(t), "2026-12-02T03:00:00+00:00");
        let t = resets_at(
            "⎿  You've hit your limit · resets 12:48pm (UTC)",
            now(),
            &Utc,
        );
        assert_eq!(rfc(t), "2026-12-01T12:48:00+00:00");
    }

    #[test]
    fn claude_dates_without_a_year() {
        let t = resets_at(
            "You've hit your limit · resets Dec 3, 10:22am (America/Los_Angeles)",
            now(),
            &Utc,
        );
        assert_eq!(rfc(t), "2026-12-03T18:22:00+00:00");
        let t = resets_at(
            "You've hit your limit · resets May 5 at 9pm (America/New_York)",
            now(),
            &Utc,
        );
        assert_eq!(rfc(t), "2027-05-06T01:00:00+00:00");
        assert_eq!(resets_at("resets 3am (Mars/Olympus)", now(), &Utc), None);
    }

    #[test]
    fn codex_local_times_and_dates() {
        let la: chrono_tz::Tz = "America/Los_Angeles".parse().unwrap();
        let t = resets_at(
            "usage to purchase more credits or try again at Dec 3rd, 2026 6:22 PM.",
            now(),
            &Utc,
        );
        assert_eq!(rfc(t), "2026-12-03T18:22:00+00:00");
        let t = resets_at("or try again at Jun 18th, 2026 8:41 AM.", now(), &la);
        assert_eq!(rfc(t), "2026-06-18T15:41:00+00:00");
        let t = resets_at("or try again at 12:48 PM.", now(), &Utc);
        assert_eq!(rfc(t), "2026-12-01T12:48:00+00:00");
        let t = resets_at(
            "ou tente novamente em 10 de jul. de 2026, 11:52.",
            now(),
            &Utc,
        );
        assert_eq!(rfc(t), "2026-07-10T11:52:00+00:00");
        assert_eq!(resets_at("no time here", now(), &Utc), None);
    }
}
