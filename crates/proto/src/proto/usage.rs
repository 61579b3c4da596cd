//! What a pane's agent has used, summed across its sessions (docs/agents.md,
//! "What a task cost"). An agent reports its session's running totals
//! ([`Usage`]: Claude's status line, Codex's rollout `token_count`), and a
//! new session (a respawn, `/clear`, another generation) counts again from
//! zero; a [`Tally`] keeps the finished sessions' last totals beside the
//! current session's, so the pane's figure only grows. A task's figure is
//! the tally's growth over its jobs ([`Usage::since`]); a run's, the sum
//! over its tasks ([`Usage::plus`]).
//!
//! A figure never reported is absent (`None`), never zero: an agent that
//! reports no cost has no cost, not a free one.

pub use super::signal::Usage;

impl Usage {
    /// Whether no figure is known.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// Both added, field by field; a field is known when either side knows it.
    pub fn plus(&self, o: &Usage) -> Usage {
        fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                _ => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            }
        }
        Usage {
            input_tokens: add(self.input_tokens, o.input_tokens),
            output_tokens: add(self.output_tokens, o.output_tokens),
            cached_tokens: add(self.cached_tokens, o.cached_tokens),
            cost_usd: match (self.cost_usd, o.cost_usd) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            },
        }
    }

    /// What was added since `base` (a total taken earlier), field by field:
    /// a field this figure does not know stays unknown; a field that went
    /// back (it cannot, for a tally) counts as nothing added.
    pub fn since(&self, base: &Usage) -> Usage {
        let sub = |a: Option<u64>, b: Option<u64>| a.map(|a| a.saturating_sub(b.unwrap_or(0)));
        Usage {
            input_tokens: sub(self.input_tokens, base.input_tokens),
            output_tokens: sub(self.output_tokens, base.output_tokens),
            cached_tokens: sub(self.cached_tokens, base.cached_tokens),
            cost_usd: self
                .cost_usd
                .map(|c| (c - base.cost_usd.unwrap_or(0.0)).max(0.0)),
        }
    }

    /// Whether any figure is below `earlier`'s: the agent counts from zero
    /// again (a new session it did not name).
    fn went_back(&self, earlier: &Usage) -> bool {
        let back = |a: Option<u64>, b: Option<u64>| matches!((a, b), (Some(a), Some(b)) if a < b);
        back(self.input_tokens, earlier.input_tokens)
            || back(self.output_tokens, earlier.output_tokens)
            || back(self.cached_tokens, earlier.cached_tokens)
            || matches!((self.cost_usd, earlier.cost_usd), (Some(a), Some(b)) if a + 1e-9 < b)
    }

    /// `self` over `older`: each field this figure gives, else `older`'s
    /// (a status line without its cost does not forget the cost).
    fn over(&self, older: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.or(older.input_tokens),
            output_tokens: self.output_tokens.or(older.output_tokens),
            cached_tokens: self.cached_tokens.or(older.cached_tokens),
            cost_usd: self.cost_usd.or(older.cost_usd),
        }
    }

    /// A short line for people: `12.3k in · 4.5k out · $0.42`, the known
    /// figures only; `not reported` when none is.
    pub fn brief(&self) -> String {
        let n = |v: u64| {
            if v >= 1_000_000 {
                format!("{:.1}M", v as f64 / 1e6)
            } else if v >= 10_000 {
                format!("{:.1}k", v as f64 / 1e3)
            } else {
                v.to_string()
            }
        };
        let mut parts = Vec::new();
        if let Some(v) = self.input_tokens {
            parts.push(format!("{} in", n(v)));
        }
        if let Some(v) = self.output_tokens {
            parts.push(format!("{} out", n(v)));
        }
        if let Some(c) = self.cost_usd {
            parts.push(format!("${c:.2}"));
        }
        if parts.is_empty() {
            "not reported".into()
        } else {
            parts.join(" · ")
        }
    }
}

/// The session a pane's agent counts in now.
#[derive(Debug, Clone, PartialEq)]
struct Current {
    generation: u64,
    session: Option<String>,
    totals: Usage,
}

/// A pane's usage across its sessions: the finished sessions' last totals
/// plus the current session's. Bounded: one session id and two figures,
/// however many signals came.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    finished: Usage,
    current: Option<Current>,
    sessions: u32,
}

impl Tally {
    /// Take a session's running totals `u`, reported by the pane's
    /// `generation` for `session` (when named). Another generation, another
    /// named session, or a figure below the last one (a session that
    /// counts from zero again without naming itself) starts a new session.
    pub fn take(&mut self, generation: u64, session: Option<&str>, u: &Usage) {
        if u.is_empty() {
            return;
        }
        if let Some(c) = self.current.as_mut() {
            let other = c.generation != generation
                || matches!((c.session.as_deref(), session), (Some(a), Some(b)) if a != b)
                || u.went_back(&c.totals);
            if !other {
                c.totals = u.over(&c.totals);
                if c.session.is_none() {
                    c.session = session.map(str::to_string);
                }
                return;
            }
            self.finished = self.finished.plus(&c.totals);
        }
        self.current = Some(Current {
            generation,
            session: session.map(str::to_string),
            totals: *u,
        });
        self.sessions = self.sessions.saturating_add(1);
    }

    /// The pane's total, `None` when its agent never reported usage.
    pub fn total(&self) -> Option<Usage> {
        let cur = self.current.as_ref().map(|c| c.totals).unwrap_or_default();
        let t = self.finished.plus(&cur);
        (!t.is_empty()).then_some(t)
    }

    /// How many sessions reported usage.
    pub fn sessions(&self) -> u32 {
        self.sessions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(i: u64, o: u64, c: Option<f64>) -> Usage {
        Usage {
            input_tokens: Some(i),
            output_tokens: Some(o),
            cached_tokens: None,
            cost_usd: c,
        }
    }

    #[test]
    fn a_session_s_running_totals_replace_each_other() {
        let mut t = Tally::default();
        assert_eq!(t.total(), None, "nothing reported is absent, not zero");
        t.take(1, Some("s1"), &u(100, 10, Some(0.01)));
        t.take(1, Some("s1"), &u(250, 40, Some(0.03)));
        assert_eq!(t.total(), Some(u(250, 40, Some(0.03))));
        assert_eq!(t.sessions(), 1);
    }

    #[test]
    fn a_new_session_or_generation_adds_to_the_finished_ones() {
        let mut t = Tally::default();
        t.take(1, Some("s1"), &u(250, 40, Some(0.03)));
        // /clear: another session id, counting from zero.
        t.take(1, Some("s2"), &u(10, 1, Some(0.001)));
        assert_eq!(t.total(), Some(u(260, 41, Some(0.031))));
        // A respawn: the next generation, same session id even.
        t.take(2, Some("s2"), &u(5, 5, Some(0.002)));
        assert_eq!(t.total(), Some(u(265, 46, Some(0.033))));
        // A session that names none and counts again from zero.
        t.take(2, None, &u(1, 1, Some(0.001)));
        assert_eq!(t.total(), Some(u(266, 47, Some(0.034))));
        assert_eq!(t.sessions(), 4);
        // An unnamed figure after a named one is the same session growing.
        t.take(2, None, &u(3, 2, Some(0.002)));
        assert_eq!(t.total(), Some(u(268, 48, Some(0.035))));
        assert_eq!(t.sessions(), 4);
    }

    #[test]
    fn missing_fields_stay_unknown_or_keep_the_last_value() {
        let mut t = Tally::default();
        // Codex: tokens, no cost.
        t.take(1, Some("th"), &u(500, 20, None));
        let total = t.total().unwrap_or_default();
        assert_eq!(total.cost_usd, None, "no cost reported is no cost, not $0");
        // A status line without the cost block keeps the cost it had.
        let mut t = Tally::default();
        t.take(1, Some("s"), &u(10, 1, Some(0.5)));
        t.take(
            1,
            Some("s"),
            &Usage {
                input_tokens: Some(20),
                ..Usage::default()
            },
        );
        assert_eq!(t.total(), Some(u(20, 1, Some(0.5))));
        // An empty figure changes nothing.
        t.take(3, Some("x"), &Usage::default());
        assert_eq!(t.sessions(), 1);
    }

    #[test]
    fn since_and_plus_keep_unknown_apart_from_zero() {
        let base = u(100, 10, None);
        let now = u(160, 15, Some(0.2));
        assert_eq!(now.since(&base), u(60, 5, Some(0.2)));
        assert_eq!(now.since(&now), u(0, 0, Some(0.0)));
        assert_eq!(base.since(&now), u(0, 0, None), "never below zero");
        let sum = u(1, 2, None).plus(&u(3, 4, Some(0.5)));
        assert_eq!(sum, u(4, 6, Some(0.5)));
        assert_eq!(Usage::default().plus(&Usage::default()), Usage::default());
        assert_eq!(Usage::default().brief(), "not reported");
        assert_eq!(
            u(12_345, 42, Some(0.4219)).brief(),
            "12.3k in · 42 out · $0.42"
        );
    }
}
