//! The mock model server over real HTTP: SSE shapes of both APIs, scripts,
//! pacing, request logging without bodies, and the loopback-only bind.

use drover::rehearse::{Logger, MockServer, Script};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
[[turn]]
match = "write"
[[turn.step]]
text = "Writing it."
tool = { name = "Write", input = { file_path = "hello.txt", content = "hi\n" } }
[[turn.step]]
text = "Wrote hello.txt."

[[turn]]
match = "escalate"
[[turn.step]]
tool = { name = "exec_command", input = { cmd = "touch x", sandbox_permissions = "require_escalated" } }

[[turn]]
match = "paced"
[[turn.step]]
text = "abcdef"
chunk_chars = 2
delay_ms = 100
"#;

struct Mock {
    server: MockServer,
    log: Arc<Mutex<Vec<String>>>,
}

fn start() -> Mock {
    let script = Script::parse(SCRIPT, Path::new("test.toml")).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let logger: Logger = Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string()));
    let server = MockServer::start(0, script, logger).unwrap();
    Mock { server, log }
}

/// One request over a fresh connection; returns (status, content-type, body).
fn request(port: u16, method: &str, target: &str, body: Option<Value>) -> (u16, String, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let req = hyper::Request::builder()
            .method(method)
            .uri(target)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, ct, String::from_utf8(body.to_vec()).unwrap())
    })
}

/// Parse an SSE body into (event, data) pairs, checking each event names its type.
fn sse(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            let mut name = String::new();
            let mut data = Value::Null;
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).unwrap();
                }
            }
            assert_eq!(
                data["type"],
                name.as_str(),
                "event name and data type agree"
            );
            (name, data)
        })
        .collect()
}

fn names(ev: &[(String, Value)]) -> Vec<&str> {
    ev.iter().map(|(n, _)| n.as_str()).collect()
}

fn claude_request(prompt: &str, tools: Value, extra: Vec<Value>) -> Value {
    let mut messages = vec![json!({"role": "user", "content": [{"type": "text", "text": prompt}]})];
    messages.extend(extra);
    json!({"model": "claude-test", "stream": true, "tools": tools, "messages": messages})
}

#[test]
fn head_root_answers_200() {
    let m = start();
    let (status, _, _) = request(m.server.port(), "HEAD", "/", None);
    assert_eq!(status, 200);
}

#[test]
fn anthropic_tool_turn_streams_tool_use_then_reply_after_result() {
    let m = start();
    let port = m.server.port();
    let tools = json!([{"name": "Write"}, {"name": "Bash"}]);
    let (status, ct, body) = request(
        port,
        "POST",
        "/v1/messages?beta=true",
        Some(claude_request("please write it", tools.clone(), vec![])),
    );
    assert_eq!(status, 200);
    assert_eq!(ct, "text/event-stream");
    let ev = sse(&body);
    let n = names(&ev);
    assert_eq!(n[..2], ["message_start", "ping"]);
    assert_eq!(n[n.len() - 2..], ["message_delta", "message_stop"]);
    let tool_start = ev
        .iter()
        .find(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use")
        .expect("a tool_use block");
    assert_eq!(tool_start.1["content_block"]["name"], "Write");
    let partial: String = ev
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap().to_string())
        .collect();
    let input: Value = serde_json::from_str(&partial).unwrap();
    assert_eq!(input["file_path"], "hello.txt");
    assert_eq!(ev[n.len() - 2].1["delta"]["stop_reason"], "tool_use");

    let id = tool_start.1["content_block"]["id"].clone();
    let after = vec![
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Write", "input": input}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}),
    ];
    let (_, _, body) = request(
        port,
        "POST",
        "/v1/messages?beta=true",
        Some(claude_request("please write it", tools, after)),
    );
    let ev = sse(&body);
    let text: String = ev
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Wrote hello.txt.");
    assert_eq!(ev[ev.len() - 2].1["delta"]["stop_reason"], "end_turn");
}

#[test]
fn anthropic_title_request_gets_title_json() {
    let m = start();
    let (_, _, body) = request(
        m.server.port(),
        "POST",
        "/v1/messages",
        Some(claude_request("please write it", json!([]), vec![])),
    );
    let text: String = sse(&body)
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_string())
        .collect();
    let title: Value = serde_json::from_str(&text).unwrap();
    assert!(title["title"].is_string(), "{text}");
    assert!(
        m.log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("title=true"))
    );
}

#[test]
fn openai_escalated_exec_command_is_a_function_call_item() {
    let m = start();
    let req = json!({"model": "mock-model", "stream": true, "tools": [{"type": "function", "name": "exec_command"}],
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "escalate now"}]}]});
    let (status, ct, body) = request(m.server.port(), "POST", "/v1/responses", Some(req));
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"));
    let ev = sse(&body);
    assert_eq!(
        names(&ev),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let item = &ev[3].1["item"];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "exec_command");
    assert!(item["call_id"].is_string());
    let args: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["sandbox_permissions"], "require_escalated");
    assert_eq!(ev[4].1["response"]["output"][0]["type"], "function_call");
}

#[test]
fn openai_text_reply_follows_function_call_output() {
    let m = start();
    let req = json!({"model": "mock-model", "stream": true, "tools": [{"type": "function", "name": "exec_command"}],
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "please write"}]},
        {"type": "function_call", "name": "Write", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"}
    ]});
    let (_, _, body) = request(m.server.port(), "POST", "/v1/responses", Some(req));
    let ev = sse(&body);
    let text: String = ev
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Wrote hello.txt.");
    let done = ev
        .iter()
        .find(|(n, _)| n == "response.output_item.done")
        .unwrap();
    assert_eq!(done.1["item"]["content"][0]["text"], "Wrote hello.txt.");
}

#[test]
fn deltas_are_paced_as_scripted() {
    let m = start();
    let started = Instant::now();
    let (_, _, body) = request(
        m.server.port(),
        "POST",
        "/v1/messages",
        Some(claude_request(
            "paced please",
            json!([{"name": "Bash"}]),
            vec![],
        )),
    );
    let deltas = sse(&body)
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .count();
    assert_eq!(deltas, 3);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "3 deltas × 100 ms"
    );
}

#[test]
fn log_has_shapes_but_never_bodies() {
    let m = start();
    request(
        m.server.port(),
        "POST",
        "/v1/messages?beta=true",
        Some(claude_request(
            "secret-prompt-text",
            json!([{"name": "Bash"}]),
            vec![],
        )),
    );
    request(m.server.port(), "POST", "/v2/nothing", Some(json!({})));
    let log = m.log.lock().unwrap().join("\n");
    assert!(
        log.contains("POST /v1/messages?beta=true model=claude-test messages=1 tools=1"),
        "{log}"
    );
    assert!(log.contains("/v2/nothing -> 404"), "{log}");
    assert!(!log.contains("secret-prompt-text"), "{log}");
}

#[test]
fn binds_loopback_only() {
    let m = start();
    assert!(m.server.addr().ip().is_loopback());
    // The address this host would use outwards (no packet is sent by a UDP connect).
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    if probe.connect("192.0.2.1:9").is_ok()
        && let Ok(local) = probe.local_addr()
        && !local.ip().is_loopback()
        && !local.ip().is_unspecified()
    {
        let r = std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::new(local.ip(), m.server.port()),
            Duration::from_secs(2),
        );
        assert!(r.is_err(), "reachable on {}", local.ip());
    }
}

#[test]
fn cli_prints_the_bound_port_and_writes_the_port_file() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let mut child = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["mock-model", "--port", "0", "--port-file"])
            .arg(&port_file)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    assert!(
        line.starts_with("mock-model listening on http://127.0.0.1:"),
        "{line}"
    );
    assert_eq!(
        std::fs::read_to_string(&port_file).unwrap().trim(),
        port.to_string()
    );
    assert_eq!(request(port, "HEAD", "/", None).0, 200);
}

/// Kills and reaps the child even when an assertion fails first.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn cli_rejects_a_bad_script_with_usage_exit() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[turn]]\nmatchx = 1\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["mock-model", "--script"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("matchx"));
}

#[test]
fn every_fixture_script_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mock-scripts");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let s = Script::load(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(!s.turns.is_empty(), "{} has no turns", p.display());
            n += 1;
        }
    }
    assert!(n >= 3, "expected the suite and demo scripts");
}

fn start_fixture(name: &str) -> MockServer {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mock-scripts")
        .join(format!("{name}.toml"));
    let logger: Logger = Arc::new(|_: &str| {});
    MockServer::start(0, Script::load(&p).unwrap(), logger).unwrap()
}

/// A dispatch prompt: some work, then drover's trailer.
fn dispatch_prompt(report: &Path) -> String {
    format!(
        "write out.txt\n\nmore context{}",
        drover::dispatch::trailer("J7", "att-42", "n0nce", report)
    )
}

/// The templated report of `dispatch-claude.toml` reaches Claude as a `Write`
/// whose content is the JSON report naming the prompt's attempt and path.
#[test]
fn dispatch_script_templates_the_report_for_claude() {
    let server = start_fixture("dispatch-claude");
    let report = Path::new("/lane/report.json");
    let tools = json!([{"name": "Write"}]);
    let prompt = dispatch_prompt(report);
    let tool_use = |id: &str| {
        vec![
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Write", "input": {}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}),
        ]
    };
    let (_, _, body) = request(
        server.port(),
        "POST",
        "/v1/messages",
        Some(claude_request(&prompt, tools, tool_use("t1"))),
    );
    let partial: String = sse(&body)
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap().to_string())
        .collect();
    let input: Value = serde_json::from_str(&partial).unwrap();
    assert_eq!(input["file_path"], "/lane/report.json");
    let r: Value = serde_json::from_str(input["content"].as_str().unwrap()).unwrap();
    assert_eq!(r["attempt_id"], "att-42");
    assert_eq!(r["state"], "finalized");
    assert_eq!(r["side_effects"][0]["path"], "out.txt");
}

/// The `exec_command` of `dispatch-codex.toml`, run by a shell, writes a report
/// that parses and names the prompt's attempt (JSON inside shell quoting
/// inside a JSON string survives).
#[test]
fn dispatch_script_templates_the_report_for_codex() {
    let server = start_fixture("dispatch-codex");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let prompt = dispatch_prompt(&report);
    let mut input = vec![json!({"type": "message", "role": "user",
                                "content": [{"type": "input_text", "text": prompt}]})];
    let mut cmds = Vec::new();
    for _ in 0..2 {
        let req = json!({"model": "mock-model", "stream": true,
                         "tools": [{"type": "function", "name": "exec_command"}], "input": input});
        let (_, _, body) = request(server.port(), "POST", "/v1/responses", Some(req));
        let ev = sse(&body);
        let item = ev
            .iter()
            .find(|(n, d)| n == "response.output_item.done" && d["item"]["type"] == "function_call")
            .map(|(_, d)| d["item"].clone())
            .expect("a function call");
        let args: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
        cmds.push(args["cmd"].as_str().unwrap().to_string());
        let output = json!({"type": "function_call_output", "call_id": item["call_id"].clone(), "output": "ok"});
        input.push(item);
        input.push(output);
    }
    for cmd in &cmds {
        let st = std::process::Command::new("sh")
            .args(["-c", cmd])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "{cmd}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "work for J7\n"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["attempt_id"], "att-42");
    assert_eq!(r["session_id"], "implementer");
    assert_eq!(r["side_effects"][0]["kind"], "file");
}

/// A `limit` step answers like each API at a usage limit: HTTP 429 with its error body.
#[test]
fn limit_step_answers_429_like_each_api() {
    let m = start_fixture("limits");
    let port = m.port();
    let tools = json!([{"name": "Write"}]);
    let (status, _, body) = request(
        port,
        "POST",
        "/v1/messages?beta=true",
        Some(claude_request("hit the weekly limit", tools, vec![])),
    );
    assert_eq!(status, 429, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
    let req = json!({"model": "mock-model", "stream": true, "tools": [{"type": "function", "name": "exec_command"}],
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hit the weekly limit"}]}]});
    let (status, _, body) = request(port, "POST", "/v1/responses", Some(req));
    assert_eq!(status, 429, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "usage_limit_reached", "{v}");
    assert!(v["error"]["resets_at"].as_i64().unwrap_or(0) > 0, "{v}");
}
