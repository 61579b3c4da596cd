//! Script templating: `{{key}}` in a step's `text` and in the string values of
//! a tool's `input` becomes the value of the `key=value` token in the latest
//! user prompt, so a script can answer a dispatch's trailer
//! (`[drover] job=J attempt=A nonce=N report=PATH`) with the attempt it names.
//!
//! Tokens are whitespace-separated words containing `=`; the key is the part
//! before the first `=` and the value the rest (so a value cannot hold
//! whitespace). When a key occurs twice the last one wins (the trailer comes
//! last). An unknown key is left as written, so a typo shows in the output.
//! Substitution happens on parsed values, before the tool input is serialized:
//! a value holding `"` or `\` is escaped by the JSON encoder like any other
//! string, and JSON written inside a string (a report in a `Write`'s
//! `content`) reaches the agent intact on both APIs.

use super::script::Step;
use serde_json::Value;
use std::collections::HashMap;

/// The `key=value` tokens of a prompt; the last occurrence of a key wins.
pub fn tokens(prompt: &str) -> HashMap<String, String> {
    prompt
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `text` with every `{{key}}` whose key is in `vars` replaced by its value.
pub fn render(text: &str, vars: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => {
                let key = after[..close].trim();
                match vars.get(key) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&rest[open..open + 2 + close + 2]),
                }
                rest = &after[close + 2..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn render_value(v: &mut Value, vars: &HashMap<String, String>) {
    match v {
        Value::String(s) => *s = render(s, vars),
        Value::Array(a) => a.iter_mut().for_each(|x| render_value(x, vars)),
        Value::Object(o) => o.values_mut().for_each(|x| render_value(x, vars)),
        _ => {}
    }
}

/// The step with its text and tool input rendered against `prompt`'s tokens.
pub fn apply(step: Step, prompt: &str) -> Step {
    if !step.text.contains("{{")
        && !step
            .tool
            .as_ref()
            .is_some_and(|t| t.input.to_string().contains("{{"))
    {
        return step;
    }
    let vars = tokens(prompt);
    let mut step = step;
    step.text = render(&step.text, &vars);
    if let Some(tool) = &mut step.tool {
        render_value(&mut tool.input, &vars);
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::script::{Position, ToolCall};
    use crate::rehearse::{anthropic, openai};
    use serde_json::json;

    const PROMPT: &str = "do the work\n\n[drover] job=J1 attempt=a1b2 nonce=n9 report=/w/report.json (when finished, write it with attempt_id, session_id, state and side_effects)";

    #[test]
    fn trailer_tokens_are_read() {
        let t = tokens(PROMPT);
        assert_eq!(t["job"], "J1");
        assert_eq!(t["attempt"], "a1b2");
        assert_eq!(t["nonce"], "n9");
        assert_eq!(t["report"], "/w/report.json");
        assert!(!t.contains_key("(when"));
        assert_eq!(tokens("a=1 a=2")["a"], "2", "the last occurrence wins");
    }

    #[test]
    fn known_keys_are_replaced_unknown_kept() {
        let v = tokens(PROMPT);
        assert_eq!(
            render("attempt {{attempt}} of {{ job }}", &v),
            "attempt a1b2 of J1"
        );
        assert_eq!(render("{{missing}} {{attempt", &v), "{{missing}} {{attempt");
        assert_eq!(render("{{attempt}}{{attempt}}", &v), "a1b2a1b2");
        assert_eq!(render("no braces", &v), "no braces");
    }

    fn report_step() -> Step {
        Step {
            text: "Reporting {{attempt}}.".into(),
            tool: Some(ToolCall {
                name: "Write".into(),
                input: json!({
                    "file_path": "{{report}}",
                    "content": r#"{"attempt_id":"{{attempt}}","state":"finalized","side_effects":[{"kind":"file","path":"out.txt"}]}"#,
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn json_in_a_tool_input_survives_both_apis() {
        let step = apply(report_step(), PROMPT);
        assert_eq!(step.text, "Reporting a1b2.");
        let pos = Position {
            prompt: PROMPT.into(),
            prompts: 1,
            tool_results: 0,
            results: Vec::new(),
        };
        let check = |args: &str| {
            let input: Value = serde_json::from_str(args).unwrap();
            assert_eq!(input["file_path"], "/w/report.json");
            let report: Value = serde_json::from_str(input["content"].as_str().unwrap()).unwrap();
            assert_eq!(report["attempt_id"], "a1b2");
            assert_eq!(report["side_effects"][0]["path"], "out.txt");
        };
        let ev = anthropic::events(&step, "m", &pos);
        let delta = ev
            .iter()
            .find(|e| e.data["delta"]["type"] == "input_json_delta")
            .unwrap();
        check(delta.data["delta"]["partial_json"].as_str().unwrap());
        let ev = openai::events(&step, "m", &pos);
        let done = ev
            .iter()
            .find(|e| e.data["item"]["type"] == "function_call")
            .unwrap();
        check(done.data["item"]["arguments"].as_str().unwrap());
    }

    #[test]
    fn a_value_with_quotes_is_escaped_by_the_encoder() {
        let step = apply(report_step(), "x attempt=a\"b\\c");
        let args = step.tool.unwrap().input.to_string();
        let input: Value = serde_json::from_str(&args).unwrap();
        assert!(
            input["content"]
                .as_str()
                .unwrap()
                .contains(r#""attempt_id":"a"b\c""#)
        );
    }

    #[test]
    fn a_step_without_placeholders_is_unchanged() {
        let s = Step::text("plain");
        assert_eq!(apply(s.clone(), PROMPT), s);
    }
}
