//! The report's schema as the policy reads it, said once: the fields a
//! lane's `report.json` may hold, the one literal example the trailer
//! shows, and a check that names exactly what to change in a report that
//! does not fit (an agent that writes the file by hand guesses otherwise).

use serde_json::{Value, json};

/// The one state a finished report has.
pub const FINALIZED: &str = "finalized";
/// The states a report may have (`writing` and `paused` are held on).
pub const STATES: [&str; 3] = ["writing", "paused", FINALIZED];
/// What the agent says of its work (`drover report done|failed|blocked`).
pub const OUTCOMES: [&str; 3] = ["done", "failed", "blocked"];
/// The kinds of declared side effect.
pub const KINDS: [&str; 2] = ["file", "commit"];
/// How a file changed against the base.
pub const CHANGES: [&str; 3] = ["added", "modified", "deleted"];

/// The top-level fields a report may hold. Besides the contract's own,
/// the simulated agents name their nonce, time and effort, and reviewers
/// their `findings` and `class`.
pub const FIELDS: &[&str] = &[
    "attempt_id",
    "session_id",
    "job_id",
    "state",
    "outcome",
    "summary",
    "reason",
    "side_effects",
    "manifest",
    "nonce",
    "at",
    "effort",
    "findings",
    "class",
];
/// The fields of one side effect.
const EFFECT_FIELDS: &[&str] = &["kind", "path", "id", "sha", "change"];

/// What a report must name to count for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect<'a> {
    pub attempt_id: &'a str,
    pub session_id: &'a str,
}

/// The one complete literal example of a finished report, with the real
/// values filled in (the trailer shows it; `files` are the example's paths).
pub fn example(expect: &Expect<'_>, files: &[&str]) -> String {
    let effects: Vec<Value> = files
        .iter()
        .map(|f| json!({"kind": "file", "path": f, "change": "added"}))
        .collect();
    json!({
        "attempt_id": expect.attempt_id,
        "session_id": expect.session_id,
        "state": FINALIZED,
        "outcome": "done",
        "summary": "what you did, in one line",
        "side_effects": effects,
    })
    .to_string()
}

/// Whether the policy can take the report as this attempt's finished
/// account (pure): it parses, is `finalized`, names the attempt and
/// session, and declares only side effects that can be checked. Unknown
/// extra fields do not stop it counting.
pub fn counts(bytes: &[u8], expect: &Expect<'_>) -> bool {
    let Ok(r) = serde_json::from_slice::<crate::shadow::report::Report>(bytes) else {
        return false;
    };
    r.state == crate::evidence::LaneReportState::Finalized
        && r.attempt_id.as_deref() == Some(expect.attempt_id)
        && r.session_id.as_deref() == Some(expect.session_id)
        && r.declared()
            .is_some_and(|m| m.files.iter().all(|f| !f.is_empty()))
}

/// Check a report's bytes (pure): every problem, each one sentence naming
/// the field and what to write instead. Empty when the report fits.
pub fn check(bytes: &[u8], expect: &Expect<'_>) -> Vec<String> {
    let v: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return vec![format!("it is not one JSON object ({e})")],
    };
    let Some(obj) = v.as_object() else {
        return vec!["it must be one JSON object `{…}`".into()];
    };
    let mut out = Vec::new();
    for k in obj.keys() {
        if !FIELDS.contains(&k.as_str()) {
            out.push(format!("remove the unknown field `{k}`"));
        }
    }
    let want = |out: &mut Vec<String>, field: &str, value: &str| match obj.get(field) {
        Some(Value::String(s)) if s == value => {}
        None => out.push(format!("add `\"{field}\": \"{value}\"`")),
        Some(other) => out.push(format!("`{field}` must be `\"{value}\"` (it is `{other}`)")),
    };
    want(&mut out, "attempt_id", expect.attempt_id);
    want(&mut out, "session_id", expect.session_id);
    match obj.get("state") {
        Some(Value::String(s)) if STATES.contains(&s.as_str()) => {}
        None => out.push(format!("add `\"state\": \"{FINALIZED}\"`")),
        Some(other) => out.push(format!(
            "`state` must be `\"{FINALIZED}\"` when you are finished (it is `{other}`)"
        )),
    }
    match obj.get("outcome") {
        None => {}
        Some(Value::String(s))
            if s != "done"
                && OUTCOMES.contains(&s.as_str())
                && !obj.get("reason").is_some_and(|r| r.is_string()) =>
        {
            out.push(format!("an outcome `{s}` needs a `\"reason\": \"…\"`"))
        }
        Some(Value::String(s)) if OUTCOMES.contains(&s.as_str()) => {}
        Some(other) => out.push(format!(
            "`outcome` must be one of `done`, `failed`, `blocked` (it is `{other}`)"
        )),
    }
    for k in ["summary", "reason"] {
        if obj.get(k).is_some_and(|v| !v.is_string()) {
            out.push(format!("`{k}` must be a string"));
        }
    }
    match (obj.get("side_effects"), obj.get("manifest")) {
        (None, None) => out.push(
            "add `\"side_effects\": [{\"kind\": \"file\", \"path\": \"<a file you changed>\"}]` (one entry per file)"
                .into(),
        ),
        (Some(Value::Array(list)), _) => {
            for (i, se) in list.iter().enumerate() {
                check_effect(&mut out, i, se);
            }
        }
        (Some(_), _) => out.push("`side_effects` must be a list `[…]`".into()),
        (None, Some(_)) => {}
    }
    out
}

fn check_effect(out: &mut Vec<String>, i: usize, se: &Value) {
    let Some(o) = se.as_object() else {
        out.push(format!(
            "side_effects[{i}] must be an object `{{\"kind\": \"file\", \"path\": \"…\"}}`"
        ));
        return;
    };
    for k in o.keys() {
        if !EFFECT_FIELDS.contains(&k.as_str()) {
            out.push(format!("side_effects[{i}]: remove the unknown field `{k}`"));
        }
    }
    match o.get("kind").and_then(Value::as_str) {
        Some("file") => {
            if !o.get("path").is_some_and(Value::is_string) {
                out.push(format!(
                    "side_effects[{i}] needs `\"path\": \"<the file, relative to the worktree>\"`"
                ));
            }
        }
        Some("commit") => {
            if !o
                .get("id")
                .or_else(|| o.get("sha"))
                .is_some_and(Value::is_string)
            {
                out.push(format!(
                    "side_effects[{i}] needs `\"id\": \"<commit sha>\"`"
                ));
            }
        }
        Some(k) => out.push(format!(
            "side_effects[{i}]: `kind` must be `\"file\"` or `\"commit\"` (it is `\"{k}\"`)"
        )),
        None => out.push(format!("side_effects[{i}] needs `\"kind\": \"file\"`")),
    }
    if let Some(c) = o.get("change")
        && !c.as_str().is_some_and(|c| CHANGES.contains(&c))
    {
        out.push(format!(
            "side_effects[{i}]: `change` must be `added`, `modified` or `deleted` (it is `{c}`)"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: Expect<'static> = Expect {
        attempt_id: "A1",
        session_id: "implementer",
    };

    #[test]
    fn the_example_fits_the_check() {
        let ex = example(&E, &["notes/TASK-1.md"]);
        assert_eq!(check(ex.as_bytes(), &E), Vec::<String>::new());
        assert!(counts(ex.as_bytes(), &E));
        let extra = br#"{"attempt_id":"A1","session_id":"implementer","state":"finalized","wu":1,"side_effects":[]}"#;
        assert!(
            counts(extra, &E),
            "an extra field alone does not stop a report counting"
        );
        let v: Value = serde_json::from_str(&ex).unwrap();
        assert_eq!(v["state"], FINALIZED);
        assert_eq!(v["side_effects"][0]["kind"], "file");
    }

    /// Guards issue 23: the report a model wrote from the old trailer's
    /// words ("write it with attempt_id, session_id, state and
    /// side_effects") was read as no report, and nothing said why.
    #[test]
    fn the_guessed_report_of_issue_23_is_answered_field_by_field() {
        let guess = br#"{"attempt_id":"A1","session_id":null,"state":"completed","side_effects":[{"type":"file","action":"created","path":"notes/TASK-1.md"}]}"#;
        let p = check(guess, &E);
        let all = p.join("\n");
        assert!(
            all.contains("`session_id` must be `\"implementer\"` (it is `null`)"),
            "{all}"
        );
        assert!(all.contains("`state` must be `\"finalized\"`"), "{all}");
        assert!(
            all.contains("side_effects[0]: remove the unknown field `type`"),
            "{all}"
        );
        assert!(
            all.contains("side_effects[0]: remove the unknown field `action`"),
            "{all}"
        );
        assert!(
            all.contains("side_effects[0] needs `\"kind\": \"file\"`"),
            "{all}"
        );
        assert_eq!(p.len(), 5, "{all}");
        assert!(!counts(guess, &E));
    }

    #[test]
    fn missing_and_unknown_fields_are_named() {
        let p = check(br#"{"state":"finalized","extra":1}"#, &E).join("\n");
        for want in [
            "remove the unknown field `extra`",
            "add `\"attempt_id\": \"A1\"`",
            "add `\"session_id\": \"implementer\"`",
            "add `\"side_effects\"",
        ] {
            assert!(p.contains(want), "{want} in {p}");
        }
        assert!(check(b"[1]", &E)[0].contains("one JSON object"));
        assert!(check(b"{", &E)[0].contains("not one JSON object"));
        let failed = br#"{"attempt_id":"A1","session_id":"implementer","state":"finalized","outcome":"failed","side_effects":[]}"#;
        assert!(check(failed, &E)[0].contains("needs a `\"reason\""));
    }
}
