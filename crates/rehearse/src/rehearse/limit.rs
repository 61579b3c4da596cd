//! A scripted usage limit: the mock answers the way each API does when the
//! account is at its limit (HTTP 429 with the API's rate-limit headers and
//! error body), so the real TUIs draw their real limit screens.

use serde::Deserialize;
use serde_json::{Value, json};

/// Seconds until the limit resets when a step does not say.
pub const DEFAULT_RESETS_IN_S: u64 = 3 * 3600;

/// `limit = { … }` on a step: answer this request with a 429.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Seconds from the request until the limit resets.
    #[serde(default)]
    pub resets_in_s: Option<u64>,
    /// Claude's limit window: `five_hour` (a session limit, the default) or `seven_day`.
    #[serde(default)]
    pub window: Option<String>,
    /// Codex's plan type in the error body (default `plus`).
    #[serde(default)]
    pub plan: Option<String>,
}

/// A 429 answer: headers and a JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// The error body.
    pub body: Value,
}

impl Limit {
    fn resets_at(&self, now_s: i64) -> i64 {
        let secs = self.resets_in_s.unwrap_or(DEFAULT_RESETS_IN_S);
        now_s.saturating_add(i64::try_from(secs).unwrap_or(i64::MAX / 2))
    }

    /// The Anthropic Messages API at a subscription limit: `rate_limit_error`,
    /// `retry-after`, and the `anthropic-ratelimit-unified-*` headers Claude
    /// Code reads its "You've hit your … limit · resets …" line from.
    pub fn anthropic(&self, now_s: i64) -> Rejection {
        let reset = self.resets_at(now_s);
        let window = self.window.as_deref().unwrap_or("five_hour");
        let short = if window == "seven_day" { "7d" } else { "5h" };
        let other = if short == "5h" { "7d" } else { "5h" };
        let h = |k: &str, v: String| (k.to_string(), v);
        let rfc = chrono::DateTime::from_timestamp(reset, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default();
        Rejection {
            headers: vec![
                h("retry-after", (reset - now_s).max(0).to_string()),
                h("x-should-retry", "false".into()),
                h("request-id", "req_mock_limit".into()),
                h("anthropic-ratelimit-unified-status", "rejected".into()),
                h("anthropic-ratelimit-unified-reset", reset.to_string()),
                h(
                    "anthropic-ratelimit-unified-representative-claim",
                    window.into(),
                ),
                h(
                    &format!("anthropic-ratelimit-unified-{short}-status"),
                    "rejected".into(),
                ),
                h(
                    &format!("anthropic-ratelimit-unified-{short}-reset"),
                    reset.to_string(),
                ),
                h(
                    &format!("anthropic-ratelimit-unified-{short}-utilization"),
                    "1.0".into(),
                ),
                h(
                    &format!("anthropic-ratelimit-unified-{other}-status"),
                    "allowed".into(),
                ),
                h(
                    "anthropic-ratelimit-unified-overage-status",
                    "rejected".into(),
                ),
                h(
                    "anthropic-ratelimit-unified-fallback-percentage",
                    "0.5".into(),
                ),
                h("anthropic-ratelimit-requests-limit", "50".into()),
                h("anthropic-ratelimit-requests-remaining", "0".into()),
                h("anthropic-ratelimit-requests-reset", rfc),
            ],
            body: json!({"type": "error", "error": {"type": "rate_limit_error",
                "message": "This request would exceed your account's rate limit. Please try again later."}}),
        }
    }

    /// The OpenAI Responses API (ChatGPT backend) at a usage limit:
    /// `usage_limit_reached` with `plan_type` and `resets_at`, plus the
    /// `x-codex-*` rate-limit headers.
    pub fn openai(&self, now_s: i64) -> Rejection {
        let reset = self.resets_at(now_s);
        let h = |k: &str, v: String| (k.to_string(), v);
        let left = (reset - now_s).max(0);
        Rejection {
            headers: vec![
                h("retry-after", left.to_string()),
                h("x-request-id", "req_mock_limit".into()),
                h("x-codex-primary-used-percent", "100.0".into()),
                h("x-codex-primary-window-minutes", "300".into()),
                h("x-codex-primary-reset-after-seconds", left.to_string()),
                h("x-codex-primary-reset-at", reset.to_string()),
                h("x-codex-secondary-used-percent", "40.0".into()),
                h("x-codex-secondary-window-minutes", "10080".into()),
                h("x-ratelimit-limit-requests", "50".into()),
                h("x-ratelimit-remaining-requests", "0".into()),
                h("x-ratelimit-reset-requests", format!("{left}s")),
            ],
            body: json!({"error": {"type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": self.plan.as_deref().unwrap_or("plus"),
                "resets_at": reset, "resets_in_seconds": left}}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_rejection_names_the_window_and_reset() {
        let l = Limit {
            resets_in_s: Some(60),
            ..Default::default()
        };
        let r = l.anthropic(1_000);
        let get = |k: &str| {
            r.headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("anthropic-ratelimit-unified-status"), Some("rejected"));
        assert_eq!(get("anthropic-ratelimit-unified-reset"), Some("1060"));
        assert_eq!(
            get("anthropic-ratelimit-unified-5h-status"),
            Some("rejected")
        );
        assert_eq!(get("retry-after"), Some("60"));
        assert_eq!(r.body["error"]["type"], "rate_limit_error");
    }

    #[test]
    fn openai_rejection_is_usage_limit_reached() {
        let r = Limit::default().openai(0);
        assert_eq!(r.body["error"]["type"], "usage_limit_reached");
        assert_eq!(r.body["error"]["resets_at"], DEFAULT_RESETS_IN_S as i64);
        assert_eq!(r.body["error"]["plan_type"], "plus");
    }
}
