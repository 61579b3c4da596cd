//! What a pane's agent has used, summed across its sessions (docs/agents.md,
//! "What a task cost"). An agent reports its session's running totals
//! ([`Usage`]: Claude's status line, Codex's rollout `token_count`), and a
//! new session (a respawn, `/clear`, another generation) counts again from
//! zero (Claude Code 2.1.197 keeps its cost across `/clear`); a [`Tally`]
//! keeps, per figure, what the finished counts came to beside the current
//! count, so the pane's figure only grows. A task's figure is
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

    /// A short line for people: `12.3k in · 4.5k out · $0.42` (a cost under
    /// a cent to 4 places: `$0.0004`), the known figures only; `not
    /// reported` when none is.
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
            // A cent or more to the cent; less (a short turn) to 4 places.
            if c == 0.0 || c >= 0.01 {
                parts.push(format!("${c:.2}"));
            } else {
                parts.push(format!("${c:.4}"));
            }
        }
        if parts.is_empty() {
            "not reported".into()
        } else {
            parts.join(" · ")
        }
    }
}

/// One counter's tally: what its finished runs counted, and its last value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counter<T> {
    finished: T,
    last: Option<T>,
    /// Whether it was ever reported (a figure never reported stays absent).
    seen: bool,
}

impl<T: Copy + PartialOrd + std::ops::Add<Output = T> + Default> Counter<T> {
    /// Its count ended (a new process, a new session): it starts again.
    fn close(&mut self) {
        if let Some(l) = self.last.take() {
            self.finished = self.finished + l;
        }
    }

    /// Take its next value: below the last one, it counted from zero again.
    fn take(&mut self, v: Option<T>) {
        let Some(v) = v else { return };
        if self.last.is_some_and(|l| v < l) {
            self.close();
        }
        self.last = Some(v);
        self.seen = true;
    }

    fn total(&self) -> Option<T> {
        self.seen
            .then(|| self.finished + self.last.unwrap_or_default())
    }
}

/// A pane's usage across its sessions: per figure, what the finished
/// counts came to plus the current count. A new generation (another
/// process) starts every figure again; a new session named starts the token
/// counts again (each session has its own context) and the cost only if it
/// went below its last value (Claude Code 2.1.197 counts the process's cost
/// across `/clear`, 2.1.332 starts it at $0); within a session a figure
/// below its last value counted from zero again. Bounded: one session id
/// and eight numbers, however many signals came.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    input: Counter<u64>,
    output: Counter<u64>,
    cached: Counter<u64>,
    cost: Counter<f64>,
    /// The generation and session counting now (`None` before any figure).
    key: Option<(u64, Option<String>)>,
    sessions: u32,
}

impl Tally {
    /// Take a session's running totals `u`, reported by the pane's
    /// `generation` for `session` (when named).
    pub fn take(&mut self, generation: u64, session: Option<&str>, u: &Usage) {
        if u.is_empty() {
            return;
        }
        let (new_generation, new_session) = match &self.key {
            None => (true, true),
            Some((g, s)) => (
                *g != generation,
                matches!((s.as_deref(), session), (Some(a), Some(b)) if a != b),
            ),
        };
        if new_generation || new_session {
            self.input.close();
            self.output.close();
            self.cached.close();
            if new_generation {
                self.cost.close();
            }
            self.key = Some((generation, session.map(str::to_string)));
            self.sessions = self.sessions.saturating_add(1);
        } else if let Some((_, s @ None)) = self.key.as_mut() {
            *s = session.map(str::to_string);
        }
        self.input.take(u.input_tokens);
        self.output.take(u.output_tokens);
        self.cached.take(u.cached_tokens);
        self.cost.take(u.cost_usd);
    }

    /// The pane's total, `None` when its agent never reported usage.
    pub fn total(&self) -> Option<Usage> {
        let t = Usage {
            input_tokens: self.input.total(),
            output_tokens: self.output.total(),
            cached_tokens: self.cached.total(),
            cost_usd: self.cost.total(),
        };
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
        // A count that goes back without a session named started again.
        t.take(2, None, &u(1, 1, Some(0.001)));
        assert_eq!(t.total(), Some(u(266, 47, Some(0.034))));
        // An unnamed figure after a named one is the same session growing.
        t.take(2, None, &u(3, 2, Some(0.002)));
        assert_eq!(t.total(), Some(u(268, 48, Some(0.035))));
        assert_eq!(t.sessions(), 3);
    }

    #[test]
    fn a_cost_that_goes_on_across_a_clear_is_counted_once() {
        // Claude Code 2.1.197, as its status line said it: `/clear` starts
        // the token counts again, not the process's cost.
        let mut t = Tally::default();
        t.take(1, Some("s1"), &u(0, 0, Some(0.0)));
        t.take(1, Some("s1"), &u(12, 7, Some(0.000235)));
        t.take(1, Some("s2"), &u(0, 0, Some(0.000235)));
        t.take(1, Some("s2"), &u(12, 7, Some(0.00047)));
        let total = t.total().unwrap_or_default();
        assert_eq!(
            (total.input_tokens, total.output_tokens),
            (Some(24), Some(14))
        );
        assert!(
            (total.cost_usd.unwrap_or(0.0) - 0.00047).abs() < 1e-12,
            "{total:?}"
        );
        // 2.1.332 starts the cost at $0 with the new session.
        let mut t = Tally::default();
        t.take(1, Some("s1"), &u(12, 7, Some(0.000188)));
        t.take(1, Some("s2"), &u(0, 0, Some(0.0)));
        t.take(1, Some("s2"), &u(12, 7, Some(0.000188)));
        let total = t.total().unwrap_or_default();
        assert!(
            (total.cost_usd.unwrap_or(0.0) - 0.000376).abs() < 1e-12,
            "{total:?}"
        );
        assert_eq!(t.sessions(), 2);
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
        // A figure reported as zero is known: zero, not absent.
        let mut t = Tally::default();
        t.take(1, None, &u(0, 0, Some(0.0)));
        t.take(
            2,
            None,
            &Usage {
                input_tokens: Some(5),
                ..Usage::default()
            },
        );
        assert_eq!(t.total(), Some(u(5, 0, Some(0.0))));
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
