//! Each op's documented request (docs/protocol.md) round-trips through the
//! typed [`Request`]: parsing the documented JSON gives the variant, and
//! serializing the variant gives the documented JSON back. Unknown ops,
//! missing arguments and other versions are refused with what they are.

use super::*;
use serde_json::{Value, json};

/// Parse `doc` (a request frame's JSON) and serialize it back.
fn round_trip(doc: Value) -> Request {
    let bytes = serde_json::to_vec(&doc).unwrap();
    let (env, req) = parse_frame(&bytes).expect("a request");
    assert_eq!((env.v, env.id), (PROTOCOL_VERSION, 7));
    let req = req.unwrap_or_else(|e| panic!("{doc}: {e}"));
    let again = serde_json::to_value(Framed::new(7, &req)).unwrap();
    assert_eq!(again, doc, "serialized back");
    let direct: Request = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(direct, req);
    req
}

fn req(op: &str, args: Value) -> Value {
    json!({"v": 1, "id": 7, "op": op, "args": args})
}

#[test]
fn every_documented_request_round_trips() {
    let spec = json!({"name": "p1", "argv": ["sh"], "env": [["K", "V"]], "cwd": "/tmp",
                      "cols": 120, "rows": 40, "agent": "shell"});
    let cases = [
        req("ping", json!({})),
        req("pane.new", json!({"spec": spec, "backend": "tmux"})),
        req(
            "pane.new",
            json!({"spec": spec, "backend": "herdr", "split": {"pane": "p0", "direction": "down"}}),
        ),
        req("pane.ls", json!({})),
        req("pane.read", json!({"pane": "p1", "scrollback": 0})),
        req("pane.read", json!({"pane": "p1", "raw": true})),
        req(
            "pane.send",
            json!({"pane": "p1", "text": "hi", "enter": false}),
        ),
        req("pane.keys", json!({"pane": "p1", "keys": ["C-c", "Enter"]})),
        req(
            "pane.resize",
            json!({"pane": "p1", "cols": 100, "rows": 30}),
        ),
        req("pane.kill", json!({"pane": "p1"})),
        req("pane.respawn", json!({"pane": "p1"})),
        req(
            "wait",
            json!({"panes": ["p1", "p2"], "until": ["idle", "blocked:permission"],
                   "mode": "any", "timeout_ms": 500, "fresh": true}),
        ),
        req(
            "deliver",
            json!({"pane": "p1", "text": "do it", "nonce": "n1",
                   "ready_timeout_ms": 1000, "confirm_timeout_ms": 2000}),
        ),
        req("pane.answer", json!({"pane": "p1", "action": "approve"})),
        req(
            "pane.answer",
            json!({"pane": "p1", "action": "answer", "choice": "2"}),
        ),
        req(
            "evidence.watch",
            json!({"job_id": "J1", "attempt_id": "A", "session_id": "s", "pane": "p1",
                   "generation": 3, "autocomplete": true}),
        ),
        req(
            "report",
            json!({"outcome": "failed", "reason": "tests fail",
                   "claims": {"lane_id": "l1", "state_dir": "/s"}}),
        ),
        req("attach", json!({"pane": "p1", "cols": 80, "rows": 24})),
        req("attach", json!({"pane": "p1", "read_only": true})),
        req(
            "events.follow",
            json!({"since": 4, "pane": "p1", "kind": "pane."}),
        ),
        req(
            "fleet.join",
            json!({"config": {"fleet": "lab", "url": "nats://127.0.0.1:4222", "host": "h1",
                              "slots": 2, "auth": {"kind": "user", "user": "u",
                              "password": {"from": "env", "var": "DROVER_NATS_PASSWORD"}},
                              "insecure": false, "heartbeat_ms": 5000, "replicas": 1},
                   "password": "pw"}),
        ),
        req("fleet.leave", json!({})),
        req(
            "signal",
            json!({"source": "hook", "session": "s1", "signal": "permission_asked", "tool": "Bash"}),
        ),
        req("pane.explain", json!({"pane": "p1"})),
        req("shutdown", json!({})),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for doc in cases {
        let r = round_trip(doc);
        seen.insert(r.name());
    }
    let all: std::collections::BTreeSet<&str> = OP_NAMES.iter().copied().collect();
    assert_eq!(seen, all, "every op has a documented example here");
}

/// Fields a request may leave out take the documented defaults.
#[test]
fn missing_optional_fields_take_their_defaults() {
    let r: Request = serde_json::from_value(json!({"op": "pane.send",
        "args": {"pane": "p", "text": "x"}}))
    .unwrap();
    let Request::PaneSend(a) = r else { panic!() };
    assert!(a.enter, "enter defaults to true");
    let r: Request =
        serde_json::from_value(json!({"op": "wait", "args": {"panes": ["p"], "until": ["idle"]}}))
            .unwrap();
    let Request::Wait(w) = r else { panic!() };
    assert_eq!(w.mode, args::WaitMode::All);
    assert_eq!(w.timeout(), std::time::Duration::from_millis(30_000));
    // No args at all, or null, for the ops that take none.
    for doc in [
        json!({"op": "ping"}),
        json!({"op": "pane.ls", "args": null}),
    ] {
        assert!(serde_json::from_value::<Request>(doc).is_ok());
    }
}

#[test]
fn an_unknown_op_is_named() {
    let e = Request::from_parts("no.such.op", json!({})).unwrap_err();
    assert_eq!(e, BadRequest::UnknownOp("no.such.op".into()));
    assert_eq!(e.to_string(), r#"unknown request "no.such.op""#);
    assert_eq!(e.op(), None);
}

#[test]
fn a_missing_or_bad_argument_is_a_usage_error_naming_it() {
    for (op, args, needle) in [
        ("pane.read", json!({}), "missing field `pane`"),
        ("pane.send", json!({"pane": "p"}), "missing field `text`"),
        (
            "pane.keys",
            json!({"pane": "p", "keys": "Enter"}),
            "invalid type",
        ),
        ("pane.read", json!({"pane": "p", "scrollback": -1}), "-1"),
        ("wait", json!({"panes": ["p"]}), "missing field `until`"),
        (
            "wait",
            json!({"panes": [], "until": ["idle"]}),
            "`panes` is empty",
        ),
        (
            "wait",
            json!({"panes": ["p"], "until": ["blocked:bogus"]}),
            "usage_limit",
        ),
        (
            "wait",
            json!({"panes": ["p"], "until": ["idle"], "mode": "some"}),
            "any",
        ),
        (
            "pane.answer",
            json!({"pane": "p", "action": "answer"}),
            "`choice`",
        ),
        ("pane.new", json!({"spec": 42}), "invalid type"),
    ] {
        let e = Request::from_parts(op, args.clone()).unwrap_err();
        let m = e.to_string();
        assert_eq!(e.op(), Some(op), "{m}");
        assert!(
            m.starts_with(&format!("{op}: ")) && m.contains(needle),
            "{op} {args}: {m}"
        );
    }
}

#[test]
fn another_version_is_refused_saying_both() {
    let (env, req) = parse_frame(br#"{"v": 99, "id": 3, "op": "ping"}"#).unwrap();
    assert_eq!(env.id, 3);
    let e = req.unwrap_err();
    assert_eq!(e, RequestError::Version(99));
    let m = e.to_string();
    assert!(m.contains("protocol v99, this supervisor speaks v1"), "{m}");
    assert!(m.contains("protocol version"), "{m}");
    let r = Response::version_mismatch(3, 99);
    assert_eq!(r.error.map(|e| e.code), Some(ErrorCode::Version));
    assert_eq!(ErrorCode::Version.exit_code(), 5);
    // Not a request at all: no envelope.
    assert!(parse_frame(b"[1,2,3]").is_err());
    assert!(parse_frame(br#"{"v": 1, "id": 3}"#).is_err(), "no op");
}

/// The replies as the supervisor writes them parse into their types.
#[test]
fn documented_replies_parse() {
    let snap = json!({"pane": "p1", "generation": 1, "state": "blocked", "kind": "permission",
        "exit_code": null, "since_ms": 5, "since": "2026-12-05T00:00:00Z",
        "evidence": ["rule:x"], "screen_hash": "00", "seq": 2});
    // A snapshot without `source` (an older supervisor's) parses as the
    // screen's; it is written with it.
    let s: Snapshot = serde_json::from_value(snap.clone()).unwrap();
    assert_eq!(s.state, state::State::Blocked);
    assert_eq!(s.label(), "blocked:permission");
    assert_eq!(s.source, Source::Screen);
    let mut with_source = snap.clone();
    with_source["source"] = json!("screen");
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        with_source,
        "same JSON as the untyped one"
    );
    let mut hooked = snap.clone();
    hooked["source"] = json!("hook");
    let h: Snapshot = serde_json::from_value(hooked).unwrap();
    assert_eq!(h.source, Source::Hook);
    let explained: fuse::Explained = serde_json::from_value(json!({
        "pane": "p1", "generation": 1, "screen": null, "screen_hash": "",
        "signals": [{"source": "hook", "signal": "turn_ended", "at_ms": 5, "age_ms": 1}],
        "view": {"notes": 1, "turn_end": {"at": {"at_ms": 5, "source": "hook"}, "how": "ended"}},
        "fused": {"state": "done", "kind": null, "exit_code": null, "evidence": ["fuse:turn_ended"],
                  "source": "hook"},
        "rule": "turn_ended"
    }))
    .unwrap();
    assert_eq!(explained.fused.source, Source::Hook);
    assert!(explained.disagreement.is_none());
    let mut matched = snap.clone();
    matched["matched"] = json!(true);
    let w: reply::Waited =
        serde_json::from_value(json!({"matched": true, "snapshots": [matched]})).unwrap();
    assert_eq!(w.snapshots[0].matched, Some(true));
    let t: reply::Waited =
        serde_json::from_value(json!({"matched": false, "timed_out": true, "snapshots": [snap]}))
            .unwrap();
    assert!(t.timed_out);
    let lost: Vec<PaneEntry> = serde_json::from_value(json!([{
        "name": "l1", "backend": "native", "pid": 9, "generation": 1, "agent": "shell",
        "cols": null, "rows": null, "lost": true, "note": "ended", "left_running": 0,
        "observation": {"pane": "l1", "state": "lost", "generation": 1, "since_ms": 0}
    }]))
    .unwrap();
    assert!(lost[0].is_lost());
    let left: reply::Left =
        serde_json::from_value(json!({"left": false, "config_removed": true})).unwrap();
    assert_eq!(
        left,
        reply::Left::NotIn {
            left: false,
            config_removed: true
        }
    );
    let r: reply::Reported =
        serde_json::from_value(json!({"refused": {"code": "usage", "message": "m"}})).unwrap();
    assert!(matches!(r, reply::Reported::Refused { .. }));
    let f: reply::Reported = serde_json::from_value(json!({"foreign": true})).unwrap();
    assert!(matches!(f, reply::Reported::Foreign { foreign: true }));
}

/// The attach stream's messages keep their documented JSON.
#[test]
fn attach_messages_keep_their_json() {
    for (ev, doc) in [
        (AttachEvent::Detached, json!({"event": "detached"})),
        (AttachEvent::Kicked, json!({"event": "kicked"})),
        (
            AttachEvent::Exited {
                exit: Some(pane::ExitInfo {
                    code: Some(0),
                    signal: None,
                    at_ms: 5,
                }),
            },
            json!({"event": "exited", "exit": {"code": 0, "signal": null, "at_ms": 5}}),
        ),
    ] {
        assert_eq!(serde_json::to_value(&ev).unwrap(), doc);
        assert_eq!(serde_json::from_value::<AttachEvent>(doc).unwrap(), ev);
    }
    let r = AttachControl::parse(br#"{"op":"resize","cols":80,"rows":24}"#).unwrap();
    assert_eq!(r.size(), Some((80, 24)));
    assert_eq!(
        AttachControl::parse(br#"{"op":"resize"}"#).unwrap().size(),
        None
    );
    assert_eq!(
        AttachControl::parse(br#"{"op":"detach"}"#),
        Some(AttachControl::Detach)
    );
    assert_eq!(AttachControl::parse(br#"{"op":"dance"}"#), None);
}

#[test]
fn a_backend_named_inside_the_spec_still_picks_the_backend_and_the_requests_own_wins() {
    let spec = json!({"name": "p", "argv": ["sh"], "cols": 80, "rows": 24, "agent": "shell"});
    let mut legacy = spec.clone();
    legacy["backend"] = json!("tmux");
    let n: args::PaneNew = serde_json::from_value(json!({"spec": legacy})).unwrap();
    assert_eq!(n.backend.as_deref(), Some("tmux"));
    let n: args::PaneNew =
        serde_json::from_value(json!({"spec": legacy, "backend": "native"})).unwrap();
    assert_eq!(n.backend.as_deref(), Some("native"));
    // What a client sends keeps its form: the backend beside the spec.
    let n: args::PaneNew =
        serde_json::from_value(json!({"spec": spec, "backend": "tmux"})).unwrap();
    assert_eq!(
        serde_json::to_value(&n).unwrap(),
        json!({"spec": {"name": "p", "argv": ["sh"], "env": [], "cwd": null, "cols": 80,
                        "rows": 24, "agent": "shell"}, "backend": "tmux"})
    );
}

#[test]
fn a_fleet_join_carries_the_config_typed_in_fleet_jsons_form() {
    let file = r#"{"fleet":"lab","url":"nats://a:4222,nats://b:4222","host":"h1","slots":2,"auth":{"kind":"token","token":{"from":"file","path":"/s/t"}},"tls_ca":"/s/ca.pem","insecure":false,"heartbeat_ms":5000,"replicas":3}"#;
    let doc = format!(r#"{{"config":{file},"rejoin":true}}"#);
    let j: args::FleetJoin = serde_json::from_str(&doc).unwrap();
    assert_eq!(j.config.replicas, 3);
    assert!(matches!(j.config.auth, fleet::Auth::Token { .. }));
    assert_eq!(serde_json::to_string(&j.config).unwrap(), file);
    // A config of the file's older form (no replicas) still joins, with one.
    let old = file.replace(r#","replicas":3"#, "");
    let c: fleet::FleetConfig = serde_json::from_str(&old).unwrap();
    assert_eq!(c.replicas, 1);
}
