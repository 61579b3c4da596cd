//! The `pane.answer` op: act on the dialog a pane is blocked on and confirm
//! that the pane left it (docs/agents.md "Answering dialogs", docs/protocol.md).
//! The keys come from [`crate::agent::dialog`]; here they are sent, and the
//! screen is watched — woken by the pane's output, not by a timer loop — until
//! the dialog is gone. A key the agent dropped (Claude 2.1.332 drops one sent
//! the instant its first dialog is drawn) is sent again once, never twice.

use super::protocol::{ErrorCode, Response};
use super::server::{Entry, Sup, pane_err};
use crate::agent::AgentKind;
use crate::agent::State;
use crate::agent::dialog::{self, Action, Dialog, DialogKind, Plan};
use crate::proto::args::{AnswerAction, PaneAnswer};
use crate::proto::reply::Answered;
use std::sync::Arc;
use std::time::Duration;

/// The dialog must have been drawn and quiet this long before a key is sent.
pub const DIALOG_QUIET: Duration = Duration::from_millis(200);
/// At most this long is spent waiting for that quiet.
pub const QUIET_WAIT_MAX: Duration = Duration::from_secs(3);
/// A key that changed nothing within this time is taken as dropped.
pub const KEY_TAKEN_TIMEOUT: Duration = Duration::from_secs(3);
/// How long an answer waits for the screen to draw the dialog when the pane
/// is blocked by the agent's own signal before the frame shows it (a
/// `PermissionRequest` hook comes first); the fusion's disagreement bound.
pub const DIALOG_APPEAR: Duration =
    Duration::from_millis(crate::agent::signals::fuse::DISAGREE_BOUND_MS);
/// After the one retry, how long the pane may take to leave the dialog.
pub const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the reply waits for the classified state to catch up with a
/// screen that has left the dialog (the screen moves first).
pub const STATE_CATCHUP: Duration = Duration::from_secs(2);

fn refused(msg: String) -> Response {
    Response::err(0, ErrorCode::Refused, msg)
}

fn same(a: &Dialog, b: &Dialog) -> bool {
    a.kind == b.kind
        && a.title == b.title
        && a.choices.len() == b.choices.len()
        && a.choices
            .iter()
            .zip(&b.choices)
            .all(|(x, y)| x.label == y.label)
}

fn current(entry: &Entry, kind: AgentKind) -> Option<Dialog> {
    entry
        .pane
        .with_screen(|s, _| dialog::parse(kind, &s.rows(), usize::from(s.size().0)))
}

/// Wait until `cond` holds for the pane's dialog (or its absence), woken by
/// output; false on timeout.
async fn wait_screen(
    entry: &Entry,
    kind: AgentKind,
    timeout: Duration,
    cond: impl Fn(Option<&Dialog>) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut out = entry.output.subscribe();
    loop {
        out.borrow_and_update();
        if cond(current(entry, kind).as_ref()) {
            return true;
        }
        tokio::select! {
            changed = out.changed() => if changed.is_err() { return false },
            _ = tokio::time::sleep_until(deadline) => return cond(current(entry, kind).as_ref()),
        }
    }
}

/// Wait (bounded) until the pane's output has been quiet for [`DIALOG_QUIET`].
async fn settle(entry: &Entry) {
    let deadline = tokio::time::Instant::now() + QUIET_WAIT_MAX;
    loop {
        let quiet = entry.pane.with_screen(|_, m| m.quiet);
        if quiet >= DIALOG_QUIET || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(DIALOG_QUIET - quiet).await;
    }
}

fn send(entry: &Entry, keys: &[String]) -> Result<(), Response> {
    if keys.is_empty() {
        return Ok(());
    }
    entry.pane.send_keys(keys).map_err(pane_err)
}

/// Put the cursor on the plan's target (re-planned from the screen once if
/// the first keys were dropped), then send the confirming keys; confirmed when
/// the dialog is gone. Returns the keys sent and the attempts made.
async fn execute(
    entry: &Entry,
    kind: AgentKind,
    d: &Dialog,
    action: &Action,
    p: Plan,
) -> Result<(Vec<String>, u32), Response> {
    let mut sent = Vec::new();
    let mut attempts = 1;
    if let Some(target) = &p.target {
        let on = |x: Option<&Dialog>| x.and_then(dialog::selected) == Some(target.as_str());
        send(entry, &p.nav)?;
        sent.extend(p.nav.iter().cloned());
        if !wait_screen(entry, kind, KEY_TAKEN_TIMEOUT, on).await {
            let now = current(entry, kind).filter(|x| same(x, d)).ok_or_else(|| {
                refused(
                    "the dialog changed while its answer was being chosen; look at the pane".into(),
                )
            })?;
            let again = dialog::plan(&now, action).map_err(|e| refused(e.to_string()))?;
            attempts += 1;
            send(entry, &again.nav)?;
            sent.extend(again.nav.iter().cloned());
            if !wait_screen(entry, kind, KEY_TAKEN_TIMEOUT, on).await {
                return Err(Response::err(
                    0,
                    ErrorCode::Timeout,
                    format!("the cursor did not reach {target:?}; nothing was confirmed"),
                ));
            }
        }
    }
    let gone = |x: Option<&Dialog>| !x.is_some_and(|x| same(x, d));
    send(entry, &p.confirm)?;
    sent.extend(p.confirm.iter().cloned());
    if wait_screen(entry, kind, KEY_TAKEN_TIMEOUT, gone).await {
        return Ok((sent, attempts));
    }
    // Still the same dialog and quiet: the key was dropped. Once more.
    settle(entry).await;
    if gone(current(entry, kind).as_ref()) {
        return Ok((sent, attempts));
    }
    attempts += 1;
    send(entry, &p.confirm)?;
    sent.extend(p.confirm.iter().cloned());
    if wait_screen(entry, kind, LEAVE_TIMEOUT, gone).await {
        return Ok((sent, attempts));
    }
    Err(Response::err(
        0,
        ErrorCode::Timeout,
        format!(
            "the pane still shows the {} dialog after {attempts} tries",
            d.kind.as_str()
        ),
    ))
}

/// The pane's state once its observation has caught up with the screen that
/// left the dialog: the first state other than `blocked`, or after
/// [`STATE_CATCHUP`] whatever it is (a dialog that follows is `blocked` again).
/// Read at once, the observation still said `blocked` about the dialog just
/// answered.
async fn state_after(sup: &Sup, entry: &Entry) -> State {
    let read = || super::server::lock(&entry.obs).state;
    let deadline = tokio::time::Instant::now() + STATE_CATCHUP;
    let mut epoch = sup.epoch.subscribe();
    loop {
        epoch.borrow_and_update();
        let state = read();
        if state != State::Blocked {
            return state;
        }
        tokio::select! {
            changed = epoch.changed() => if changed.is_err() { return read() },
            _ = tokio::time::sleep_until(deadline) => return read(),
        }
    }
}

fn parse_action(args: &PaneAnswer) -> Result<Action, Response> {
    let usage = |m: &str| Response::err(0, ErrorCode::Usage, m.to_string());
    match args.action {
        AnswerAction::Approve => Ok(Action::Approve),
        AnswerAction::Deny => Ok(Action::Deny),
        AnswerAction::Answer => {
            let c = args
                .choice
                .as_deref()
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| {
                    usage("`answer` needs a string field `choice` (a number or a label)")
                })?;
            Ok(match c.parse::<u32>() {
                Ok(n) => Action::Number(n),
                Err(_) => Action::Label(c.to_string()),
            })
        }
    }
}

/// The `pane.answer` op.
pub(super) async fn answer(sup: &Arc<Sup>, args: PaneAnswer) -> Result<Answered, Response> {
    let name = args.pane.as_str();
    let action = parse_action(&args)?;
    let entry = sup.entry(name)?;
    let kind = super::observe::kind_of(&entry.pane.info().agent);
    settle(&entry).await;
    let mut d = current(&entry, kind);
    let asks = |e: &Entry| {
        let o = super::server::lock(&e.obs);
        o.state == State::Blocked
            && matches!(
                o.kind,
                Some(crate::agent::BlockedKind::Permission | crate::agent::BlockedKind::Question)
            )
    };
    if d.is_none() && asks(&entry) {
        // The agent said it asks (its hook) before the screen drew the
        // dialog, and the screen is what the answer acts on: wait for it.
        if wait_screen(&entry, kind, DIALOG_APPEAR, |x| x.is_some()).await {
            settle(&entry).await;
            d = current(&entry, kind);
        }
    }
    let Some(d) = d else {
        let state = super::server::lock(&entry.obs).label();
        return Err(refused(format!(
            "pane {name} is not blocked on a dialog (it is {state}, no dialog on screen); nothing was sent"
        )));
    };
    let p = dialog::plan(&d, &action).map_err(|e| refused(format!("pane {name}: {e}")))?;
    let (mut keys, mut attempts) = execute(&entry, kind, &d, &action, p).await?;
    let mut dialogs = vec![d.kind.as_str()];
    // Claude's auto-mode dialog asks again for the action itself: approve that too.
    if d.kind == DialogKind::ClaudeAutoMode && action == Action::Approve {
        let asked = wait_screen(&entry, kind, LEAVE_TIMEOUT, |x| {
            x.is_some_and(|x| x.kind == DialogKind::ClaudePermission)
        })
        .await;
        if asked {
            settle(&entry).await;
            if let Some(next) = current(&entry, kind) {
                let p = dialog::plan(&next, &action).map_err(|e| refused(e.to_string()))?;
                let (k, a) = execute(&entry, kind, &next, &action, p).await?;
                keys.extend(k);
                attempts += a;
                dialogs.push(next.kind.as_str());
            }
        }
    }
    let state = state_after(sup, &entry).await;
    Ok(Answered {
        pane: name.to_string(),
        dialog: dialogs[0].to_string(),
        dialogs: dialogs.iter().map(|d| d.to_string()).collect(),
        title: d.title,
        keys,
        attempts,
        left: true,
        state,
    })
}
