//! The Anthropic Messages API as Claude Code uses it (docs/rehearsal.md): `POST
//! /v1/messages?beta=true` with `stream: true`, answered with the SSE sequence
//! `message_start`, `ping`, blocks, `message_delta`, `message_stop`.

use super::script::{Position, Script, Step, TITLE};
use super::sse::{Event, Shape, is_injected, prompt_text};
use serde_json::{Value, json};

/// The request's shape and conversation position.
pub fn inspect(req: &Value) -> (Shape, Position) {
    let messages = req["messages"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let tools = req["tools"].as_array().map(Vec::len);
    let mut pos = Position {
        prompt: String::new(),
        prompts: 0,
        tool_results: 0,
        results: Vec::new(),
    };
    for m in messages.iter().filter(|m| m["role"] == "user") {
        let blocks: Vec<&Value> = match &m["content"] {
            Value::Array(a) => a.iter().collect(),
            v @ Value::String(_) => vec![v],
            _ => Vec::new(),
        };
        let text: Vec<String> = blocks
            .iter()
            .filter(|b| b["type"] != "tool_result")
            .filter_map(|b| b.as_str().or_else(|| b["text"].as_str()))
            .filter(|t| !is_injected(t))
            .map(prompt_text)
            .collect();
        // A rejected tool call and the next prompt can share one message: the
        // prompt starts a new turn.
        let result = blocks.iter().any(|b| b["type"] == "tool_result");
        if result && text.is_empty() {
            pos.tool_results += 1;
            let out: Vec<String> = blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| result_text(&b["content"]))
                .collect();
            pos.results.push(out.join("\n"));
            continue;
        }
        if !text.is_empty() {
            pos.prompt = text.join("\n");
            pos.prompts += 1;
            pos.tool_results = 0;
            pos.results.clear();
        }
    }
    let shape = Shape {
        model: req["model"].as_str().unwrap_or("").to_string(),
        messages: messages.len(),
        tools: tools.unwrap_or(0),
        stream: req["stream"].as_bool().unwrap_or(false),
        title: tools.unwrap_or(0) == 0,
        prompts: pos.prompts,
        tool_results: pos.tool_results,
    };
    (shape, pos)
}

/// A tool result's text: a string, or the text blocks of a list.
fn result_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The step to answer with: the title for a title request, else the script's.
pub fn choose(script: &Script, shape: &Shape, pos: &Position) -> Step {
    if shape.title {
        Step::text(&json!({ "title": TITLE }).to_string())
    } else {
        script.step_for_agent(pos, "claude")
    }
}

/// The SSE events for one step.
pub fn events(step: &Step, model: &str, pos: &Position) -> Vec<Event> {
    let id = format!("msg_mock_{}_{}", pos.prompts, pos.tool_results);
    let out_tokens = step.text.chars().count() / 4 + 1;
    let mut ev = vec![
        Event::now(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 12, "output_tokens": 1,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            }}),
        )
        .after(step.first_delay()),
        Event::now("ping", json!({"type": "ping"})),
    ];
    let mut index = 0;
    if !step.text.is_empty() {
        ev.push(Event::now(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}),
        ));
        for chunk in step.chunks() {
            ev.push(
                Event::now(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": chunk}}),
                )
                .after(step.delay()),
            );
        }
        ev.push(Event::now(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let stop_reason = match &step.tool {
        Some(tool) => {
            ev.push(Event::now(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use",
                           "id": format!("toolu_mock_{}_{}", pos.prompts, pos.tool_results),
                           "name": tool.name, "input": {}}}),
            ));
            ev.push(
                Event::now(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta",
                                     "partial_json": tool.input.to_string()}}),
                )
                .after(step.delay()),
            );
            ev.push(Event::now(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            "tool_use"
        }
        None => "end_turn",
    };
    ev.push(
        Event::now(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": out_tokens}}),
        )
        .after(step.hold()),
    );
    ev.push(Event::now("message_stop", json!({"type": "message_stop"})));
    ev
}

/// The whole message, for a request without `stream: true`.
pub fn message(step: &Step, model: &str, pos: &Position) -> Value {
    let mut content = Vec::new();
    if !step.text.is_empty() {
        content.push(json!({"type": "text", "text": step.text}));
    }
    if let Some(tool) = &step.tool {
        content.push(json!({"type": "tool_use",
            "id": format!("toolu_mock_{}_{}", pos.prompts, pos.tool_results),
            "name": tool.name, "input": tool.input}));
    }
    json!({"id": format!("msg_mock_{}_{}", pos.prompts, pos.tool_results),
           "type": "message", "role": "assistant", "model": model, "content": content,
           "stop_reason": if step.tool.is_some() { "tool_use" } else { "end_turn" },
           "stop_sequence": null,
           "usage": {"input_tokens": 12, "output_tokens": step.text.chars().count() / 4 + 1}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::script::ToolCall;

    #[test]
    fn tool_results_count_from_the_last_prompt() {
        let req = json!({"model": "m", "stream": true, "tools": [{"name": "Write"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                         {"type": "text", "text": "write a file"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Write", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
        ]});
        let (shape, pos) = inspect(&req);
        assert_eq!(pos.prompt, "write a file");
        assert_eq!((pos.prompts, pos.tool_results), (1, 1));
        assert!(!shape.title);
        assert_eq!(shape.messages, 3);
    }

    #[test]
    fn empty_tools_is_a_title_request_answered_with_json() {
        let req =
            json!({"model": "m", "tools": [], "messages": [{"role": "user", "content": "hi"}]});
        let (shape, pos) = inspect(&req);
        assert!(shape.title);
        let step = choose(&Script::default(), &shape, &pos);
        let title: Value = serde_json::from_str(&step.text).unwrap();
        assert_eq!(title["title"], TITLE);
    }

    #[test]
    fn tool_step_streams_input_json_and_stops_for_tool_use() {
        let step = Step {
            text: "ok".into(),
            tool: Some(ToolCall {
                name: "Bash".into(),
                input: json!({"command": "true"}),
            }),
            ..Default::default()
        };
        let pos = Position {
            prompt: "p".into(),
            prompts: 1,
            tool_results: 0,
            results: Vec::new(),
        };
        let ev = events(&step, "m", &pos);
        let names: Vec<&str> = ev.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(ev[6].data["delta"]["type"], "input_json_delta");
        assert_eq!(ev[8].data["delta"]["stop_reason"], "tool_use");
    }
}
