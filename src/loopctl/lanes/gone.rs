//! A lane whose pane or backend is gone while its job runs: seen in the
//! supervisor's live listing (`pane.ls`: the pane's `exit`, `lost` and
//! `transport_error`), said at once, never waited out to the turn timeout.
//! The job fails in the engine with the cause, so the task parks naming it.

use crate::engine::{Action, Actor, Engine, Request};
use serde_json::Value;
use std::time::Duration;

/// How often a wait for outcomes looks at its lanes' panes; a job whose
/// pane two looks in a row find gone (so at least this long) is failed.
pub const PANE_CHECK_EVERY: Duration = Duration::from_millis(500);

/// Why the pane `pane` of lane `lane` can no longer work job `job`, from
/// its entry in the live listing (`None`: not listed); `None` while it lives.
pub fn gone_reason(lane: &str, pane: &str, job: &str, entry: Option<&Value>) -> Option<String> {
    let Some(p) = entry else {
        return Some(format!(
            "lane {lane}'s pane {pane} is gone from the supervisor while job {job} ran"
        ));
    };
    if p["lost"].as_bool() == Some(true) {
        return Some(format!(
            "lane {lane}'s pane {pane} was lost with an earlier supervisor while job {job} ran"
        ));
    }
    let exit = &p["exit"];
    if exit.is_null() {
        return None;
    }
    let how = match (exit["signal"].as_str(), exit["code"].as_i64()) {
        (Some(s), _) => format!("killed by signal {s}"),
        // 128 + N: the command's own word that signal N ended it.
        (None, Some(c)) if (129..=192).contains(&c) => format!(
            "exited with code {c} (signal {})",
            crate::pane::signal_name((c - 128) as i32)
        ),
        (None, Some(c)) => format!("exited with code {c}"),
        (None, None) => "exited".to_string(),
    };
    let backend = p["backend"].as_str().unwrap_or("its");
    let mut why = format!("lane {lane}'s {backend} pane {pane} {how} while job {job} ran");
    if let Some(t) = p["transport_error"].as_str().filter(|t| !t.is_empty()) {
        why.push_str(&format!(": {t}"));
    }
    Some(why)
}

/// The listing's entry for pane `pane`.
pub fn entry<'a>(listing: &'a Value, pane: &str) -> Option<&'a Value> {
    listing
        .as_array()?
        .iter()
        .find(|p| p["name"].as_str() == Some(pane))
}

/// Fail `job` in the engine with `reason` (a job that settled meanwhile
/// keeps its own outcome: the engine refuses the request).
pub fn fail_job(engine: &Engine, job: &str, reason: &str) {
    let _ = engine.transition(&Request::new(
        job.to_string(),
        Action::Fail {
            reason: Some(reason.to_string()),
        },
        Actor::operator(),
    ));
}

#[cfg(test)]
mod tests {
    use super::gone_reason;
    use serde_json::json;

    #[test]
    fn a_live_pane_is_not_gone_and_each_end_is_named() {
        let live = json!({"name": "l1", "backend": "native", "exit": null});
        assert_eq!(gone_reason("l1", "l1", "j", Some(&live)), None);
        let hup = json!({"name": "l1", "backend": "native",
                         "exit": {"code": null, "signal": "Hangup", "at_ms": 1}});
        let why = gone_reason("l1", "l1", "j", Some(&hup)).unwrap();
        assert!(why.contains("killed by signal Hangup"), "{why}");
        let own = json!({"name": "l1", "backend": "native",
                         "exit": {"code": 129, "signal": null, "at_ms": 1}});
        let why = gone_reason("l1", "l1", "j", Some(&own)).unwrap();
        assert!(why.contains("code 129 (signal Hangup)"), "{why}");
        let herdr = json!({"name": "l1", "backend": "herdr",
                           "exit": {"code": 0, "signal": null, "at_ms": 1},
                           "transport_error": "herdr's server went away"});
        let why = gone_reason("l1", "l1", "j", Some(&herdr)).unwrap();
        assert!(
            why.contains("herdr pane l1 exited with code 0") && why.contains("went away"),
            "{why}"
        );
        let lost = json!({"name": "l1", "lost": true, "exit": null});
        assert!(
            gone_reason("l1", "l1", "j", Some(&lost))
                .unwrap()
                .contains("lost")
        );
        assert!(gone_reason("l1", "l1", "j", None).unwrap().contains("gone"));
    }
}
