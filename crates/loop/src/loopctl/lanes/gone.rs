//! A lane whose pane or backend is gone while its job runs: seen in the
//! supervisor's live listing (`pane.ls`: the pane's `exit`, `lost` and
//! `transport_error`), said at once, never waited out to the turn timeout.
//! The job fails in the engine with the cause, so the task parks naming it.

use crate::engine::{Action, Actor, Engine, Request};
use crate::proto::PaneEntry;
use std::time::Duration;

/// How often a wait for outcomes looks at its lanes' panes; a job whose
/// pane two looks in a row find gone (so at least this long) is failed.
pub const PANE_CHECK_EVERY: Duration = Duration::from_millis(500);

/// Why the pane `pane` of lane `lane` can no longer work job `job`, from
/// its entry in the live listing (`None`: not listed); `None` while it lives.
pub fn gone_reason(lane: &str, pane: &str, job: &str, entry: Option<&PaneEntry>) -> Option<String> {
    let p = match entry {
        None => {
            return Some(format!(
                "lane {lane}'s pane {pane} is gone from the supervisor while job {job} ran"
            ));
        }
        Some(PaneEntry::Lost(_)) => {
            return Some(format!(
                "lane {lane}'s pane {pane} was lost with an earlier supervisor while job {job} ran"
            ));
        }
        Some(PaneEntry::Live(p)) => p,
    };
    let exit = p.info.exit.as_ref()?;
    let how = match (exit.signal.as_deref(), exit.code) {
        (Some(s), _) => format!("killed by signal {s}"),
        // 128 + N: the command's own word that signal N ended it.
        (None, Some(c)) if (129..=192).contains(&c) => format!(
            "exited with code {c} (signal {})",
            crate::pane::signal_name(c - 128)
        ),
        (None, Some(c)) => format!("exited with code {c}"),
        (None, None) => "exited".to_string(),
    };
    let backend = &p.info.backend;
    let mut why = format!("lane {lane}'s {backend} pane {pane} {how} while job {job} ran");
    if let Some(t) = p.transport_error.as_deref().filter(|t| !t.is_empty()) {
        why.push_str(&format!(": {t}"));
    }
    Some(why)
}

/// The listing's entry for pane `pane`.
pub fn entry<'a>(listing: &'a [PaneEntry], pane: &str) -> Option<&'a PaneEntry> {
    listing.iter().find(|p| p.name() == pane)
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
    use crate::proto::pane::{ExitInfo, PaneInfo};
    use crate::proto::{PaneEntry, PaneView, Snapshot};
    use serde_json::json;

    fn pane(backend: &str, exit: Option<ExitInfo>, transport_error: Option<&str>) -> PaneEntry {
        let observation: Snapshot = serde_json::from_value(json!({
            "pane": "l1", "generation": 1, "state": "idle", "kind": null, "exit_code": null,
            "since_ms": 0, "since": "", "evidence": [], "screen_hash": ""
        }))
        .unwrap();
        PaneEntry::Live(Box::new(PaneView {
            info: PaneInfo {
                name: "l1".into(),
                backend: backend.parse().unwrap(),
                pid: 1,
                generation: 1,
                cols: 80,
                rows: 24,
                agent: "shell".into(),
                argv: vec![],
                env_names: vec![],
                env_verified: true,
                cwd: None,
                started_at_ms: 0,
                bytes: 0,
                exit,
                attached: false,
            },
            backend_pane_id: None,
            attach_command: None,
            transport_error: transport_error.map(str::to_string),
            backend_state: None,
            usage: None,
            observation,
        }))
    }

    fn exit(code: Option<i32>, signal: Option<&str>) -> Option<ExitInfo> {
        Some(ExitInfo {
            code,
            signal: signal.map(str::to_string),
            at_ms: 1,
        })
    }

    #[test]
    fn a_live_pane_is_not_gone_and_each_end_is_named() {
        let live = pane("native", None, None);
        assert_eq!(gone_reason("l1", "l1", "j", Some(&live)), None);
        let hup = pane("native", exit(None, Some("Hangup")), None);
        let why = gone_reason("l1", "l1", "j", Some(&hup)).unwrap();
        assert!(why.contains("killed by signal Hangup"), "{why}");
        let own = pane("native", exit(Some(129), None), None);
        let why = gone_reason("l1", "l1", "j", Some(&own)).unwrap();
        assert!(why.contains("code 129 (signal Hangup)"), "{why}");
        let herdr = pane(
            "herdr",
            exit(Some(0), None),
            Some("herdr's server went away"),
        );
        let why = gone_reason("l1", "l1", "j", Some(&herdr)).unwrap();
        assert!(
            why.contains("herdr pane l1 exited with code 0") && why.contains("went away"),
            "{why}"
        );
        let lost: PaneEntry = serde_json::from_value(json!({
            "name": "l1", "backend": "native", "pid": 1, "generation": 1, "agent": "shell",
            "cols": null, "rows": null, "lost": true, "note": "", "left_running": 0,
            "observation": {"pane": "l1", "state": "lost", "generation": 1, "since_ms": 0}
        }))
        .unwrap();
        assert!(
            gone_reason("l1", "l1", "j", Some(&lost))
                .unwrap()
                .contains("lost")
        );
        assert!(gone_reason("l1", "l1", "j", None).unwrap().contains("gone"));
    }
}
