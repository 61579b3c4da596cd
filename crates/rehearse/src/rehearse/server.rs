//! The mock model's HTTP server: hyper on a current-thread tokio runtime of
//! its own thread, bound to loopback only, streaming SSE with the script's
//! pacing. Logs each request's shape, never its body.

use super::script::Script;
use super::sse::{Event, Shape};
use super::{anthropic, openai};
use http_body_util::BodyExt;
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Requests larger than this are refused (agents send a few hundred KB).
pub const MAX_REQUEST_BYTES: usize = 32 << 20;
/// Events queued ahead of a slow client.
const STREAM_QUEUE: usize = 64;

/// Errors starting the mock server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MockError {
    #[error("cannot bind 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the mock server's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Where request log lines go.
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// A running mock server; stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish()
    }
}

struct State {
    script: Script,
    log: Logger,
}

impl MockServer {
    /// Bind `127.0.0.1:port` (0 = ephemeral) and serve `script` on a thread.
    pub fn start(port: u16, script: Script, log: Logger) -> Result<Self, MockError> {
        let std_listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .map_err(|source| MockError::Bind { port, source })?;
        let addr = std_listener
            .local_addr()
            .map_err(|source| MockError::Bind { port, source })?;
        std_listener
            .set_nonblocking(true)
            .map_err(|source| MockError::Bind { port, source })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(MockError::Runtime)?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let state = Arc::new(State { script, log });
        let thread = std::thread::Builder::new()
            .name("mock-model".into())
            .spawn(move || rt.block_on(serve(std_listener, state, stop_rx)))
            .map_err(MockError::Runtime)?;
        Ok(MockServer {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The bound address (always 127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    std_listener: std::net::TcpListener,
    state: Arc<State>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(std_listener) {
        Ok(l) => l,
        Err(e) => {
            (state.log)(&format!("mock-model: listener failed: {e}"));
            return;
        }
    };
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                (state.log)(&format!("mock-model: accept failed: {e}"));
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(req, state.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// A response body fed from a channel, so events can be paced.
pub struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

fn full(status: StatusCode, content_type: &str, body: String) -> Response<ChannelBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    if !body.is_empty() {
        let _ = tx.try_send(Bytes::from(body));
    }
    let mut resp = Response::new(ChannelBody { rx });
    *resp.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

fn json_response(status: StatusCode, v: &Value) -> Response<ChannelBody> {
    full(status, "application/json", v.to_string())
}

fn error_response(status: StatusCode, msg: &str) -> Response<ChannelBody> {
    json_response(
        status,
        &json!({"type": "error", "error": {"type": "invalid_request_error", "message": msg}}),
    )
}

fn rejection(r: super::limit::Rejection) -> Response<ChannelBody> {
    let mut resp = json_response(StatusCode::TOO_MANY_REQUESTS, &r.body);
    for (k, v) in r.headers {
        if let (Ok(k), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            hyper::header::HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().insert(k, v);
        }
    }
    resp
}

/// Add a script's rate-limit headers to an accepted answer.
fn with_headers(
    mut resp: Response<ChannelBody>,
    headers: Vec<(String, String)>,
) -> Response<ChannelBody> {
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            hyper::header::HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().insert(k, v);
        }
    }
    resp
}

fn now_s() -> i64 {
    chrono::Utc::now().timestamp()
}

fn stream(events: Vec<Event>) -> Response<ChannelBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(STREAM_QUEUE);
    tokio::spawn(async move {
        for e in events {
            if !e.delay.is_zero() {
                tokio::time::sleep(e.delay).await;
            }
            // A closed channel means the agent hung up (an interrupt): stop.
            if tx.send(Bytes::from(e.render())).await.is_err() {
                return;
            }
        }
    });
    let mut resp = Response::new(ChannelBody { rx });
    let h = resp.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    resp
}

/// Which API a path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Root,
    AnthropicMessages,
    AnthropicCountTokens,
    OpenAiResponses,
    NotFound,
}

/// Route a request by method and path (the query, e.g. `?beta=true`, is ignored).
pub fn route(method: &Method, path: &str) -> Route {
    match (method, path.trim_end_matches('/')) {
        (&Method::HEAD | &Method::GET, "") => Route::Root,
        (&Method::POST, "/v1/messages") => Route::AnthropicMessages,
        (&Method::POST, "/v1/messages/count_tokens") => Route::AnthropicCountTokens,
        (&Method::POST, "/v1/responses") => Route::OpenAiResponses,
        _ => Route::NotFound,
    }
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<ChannelBody>, Infallible> {
    let method = req.method().clone();
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let r = route(&method, req.uri().path());
    let log = |extra: &str| (state.log)(&format!("{method} {target} {extra}"));
    match r {
        Route::Root => {
            log("-> 200");
            return Ok(full(StatusCode::OK, "text/plain", String::new()));
        }
        Route::NotFound => {
            log("-> 404");
            return Ok(error_response(
                StatusCode::NOT_FOUND,
                "mock-model: no such endpoint",
            ));
        }
        _ => {}
    }
    let body = match http_body_util::Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            log(&format!("-> 400 (body: {e})"));
            return Ok(error_response(StatusCode::BAD_REQUEST, "unreadable body"));
        }
    };
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            log(&format!("-> 400 (json: {e})"));
            return Ok(error_response(StatusCode::BAD_REQUEST, "body is not JSON"));
        }
    };
    let (shape, resp): (Shape, Response<ChannelBody>) = match r {
        Route::AnthropicCountTokens => {
            let (shape, _) = anthropic::inspect(&v);
            (
                shape,
                json_response(StatusCode::OK, &json!({"input_tokens": 12})),
            )
        }
        Route::AnthropicMessages => {
            let (shape, pos) = anthropic::inspect(&v);
            let step = anthropic::choose(&state.script, &shape, &pos);
            let usage = step.usage.as_ref().or(state.script.usage.as_ref());
            let headers = usage.map(|u| u.anthropic(now_s())).unwrap_or_default();
            let resp = if let Some(l) = &step.limit {
                rejection(l.anthropic(now_s()))
            } else if shape.stream {
                with_headers(
                    stream(anthropic::events(&step, &shape.model, &pos)),
                    headers,
                )
            } else {
                with_headers(
                    json_response(
                        StatusCode::OK,
                        &anthropic::message(&step, &shape.model, &pos),
                    ),
                    headers,
                )
            };
            (shape, resp)
        }
        _ => {
            let (shape, pos) = openai::inspect(&v);
            let step = openai::choose(&state.script, &shape, &pos);
            let usage = step.usage.as_ref().or(state.script.usage.as_ref());
            let headers = usage.map(|u| u.openai(now_s())).unwrap_or_default();
            let resp = match &step.limit {
                Some(l) => rejection(l.openai(now_s())),
                None => with_headers(stream(openai::events(&step, &shape.model, &pos)), headers),
            };
            (shape.clone(), resp)
        }
    };
    log(&format!("{shape} -> {}", resp.status().as_u16()));
    Ok(resp)
}
