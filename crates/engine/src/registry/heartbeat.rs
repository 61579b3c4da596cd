//! Heartbeats (docs/registry.md): a session or one of its lanes reports a status for a
//! task; past its TTL (30 min by default) a session is `stale`.

use super::schema::{Agent, Registry, Session};
use super::{RegistryError, validate_id};
use crate::statedir::StateDir;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;

/// A heartbeat older than this is stale unless the heartbeat set its own TTL.
pub const DEFAULT_TTL_S: u64 = 30 * 60;
/// The longest TTL a heartbeat may ask for.
pub const MAX_TTL_S: u64 = 7 * 24 * 3600;
/// Statuses that count as a pass.
pub const PASS_CLASS: &[&str] = &["pass", "passed", "clear", "approved"];
/// Statuses that count as a fail.
pub const FAIL_CLASS: &[&str] = &["fail", "failed", "blocked", "rejected"];
/// Statuses that are neither: the session or lane is at work, or waiting.
pub const NEUTRAL_CLASS: &[&str] = &["active", "idle", "working", "reviewing", "waiting"];
/// The status a session falls back to when a lane moves it to another task.
pub const ACTIVE: &str = "active";

/// Whether a status is pass-class.
pub fn is_pass(status: &str) -> bool {
    PASS_CLASS.contains(&status)
}

/// Whether a status is fail-class.
pub fn is_fail(status: &str) -> bool {
    FAIL_CLASS.contains(&status)
}

/// A `drover session-heartbeat` request.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatRequest {
    pub session_id: String,
    /// When given, must be the session's role.
    pub role: Option<String>,
    pub task: Option<String>,
    pub status: String,
    /// Lane-level when given, session-level otherwise.
    pub agent: Option<Agent>,
    pub ttl_s: Option<u64>,
}

fn check_status(s: &str) -> Result<(), RegistryError> {
    if is_pass(s) || is_fail(s) || NEUTRAL_CLASS.contains(&s) {
        return Ok(());
    }
    Err(RegistryError::usage(
        "--status",
        format!(
            "{s:?} is not a status: use a pass-class one ({}), a fail-class one ({}) or a neutral one ({})",
            PASS_CLASS.join(", "),
            FAIL_CLASS.join(", "),
            NEUTRAL_CLASS.join(", ")
        ),
    ))
}

/// Apply a heartbeat to a registry in memory (pure apart from `now`).
pub fn apply(
    reg: &mut Registry,
    req: &HeartbeatRequest,
    now: DateTime<Utc>,
) -> Result<Session, RegistryError> {
    validate_id("--session", &req.session_id)?;
    check_status(&req.status)?;
    if let Some(t) = &req.task {
        validate_id("--task", t)?;
    }
    if let Some(ttl) = req.ttl_s
        && (ttl == 0 || ttl > MAX_TTL_S)
    {
        return Err(RegistryError::usage(
            "--ttl-s",
            format!("must be 1..={MAX_TTL_S}"),
        ));
    }
    let known: Vec<String> = reg.sessions.iter().map(|s| s.session_id.clone()).collect();
    let Some(s) = reg.session_mut(&req.session_id) else {
        return Err(RegistryError::usage(
            "--session",
            format!(
                "no session {:?} in this {} registry (sessions: {})",
                req.session_id,
                reg.topology,
                known.join(", ")
            ),
        ));
    };
    if let Some(role) = &req.role {
        let norm = |x: &str| x.to_ascii_lowercase().replace(char::is_whitespace, "");
        if norm(role) != norm(&s.role) {
            return Err(RegistryError::usage(
                "--role",
                format!("{role:?} is not the role of {} ({})", s.session_id, s.role),
            ));
        }
    }
    let at = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    match req.agent {
        Some(agent) => {
            let task = req.task.clone().or_else(|| s.task.clone());
            if task != s.task {
                // A session-level verdict belongs to the old task; it must not carry over.
                s.status = ACTIVE.into();
            }
            let lane = s.lanes.get_mut(agent);
            lane.status = req.status.clone();
            lane.task = task.clone();
            lane.last_heartbeat = Some(at.clone());
            s.task = task;
        }
        None => {
            // Lanes keep their own task, so their verdicts cannot carry over.
            s.status = req.status.clone();
            if req.task.is_some() {
                s.task = req.task.clone();
            }
        }
    }
    s.last_heartbeat = Some(at);
    if req.ttl_s.is_some() {
        s.heartbeat_ttl_s = req.ttl_s;
    }
    Ok(s.clone())
}

/// Record a heartbeat in `session_registry.json` (under its lock).
pub fn heartbeat(
    state_dir: &StateDir,
    req: &HeartbeatRequest,
    now: DateTime<Utc>,
) -> Result<Session, RegistryError> {
    let s = super::update(state_dir, |reg| apply(reg, req, now))?;
    super::events::emit_quiet(
        state_dir,
        "session.heartbeat",
        json!({"session_id": s.session_id, "agent": req.agent, "task": s.task, "status": req.status}),
    );
    Ok(s)
}

/// How old a timestamp is; `None` when absent or unparseable.
pub fn age(ts: Option<&str>, now: DateTime<Utc>) -> Option<chrono::Duration> {
    let t = DateTime::parse_from_rfc3339(ts?).ok()?;
    Some(now.signed_duration_since(t.with_timezone(&Utc)))
}

/// Freshness of a session's heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Freshness {
    Fresh,
    Stale,
    /// Never reported (or the time does not parse).
    Never,
}

/// The TTL in force for a session.
pub fn ttl_of(s: &Session) -> u64 {
    s.heartbeat_ttl_s.unwrap_or(DEFAULT_TTL_S)
}

/// Freshness of a timestamp under a TTL.
pub fn freshness(ts: Option<&str>, ttl_s: u64, now: DateTime<Utc>) -> Freshness {
    match age(ts, now) {
        None => Freshness::Never,
        Some(a) if a.num_milliseconds() >= (ttl_s as i64).saturating_mul(1000) => Freshness::Stale,
        Some(_) => Freshness::Fresh,
    }
}

/// Whether a session counts for a task in the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "why", rename_all = "kebab-case")]
pub enum SessionVerdict {
    Pass,
    /// A fail-class status for the task.
    Fail(String),
    /// No fresh pass-class status for the task.
    NoPass(String),
}

/// A session passes for a task when its session-level status or one of its
/// lanes' statuses is pass-class and fresh for that task, and none of them is
/// fail-class (pure).
pub fn verdict(s: &Session, task: &str, now: DateTime<Utc>) -> SessionVerdict {
    let ttl = ttl_of(s);
    let mut reports: Vec<(String, &str, Freshness)> = Vec::new();
    if s.task.as_deref() == Some(task) {
        reports.push((
            "session".into(),
            &s.status,
            freshness(s.last_heartbeat.as_deref(), ttl, now),
        ));
    }
    for a in Agent::ALL {
        let l = s.lanes.get(a);
        if l.task.as_deref() == Some(task) {
            reports.push((
                format!("{a} lane"),
                &l.status,
                freshness(l.last_heartbeat.as_deref(), ttl, now),
            ));
        }
    }
    if let Some((who, st, _)) = reports.iter().find(|(_, st, _)| is_fail(st)) {
        return SessionVerdict::Fail(format!("{who} reported {st} for {task}"));
    }
    if reports
        .iter()
        .any(|(_, st, f)| is_pass(st) && *f == Freshness::Fresh)
    {
        return SessionVerdict::Pass;
    }
    if let Some((who, st, _)) = reports.iter().find(|(_, st, _)| is_pass(st)) {
        return SessionVerdict::NoPass(format!(
            "{who} reported {st} for {task} but is stale (ttl {ttl}s)"
        ));
    }
    match (&s.task, s.last_heartbeat.is_some()) {
        (_, false) => SessionVerdict::NoPass("no heartbeat yet".into()),
        (Some(t), true) if t != task => {
            SessionVerdict::NoPass(format!("last heartbeat is for {t}, not {task}"))
        }
        (None, true) => SessionVerdict::NoPass(format!("no heartbeat for {task}")),
        _ => SessionVerdict::NoPass(format!("status {} is not pass-class", s.status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::mix::MixPolicy;
    use crate::registry::topology::Topology;

    fn reg() -> Registry {
        Registry::new(Topology::FourRole, MixPolicy::default())
    }

    fn hb(session: &str, task: &str, status: &str, agent: Option<Agent>) -> HeartbeatRequest {
        HeartbeatRequest {
            session_id: session.into(),
            task: Some(task.into()),
            status: status.into(),
            agent,
            ..Default::default()
        }
    }

    #[test]
    fn lane_heartbeat_sets_lane_and_session_time_and_task() {
        let mut r = reg();
        let now = Utc::now();
        let s = apply(
            &mut r,
            &hb("reviewer", "T-1", "passed", Some(Agent::Codex)),
            now,
        )
        .unwrap();
        assert_eq!(s.lanes.codex.status, "passed");
        assert_eq!(s.lanes.claude.status, "idle");
        assert_eq!(s.task.as_deref(), Some("T-1"));
        assert!(s.last_heartbeat.is_some());
        assert_eq!(
            s.status, "active",
            "session-level status reset for the new task"
        );
        assert_eq!(verdict(&s, "T-1", now), SessionVerdict::Pass);
        assert!(matches!(verdict(&s, "T-2", now), SessionVerdict::NoPass(_)));
    }

    #[test]
    fn a_fail_anywhere_beats_a_pass() {
        let mut r = reg();
        let now = Utc::now();
        apply(
            &mut r,
            &hb("reviewer", "T-1", "passed", Some(Agent::Codex)),
            now,
        )
        .unwrap();
        let s = apply(
            &mut r,
            &hb("reviewer", "T-1", "rejected", Some(Agent::Claude)),
            now,
        )
        .unwrap();
        assert!(
            matches!(verdict(&s, "T-1", now), SessionVerdict::Fail(w) if w.contains("claude lane"))
        );
    }

    #[test]
    fn stale_pass_does_not_count() {
        let mut r = reg();
        let then = Utc::now() - chrono::Duration::seconds(DEFAULT_TTL_S as i64 + 1);
        let s = apply(&mut r, &hb("reviewer", "T-1", "approved", None), then).unwrap();
        let v = verdict(&s, "T-1", Utc::now());
        assert!(
            matches!(&v, SessionVerdict::NoPass(w) if w.contains("stale")),
            "{v:?}"
        );
        assert_eq!(
            freshness(s.last_heartbeat.as_deref(), ttl_of(&s), Utc::now()),
            Freshness::Stale
        );
    }

    #[test]
    fn a_pass_for_another_task_does_not_carry_over() {
        let mut r = reg();
        let now = Utc::now();
        apply(&mut r, &hb("reviewer", "T-1", "passed", None), now).unwrap();
        let s = apply(
            &mut r,
            &hb("reviewer", "T-2", "working", Some(Agent::Claude)),
            now,
        )
        .unwrap();
        assert!(matches!(verdict(&s, "T-2", now), SessionVerdict::NoPass(_)));
    }

    #[test]
    fn bad_input_names_the_field() {
        let mut r = reg();
        let now = Utc::now();
        let e = apply(&mut r, &hb("nobody", "T-1", "passed", None), now).unwrap_err();
        assert!(e.to_string().starts_with("--session"), "{e}");
        let e = apply(&mut r, &hb("reviewer", "T-1", "Pass ed", None), now).unwrap_err();
        assert!(e.to_string().starts_with("--status"), "{e}");
        // Guards: `session-heartbeat --status bogus` was accepted.
        let e = apply(&mut r, &hb("reviewer", "T-1", "bogus", None), now).unwrap_err();
        assert!(e.to_string().contains("neutral"), "{e}");
        let mut req = hb("reviewer", "T-1", "passed", None);
        req.role = Some("Implementer".into());
        assert!(
            apply(&mut r, &req, now)
                .unwrap_err()
                .to_string()
                .starts_with("--role")
        );
        req.role = Some("reviewer".into());
        req.ttl_s = Some(0);
        assert!(
            apply(&mut r, &req, now)
                .unwrap_err()
                .to_string()
                .starts_with("--ttl-s")
        );
    }
}
