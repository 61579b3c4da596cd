//! The account's usage, as the APIs report it on every answer: the
//! rate-limit response headers Claude Code turns into its status line's
//! `rate_limits` and Codex into its rollout's `token_count.rate_limits`.
//!
//! A script sends them only when it says so (`[usage]` for every answer, or
//! `usage = { … }` on a step); by default no such header is sent.

use serde::Deserialize;

/// Claude's five-hour and Codex's primary window, in minutes.
pub const SHORT_WINDOW_MINUTES: u32 = 300;
/// Claude's seven-day and Codex's secondary window, in minutes.
pub const LONG_WINDOW_MINUTES: u32 = 10_080;

/// `usage = { short = { … }, long = { … } }`: the account's two windows.
/// `short` is Claude's five-hour window and Codex's primary one; `long` is
/// Claude's seven-day window and Codex's secondary one.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub short: Option<Window>,
    #[serde(default)]
    pub long: Option<Window>,
}

/// One window's figures.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// How much of the window is used, 0–100.
    pub used_percent: f64,
    /// Seconds from the answer until the window resets (default: the window's length).
    #[serde(default)]
    pub resets_in_s: Option<u64>,
    /// The window's length (Codex's `window-minutes`; default 300 for
    /// `short`, 10080 for `long`).
    #[serde(default)]
    pub window_minutes: Option<u32>,
}

impl Window {
    fn minutes(&self, default: u32) -> u32 {
        self.window_minutes.unwrap_or(default)
    }

    fn resets_at(&self, now_s: i64, default_minutes: u32) -> i64 {
        let secs = self
            .resets_in_s
            .unwrap_or(u64::from(self.minutes(default_minutes)) * 60);
        now_s.saturating_add(i64::try_from(secs).unwrap_or(i64::MAX / 2))
    }

    /// The percentage, kept within 0–100 (a script's typo must not reach
    /// the agent as a nonsense figure).
    fn percent(&self) -> f64 {
        if self.used_percent.is_finite() {
            self.used_percent.clamp(0.0, 100.0)
        } else {
            0.0
        }
    }
}

type Headers = Vec<(String, String)>;

impl Usage {
    fn windows(&self) -> impl Iterator<Item = (&Window, u32, &'static str, &'static str)> {
        [
            self.short
                .as_ref()
                .map(|w| (w, SHORT_WINDOW_MINUTES, "5h", "primary")),
            self.long
                .as_ref()
                .map(|w| (w, LONG_WINDOW_MINUTES, "7d", "secondary")),
        ]
        .into_iter()
        .flatten()
    }

    /// The Anthropic Messages API's unified rate-limit headers on an
    /// accepted request: the overall `status` (`allowed`) and `reset`, and
    /// per window `-5h-`/`-7d-` `utilization` (a fraction, 0–1), `reset`
    /// (Unix seconds) and `status`.
    pub fn anthropic(&self, now_s: i64) -> Headers {
        let mut h: Headers = Vec::new();
        let mut first_reset = None;
        for (w, default, short, _) in self.windows() {
            let reset = w.resets_at(now_s, default);
            first_reset.get_or_insert(reset);
            let key = |k: &str| format!("anthropic-ratelimit-unified-{short}-{k}");
            h.push((key("utilization"), fraction(w.percent())));
            h.push((key("reset"), reset.to_string()));
            h.push((key("status"), "allowed".into()));
        }
        if let Some(reset) = first_reset {
            h.push((
                "anthropic-ratelimit-unified-status".into(),
                "allowed".into(),
            ));
            h.push((
                "anthropic-ratelimit-unified-reset".into(),
                reset.to_string(),
            ));
            let claim = if self.short.is_some() {
                "five_hour"
            } else {
                "seven_day"
            };
            h.push((
                "anthropic-ratelimit-unified-representative-claim".into(),
                claim.into(),
            ));
        }
        h
    }

    /// The OpenAI Responses API's (ChatGPT backend's) `x-codex-*` headers:
    /// per window `used-percent`, `window-minutes` and `reset-at` (Unix seconds).
    pub fn openai(&self, now_s: i64) -> Headers {
        let mut h: Headers = Vec::new();
        for (w, default, _, name) in self.windows() {
            let key = |k: &str| format!("x-codex-{name}-{k}");
            h.push((key("used-percent"), format!("{:.1}", w.percent())));
            h.push((key("window-minutes"), w.minutes(default).to_string()));
            h.push((key("reset-at"), w.resets_at(now_s, default).to_string()));
        }
        h
    }
}

/// A percentage as the fraction Anthropic sends (`0.42`), without float noise.
fn fraction(percent: f64) -> String {
    let s = format!("{:.4}", percent / 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() { "0".into() } else { s.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(h: &'a Headers, k: &str) -> Option<&'a str> {
        h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    fn usage() -> Usage {
        Usage {
            short: Some(Window {
                used_percent: 42.0,
                resets_in_s: Some(600),
                window_minutes: None,
            }),
            long: Some(Window {
                used_percent: 7.5,
                resets_in_s: None,
                window_minutes: None,
            }),
        }
    }

    #[test]
    fn anthropic_headers_carry_utilization_as_a_fraction_and_resets() {
        let h = usage().anthropic(1_000);
        assert_eq!(
            get(&h, "anthropic-ratelimit-unified-5h-utilization"),
            Some("0.42")
        );
        assert_eq!(
            get(&h, "anthropic-ratelimit-unified-5h-reset"),
            Some("1600")
        );
        assert_eq!(
            get(&h, "anthropic-ratelimit-unified-7d-utilization"),
            Some("0.075")
        );
        assert_eq!(
            get(&h, "anthropic-ratelimit-unified-7d-reset"),
            Some((1_000 + 10_080 * 60).to_string().as_str())
        );
        assert_eq!(
            get(&h, "anthropic-ratelimit-unified-status"),
            Some("allowed")
        );
        assert_eq!(get(&h, "anthropic-ratelimit-unified-reset"), Some("1600"));
    }

    #[test]
    fn openai_headers_name_the_primary_and_secondary_windows() {
        let h = usage().openai(1_000);
        assert_eq!(get(&h, "x-codex-primary-used-percent"), Some("42.0"));
        assert_eq!(get(&h, "x-codex-primary-window-minutes"), Some("300"));
        assert_eq!(get(&h, "x-codex-primary-reset-at"), Some("1600"));
        assert_eq!(get(&h, "x-codex-secondary-used-percent"), Some("7.5"));
        assert_eq!(get(&h, "x-codex-secondary-window-minutes"), Some("10080"));
    }

    #[test]
    fn no_windows_no_headers_and_out_of_range_is_clamped() {
        assert!(Usage::default().anthropic(0).is_empty());
        assert!(Usage::default().openai(0).is_empty());
        let u = Usage {
            short: Some(Window {
                used_percent: 250.0,
                ..Default::default()
            }),
            long: None,
        };
        let h = u.anthropic(0);
        assert_eq!(
            get(&h, "anthropic-ratelimit-unified-5h-utilization"),
            Some("1")
        );
        assert_eq!(
            get(&h, "anthropic-ratelimit-unified-representative-claim"),
            Some("five_hour")
        );
        assert_eq!(
            get(&u.openai(0), "x-codex-primary-used-percent"),
            Some("100.0")
        );
    }
}
