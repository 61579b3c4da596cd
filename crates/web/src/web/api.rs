//! The routes: the page's three files (embedded in the binary), the
//! snapshot (`/api/view`), its live stream (`/api/events`, server-sent
//! events), a pane's screen (`/api/screen`) and the two actions, all behind
//! [`super::auth::guard`]. Errors on `/api/*` are `{"error": "…"}`.

use super::Shared;
use super::actions::{self, AnswerReq, ControlReq};
use super::auth;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// The largest request body taken.
pub const BODY_LIMIT: usize = 16 * 1024;

/// How often an idle event stream says it is alive.
pub const KEEPALIVE: Duration = Duration::from_secs(25);

const INDEX: &str = include_str!("page/index.html");
const APP_JS: &str = include_str!("page/app.js");
const APP_CSS: &str = include_str!("page/app.css");

/// The router with every route behind the guard.
pub fn router(s: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(|| file("text/html; charset=utf-8", INDEX)))
        .route(
            "/app.js",
            get(|| file("text/javascript; charset=utf-8", APP_JS)),
        )
        .route("/app.css", get(|| file("text/css; charset=utf-8", APP_CSS)))
        .route("/api/view", get(view))
        .route("/api/events", get(events))
        .route("/api/screen", get(screen))
        .route("/api/answer", post(answer))
        .route("/api/control", post(control))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(s.clone(), auth::guard))
        .with_state(s)
}

async fn file(ctype: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, ctype)], body).into_response()
}

async fn not_found(req: axum::extract::Request) -> Response {
    auth::error(req.uri().path(), StatusCode::NOT_FOUND, "no such page")
}

fn json_err(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": msg.into() }))).into_response()
}

async fn view(State(s): State<Arc<Shared>>) -> Response {
    let body = s.view.borrow().clone();
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn events(State(s): State<Arc<Shared>>) -> Response {
    let rx = s.view.clone();
    let stream = futures_util::stream::unfold((rx, true), |(mut rx, first)| async move {
        if !first && rx.changed().await.is_err() {
            return None;
        }
        let data = rx.borrow_and_update().clone();
        let ev = Event::default().event("view").data(&*data);
        Some((Ok::<Event, Infallible>(ev), (rx, false)))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEPALIVE).text(" keepalive"))
        .into_response()
}

#[derive(Debug, Deserialize)]
struct ScreenQuery {
    pane: String,
}

/// Control characters (C0, DEL, C1) and ESC as U+FFFD: the page gets text.
pub fn clean(line: &str) -> String {
    line.chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect()
}

fn screen_of(s: &Shared, pane: &str) -> Result<Value, (StatusCode, String)> {
    let gone = |e: crate::client::ClientError| (StatusCode::BAD_GATEWAY, e.to_string());
    let mut c = crate::client::Client::connect(&s.socket).map_err(gone)?;
    let panes = crate::top::gather::panes(&mut c).map_err(gone)?;
    let p = panes
        .iter()
        .find(|p| p.name() == pane)
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no pane {pane:?}")))?;
    let (state, since) = match p.live() {
        Some(v) => (v.observation.label(), v.observation.since_ms),
        None => ("lost".to_string(), 0),
    };
    let lines: Vec<String> = crate::top::gather::detail(&mut c, pane)
        .iter()
        .map(|l| clean(l))
        .collect();
    Ok(json!({"pane": pane, "state": state, "since_ms": since, "lines": lines}))
}

async fn screen(
    State(s): State<Arc<Shared>>,
    q: Result<Query<ScreenQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(q)) = q else {
        return json_err(
            StatusCode::BAD_REQUEST,
            "say which pane: /api/screen?pane=NAME",
        );
    };
    match tokio::task::spawn_blocking(move || screen_of(&s, &q.pane)).await {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err((status, msg))) => json_err(status, msg),
        Err(_) => json_err(StatusCode::INTERNAL_SERVER_ERROR, "the screen read failed"),
    }
}

fn ctx(s: &Shared) -> actions::Ctx {
    actions::Ctx {
        state_dir: s.state_dir.clone(),
        socket: s.socket.clone(),
        exe: s.exe.clone(),
        token_id: s.token.id(),
    }
}

/// Parse a JSON body, or say in one sentence what is wrong with it.
fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Box<Response>> {
    serde_json::from_slice(bytes).map_err(|e| {
        Box::new(json_err(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("a bad request body: {e}"),
        ))
    })
}

async fn act(
    s: Arc<Shared>,
    what: &'static str,
    target: String,
    f: impl FnOnce(&actions::Ctx) -> actions::Reply + Send + 'static,
) -> Response {
    let cx = ctx(&s);
    let r = if s.allow_actions {
        tokio::task::spawn_blocking(move || f(&cx)).await
    } else {
        tokio::task::spawn_blocking(move || actions::read_only(&cx, what, &target)).await
    };
    match r {
        Ok((status, v)) => (status, axum::Json(v)).into_response(),
        Err(_) => json_err(StatusCode::INTERNAL_SERVER_ERROR, "the action failed"),
    }
}

async fn answer(State(s): State<Arc<Shared>>, bytes: axum::body::Bytes) -> Response {
    let req: AnswerReq = match body(&bytes) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let (what, target) = (action_word(&req.action), req.pane.clone());
    act(s, what, target, move |cx| actions::answer(cx, &req)).await
}

async fn control(State(s): State<Arc<Shared>>, bytes: axum::body::Bytes) -> Response {
    let req: ControlReq = match body(&bytes) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let (what, target) = (action_word(&req.control.text), format!("loop{}", req.run));
    act(s, what, target, move |cx| actions::control(cx, &req)).await
}

/// An action's word for the audit log (one of the known ones).
fn action_word(w: &str) -> &'static str {
    match w {
        "approve" => "approve",
        "deny" => "deny",
        "answer" => "answer",
        "pause" => "pause",
        "resume" => "resume",
        "close-out" => "close-out",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn control_characters_become_replacement_characters() {
        assert_eq!(
            clean("a\u{1b}[31mb\u{9b}c\td"),
            "a\u{FFFD}[31mb\u{FFFD}c\u{FFFD}d"
        );
        assert_eq!(clean("<img src=x>"), "<img src=x>");
    }
}
