//! The mock model's rate-limit headers (docs/rehearsal.md, "Rate-limit
//! headers"): none by default; a script's `[usage]` on every accepted
//! answer of both APIs; a step's `usage` instead of it for that answer.

use drover::rehearse::{Logger, MockServer, Script};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

const SCRIPT: &str = r#"
[usage]
short = { used_percent = 42.0, resets_in_s = 3600 }
long = { used_percent = 7.5 }

[[turn]]
match = "nearly out"
[[turn.step]]
text = "Careful."
usage = { short = { used_percent = 95.0, resets_in_s = 60 } }

[[turn]]
match = "hello"
[[turn.step]]
text = "Hello."
"#;

fn start(script: &str) -> MockServer {
    let script = Script::parse(script, Path::new("usage.toml")).expect("script parses");
    let logger: Logger = Arc::new(|_: &str| {});
    MockServer::start(0, script, logger).expect("mock starts")
}

/// POST `body` to `target`; the status and the response's headers.
fn post(port: u16, target: &str, body: Value) -> (u16, Vec<(String, String)>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("handshake");
        tokio::spawn(conn);
        let req = hyper::Request::builder()
            .method("POST")
            .uri(target)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("request");
        let resp = send.send_request(req).await.expect("response");
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        // Read the whole stream so the server is done with the request.
        let _ = resp.into_body().collect().await;
        (status, headers)
    })
}

fn get<'a>(h: &'a [(String, String)], k: &str) -> Option<&'a str> {
    h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

fn claude(prompt: &str) -> Value {
    json!({"model": "claude-test", "stream": true, "max_tokens": 100,
           "tools": [{"name": "Bash", "input_schema": {}}],
           "messages": [{"role": "user", "content": prompt}]})
}

fn codex(prompt: &str) -> Value {
    json!({"model": "mock-model", "stream": true,
           "tools": [{"type": "function", "name": "exec_command"}],
           "input": [{"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": prompt}]}]})
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[test]
fn a_scripts_usage_rides_every_accepted_answer_of_both_apis() {
    let m = start(SCRIPT);
    let t0 = now();
    let (status, h) = post(m.port(), "/v1/messages?beta=true", claude("say hello"));
    assert_eq!(status, 200);
    assert_eq!(
        get(&h, "anthropic-ratelimit-unified-5h-utilization"),
        Some("0.42")
    );
    assert_eq!(
        get(&h, "anthropic-ratelimit-unified-7d-utilization"),
        Some("0.075")
    );
    assert_eq!(
        get(&h, "anthropic-ratelimit-unified-status"),
        Some("allowed")
    );
    let reset: i64 = get(&h, "anthropic-ratelimit-unified-5h-reset")
        .and_then(|v| v.parse().ok())
        .expect("5h reset");
    assert!((reset - (t0 + 3600)).abs() <= 2, "{reset}");

    let (status, h) = post(m.port(), "/v1/responses", codex("say hello"));
    assert_eq!(status, 200);
    assert_eq!(get(&h, "x-codex-primary-used-percent"), Some("42.0"));
    assert_eq!(get(&h, "x-codex-primary-window-minutes"), Some("300"));
    assert_eq!(get(&h, "x-codex-secondary-used-percent"), Some("7.5"));
    assert_eq!(get(&h, "x-codex-secondary-window-minutes"), Some("10080"));
    let reset: i64 = get(&h, "x-codex-secondary-reset-at")
        .and_then(|v| v.parse().ok())
        .expect("secondary reset");
    assert!((reset - (t0 + 10_080 * 60)).abs() <= 2, "{reset}");
}

#[test]
fn a_steps_usage_replaces_the_scripts_for_its_answer() {
    let m = start(SCRIPT);
    let (_, h) = post(m.port(), "/v1/messages", claude("nearly out"));
    assert_eq!(
        get(&h, "anthropic-ratelimit-unified-5h-utilization"),
        Some("0.95")
    );
    assert_eq!(get(&h, "anthropic-ratelimit-unified-7d-utilization"), None);
    let (_, h) = post(m.port(), "/v1/responses", codex("nearly out"));
    assert_eq!(get(&h, "x-codex-primary-used-percent"), Some("95.0"));
    assert_eq!(get(&h, "x-codex-secondary-used-percent"), None);
}

#[test]
fn without_usage_no_rate_limit_header_is_sent() {
    let m = start("[[turn]]\nmatch = \"hello\"\n[[turn.step]]\ntext = \"Hello.\"\n");
    for (target, body) in [
        ("/v1/messages", claude("say hello")),
        ("/v1/responses", codex("say hello")),
    ] {
        let (status, h) = post(m.port(), target, body);
        assert_eq!(status, 200);
        assert!(
            h.iter()
                .all(|(k, _)| !k.starts_with("anthropic-ratelimit") && !k.starts_with("x-codex")),
            "{target}: {h:?}"
        );
    }
}
