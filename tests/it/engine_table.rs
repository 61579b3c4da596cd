//! Every row and every refusal of the transition table (docs/state-transitions.md), each case run
//! twice: through the library (`Engine::transition`) and through the CLI (a real
//! `drover job …` process per request). The lock discipline is in
//! `engine_lock.rs`, the rest of the command line in `engine_cli.rs`.

use crate::engine_support as support;

use drover::engine::{
    Action, Actor, Authority, Engine, EngineError, JobRecord, Lane, Outcome, Request, Status,
};
use serde_json::{Map, Value};
use std::path::Path;
use support::*;

const PAST: &str = "2000-01-01T00:00:00Z";
const FUTURE: &str = "2999-01-01T00:00:00Z";

#[derive(Debug, Clone)]
enum Who {
    Agent,
    Operator,
    Supervisor,
    /// Inside lane `lane` (session env `session`), with `--as` given or not.
    Lane {
        lane: &'static str,
        session: Option<&'static str>,
        as_: Option<Authority>,
    },
}

#[derive(Debug, Clone)]
enum Pre {
    None,
    /// The job's attempt at the time of the request.
    Current,
    Other(&'static str),
}

#[derive(Debug, Clone)]
struct Step {
    action: Action,
    who: Who,
    attempt: Pre,
    status: Option<Status>,
    job: &'static str,
}

fn step(action: Action, who: Who) -> Step {
    Step {
        action,
        who,
        attempt: Pre::None,
        status: None,
        job: "J",
    }
}
fn op(a: Action) -> Step {
    step(a, Who::Operator)
}
fn ag(a: Action) -> Step {
    step(a, Who::Agent)
}
impl Step {
    fn attempt(mut self, p: Pre) -> Self {
        self.attempt = p;
        self
    }
    fn status(mut self, s: Status) -> Self {
        self.status = Some(s);
        self
    }
    fn on(mut self, job: &'static str) -> Self {
        self.job = job;
        self
    }
}

fn create(deadline: Option<&str>) -> Action {
    Action::Create {
        deadline: deadline.map(str::to_string),
    }
}
fn claim(s: &str) -> Action {
    Action::Claim { session: s.into() }
}
fn started(s: &str) -> Action {
    Action::Started { session: s.into() }
}
fn progress(kv: &[(&str, &str)]) -> Action {
    let mut set = Map::new();
    for (k, v) in kv {
        set.insert((*k).into(), Value::String((*v).into()));
    }
    Action::Progress { set }
}
fn complete() -> Action {
    Action::Complete {
        reason: Some("done".into()),
    }
}
fn fail_() -> Action {
    Action::Fail { reason: None }
}
fn cancel() -> Action {
    Action::Cancel { reason: None }
}
fn redispatch(n: u64) -> Action {
    Action::Redispatch { iteration: n }
}

fn pending() -> Vec<Step> {
    vec![op(create(None))]
}
fn pending_past() -> Vec<Step> {
    vec![op(create(Some(PAST)))]
}
fn running() -> Vec<Step> {
    let mut v = pending();
    v.push(ag(claim("s1")));
    v
}
fn running_past() -> Vec<Step> {
    let mut v = pending_past();
    v.push(ag(claim("s1")));
    v
}
fn then(mut v: Vec<Step>, s: Step) -> Vec<Step> {
    v.push(s);
    v
}
fn completed() -> Vec<Step> {
    then(running(), ag(complete()))
}
fn failed() -> Vec<Step> {
    then(running(), ag(fail_()))
}
fn cancelled() -> Vec<Step> {
    then(pending(), op(cancel()))
}
fn timed_out() -> Vec<Step> {
    then(pending_past(), op(Action::Timeout))
}
fn lane(lane: &'static str, session: Option<&'static str>, a: Action) -> Step {
    step(
        a,
        Who::Lane {
            lane,
            session,
            as_: None,
        },
    )
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Accepted(Status),
    Ack,
    Refused(&'static str),
}

struct Case {
    name: &'static str,
    setup: Vec<Step>,
    step: Step,
    expect: Expect,
    check: Option<fn(&JobRecord, &JobRecord)>,
}

fn case(name: &'static str, setup: Vec<Step>, step: Step, expect: Expect) -> Case {
    Case {
        name,
        setup,
        step,
        expect,
        check: None,
    }
}

fn cases() -> Vec<Case> {
    use Expect::*;
    use Status::*;
    let mut v = vec![
        // ---- rows
        Case {
            check: Some(|_, r| {
                assert_eq!(r.iteration, 1);
                assert!(r.attempt_id.is_none() && r.session_id.is_none());
                assert_eq!(r.deadline.as_deref(), Some("2999-01-01T00:00:00.000Z"));
                assert_eq!(r.created_at, r.updated_at);
            }),
            ..case(
                "create",
                vec![],
                op(create(Some(FUTURE))),
                Accepted(Pending),
            )
        },
        Case {
            check: Some(|_, r| {
                let a = r.attempt_id.as_deref().unwrap_or_default();
                let u = uuid::Uuid::parse_str(a).expect("attempt id is a uuid");
                assert_eq!(u.get_version_num(), 4);
                assert_eq!(r.session_id.as_deref(), Some("s1"));
            }),
            ..case("claim", pending(), ag(claim("s1")), Accepted(Running))
        },
        case(
            "claim with expected status",
            pending(),
            ag(claim("s1")).status(Pending),
            Accepted(Running),
        ),
        Case {
            check: Some(|b, r| assert_eq!(b.attempt_id, r.attempt_id)),
            ..case("started", running(), ag(started("s1")), Accepted(Running))
        },
        Case {
            check: Some(|_, r| {
                assert_eq!(r.metadata.get("a"), Some(&Value::String("1".into())));
                assert_eq!(r.metadata.get("b"), Some(&Value::String("x=y".into())));
                assert_eq!(r.metadata.get("keep"), Some(&Value::String("k".into())));
            }),
            ..case(
                "progress merges",
                then(running(), ag(progress(&[("keep", "k"), ("a", "0")]))),
                ag(progress(&[("a", "1"), ("b", "x=y")])),
                Accepted(Running),
            )
        },
        Case {
            check: Some(|_, r| assert_eq!(r.reason.as_deref(), Some("done"))),
            ..case(
                "complete with expected attempt",
                running(),
                ag(complete()).attempt(Pre::Current),
                Accepted(Completed),
            )
        },
        case("fail", running(), ag(fail_()), Accepted(Failed)),
        case(
            "cancel pending",
            pending(),
            op(cancel()),
            Accepted(Cancelled),
        ),
        case(
            "cancel running",
            running(),
            op(cancel()),
            Accepted(Cancelled),
        ),
        case(
            "timeout pending past deadline",
            pending_past(),
            op(Action::Timeout),
            Accepted(TimedOut),
        ),
        case(
            "timeout running past deadline",
            running_past(),
            op(Action::Timeout),
            Accepted(TimedOut),
        ),
        Case {
            check: Some(|b, r| {
                assert_eq!(r.iteration, b.iteration + 1);
                assert!(r.attempt_id.is_none() && r.session_id.is_none() && r.reason.is_none());
            }),
            ..case(
                "redispatch completed",
                completed(),
                op(redispatch(2)),
                Accepted(Pending),
            )
        },
        case(
            "redispatch failed",
            failed(),
            op(redispatch(2)),
            Accepted(Pending),
        ),
        case(
            "redispatch cancelled",
            cancelled(),
            op(redispatch(2)),
            Accepted(Pending),
        ),
        case(
            "redispatch timed out",
            timed_out(),
            op(redispatch(2)),
            Accepted(Pending),
        ),
        case(
            "claim after redispatch",
            then(completed(), op(redispatch(2))),
            ag(claim("s2")),
            Accepted(Running),
        ),
        Case {
            check: Some(|_, r| assert_eq!(r.reason.as_deref(), Some("exhausted"))),
            ..case(
                "finalize pending",
                pending(),
                op(Action::Finalize),
                Accepted(Failed),
            )
        },
        case(
            "finalize running",
            running(),
            op(Action::Finalize),
            Accepted(Failed),
        ),
        // ---- idempotent re-receipt
        case("ack complete", completed(), ag(complete()), Ack),
        case(
            "ack complete same attempt",
            completed(),
            ag(complete()).attempt(Pre::Current),
            Ack,
        ),
        case("ack fail", failed(), ag(fail_()), Ack),
        case("ack cancel", cancelled(), op(cancel()), Ack),
        case("ack timeout", timed_out(), op(Action::Timeout), Ack),
        case("ack finalize", failed(), op(Action::Finalize), Ack),
        // ---- refusals
        case(
            "create twice",
            pending(),
            op(create(None)),
            Refused("id-new"),
        ),
        case(
            "claim unknown job",
            vec![],
            ag(claim("s1")),
            Refused("job-exists"),
        ),
        case(
            "complete unknown job",
            vec![],
            ag(complete()),
            Refused("job-exists"),
        ),
        case(
            "second claim loses",
            running(),
            ag(claim("s2")),
            Refused("from-status"),
        ),
        case(
            "started on pending",
            pending(),
            ag(started("s1")),
            Refused("from-status"),
        ),
        case(
            "progress on pending",
            pending(),
            ag(progress(&[("a", "1")])),
            Refused("from-status"),
        ),
        case(
            "complete on pending",
            pending(),
            ag(complete()),
            Refused("from-status"),
        ),
        case(
            "fail on pending",
            pending(),
            ag(fail_()),
            Refused("from-status"),
        ),
        case(
            "redispatch running",
            running(),
            op(redispatch(2)),
            Refused("from-status"),
        ),
        case(
            "started by another session",
            running(),
            ag(started("s2")),
            Refused("assigned-session"),
        ),
        case(
            "progress carrying status",
            running(),
            ag(progress(&[("status", "completed")])),
            Refused("status-owned"),
        ),
        case(
            "agent create",
            vec![],
            ag(create(None)),
            Refused("authority"),
        ),
        case(
            "agent cancel",
            running(),
            ag(cancel()),
            Refused("authority"),
        ),
        case(
            "agent timeout",
            running_past(),
            ag(Action::Timeout),
            Refused("authority"),
        ),
        case(
            "agent redispatch",
            completed(),
            ag(redispatch(2)),
            Refused("authority"),
        ),
        case(
            "agent finalize",
            running(),
            ag(Action::Finalize),
            Refused("authority"),
        ),
        case(
            "agent fail after complete",
            completed(),
            ag(fail_()),
            Refused("terminal"),
        ),
        case(
            "agent complete after fail",
            failed(),
            ag(complete()),
            Refused("terminal"),
        ),
        case(
            "agent progress after complete",
            completed(),
            ag(progress(&[("a", "1")])),
            Refused("terminal"),
        ),
        case(
            "late claim after complete",
            completed(),
            ag(claim("s2")),
            Refused("terminal"),
        ),
        case(
            "operator cancel after complete",
            completed(),
            op(cancel()),
            Refused("terminal"),
        ),
        case(
            "operator timeout after complete",
            then(running_past(), ag(complete())),
            op(Action::Timeout),
            Refused("terminal"),
        ),
        case(
            "finalize after complete",
            completed(),
            op(Action::Finalize),
            Refused("terminal"),
        ),
        case(
            "stale attempt",
            running(),
            ag(complete()).attempt(Pre::Other("not-the-attempt")),
            Refused("expected-attempt"),
        ),
        case(
            "expected attempt on a job without one fails closed",
            pending(),
            op(cancel()).attempt(Pre::Other("a1")),
            Refused("expected-attempt"),
        ),
        case(
            "expected attempt after redispatch cleared it",
            then(completed(), op(redispatch(2))),
            op(cancel()).attempt(Pre::Other("a1")),
            Refused("expected-attempt"),
        ),
        case(
            "expected status mismatch",
            running(),
            ag(complete()).status(Pending),
            Refused("expected-status"),
        ),
        case(
            "timeout before deadline",
            then(vec![], op(create(Some(FUTURE)))),
            op(Action::Timeout),
            Refused("deadline-passed"),
        ),
        case(
            "timeout without deadline",
            running(),
            op(Action::Timeout),
            Refused("deadline-passed"),
        ),
        case(
            "redispatch same iteration",
            completed(),
            op(redispatch(1)),
            Refused("iteration-advance"),
        ),
        case(
            "redispatch skipping an iteration",
            completed(),
            op(redispatch(3)),
            Refused("iteration-advance"),
        ),
        // ---- lanes
        Case {
            check: Some(|_, r| {
                assert_eq!(r.lane_id.as_deref(), Some("L1"));
                assert_eq!(r.session_id.as_deref(), Some("s1"));
            }),
            ..case(
                "lane claims",
                pending(),
                lane("L1", Some("s1"), claim("s1")),
                Accepted(Running),
            )
        },
        case(
            "lane completes its own job",
            then(pending(), lane("L1", Some("s1"), claim("s1"))),
            lane("L1", Some("s1"), complete()),
            Accepted(Completed),
        ),
        case(
            "lane touches another lane's job",
            then(pending(), lane("L1", Some("s1"), claim("s1"))),
            lane("L2", Some("s1"), complete()),
            Refused("lane-own-job"),
        ),
        case(
            "lane touches a job claimed outside lanes",
            running(),
            lane("L1", Some("s1"), progress(&[("a", "1")])),
            Refused("lane-own-job"),
        ),
        case(
            "lane claims for another session",
            pending(),
            lane("L1", Some("s1"), claim("s2")),
            Refused("lane-session"),
        ),
        case(
            "lane cannot act as operator",
            then(pending(), lane("L1", Some("s1"), claim("s1"))),
            step(
                cancel(),
                Who::Lane {
                    lane: "L1",
                    session: Some("s1"),
                    as_: Some(Authority::Operator),
                },
            ),
            Refused("lane-agent-only"),
        ),
        case(
            "lane cannot create",
            vec![],
            lane("L1", None, create(None)),
            Refused("authority"),
        ),
        case(
            "other job untouched by refusal",
            then(running(), op(create(None)).on("K")),
            ag(claim("s9")).on("K").status(Running),
            Refused("expected-status"),
        ),
    ];
    // Supervisor authority exists only in the library.
    v.push(case(
        "supervisor timeout",
        running_past(),
        step(Action::Timeout, Who::Supervisor),
        Accepted(Status::TimedOut),
    ));
    v.push(case(
        "supervisor cancel",
        running(),
        step(cancel(), Who::Supervisor),
        Refused("authority"),
    ));
    v
}

fn actor(who: &Who) -> Actor {
    match who {
        Who::Agent => Actor::agent(),
        Who::Operator => Actor::operator(),
        Who::Supervisor => Actor::supervisor(),
        Who::Lane { lane, session, as_ } => Actor {
            authority: as_.unwrap_or(Authority::Agent),
            lane: Some(Lane {
                lane_id: (*lane).into(),
                session_id: session.map(str::to_string),
            }),
        },
    }
}

fn current_attempt(state: &Path, job: &str) -> Option<String> {
    Engine::open(drover::statedir::StateDir::new(state))
        .ok()?
        .show(job)
        .ok()
        .and_then(|r| r.attempt_id)
}

fn request(state: &Path, s: &Step) -> Request {
    Request {
        job_id: s.job.into(),
        action: s.action.clone(),
        expected_attempt: match &s.attempt {
            Pre::None => None,
            Pre::Current => current_attempt(state, s.job),
            Pre::Other(a) => Some((*a).into()),
        },
        expected_status: s.status,
        actor: actor(&s.who),
    }
}

/// Outcome through the library.
fn lib_step(state: &Path, s: &Step) -> Result<Expect, String> {
    let engine = Engine::open(drover::statedir::StateDir::new(state)).map_err(|e| e.to_string())?;
    match engine.transition(&request(state, s)) {
        Ok(drover::engine::Applied::Accepted { record }) => Ok(Expect::Accepted(record.status)),
        Ok(drover::engine::Applied::Ack { .. }) => Ok(Expect::Ack),
        Err(EngineError::Refused { rule, .. }) => Ok(Expect::Refused(rule)),
        Err(e) => Err(e.to_string()),
    }
}

/// The CLI arguments of a step.
fn cli_args(state: &Path, s: &Step) -> Vec<String> {
    let mut a: Vec<String> = vec!["job".into(), s.action.name().into(), s.job.into()];
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|x| x.to_string()));
    match &s.action {
        Action::Create { deadline: Some(d) } => push(&["--deadline", d]),
        Action::Claim { session } | Action::Started { session } => push(&["--session", session]),
        Action::Progress { set } => {
            push(&["--set"]);
            for (k, v) in set {
                push(&[&format!("{k}={}", v.as_str().unwrap_or_default())]);
            }
        }
        Action::Complete { reason: Some(r) }
        | Action::Fail { reason: Some(r) }
        | Action::Cancel { reason: Some(r) } => push(&["--reason", r]),
        Action::Redispatch { iteration } => push(&["--iteration", &iteration.to_string()]),
        _ => {}
    }
    let req = request(state, s);
    if let Some(x) = &req.expected_attempt {
        push(&["--expected-attempt", x]);
    }
    if let Some(x) = req.expected_status {
        push(&["--expected-status", x.as_str()]);
    }
    match &s.who {
        Who::Agent => push(&["--as", "agent"]),
        Who::Operator => push(&["--as", "operator"]),
        Who::Lane { as_: Some(x), .. } => push(&["--as", x.as_str()]),
        _ => {}
    }
    a
}

/// Outcome through a real `drover` process; checks the exit code contract.
fn cli_step(state: &Path, s: &Step) -> Result<Expect, String> {
    let mut c = drover(state);
    c.args(cli_args(state, s));
    if let Who::Lane { lane, session, .. } = &s.who {
        c.env("DROVER_LANE_ID", lane);
        if let Some(sess) = session {
            c.env("DROVER_SESSION_ID", sess);
        }
    }
    let before = Engine::open(drover::statedir::StateDir::new(state))
        .ok()
        .and_then(|e| e.show(s.job).ok())
        .map(|r| r.status.as_str().to_string())
        .unwrap_or_else(|| "none".into());
    let o = run(c);
    match code(&o) {
        0 => {
            let after = Engine::open(drover::statedir::StateDir::new(state))
                .and_then(|e| e.show(s.job))
                .map_err(|e| e.to_string())?;
            if stdout(&o).contains("already") {
                Ok(Expect::Ack)
            } else {
                if matches!(s.action, Action::Claim { .. }) {
                    assert_eq!(
                        Some(stdout(&o).trim().to_string()),
                        after.attempt_id,
                        "claim prints the new attempt id"
                    );
                }
                Ok(Expect::Accepted(after.status))
            }
        }
        3 => {
            let err = stderr(&o);
            assert_eq!(err.lines().count(), 1, "one line: {err}");
            assert!(
                err.contains(&format!("refused {}", s.action.name())),
                "names the request: {err}"
            );
            assert!(
                err.contains(&format!("status {before}")),
                "names the status: {err}"
            );
            let rule = err
                .split("rule ")
                .nth(1)
                .and_then(|r| r.split(':').next())
                .unwrap_or_default()
                .to_string();
            Ok(Expect::Refused(Box::leak(rule.into_boxed_str())))
        }
        c => Err(format!("exit {c}: {}", stderr(&o))),
    }
}

fn run_cases(cli: bool) {
    let mut ran = 0;
    for c in cases() {
        let uses_supervisor = std::iter::once(&c.step)
            .chain(&c.setup)
            .any(|s| matches!(s.who, Who::Supervisor));
        if cli && uses_supervisor {
            continue;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path();
        let exec = if cli { cli_step } else { lib_step };
        for s in &c.setup {
            let got = exec(state, s);
            assert!(
                matches!(got, Ok(Expect::Accepted(_))),
                "{}: setup step {s:?} gave {got:?}",
                c.name
            );
        }
        let engine = Engine::open(drover::statedir::StateDir::new(state)).expect("engine");
        let before = engine.show(c.step.job).ok();
        let audit_before = engine.audit(None).expect("audit").len();
        let last_seq = engine
            .list()
            .expect("list")
            .iter()
            .map(|r| r.transition_seq)
            .max()
            .unwrap_or(0);
        let got = exec(state, &c.step);
        assert_eq!(got, Ok(c.expect), "case {:?} (cli: {cli})", c.name);
        let after = engine.show(c.step.job).ok();
        let audit = engine.audit(None).expect("audit");
        assert_eq!(audit.len(), audit_before + 1, "{}: one audit entry", c.name);
        let last = &audit[audit.len() - 1];
        match c.expect {
            Expect::Accepted(st) => {
                let r = after.expect("record exists");
                assert_eq!(r.status, st);
                assert_eq!(r.transition_seq, last_seq + 1, "{}: next seq", c.name);
                assert_eq!(last.outcome, Outcome::Accepted);
                assert_eq!(last.seq, Some(r.transition_seq));
                let m = engine.mirror().expect("mirror").expect("mirror written");
                assert_eq!(m.jobs[c.step.job].transition_seq, r.transition_seq);
                assert_eq!(m.jobs[c.step.job].status, st);
                if let Some(check) = c.check {
                    let b = before.clone().unwrap_or_else(|| r.clone());
                    check(&b, &r);
                }
            }
            Expect::Ack => {
                assert_eq!(after, before, "{}: an ACK writes nothing", c.name);
                assert_eq!(last.outcome, Outcome::Ack);
                assert_eq!(last.seq, None);
            }
            Expect::Refused(rule) => {
                assert_eq!(after, before, "{}: a refusal writes nothing", c.name);
                assert_eq!(last.outcome, Outcome::Refused);
                assert_eq!(last.seq, None);
                assert_eq!(last.rule.as_deref(), Some(rule));
            }
        }
        ran += 1;
    }
    assert!(ran > 50, "ran {ran} cases");
}

#[test]
fn every_row_and_refusal_through_the_library() {
    run_cases(false);
}

#[test]
fn every_row_and_refusal_through_the_cli() {
    run_cases(true);
}
