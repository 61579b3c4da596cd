//! What `--allow-actions` lets the page do, exactly `drover answer` and
//! `drover loop control`: each first checks the state is still the one the
//! page saw (else 409 "the state moved on"), then makes the same call as the
//! CLI, and is audited whatever its outcome. Blocking: run off the runtime.

use super::audit;
use crate::client::{Client, ClientError};
use crate::proto::args::{self, AnswerAction, PaneAnswer};
use crate::runstate::RunState;
use crate::runstate::control::{self, Control, ControlError, Requested};
use crate::statedir::StateDir;
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use std::path::PathBuf;

/// `POST /api/answer`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerReq {
    pub pane: String,
    /// `approve`, `deny` or `answer`.
    pub action: String,
    #[serde(default)]
    pub choice: Option<String>,
    /// When the pane entered the state the page saw.
    pub since_ms: u64,
}

/// `POST /api/control`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlReq {
    pub run: u32,
    /// `pause`, `resume` or `close-out`.
    pub control: Word<Control>,
    /// The run's state the page saw.
    pub state: Word<RunState>,
}

/// A word the page sent, as sent and as the type it names (`None`: a word
/// no value of it has, refused with its own message, never a bad body).
#[derive(Debug, Clone, PartialEq)]
pub struct Word<T> {
    pub text: String,
    pub known: Option<T>,
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Word<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let known = serde_json::from_value(Value::String(text.clone())).ok();
        Ok(Word { text, known })
    }
}

/// Where the actions act and who asks.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    pub exe: PathBuf,
    pub token_id: String,
}

/// An answer to the page: a status and its JSON.
pub type Reply = (StatusCode, Value);

fn refused(status: StatusCode, msg: impl Into<String>) -> Reply {
    (status, json!({ "error": msg.into() }))
}

/// The status of a supervisor's refusal.
fn status_of(e: &ClientError) -> StatusCode {
    match e.exit_code() {
        crate::exit::REFUSED => StatusCode::CONFLICT,
        crate::exit::USAGE => StatusCode::UNPROCESSABLE_ENTITY,
        crate::exit::TIMEOUT => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_GATEWAY,
    }
}

fn audit(cx: &Ctx, action: &str, target: &str, r: &Reply) {
    let outcome = match r.0 {
        StatusCode::OK => "ok",
        StatusCode::ACCEPTED => "accepted",
        s if s.is_client_error() => "refused",
        _ => "failed",
    };
    let reason = r.1["error"].as_str().or_else(|| r.1["message"].as_str());
    audit::record(
        StateDir::new(&cx.state_dir),
        &cx.token_id,
        action,
        target,
        outcome,
        reason,
    );
}

/// A refusal of a read-only server, audited.
pub fn read_only(cx: &Ctx, action: &str, target: &str) -> Reply {
    let r = refused(
        StatusCode::FORBIDDEN,
        "read-only: this page only shows; start drover web with --allow-actions to answer or control from it",
    );
    audit(cx, action, target, &r);
    r
}

/// Approve, deny or answer a blocked pane's dialog.
pub fn answer(cx: &Ctx, req: &AnswerReq) -> Reply {
    let r = answer_inner(cx, req);
    audit(cx, &req.action, &req.pane, &r);
    r
}

fn answer_inner(cx: &Ctx, req: &AnswerReq) -> Reply {
    let action = match req.action.as_str() {
        "approve" => AnswerAction::Approve,
        "deny" => AnswerAction::Deny,
        "answer" => AnswerAction::Answer,
        other => {
            return refused(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("unknown action {other:?} (approve, deny or answer)"),
            );
        }
    };
    if action == AnswerAction::Answer && req.choice.as_deref().is_none_or(str::is_empty) {
        return refused(StatusCode::UNPROCESSABLE_ENTITY, "an answer needs a choice");
    }
    let mut c = match Client::connect(&cx.socket) {
        Ok(c) => c,
        Err(e) => return refused(status_of(&e), e.to_string()),
    };
    let panes = match c.call(args::PaneLs {}) {
        Ok(p) => p,
        Err(e) => return refused(status_of(&e), e.to_string()),
    };
    let Some(p) = panes.iter().find(|p| p.name() == req.pane) else {
        return refused(StatusCode::NOT_FOUND, format!("no pane {:?}", req.pane));
    };
    let (state, since) = match p.live() {
        Some(v) => (v.observation.label(), v.observation.since_ms),
        None => ("lost".to_string(), 0),
    };
    if !p.is_blocked() || since != req.since_ms {
        return refused(
            StatusCode::CONFLICT,
            format!("the state moved on: {} is now {state}", req.pane),
        );
    }
    let call = PaneAnswer {
        pane: req.pane.clone(),
        action,
        choice: req
            .choice
            .clone()
            .filter(|_| action == AnswerAction::Answer),
    };
    match c.call(call) {
        Ok(v) => (
            StatusCode::OK,
            json!({"ok": true, "message": format!(
                "{}: answered the {} dialog (keys {}, attempts {}); now {}",
                req.pane, v.dialog, v.keys.join(" "), v.attempts, v.state
            )}),
        ),
        Err(e) => refused(status_of(&e), e.to_string()),
    }
}

/// The reason a run control records in `DECISIONS.md`.
pub fn control_reason(token_id: &str) -> String {
    format!("drover web {token_id}")
}

/// The run's state as `loop status` reads it now.
fn run_state(state: &StateDir, n: u32) -> Option<RunState> {
    let st = crate::runstate::status::read(state, n).ok()??;
    Some(st.live_state())
}

/// Pause, resume or close out a run.
pub fn control(cx: &Ctx, req: &ControlReq) -> Reply {
    let target = format!("loop{}", req.run);
    let r = control_inner(cx, req, &target);
    audit(cx, &req.control.text, &target, &r);
    r
}

fn control_inner(cx: &Ctx, req: &ControlReq, target: &str) -> Reply {
    let c = match req.control.known {
        Some(c @ (Control::Pause | Control::Resume | Control::CloseOut)) => c,
        _ => {
            return refused(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "unknown control {:?} (pause, resume or close-out)",
                    req.control.text
                ),
            );
        }
    };
    let state = StateDir::new(&cx.state_dir);
    let Some(now) = run_state(state, req.run) else {
        return refused(StatusCode::NOT_FOUND, format!("no run {target}"));
    };
    if req.state.known != Some(now) {
        return refused(
            StatusCode::CONFLICT,
            format!("the state moved on: {target} is now {now}"),
        );
    }
    let reason = control_reason(&cx.token_id);
    match control::request(state, req.run, c, &reason) {
        Ok(Requested::Set(set)) => {
            let ruling = set.ruling().map_or("none (running)", |r| r.0.as_str());
            (
                StatusCode::OK,
                json!({"ok": true, "message": format!("{target}: {} set; ruling now: {ruling}", c.as_str())}),
            )
        }
        Ok(Requested::CloseWithoutResume) => match close_detached(cx, req.run, &reason) {
            Ok(()) => (
                StatusCode::ACCEPTED,
                json!({"ok": true, "message": format!("{target}: closing it (its loop process is gone)")}),
            ),
            Err(e) => refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot start the close-out of {target}: {e}"),
            ),
        },
        Err(e @ (ControlError::Closed { .. } | ControlError::NotRunning { .. })) => {
            refused(StatusCode::CONFLICT, e.to_string())
        }
        Err(e) => refused(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    }
}

/// `drover loop control loopN close-out` as a detached child (it closes the
/// run as `loop run --resume N` would open it); reaped by a thread.
fn close_detached(cx: &Ctx, n: u32, reason: &str) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(&cx.exe)
        .arg("--state-dir")
        .arg(&cx.state_dir)
        .arg("--no-autostart")
        .args(["loop", "control", &format!("loop{n}"), "close-out"])
        .args(["--reason", reason])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    std::thread::Builder::new()
        .name("web-close-out".into())
        .spawn(move || {
            let _ = child.wait();
        })?;
    Ok(())
}
