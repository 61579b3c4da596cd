//! Per-host NATS users (docs/fleet.md, "Per-host users"): a real nats-server
//! configured with what `drover fleet server-config` prints, each host's
//! password in a private file the config includes. The hosts' users are
//! enough for everything drover does, and a host's user cannot act as
//! another host: the server refuses, and nothing appears under the other.

use crate::common::{self, Drover, wait_until};
use crate::fleet_events::Follower;
use crate::fleet_join::{join, run, secret_file};
use crate::nats_common::{Nats, Setup};
use async_nats::jetstream::{self, stream};
use drover::fleet::Names;
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PW1: &str = "pw-h1-Tq4Lz";
const PW2: &str = "pw-h2-Wn8Rc";
const EVENTS: &str = "drover-lab-events";
const HOSTS: &str = "KV_drover-lab-hosts";

/// A server whose only users are those `drover fleet server-config lab
/// --host h1 --host h2 --creator h1` prints; the passwords are defined in
/// two private files beside the server's config, which the printed config
/// includes.
fn authz_server(d: &Drover) -> Nats {
    let out = run(
        d,
        &[
            "fleet",
            "server-config",
            "lab",
            "--host",
            "h1",
            "--host",
            "h2",
            "--creator",
            "h1",
            "--include",
            "h1.pw.conf",
            "--include",
            "h2.pw.conf",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let conf = common::stdout(&out);
    assert!(conf.contains("password: $DROVER_NATS_PW_H1"), "{conf}");
    let (f1, f2) = (
        format!("DROVER_NATS_PW_H1: \"{PW1}\"\n"),
        format!("DROVER_NATS_PW_H2: \"{PW2}\"\n"),
    );
    Nats::start_with(
        &Setup::default(),
        &conf,
        &[("h1.pw.conf", &f1), ("h2.pw.conf", &f2)],
    )
}

/// The server's permission refusals so far, one line each.
fn violations(nats: &Nats) -> Vec<String> {
    nats.log_text()
        .lines()
        .filter(|l| l.contains("Violation"))
        .map(str::to_string)
        .collect()
}

/// The hosts `fleet ls --json` lists from `d`.
fn hosts(d: &Drover) -> Vec<String> {
    let out = run(d, &["fleet", "ls", "--json"], &[]);
    assert!(out.status.success(), "fleet ls: {}", common::stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn per_host_users_are_enough_for_joining_heartbeats_events_listing_and_leaving() {
    let (d1, d2) = (Drover::new(), Drover::new());
    let nats = authz_server(&d1);
    let url = nats.url("nats");

    // h2's user may not create the fleet's streams: before the creator
    // joined, h2's join is refused, and the server says what it refused.
    let f = secret_file(&d2, "early.pw", PW2);
    let out = run(
        &d2,
        &[
            "fleet",
            "join",
            "lab",
            "--nats",
            &url,
            "--host",
            "h2",
            "--user",
            "h2",
            "--password-file",
            f.to_str().unwrap(),
        ],
        &[],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("creator host"), "{err}");
    let refused = format!("Permissions Violation for Publish to \"$JS.API.STREAM.CREATE.{HOSTS}\"");
    let log = d2.state.join("logs/supervisor.log");
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&refused)),
        "the supervisor's log does not name the refusal"
    );

    // The creator joins, then h2; each lists both.
    join(&d1, &nats, "h1", "h1", PW1, &[]);
    join(&d2, &nats, "h2", "h2", PW2, &[]);
    assert_eq!(hosts(&d1), ["h1", "h2"]);
    assert_eq!(hosts(&d2), ["h1", "h2"]);

    // Each host's events reach a follower (on the host that did not create
    // the streams) under its own HOST.
    let follow = Follower::start(&d2, Some("0"));
    d1.ok(&["pane", "new", "a1", "--", "sh", "-c", "sleep 60"]);
    d2.ok(&["pane", "new", "b1", "--", "sh", "-c", "sleep 60"]);
    assert!(
        wait_until(Duration::from_secs(20), || follow.saw(
            "h1",
            "pane.created",
            "a1"
        ) && follow.saw(
            "h2",
            "pane.created",
            "b1"
        )),
        "{:?}",
        follow.events()
    );
    for e in follow.events() {
        let want = if e["pane"] == "a1" { "h1" } else { "h2" };
        assert_eq!(e["host"], want, "{e}");
    }
    // Heartbeats keep both listed; leaving (a delete of its own key) works.
    d2.ok(&["fleet", "leave"]);
    assert_eq!(hosts(&d1), ["h1"]);

    // Nothing drover did was refused but h2's early create.
    let v = violations(&nats);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert!(
        v[0].contains("user:h2") && v[0].contains(&format!("STREAM.CREATE.{HOSTS}")),
        "{v:#?}"
    );
}

/// A raw client logged in as `user`, with the inbox prefix drover gives
/// that host, recording what the server refuses.
struct Raw {
    client: async_nats::Client,
    js: jetstream::Context,
    refusals: Arc<Mutex<Vec<String>>>,
}

async fn raw(nats: &Nats, user: &str, pw: &str) -> Raw {
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let seen = refusals.clone();
    let client = async_nats::ConnectOptions::with_user_and_password(user.into(), pw.into())
        .custom_inbox_prefix(Names::new("lab").unwrap().inbox_prefix(user))
        .request_timeout(Some(Duration::from_secs(3)))
        .event_callback(move |ev| {
            let seen = seen.clone();
            async move {
                if let async_nats::Event::ServerError(async_nats::ServerError::Other(e)) = ev {
                    seen.lock().unwrap().push(e);
                }
            }
        })
        .connect(nats.url("nats"))
        .await
        .unwrap();
    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(3))
        .build(client.clone());
    Raw {
        client,
        js,
        refusals,
    }
}

/// Every subject of the fleet's event stream with its count.
async fn event_subjects(js: &jetstream::Context) -> HashMap<String, usize> {
    let s = js.get_stream(EVENTS).await.unwrap();
    let mut subjects = s.info_with_subjects(">").await.unwrap();
    let mut out = HashMap::new();
    while let Some(x) = subjects.next().await {
        let (k, n) = x.unwrap();
        out.insert(k, n);
    }
    out
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_hosts_user_cannot_publish_write_purge_delete_or_listen_as_another_host() {
    let (d1, d2) = (Drover::new(), Drover::new());
    let nats = authz_server(&d1);
    join(&d1, &nats, "h1", "h1", PW1, &[]);
    // h2 heartbeats every 300 ms: replies flow to its inbox all the time.
    join(&d2, &nats, "h2", "h2", PW2, &["--heartbeat-ms", "300"]);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let h1 = rt.block_on(raw(&nats, "h1", PW1));
    let forged = r#"{"seq":1,"at":"2030-01-01T00:00:00Z","kind":"pane.created","pane":"forged"}"#;

    // h2 has no panes: it publishes no events of its own here.
    let baseline = rt.block_on(event_subjects(&h1.js));
    assert!(
        !baseline.contains_key("drover.lab.events.h2"),
        "{baseline:?}"
    );

    let (own, errors, inbox) = rt.block_on(async {
        let js = &h1.js;
        // What h1 may do: its own events subject.
        let own = js
            .publish("drover.lab.events.h1", "{\"kind\":\"probe\"}".into())
            .await
            .unwrap()
            .await;
        // Publish as h2, core and with JetStream.
        h1.client
            .publish("drover.lab.events.h2", forged.into())
            .await
            .unwrap();
        h1.client.flush().await.unwrap();
        let kv = js.get_key_value("drover-lab-hosts").await.unwrap();
        let events = js.get_stream(EVENTS).await.unwrap();
        let presence = js.get_stream(HOSTS).await.unwrap();
        let mut rollup = async_nats::HeaderMap::new();
        rollup.insert("Nats-Rollup", "all");
        let republish = |src: &str, dest: &str, name: &str, subjects: &str| stream::Config {
            name: name.into(),
            subjects: vec![subjects.into()],
            republish: Some(stream::Republish {
                source: src.into(),
                destination: dest.into(),
                headers_only: false,
            }),
            ..Default::default()
        };
        let (
            js_as_h2,
            put_h2,
            delete_h2,
            purge_ev,
            purge_kv,
            delete_ev,
            delete_kv,
            delete_msg,
            update,
            rollup_kv,
            rollup_ev,
            recreate_ev,
            recreate_kv,
        ) = tokio::join!(
            async {
                js.publish("drover.lab.events.h2", forged.into())
                    .await
                    .unwrap()
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            async {
                kv.put("h2", forged.into())
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            async { kv.delete("h2").await.map_err(|e| e.to_string()) },
            async { events.purge().await.map(|_| ()).map_err(|e| e.to_string()) },
            async {
                presence
                    .purge()
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            async {
                js.delete_stream(EVENTS)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            async {
                js.delete_stream(HOSTS)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            async {
                events
                    .delete_message(1)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            async {
                js.update_stream(republish(
                    "drover.lab.events.h1",
                    "$KV.drover-lab-hosts.h2",
                    EVENTS,
                    "drover.lab.events.>",
                ))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
            },
            // A rollup on its own key would erase every host's key.
            async {
                js.publish_with_headers("$KV.drover-lab-hosts.h1", rollup.clone(), "x".into())
                    .await
                    .unwrap()
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            async {
                js.publish_with_headers("drover.lab.events.h1", rollup.clone(), "x".into())
                    .await
                    .unwrap()
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
            // The creator may create the streams, not remake them.
            async {
                js.create_stream(republish(
                    "drover.lab.events.h1",
                    "$KV.drover-lab-hosts.h2",
                    EVENTS,
                    "drover.lab.events.>",
                ))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
            },
            async {
                js.create_stream(republish(
                    "$KV.drover-lab-hosts.h1",
                    "drover.lab.events.h2",
                    HOSTS,
                    "$KV.drover-lab-hosts.>",
                ))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
            },
        );
        // A consumer that would deliver h1's presence onto h2's events
        // subject: created, but the server delivers only to a listener, and
        // under the record's own subject.
        let aimed = presence
            .create_consumer(jetstream::consumer::push::Config {
                deliver_subject: "drover.lab.events.h2".into(),
                filter_subject: "$KV.drover-lab-hosts.h1".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        // Deleting a consumer (another host's follower's, say) is refused.
        let name = aimed.cached_info().name.clone();
        let delete_consumer = presence
            .delete_consumer(&name)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
        // Listen on h2's inbox while h2 heartbeats: refused, nothing comes.
        let mut sub = h1.client.subscribe("_INBOX_drover_lab_h2.>").await.unwrap();
        h1.client.flush().await.unwrap();
        let inbox = tokio::time::timeout(Duration::from_secs(1), sub.next()).await;
        let errors = vec![
            ("delete a consumer", delete_consumer),
            ("JetStream publish as h2", js_as_h2),
            ("put h2's key", put_h2),
            ("delete h2's key", delete_h2),
            ("purge the event stream", purge_ev),
            ("purge the presence bucket", purge_kv),
            ("delete the event stream", delete_ev),
            ("delete the presence bucket", delete_kv),
            ("delete an event", delete_msg),
            ("update the event stream", update),
            ("roll up the presence bucket", rollup_kv),
            ("roll up the event stream", rollup_ev),
            ("remake the event stream", recreate_ev),
            ("remake the presence bucket", recreate_kv),
        ];
        (own, errors, inbox.is_ok())
    });
    assert!(own.is_ok(), "h1 cannot publish its own events: {own:?}");
    for (what, r) in &errors {
        assert!(r.is_err(), "{what} was allowed");
    }
    let by = |what: &str| errors.iter().find(|(w, _)| *w == what).unwrap().1.clone();
    for what in ["roll up the presence bucket", "roll up the event stream"] {
        let e = by(what).unwrap_err();
        assert!(e.contains("rollup not permitted"), "{what}: {e}");
    }
    for what in ["remake the event stream", "remake the presence bucket"] {
        let e = by(what).unwrap_err();
        assert!(e.contains("different configuration"), "{what}: {e}");
    }
    assert!(!inbox, "h1 received a message on h2's inbox");

    // The server said each refusal, naming the subject.
    let want = [
        "Publish to \"drover.lab.events.h2\"".to_string(),
        "Publish to \"$KV.drover-lab-hosts.h2\"".to_string(),
        format!("Publish to \"$JS.API.STREAM.PURGE.{EVENTS}\""),
        format!("Publish to \"$JS.API.STREAM.PURGE.{HOSTS}\""),
        format!("Publish to \"$JS.API.STREAM.DELETE.{EVENTS}\""),
        format!("Publish to \"$JS.API.STREAM.DELETE.{HOSTS}\""),
        format!("Publish to \"$JS.API.STREAM.MSG.DELETE.{EVENTS}\""),
        format!("Publish to \"$JS.API.STREAM.UPDATE.{EVENTS}\""),
        format!("Publish to \"$JS.API.CONSUMER.DELETE.{HOSTS}."),
        "Subscription to \"_INBOX_drover_lab_h2.>\"".to_string(),
    ];
    let said = |w: &str| {
        h1.refusals
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains("Permissions Violation") && r.contains(w))
    };
    assert!(
        wait_until(Duration::from_secs(10), || want.iter().all(|w| said(w))),
        "missing refusals: {:?} of {:?}",
        want.iter().filter(|w| !said(w)).collect::<Vec<_>>(),
        h1.refusals.lock().unwrap()
    );

    // Nothing appeared under h2, nothing foreign in the event stream: only
    // h1's own probe was added.
    let after = rt.block_on(event_subjects(&h1.js));
    let mut expected = baseline.clone();
    *expected.entry("drover.lab.events.h1".into()).or_default() += 1;
    assert_eq!(after, expected);
    let entry = rt.block_on(async {
        let kv = h1.js.get_key_value("drover-lab-hosts").await.unwrap();
        kv.get("h2").await.unwrap()
    });
    let p: Value = serde_json::from_slice(&entry.expect("h2's key is gone")).unwrap();
    assert_eq!(p["host"], "h2", "{p}");
    assert_eq!(hosts(&d1), ["h1", "h2"]);
}

#[test]
fn server_config_refuses_bad_ids_and_names_no_secret() {
    let d = Drover::new();
    let ok = d.ok(&[
        "fleet",
        "server-config",
        "lab",
        "--host",
        "box-1",
        "--host",
        "h2",
        "--creator",
        "h2",
    ]);
    assert!(ok.contains("user: \"box-1\""), "{ok}");
    assert!(ok.contains("password: $DROVER_NATS_PW_BOX_1"), "{ok}");
    assert!(ok.contains("\"drover.lab.events.box-1\""), "{ok}");
    assert!(!ok.contains("drover.lab.events.>"), "{ok}");
    for bad in [
        vec!["bad.fleet", "--host", "h1", "--creator", "h1"],
        vec!["lab", "--host", "h.1", "--creator", "h.1"],
        vec!["lab", "--host", ">", "--creator", ">"],
        vec!["lab", "--host", "h1", "--host", "h1", "--creator", "h1"],
        vec!["lab", "--host", "a-b", "--host", "a_b", "--creator", "a-b"],
        vec!["lab", "--host", "h1", "--creator", "h2"],
        vec![
            "lab",
            "--host",
            "h1",
            "--creator",
            "h1",
            "--include",
            "a\"b",
        ],
        vec!["lab", "--creator", "h1"],
    ] {
        let mut args = vec!["fleet", "server-config"];
        args.extend(bad.iter().copied());
        let out = d.run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad:?}: {}",
            common::stderr(&out)
        );
        assert!(common::stdout(&out).is_empty(), "{bad:?}");
    }
}
