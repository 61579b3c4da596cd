//! The OpenAI Responses API as Codex uses it (docs/rehearsal.md): `POST /v1/responses`
//! with `stream: true`, answered with `response.created`, `response.in_progress`,
//! output items (`message` text deltas or a `function_call`), `response.completed`.

use super::script::{Position, Script, Step, TITLE};
use super::sse::{Event, Shape, is_injected};
use serde_json::{Value, json};

/// The request's shape and conversation position. Tool results arrive as
/// `function_call_output` items.
pub fn inspect(req: &Value) -> (Shape, Position) {
    let input = req["input"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut pos = Position {
        prompt: String::new(),
        prompts: 0,
        tool_results: 0,
        results: Vec::new(),
    };
    for item in input {
        let kind = item["type"].as_str().unwrap_or("message");
        if kind == "function_call_output" {
            pos.tool_results += 1;
            pos.results.push(match &item["output"] {
                Value::String(s) => s.clone(),
                Value::Array(a) => a
                    .iter()
                    .filter_map(|c| c["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            });
            continue;
        }
        if kind != "message" || item["role"] != "user" {
            continue;
        }
        let text: Vec<&str> = match &item["content"] {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(|c| c["text"].as_str()).collect(),
            _ => Vec::new(),
        };
        let text: Vec<&str> = text.into_iter().filter(|t| !is_injected(t)).collect();
        if !text.is_empty() {
            pos.prompt = text.join("\n");
            pos.prompts += 1;
            pos.tool_results = 0;
            pos.results.clear();
        }
    }
    let shape = Shape {
        model: req["model"].as_str().unwrap_or("").to_string(),
        messages: input.len(),
        tools: req["tools"].as_array().map(Vec::len).unwrap_or(0),
        stream: req["stream"].as_bool().unwrap_or(false),
        // Codex's side requests (thread titles, summaries) offer no tools.
        title: req["tools"].as_array().is_none_or(Vec::is_empty),
        prompts: pos.prompts,
        tool_results: pos.tool_results,
    };
    (shape, pos)
}

/// The step to answer with: a short plain title for a side request without
/// tools (a scripted tool call there would be refused), else the script's.
pub fn choose(script: &Script, shape: &Shape, pos: &Position) -> Step {
    if shape.title {
        Step::text(TITLE)
    } else {
        script.step_for_agent(pos, "codex")
    }
}

fn response(id: &str, model: &str, status: &str, output: Vec<Value>) -> Value {
    let mut r = json!({"id": id, "object": "response", "created_at": 0, "status": status,
                       "model": model, "output": output});
    if status == "completed" {
        r["usage"] = json!({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0},
                            "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": 20});
    }
    r
}

/// The SSE events for one step.
pub fn events(step: &Step, model: &str, pos: &Position) -> Vec<Event> {
    let tag = format!("{}_{}", pos.prompts, pos.tool_results);
    let rid = format!("resp_mock_{tag}");
    let mut seq = 0u64;
    let mut next = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        Event::now(name, data)
    };
    let mut ev = vec![
        next(
            "response.created",
            json!({"response": response(&rid, model, "in_progress", vec![])}),
        )
        .after(step.first_delay()),
        next(
            "response.in_progress",
            json!({"response": response(&rid, model, "in_progress", vec![])}),
        ),
    ];
    let mut output = Vec::new();
    if !step.text.is_empty() {
        let mid = format!("msg_mock_{tag}");
        let index = output.len();
        ev.push(next(
            "response.output_item.added",
            json!({"output_index": index, "item": {"type": "message", "id": mid,
                   "status": "in_progress", "role": "assistant", "content": []}}),
        ));
        for chunk in step.chunks() {
            ev.push(
                next(
                    "response.output_text.delta",
                    json!({"item_id": mid, "output_index": index, "content_index": 0,
                           "delta": chunk}),
                )
                .after(step.delay()),
            );
        }
        let item = json!({"type": "message", "id": mid, "status": "completed",
                          "role": "assistant",
                          "content": [{"type": "output_text", "text": step.text, "annotations": []}]});
        ev.push(next(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
        output.push(item);
    }
    if let Some(tool) = &step.tool {
        let index = output.len();
        let item = json!({"type": "function_call", "id": format!("fc_mock_{tag}"),
                          "call_id": format!("call_mock_{tag}"), "name": tool.name,
                          "arguments": tool.input.to_string(), "status": "completed"});
        ev.push(
            next(
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            )
            .after(step.delay()),
        );
        ev.push(next(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
        output.push(item);
    }
    ev.push(
        next(
            "response.completed",
            json!({"response": response(&rid, model, "completed", output)}),
        )
        .after(step.hold()),
    );
    ev
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rehearse::script::ToolCall;

    #[test]
    fn environment_context_is_not_a_prompt_and_outputs_count_as_results() {
        let req = json!({"model": "mock-model", "stream": true, "tools": [{}, {}],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run it"}]},
            {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"}
        ]});
        let (shape, pos) = inspect(&req);
        assert_eq!(pos.prompt, "run it");
        assert_eq!((pos.prompts, pos.tool_results), (1, 1));
        assert_eq!(shape.tools, 2);
        assert_eq!(shape.messages, 4);
    }

    #[test]
    fn function_call_item_carries_name_arguments_and_call_id() {
        let step = Step {
            tool: Some(ToolCall {
                name: "exec_command".into(),
                input: json!({"cmd": "touch x", "sandbox_permissions": "require_escalated"}),
            }),
            ..Default::default()
        };
        let pos = Position {
            prompt: "p".into(),
            prompts: 2,
            tool_results: 0,
            results: Vec::new(),
        };
        let ev = events(&step, "mock-model", &pos);
        let names: Vec<&str> = ev.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.output_item.done",
                "response.completed"
            ]
        );
        let item = &ev[3].data["item"];
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["call_id"], "call_mock_2_0");
        let args: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["sandbox_permissions"], "require_escalated");
        assert_eq!(ev[4].data["response"]["status"], "completed");
    }
}
