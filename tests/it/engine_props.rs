//! Property tests: over any sequence of requests, the table never produces a
//! status it forbids, and the engine on disk agrees with the pure table.

use drover::engine::table::allowed;
use drover::engine::{
    Action, Actor, Applied, Authority, Decision, Engine, EngineError, Inputs, JobRecord, Lane,
    Request, Status, decide, replay,
};
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One generated request, resolved against the current state when applied.
#[derive(Debug, Clone)]
struct Gen {
    job: u8,
    action: u8,
    who: u8,
    attempt: u8,
    status: u8,
    misc: u8,
}

fn arb_request() -> impl Strategy<Value = Gen> {
    (0u8..3, 0u8..10, 0u8..6, 0u8..8, 0u8..8, any::<u8>()).prop_map(
        |(job, action, who, attempt, status, misc)| Gen {
            job,
            action,
            who,
            attempt,
            status,
            misc,
        },
    )
}

fn to_request(g: &Gen, cur: Option<&JobRecord>) -> Request {
    let session = if g.misc.is_multiple_of(3) {
        "other".to_string()
    } else {
        cur.and_then(|r| r.session_id.clone())
            .unwrap_or_else(|| "s".into())
    };
    let iteration = cur.map_or(1, |r| r.iteration) + u64::from(!g.misc.is_multiple_of(4));
    let action = match g.action {
        0 => Action::Create {
            deadline: Some(
                if g.misc.is_multiple_of(2) {
                    "2000-01-01T00:00:00Z"
                } else {
                    "2999-01-01T00:00:00Z"
                }
                .into(),
            ),
        },
        1 => Action::Claim { session },
        2 => Action::Started { session },
        3 => {
            let mut set = Map::new();
            let key = if g.misc.is_multiple_of(7) {
                "status"
            } else {
                "k"
            };
            set.insert(key.into(), Value::String(g.misc.to_string()));
            Action::Progress { set }
        }
        4 => Action::Complete { reason: None },
        5 => Action::Fail { reason: None },
        6 => Action::Cancel { reason: None },
        7 => Action::Timeout,
        8 => Action::Redispatch { iteration },
        _ => Action::Finalize,
    };
    let actor = match g.who {
        0 | 1 => Actor::agent(),
        2 | 3 => Actor::operator(),
        4 => Actor::supervisor(),
        _ => Actor {
            authority: Authority::Agent,
            lane: Some(Lane {
                lane_id: format!("L{}", g.misc % 2),
                session_id: None,
            }),
        },
    };
    let mut req = Request::new(format!("p{}", g.job), action, actor);
    req.expected_attempt = match g.attempt {
        0 => cur.and_then(|r| r.attempt_id.clone()),
        1 => Some("stale".into()),
        _ => None,
    };
    req.expected_status = match g.status {
        0 => cur.map(|r| r.status),
        1 => Some(Status::ALL[usize::from(g.misc) % 6]),
        _ => None,
    };
    req
}

/// Check one verdict against the table's invariants.
fn check(before: Option<&JobRecord>, req: &Request, d: &Decision, seq: u64) {
    match d {
        Decision::Accept(r) => {
            let from = before.map(|b| b.status);
            let name = req.action.name();
            assert!(
                allowed(from, name, r.status),
                "forbidden: {from:?} --{name}--> {}",
                r.status
            );
            assert_eq!(r.transition_seq, seq);
            match r.status {
                Status::Running => assert!(r.attempt_id.is_some() && r.session_id.is_some()),
                Status::Pending => assert!(r.attempt_id.is_none() && r.session_id.is_none()),
                _ => {}
            }
            if let Some(b) = before {
                if b.status.is_terminal() {
                    assert_eq!(name, "redispatch");
                    assert_eq!(req.actor.authority, Authority::Operator);
                    assert_eq!(r.iteration, b.iteration + 1);
                } else {
                    assert_eq!(r.iteration, b.iteration);
                }
                if name != "claim" && name != "redispatch" {
                    assert_eq!(
                        r.attempt_id, b.attempt_id,
                        "only claim/redispatch move the attempt"
                    );
                }
                if name == "claim" {
                    assert_ne!(r.attempt_id, b.attempt_id, "a claim makes a new attempt");
                }
            }
            assert!(
                r.metadata.get("status").is_none(),
                "status never rides in metadata"
            );
        }
        Decision::Ack => {
            let b = before.expect("ACK needs a record");
            assert!(b.status.is_terminal());
            assert_eq!(req.action.terminal(), Some(b.status));
        }
        Decision::Refuse { .. } => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The pure table over random request sequences: only allowed transitions,
    /// seq strictly increasing, invariants of every status hold.
    #[test]
    fn table_never_reaches_a_forbidden_status(reqs in prop::collection::vec(arb_request(), 1..80)) {
        let mut jobs: BTreeMap<String, JobRecord> = BTreeMap::new();
        let mut seq = 0u64;
        let t0 = drover::engine::record::parse_time("t", "2026-01-01T00:00:00Z").expect("time");
        for (i, g) in reqs.iter().enumerate() {
            let id = format!("p{}", g.job);
            let req = to_request(g, jobs.get(&id));
            let inputs = Inputs {
                at: t0 + chrono::Duration::milliseconds(i as i64),
                new_attempt_id: format!("a{i}"),
            };
            let d = decide(jobs.get(&id), &req, &inputs, seq + 1);
            check(jobs.get(&id), &req, &d, seq + 1);
            if let Decision::Accept(r) = d {
                seq += 1;
                jobs.insert(id, r);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The engine on disk makes the same decisions as the pure table, and its
    /// audit log replays to the records it wrote.
    #[test]
    fn engine_agrees_with_the_table(reqs in prop::collection::vec(arb_request(), 1..30)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::open(drover::statedir::StateDir::new(dir.path())).expect("engine");
        for g in &reqs {
            let id = format!("p{}", g.job);
            let cur = engine.show(&id).ok();
            let req = to_request(g, cur.as_ref());
            let next = engine.list().expect("list").iter().map(|r| r.transition_seq).max().unwrap_or(0) + 1;
            let model = decide(cur.as_ref(), &req, &Inputs::now(), next);
            check(cur.as_ref(), &req, &model, next);
            match (engine.transition(&req), &model) {
                (Ok(Applied::Accepted { record }), Decision::Accept(m)) => {
                    prop_assert_eq!(record.status, m.status);
                    prop_assert_eq!(record.transition_seq, next);
                    prop_assert_eq!(&record.metadata, &m.metadata);
                    prop_assert_eq!(record.iteration, m.iteration);
                }
                (Ok(Applied::Ack { .. }), Decision::Ack) => {}
                (Err(EngineError::Refused { rule, .. }), Decision::Refuse { rule: r, .. }) => {
                    prop_assert_eq!(rule, r.as_str());
                }
                (got, want) => prop_assert!(false, "engine {:?} vs table {:?}", got, want),
            }
        }
        let replayed = replay(&engine.audit(None).expect("audit")).expect("replay");
        let on_disk: BTreeMap<String, JobRecord> =
            engine.list().expect("list").into_iter().map(|r| (r.job_id.clone(), r)).collect();
        prop_assert_eq!(replayed, on_disk);
    }
}
