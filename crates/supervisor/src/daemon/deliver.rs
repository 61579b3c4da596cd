//! Confirmed prompt delivery (docs/agents.md): wait until the agent is ready, write
//! the prompt the way its TUI wants it, and confirm that the agent left idle
//! for working with the prompt on screen. At most one retry, and a retry never
//! submits twice: it only presses Enter on a prompt still sitting in the
//! composer, or re-sends when no trace of the first send is on screen.

use super::hub::Snapshot;
use super::protocol::{ErrorCode, Response};
use super::server::{Entry, Sup};
use crate::agent::adapter::{prompt_probe, prompt_tail, shows_prompt};
use crate::agent::{AgentKind, delivery_plan};
use crate::agent::{BlockedKind, State};
use crate::proto::args::Deliver;
use crate::proto::reply::Delivered;
use std::sync::Arc;
use std::time::Duration;

/// Default time to wait for the agent to be ready for a prompt.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time for the agent to show it took the prompt.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a pasted prompt may take to show in the composer before Enter.
const PASTE_SHOWN_TIMEOUT: Duration = Duration::from_secs(2);
/// The bottom non-blank lines that hold the composer.
const COMPOSER_LINES: usize = 8;

fn refused(msg: String) -> Response {
    Response::err(0, ErrorCode::Refused, msg)
}

/// Whether the composer (the bottom lines) shows the prompt: its first line,
/// the end of its last line, or a paste placeholder.
fn in_composer(screen: &str, snippet: &str, tail: &str) -> bool {
    let composer = bottom(screen, COMPOSER_LINES);
    // A short tail ("- a") could match anything; only a distinctive one counts.
    shows_prompt(&composer, snippet) || (tail.chars().count() >= 8 && shows_prompt(&composer, tail))
}

/// True when the paste has landed: the screen changed since `before` and its
/// composer shows the prompt or a paste placeholder.
fn paste_shown(before: &str, now: &str, snippet: &str, tail: &str) -> bool {
    now != before && in_composer(now, snippet, tail)
}

async fn write_prompt(entry: &Entry, kind: AgentKind, text: &str) -> Result<(), Response> {
    let bracketed = entry.pane.pastes_bracketed();
    let before = entry.pane.with_screen(|s, _| s.text());
    let snip = prompt_probe(text);
    let tail = prompt_tail(text);
    let plan = delivery_plan(kind, text, bracketed);
    let last = plan.len().saturating_sub(1);
    for (i, w) in plan.into_iter().enumerate() {
        if bracketed && i == last && i > 0 {
            // Claude drops an Enter that arrives while it still takes in a
            // long paste (it shows `[Pasted text #1 +N lines]` a moment
            // later): press Enter once the composer shows the prompt, or
            // after PASTE_SHOWN_TIMEOUT as before.
            // Woken by the pane's output, not by a timer loop.
            let deadline = tokio::time::Instant::now() + PASTE_SHOWN_TIMEOUT;
            let mut out = entry.output.subscribe();
            while !paste_shown(
                &before,
                &entry.pane.with_screen(|s, _| s.text()),
                &snip,
                &tail,
            ) {
                tokio::select! {
                    changed = out.changed() => if changed.is_err() { break },
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        if w.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(w.delay_ms)).await;
        }
        entry
            .pane
            .write_input(&w.bytes)
            .map_err(super::server::pane_err)?;
    }
    Ok(())
}

/// The `deliver` op.
pub(super) async fn deliver(sup: &Arc<Sup>, args: Deliver) -> Result<Delivered, Response> {
    let (name, text) = (args.pane.as_str(), args.text.as_str());
    if text.trim().is_empty() {
        return Err(Response::err(0, ErrorCode::Usage, "the prompt is empty"));
    }
    let ms = |v: Option<u64>, d: Duration| v.map(Duration::from_millis).unwrap_or(d);
    let ready_timeout = ms(args.ready_timeout_ms, READY_TIMEOUT);
    let confirm_timeout = ms(args.confirm_timeout_ms, CONFIRM_TIMEOUT);
    let nonce = args
        .nonce
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let entry = sup.entry(name)?;
    let kind = super::observe::kind_of(&entry.pane.info().agent);

    let ready = sup
        .wait_for(&entry, ready_timeout, |s| {
            matches!(
                s.state,
                State::Idle | State::Done | State::Blocked | State::Exited
            )
        })
        .await?;
    let before = match ready {
        Some(s) if matches!(s.state, State::Idle | State::Done) => s,
        Some(s) => {
            return Err(refused(format!(
                "not delivered to {name}: the agent is {}{} — {}",
                s.state,
                s.kind.map(|k| format!(":{k}")).unwrap_or_default(),
                if s.kind == Some(BlockedKind::Setup) {
                    "its environment needs fixing (login, trust, API key); no prompt will help"
                } else {
                    "answer it first"
                }
            )));
        }
        None => {
            let s = sup.snapshot(&entry);
            return Err(refused(format!(
                "not delivered to {name}: not ready within {} ms (state {})",
                ready_timeout.as_millis(),
                s.state
            )));
        }
    };
    let snip = prompt_probe(text);
    let tail = prompt_tail(text);
    let took = |before: &Snapshot| {
        let (before, pane) = (before.clone(), entry.pane.clone());
        let (snip, tail) = (snip.clone(), tail.clone());
        move |s: &Snapshot| {
            left_idle(&before, s, || {
                // Codex's submitted prompt stays in view above its composer
                // while it streams; only Claude's composer is asked.
                kind == AgentKind::Claude
                    && pane.with_screen(|sc, _| in_composer(&sc.text(), &snip, &tail))
            })
        }
    };
    let mut attempts = 1;
    write_prompt(&entry, kind, text).await?;
    let mut confirmed = sup.wait_for(&entry, confirm_timeout, took(&before)).await?;
    if confirmed.is_none() {
        // One retry, chosen so that nothing can be submitted twice.
        let (screen, state) = (
            entry.pane.with_screen(|s, _| s.text()),
            sup.snapshot(&entry).state,
        );
        if state == State::Idle || state == State::Done {
            attempts = 2;
            if in_composer(&screen, &snip, &tail) {
                // The prompt sits in the composer: Enter was taken as a newline.
                entry
                    .pane
                    .write_input(b"\r")
                    .map_err(super::server::pane_err)?;
            } else if !shows_prompt(&screen, &snip) {
                write_prompt(&entry, kind, text).await?;
            } else {
                attempts = 1;
            }
            if attempts == 2 {
                confirmed = sup.wait_for(&entry, confirm_timeout, took(&before)).await?;
            }
        }
    }
    let Some(after) = confirmed else {
        let s = sup.snapshot(&entry);
        return Err(refused(format!(
            "not delivered to {name}: the agent did not start working within {} ms after {attempts} attempt(s) (state {})",
            confirm_timeout.as_millis(),
            s.state
        )));
    };
    let screen = entry.pane.with_screen(|s, _| s.text());
    let prompt_visible = shows_prompt(&screen, &snip);
    Ok(Delivered {
        pane: name.to_string(),
        delivered: true,
        nonce,
        attempts,
        generation: after.generation,
        state: after.state,
        prompt_visible,
    })
}

/// Whether the agent took the prompt: it left `before` (idle or done) for
/// working or blocked, for a new done after idle, or for `unknown` on a
/// changed screen — Codex streaming a reply reads `unknown` while its screen
/// and title disagree — unless the prompt still sits in Claude's composer
/// (`prompt_waiting`, asked only then): a prompt typed and never submitted
/// also changes the screen.
fn left_idle(before: &Snapshot, s: &Snapshot, prompt_waiting: impl FnOnce() -> bool) -> bool {
    if s.generation != before.generation {
        return false;
    }
    match s.state {
        State::Working | State::Blocked => true,
        State::Unknown => s.screen_hash != before.screen_hash && !prompt_waiting(),
        State::Done => s.screen_hash != before.screen_hash && before.state == State::Idle,
        _ => false,
    }
}

fn bottom(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(state: &str, hash: &str) -> Snapshot {
        Snapshot {
            pane: "p".into(),
            generation: 1,
            state: state.parse().unwrap(),
            kind: None,
            exit_code: None,
            since_ms: 0,
            since: String::new(),
            evidence: Vec::new(),
            screen_hash: hash.into(),
            seq: 0,
            source: Default::default(),
        }
    }

    /// Guards the false `delivered: true` for a prompt typed into Claude's
    /// composer and never submitted: the typing changed the screen, which
    /// read `unknown`, and that alone counted as taken.
    #[test]
    fn unknown_with_the_prompt_still_in_the_composer_is_not_taken() {
        let idle = snap("idle", "a");
        assert!(!left_idle(&idle, &snap("unknown", "b"), || true));
        assert!(left_idle(&idle, &snap("unknown", "b"), || false));
        assert!(!left_idle(&idle, &snap("unknown", "a"), || false));
        assert!(left_idle(&idle, &snap("working", "a"), || true));
        assert!(left_idle(&idle, &snap("done", "b"), || true));
        assert!(!left_idle(&snap("done", "a"), &snap("done", "b"), || false));
        let mut other = snap("working", "b");
        other.generation = 2;
        assert!(!left_idle(&idle, &other, || false));
    }

    #[test]
    fn a_tall_prompt_is_found_in_the_composer_by_its_tail() {
        let prompt = format!("{}\nfinish by writing the report now", "word ".repeat(200));
        let mut screen = String::from("transcript\n");
        // The composer shows only the wrapped end of the prompt.
        for _ in 0..10 {
            screen.push_str("word word word word word word word word\n");
        }
        screen.push_str("  finish by writing the report now\n");
        assert!(!shows_prompt(
            &bottom(&screen, COMPOSER_LINES),
            &prompt_probe(&prompt)
        ));
        assert!(in_composer(
            &screen,
            &prompt_probe(&prompt),
            &prompt_tail(&prompt)
        ));
        assert!(!in_composer(
            "❯ \n? for shortcuts\n",
            &prompt_probe(&prompt),
            &prompt_tail(&prompt)
        ));
        assert_eq!(prompt_tail("a\n  the   end  \n\n"), "the end");
    }

    /// Claude 2.1.197 right after a 17-line bracketed paste (the dispatch
    /// prompt with its trailer), and a moment later.
    const IDLE: &str = " ▐▛███▜▌   Claude Code v2.1.197\n  ▘▘ ▝▝    ~/project\n\n────────\n❯ \n────────\n  ? for shortcuts · ← for agents\n";
    const PASTED: &str = " ▐▛███▜▌   Claude Code v2.1.197\n  ▘▘ ▝▝    ~/project\n\n────────\n❯ [Pasted text #1 +17 lines]\n────────\n  paste again to expand\n";

    #[test]
    fn enter_waits_until_the_paste_shows_in_the_composer() {
        let prompt = "write out.txt for this job\n\nContext:\n- a\n";
        let snip = prompt_probe(prompt);
        let t = prompt_tail(prompt);
        assert!(!paste_shown(IDLE, IDLE, &snip, &t), "nothing pasted yet");
        assert!(paste_shown(IDLE, PASTED, &snip, &t), "the placeholder");
        let typed = IDLE.replace("❯ \n", "❯ write out.txt for this job\n");
        assert!(
            paste_shown(IDLE, &typed, &snip, &t),
            "a short prompt shown as text"
        );
        // The prompt far above the composer (an earlier turn) does not count.
        let mut old = String::from("❯ write out.txt for this job\n");
        old.push_str(&"● reply line\n".repeat(10));
        old.push_str(IDLE);
        assert!(!paste_shown(IDLE, &old, &snip, &t));
        assert!(
            paste_shown(IDLE, "[Pasted Content 1030 chars]\n", "x", ""),
            "Codex"
        );
    }
}
