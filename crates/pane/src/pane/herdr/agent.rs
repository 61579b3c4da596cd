//! herdr's own reading of a pane's agent, beside drover's: one
//! `events.subscribe` connection per pane for `pane.agent_status_changed`
//! (herdr pushes each change; nothing is asked while nothing changes), its
//! starting point from `pane.get`. herdr recognises an agent by the pane's
//! foreground process name (`claude`, `codex`, …): a pane where it sees
//! none has no `backend_state`.

use super::pane::{HerdrPane, lock};
use super::watch::current;
use super::{Fault, REQUEST_TIMEOUT};
use serde_json::{Value, json};
use std::sync::Weak;
use std::time::Duration;

/// How long one wait for an event lasts before the watcher checks that its
/// generation still runs.
const EVENT_WAIT: Duration = Duration::from_secs(10);
/// The watcher backs off from this …
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
/// … to this while herdr cannot be reached or refuses the subscription.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// herdr's state from a `PaneInfo` or a `pane.agent_status_changed`
/// event: `None` when herdr sees no agent there.
pub(super) fn state_of(info: &Value) -> Option<String> {
    info["agent"].as_str()?;
    info["agent_status"].as_str().map(String::from)
}

/// Follow herdr's state of the generation's agent until the generation
/// ends. Shell panes have none to follow.
pub(super) fn watch(weak: Weak<HerdrPane>, generation: u64) {
    let mut delay = crate::backoff::Backoff::new(BACKOFF_FIRST, BACKOFF_MAX);
    loop {
        let Some(p) = weak.upgrade() else { return };
        let Some((pane_id, exited)) = current(&p, generation) else {
            return;
        };
        if exited || lock(&p.inner).spec.agent == "shell" {
            return;
        }
        let client = p.host.client().clone();
        drop(p);
        let sub = json!([{"type": "pane.agent_status_changed", "pane_id": pane_id}]);
        let failed = match client.subscribe(sub) {
            Ok(mut events) => follow(&weak, generation, &pane_id, &mut events),
            Err(f) => Some(f),
        };
        let Some(f) = failed else { return };
        let Some(p) = weak.upgrade() else { return };
        tracing::debug!(pane = %p.name_str(), error = %f, "herdr agent status");
        p.set_backend_state(generation, None);
        drop(p);
        std::thread::sleep(delay.next_delay());
    }
}

/// Read one subscription's events; `None` once the generation is over,
/// else why the subscription broke.
fn follow(
    weak: &Weak<HerdrPane>,
    generation: u64,
    pane_id: &str,
    events: &mut super::client::Subscription,
) -> Option<Fault> {
    // Subscribed first, then the state now: a change between the two is
    // in both, and the event (later) wins.
    {
        let p = weak.upgrade()?;
        let now = p.host.client().request(
            "pane.get",
            json!({"pane_id": pane_id}),
            REQUEST_TIMEOUT,
            false,
        );
        match now {
            Ok(r) => p.set_backend_state(generation, state_of(&r["pane"])),
            Err(f) => return Some(f),
        }
    }
    loop {
        let next = events.next(EVENT_WAIT);
        let p = weak.upgrade()?;
        match current(&p, generation) {
            Some((_, false)) => {}
            _ => return None,
        }
        match next {
            Ok(Some(v)) if v["event"] == "pane.agent_status_changed" => {
                p.set_backend_state(generation, state_of(&v["data"]));
            }
            Ok(_) => {}
            Err(f) => return Some(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_only_where_herdr_sees_an_agent() {
        let seen = json!({"agent": "claude", "agent_status": "working"});
        assert_eq!(state_of(&seen).as_deref(), Some("working"));
        let none = json!({"agent": null, "agent_status": "unknown"});
        assert_eq!(state_of(&none), None);
    }
}
