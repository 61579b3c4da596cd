//! Lane autotune (`--lane-autotune`, `LOOP.md` "Lane autotune"): how many
//! tasks the run keeps in flight, from the machine's load, the lanes parked
//! at a usage limit and the recent failures — one step at a time, within 1
//! and the charter's `lanes:` cap. A pure decision; the runner records each
//! change in `DECISIONS.md` and applies it to the next start. Off, nothing
//! about the run changes.

/// Load per core at or above which the run sheds a task.
pub const HIGH_LOAD: f64 = 1.5;
/// Load per core under which the run may take another task.
pub const LOW_LOAD: f64 = 0.7;
/// Recent outcomes looked at for the fail rate.
pub const WINDOW: usize = 4;
/// Fewest outcomes in the window before the fail rate counts.
pub const MIN_OUTCOMES: usize = 2;
/// Outcomes between two changes.
pub const COOLDOWN: u32 = 2;

/// What the tuner sees.
#[derive(Debug, Clone, PartialEq)]
pub struct Signals {
    /// Tasks in flight allowed now (the task pool).
    pub current: usize,
    /// The charter's `lanes:` cap.
    pub cap: usize,
    /// The machine's 1-minute load per core (`None`: unknown).
    pub load_per_core: Option<f64>,
    /// Lanes parked at a usage limit now.
    pub limited: usize,
    /// The latest outcomes, oldest first: true = a failure (a park).
    pub recent: Vec<bool>,
    /// Outcomes since the last change.
    pub since_change: u32,
}

/// The tuner's answer: the pool to use and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tune {
    pub lanes: usize,
    pub why: String,
}

fn fail_rate(recent: &[bool]) -> Option<f64> {
    let w = &recent[recent.len().saturating_sub(WINDOW)..];
    (w.len() >= MIN_OUTCOMES).then(|| w.iter().filter(|f| **f).count() as f64 / w.len() as f64)
}

/// The task pool for the next start (pure).
pub fn lanes(s: &Signals) -> Tune {
    let cap = s.cap.max(1);
    let cur = s.current.clamp(1, cap);
    let keep = |why: &str| Tune {
        lanes: cur,
        why: why.to_string(),
    };
    if s.current > cap {
        return Tune {
            lanes: cap,
            why: format!("the charter's cap is {cap}"),
        };
    }
    let load = s.load_per_core;
    let rate = fail_rate(&s.recent);
    // Shedding is never held back by the cooldown: the machine comes first.
    if let Some(l) = load.filter(|l| *l >= HIGH_LOAD) {
        return Tune {
            lanes: (cur - 1).max(1),
            why: format!("load {l:.2} per core ≥ {HIGH_LOAD}"),
        };
    }
    if s.since_change < COOLDOWN {
        return keep("cooling down after the last change");
    }
    if let Some(r) = rate.filter(|r| *r > 0.5) {
        return Tune {
            lanes: (cur - 1).max(1),
            why: format!("{:.0} % of the last outcomes failed", r * 100.0),
        };
    }
    if s.limited > 0 {
        return keep("a lane is parked at a usage limit: more lanes would meet it too");
    }
    match (load, rate) {
        (Some(l), Some(r)) if l < LOW_LOAD && r <= 0.25 && cur < cap => Tune {
            lanes: cur + 1,
            why: format!(
                "load {l:.2} per core < {LOW_LOAD} and {:.0} % failed",
                r * 100.0
            ),
        },
        (None, _) => keep("the load is unknown"),
        _ => keep("steady"),
    }
}

/// The machine's 1-minute load per core (Linux `/proc/loadavg`; `None`
/// elsewhere or when unreadable).
pub fn load_per_core() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let one: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cores = std::thread::available_parallelism().ok()?.get() as f64;
    Some(one / cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(
        current: usize,
        load: Option<f64>,
        limited: usize,
        recent: &[bool],
        since: u32,
    ) -> Signals {
        Signals {
            current,
            cap: 4,
            load_per_core: load,
            limited,
            recent: recent.to_vec(),
            since_change: since,
        }
    }

    #[test]
    fn a_table_of_cases() {
        let ok = [false, false];
        let cases: &[(Signals, usize, &str)] = &[
            (
                s(2, Some(0.2), 0, &ok, 2),
                3,
                "idle machine, no failures: one more",
            ),
            (s(4, Some(0.2), 0, &ok, 2), 4, "never past the cap"),
            (
                s(6, Some(0.2), 0, &ok, 9),
                4,
                "a pool past the cap is cut to it",
            ),
            (
                s(3, Some(1.6), 0, &ok, 0),
                2,
                "high load sheds, even cooling down",
            ),
            (s(1, Some(3.0), 0, &ok, 5), 1, "never under one"),
            (
                s(3, Some(0.2), 0, &[false, true, true, true], 2),
                2,
                "75 % failed: one fewer",
            ),
            (
                s(3, Some(0.2), 0, &[true, false], 2),
                3,
                "50 % is not above half",
            ),
            (
                s(2, Some(0.2), 0, &[true], 2),
                2,
                "one outcome is too few to grow or shed",
            ),
            (s(2, Some(0.2), 1, &ok, 2), 2, "a limit holds the pool"),
            (s(2, Some(0.2), 0, &ok, 1), 2, "cooldown"),
            (s(2, None, 0, &ok, 2), 2, "unknown load: no growth"),
            (s(2, Some(1.0), 0, &ok, 2), 2, "middling load: steady"),
            (
                s(2, Some(0.2), 0, &[true, true, false, false, false], 2),
                3,
                "only the last four count",
            ),
        ];
        for (sig, want, why) in cases {
            let t = lanes(sig);
            assert_eq!(t.lanes, *want, "{why}: {sig:?} → {t:?}");
            assert!(!t.why.is_empty());
        }
    }
}
