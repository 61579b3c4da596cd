//! Privacy for the event log (docs/registry.md, docs/architecture.md): what may not be written, as named
//! rules. [`Redactor::redact_value`] scrubs a record before it is written;
//! [`Redactor::audit_value`] finds what should have been scrubbed (the gate's
//! privacy audit). A string is clean exactly when redaction leaves it unchanged.

use regex::Regex;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, RwLock};

/// What replaces a redacted value.
pub const REDACTED: &str = "[redacted]";
/// What replaces an omitted body.
pub const OMITTED: &str = "[omitted]";

/// Keys whose values are prompt or response bodies: never logged.
const BODY_KEYS: &[&str] = &[
    "prompt",
    "response",
    "body",
    "prompt_body",
    "response_body",
    "transcript",
];
/// Key fragments whose values are secrets.
const SECRET_KEY_PARTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "authorization",
    "credential",
];
/// Keys whose object values are environments.
const ENV_KEYS: &[&str] = &["env", "environment"];

struct Rule {
    name: &'static str,
    re: Regex,
    replace: &'static str,
}

fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let mk = |name, re: &str, replace| Rule {
            name,
            // The patterns are constants; a typo is caught by the unit tests.
            re: Regex::new(re).unwrap_or_else(|e| panic!("bad redaction rule {name}: {e}")),
            replace,
        };
        vec![
            mk("openai-key", r"\bsk-[A-Za-z0-9_-]{16,}", "[redacted:sk]"),
            mk(
                "github-token",
                r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
                "[redacted:github]",
            ),
            mk(
                "slack-token",
                r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
                "[redacted:slack]",
            ),
            mk(
                "bearer-token",
                r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}",
                "Bearer [redacted]",
            ),
            mk(
                "env-value",
                r#"\b([A-Z][A-Z0-9_]+)=[^\s"'\[][^\s"']*"#,
                "$1=[redacted]",
            ),
        ]
    })
}

/// What replaces a value drover was given with `--env`/`--env-file`.
pub const GIVEN_REDACTED: &str = "[redacted:env]";
/// Given values shorter than this are not looked for in text: they would
/// hit ordinary words and numbers.
pub const MIN_GIVEN_LEN: usize = 6;

fn given() -> &'static RwLock<Vec<String>> {
    static GIVEN: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    GIVEN.get_or_init(|| RwLock::new(Vec::new()))
}

/// Remember environment values this process was given for its lanes or
/// panes (`--env K=V`, `--env K`, `--env-file`): from now on every copy it
/// shows or stores is redacted of them ([`redact_secrets`], [`redact_shown`],
/// [`Redactor::redact_str`]). A value shorter than [`MIN_GIVEN_LEN`] or an
/// absolute path is not remembered.
pub fn remember_given<I, S>(values: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let Ok(mut g) = given().write() else { return };
    for v in values {
        let v = v.as_ref().trim();
        if v.len() >= MIN_GIVEN_LEN && !v.starts_with('/') && !g.iter().any(|x| x == v) {
            g.push(v.to_string());
        }
    }
    // The longest first, so a value that holds another goes whole.
    g.sort_by_key(|v| std::cmp::Reverse(v.len()));
}

/// Replace every remembered value in `s`; whether one was there.
fn redact_given(s: &str) -> (String, bool) {
    let Ok(g) = given().read() else {
        return (s.to_string(), false);
    };
    let mut out = s.to_string();
    let mut hit = false;
    for v in g.iter() {
        if out.contains(v.as_str()) {
            hit = true;
            out = out.replace(v.as_str(), GIVEN_REDACTED);
        }
    }
    (out, hit)
}

/// The one redaction of every copy drover shows or stores (its decisions,
/// close-out, run and state files, gate logs, what it prints, its logs and
/// records), never of what it lands: the values it was given and the secret
/// rules (keys, tokens, bearer credentials).
pub fn redact_shown(s: &str) -> String {
    redact_secrets(s).0
}

/// [`redact_shown`] of bytes (a log): `None` when nothing in them is secret,
/// so a clean log keeps its bytes exactly.
pub fn redact_shown_bytes(b: &[u8]) -> Option<Vec<u8>> {
    let text = String::from_utf8_lossy(b);
    let (out, fired) = redact_secrets(&text);
    (!fired.is_empty()).then(|| out.into_bytes())
}

/// Redact only the secret rules (keys, tokens) and the given values, not
/// env assignments or paths: for text that is code, such as a candidate
/// patch, where `FOO=bar` and `/usr/bin/env` are content. Returns the names
/// of the rules that fired.
pub fn redact_secrets(s: &str) -> (String, Vec<&'static str>) {
    let mut fired = Vec::new();
    let (mut out, hit) = redact_given(s);
    if hit {
        fired.push("given-env-value");
    }
    for r in rules().iter().filter(|r| r.name != "env-value") {
        if r.re.is_match(&out) {
            fired.push(r.name);
            out = r.re.replace_all(&out, r.replace).into_owned();
        }
    }
    (out, fired)
}

fn path_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r#"(^|[\s"'=:,(\[{<])((?:~/|/)[A-Za-z0-9._@+%-]+(?:/[A-Za-z0-9._@+%-]*)*)"#)
            .unwrap_or_else(|e| panic!("bad path rule: {e}"))
    })
}

/// A privacy finding: which rule, where; never the value itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule's name, e.g. `github-token`.
    pub rule: &'static str,
    /// Where: a JSON pointer-ish field path, e.g. `detail.cmd`.
    pub field: String,
}

/// Redacts secrets and paths outside the allowed roots.
#[derive(Debug, Clone)]
pub struct Redactor {
    allowed_roots: Vec<PathBuf>,
}

impl Redactor {
    /// Absolute paths under `allowed_roots` (the state dir and the worktrees) may stay.
    pub fn new(allowed_roots: impl IntoIterator<Item = PathBuf>) -> Redactor {
        Redactor {
            allowed_roots: allowed_roots.into_iter().collect(),
        }
    }

    fn path_allowed(&self, p: &str) -> bool {
        !p.starts_with('~')
            && self
                .allowed_roots
                .iter()
                .any(|r| Path::new(p).starts_with(r))
    }

    /// Redact one string; returns the names of the rules that fired.
    pub fn redact_str(&self, s: &str) -> (String, Vec<&'static str>) {
        let mut fired = Vec::new();
        let (mut out, hit) = redact_given(s);
        if hit {
            fired.push("given-env-value");
        }
        for r in rules() {
            if r.re.is_match(&out) {
                fired.push(r.name);
                out = r.re.replace_all(&out, r.replace).into_owned();
            }
        }
        let mut path_fired = false;
        let replaced = path_re().replace_all(&out, |c: &regex::Captures<'_>| {
            let p = &c[2];
            if self.path_allowed(p) {
                c[0].to_string()
            } else {
                path_fired = true;
                format!("{}[path]", &c[1])
            }
        });
        let replaced = replaced.into_owned();
        if path_fired {
            fired.push("path-outside-state");
            out = replaced;
        }
        (out, fired)
    }

    /// Redact a JSON value in place; returns the findings.
    pub fn redact_value(&self, v: &mut Value) -> Vec<Finding> {
        let mut found = Vec::new();
        self.walk(v, "", &mut found);
        found
    }

    /// The findings redaction would make, without changing anything.
    pub fn audit_value(&self, v: &Value) -> Vec<Finding> {
        let mut copy = v.clone();
        self.redact_value(&mut copy)
    }

    fn walk(&self, v: &mut Value, at: &str, found: &mut Vec<Finding>) {
        match v {
            Value::String(s) => {
                let (out, fired) = self.redact_str(s);
                for rule in fired {
                    found.push(Finding {
                        rule,
                        field: at.to_string(),
                    });
                }
                *s = out;
            }
            Value::Array(a) => {
                for (i, x) in a.iter_mut().enumerate() {
                    self.walk(x, &format!("{at}[{i}]"), found);
                }
            }
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    let here = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    let key = k.to_ascii_lowercase();
                    if BODY_KEYS.contains(&key.as_str()) {
                        if !is_placeholder(x, OMITTED) {
                            found.push(Finding {
                                rule: "body",
                                field: here,
                            });
                            *x = Value::String(OMITTED.into());
                        }
                    } else if SECRET_KEY_PARTS.iter().any(|p| key.contains(p)) {
                        if !is_placeholder(x, REDACTED) {
                            found.push(Finding {
                                rule: "secret-field",
                                field: here,
                            });
                            *x = Value::String(REDACTED.into());
                        }
                    } else if ENV_KEYS.contains(&key.as_str()) && x.is_object() {
                        if let Value::Object(env) = x {
                            for (name, val) in env.iter_mut() {
                                if !is_placeholder(val, REDACTED) {
                                    found.push(Finding {
                                        rule: "env-value",
                                        field: format!("{here}.{name}"),
                                    });
                                    *val = Value::String(REDACTED.into());
                                }
                            }
                        }
                    } else {
                        self.walk(x, &here, found);
                    }
                }
            }
            _ => {}
        }
    }
}

fn is_placeholder(v: &Value, p: &str) -> bool {
    v.is_null() || v.as_str() == Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r() -> Redactor {
        Redactor::new([PathBuf::from("/state"), PathBuf::from("/wt/T-1")])
    }

    #[test]
    fn each_secret_shape_is_caught_and_never_kept() {
        let cases = [
            (
                "key sk-proj-abcdefghijklmnopqrstuv used",
                "openai-key",
                "abcdefghijklmnop",
            ),
            (
                "token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123 here",
                "github-token",
                "ABCDEFGHIJKLMNOP",
            ),
            (
                "pat github_pat_11ABCDEFG0123456789_abcdefghij",
                "github-token",
                "11ABCDEFG",
            ),
            (
                "slack xoxb-1234567890-abcdefghij",
                "slack-token",
                "1234567890",
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc",
                "bearer-token",
                "eyJhbGci",
            ),
            ("ran with OPENAI_API_KEY=abc123 set", "env-value", "abc123"),
            (
                "read /home/alice/private/notes.txt",
                "path-outside-state",
                "alice",
            ),
            ("read ~/.codex/auth.json", "path-outside-state", "auth.json"),
        ];
        for (input, rule, secret) in cases {
            let (out, fired) = r().redact_str(input);
            assert!(fired.contains(&rule), "{input}: fired {fired:?}");
            assert!(!out.contains(secret), "{input} → {out}");
            let (again, fired) = r().redact_str(&out);
            assert_eq!(again, out, "redaction is idempotent");
            assert!(fired.is_empty(), "{out}: {fired:?}");
        }
    }

    #[test]
    fn allowed_paths_and_plain_text_stay() {
        for s in [
            "/state/registry/events.jsonl",
            "cd /wt/T-1/src",
            "agent/T-1/codex",
            "T-0001 passed",
            "https://example.com/x",
            "a=b",
        ] {
            let (out, fired) = r().redact_str(s);
            assert_eq!(out, s);
            assert!(fired.is_empty(), "{s}: {fired:?}");
        }
    }

    #[test]
    fn bodies_secret_fields_and_env_objects_are_scrubbed() {
        let mut v = json!({"prompt": "do X", "api_token": "abc", "env": {"HOME": "/home/a"},
                           "detail": {"cmd": "curl -H 'Authorization: Bearer abcdefghijkl'"}, "n": 3});
        let found = r().redact_value(&mut v);
        let rules: Vec<_> = found.iter().map(|f| f.rule).collect();
        assert!(
            rules.contains(&"body")
                && rules.contains(&"secret-field")
                && rules.contains(&"env-value")
                && rules.contains(&"bearer-token"),
            "{rules:?}"
        );
        assert_eq!(v["prompt"], OMITTED);
        assert_eq!(v["env"]["HOME"], REDACTED);
        assert!(found.iter().any(|f| f.field == "detail.cmd"));
        assert!(
            r().audit_value(&v).is_empty(),
            "scrubbed records audit clean: {v}"
        );
    }

    proptest::proptest! {
        /// Redaction is idempotent and what it leaves audits clean, whatever the text.
        #[test]
        fn redaction_is_idempotent(s in "(?s)[ -~\n]{0,80}|.{0,40}(sk-|ghp_|xoxb-|Bearer |FOO_KEY=|/home/|~/)[A-Za-z0-9_/.-]{0,30}.{0,10}") {
            let (once, _) = r().redact_str(&s);
            let (twice, fired) = r().redact_str(&once);
            proptest::prop_assert_eq!(&twice, &once);
            proptest::prop_assert!(fired.is_empty(), "{:?} left {:?}", once, fired);
        }
    }
}
