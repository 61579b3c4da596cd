//! The fleet's threat model (docs/fleet.md, "What a host's user can do"),
//! against a real nats-server whose users are what `fleet server-config`
//! prints: a hostile client logged in as a host's own user (h2) tries to
//! take another host's step, speak as it, make the coordinator answer on
//! another subject, ack another host's item and land a candidate whose
//! symlink points outside the tree; and a step survives two partitions.

use crate::common::{Drover, git, wait_until};
use crate::fleet_join::join;
use crate::fleet_work::{
    Worker, all_starts_by, at_integration, board, commits_touching, finish, joined, loop_run,
    per_host_server, record, scripts, starts_by, trio, users, violations,
};
use crate::nats_common::{Nats, js_as_host};
use futures_util::StreamExt;
use serde_json::{Value, json};
use sha2::Digest;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The coordinator's run key (its record's name).
fn run_key(c: &Drover) -> String {
    let dir = c.state.join("fleet");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find_map(|e| {
            e.file_name()
                .to_string_lossy()
                .strip_suffix(".jsonl")
                .map(str::to_string)
        })
        .expect("a run record")
}

/// A raw client logged in as `user`, with that host's inbox prefix.
pub(crate) async fn hostile(nats: &Nats, user: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(user.into(), format!("pw-{user}-Kp3"))
        .custom_inbox_prefix(format!("_INBOX_drover_lab_{user}"))
        .connect(nats.url("nats"))
        .await
        .unwrap()
}

/// `body` asked of run `run`'s coordinator on every subject a request
/// could go to (the run's, and `host`'s own); the answers that came.
async fn ask_any(client: &async_nats::Client, run: &str, host: &str, body: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for subject in [
        format!("drover.lab.coord.{run}"),
        format!("drover.lab.coord.{run}.{host}"),
    ] {
        let asked = tokio::time::timeout(
            Duration::from_secs(2),
            client.request(subject, body.to_string().into()),
        )
        .await;
        if let Ok(Ok(m)) = asked
            && let Ok(v) = serde_json::from_slice::<Value>(&m.payload)
        {
            out.push(v);
        }
    }
    out
}

/// A nats-server with per-host users, joined by the coordinator `c`.
pub(crate) fn fleet_with_coordinator(c: &Drover) -> Nats {
    let nats = per_host_server(c);
    join(c, &nats, "c", "c", "pw-c-Kp3", &[]);
    nats
}

/// Wait until the coordinator's record shows `host` started a step.
fn wait_started(c: &Drover, host: &str, w: &Worker) {
    assert!(
        wait_until(Duration::from_secs(60), || !starts_by(c, host).is_empty()),
        "{host} never started: {}",
        w.said()
    );
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_hosts_user_cannot_take_another_hosts_step_speak_as_it_misdirect_answers_or_ack_for_it() {
    let c = Drover::new();
    let nats = fleet_with_coordinator(&c);
    let h1 = joined(&nats, "h1");
    let w1 = Worker::start(&h1);
    let (repo, charter) = board(&c, 1);
    let (imp, rev) = scripts(&c, 15000);
    let run = loop_run(&c, &repo, &charter, &imp, &rev);
    wait_started(&c, "h1", &w1);
    let st = starts_by(&c, "h1").remove(0);
    let (job, attempt) = (st["job"].clone(), st["attempt"].clone());
    let key = run_key(&c);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (crt, cjs) = js_as_host(&nats, "c", "pw-c-Kp3");
    rt.block_on(async {
        let h2 = hostile(&nats, "h2").await;
        // Ack (term) h1's item: the queue must keep it.
        let _ = h2
            .publish(
                "$JS.ACK.drover-lab-work.hosts-claude.1.1.1.1.0",
                "+TERM".into(),
            )
            .await;
        h2.flush().await.unwrap();
        // Make the coordinator answer on h1's events subject and on the
        // work subject (a junk item).
        for reply in [
            "drover.lab.events.h1".to_string(),
            format!("drover.lab.work.{key}.claude"),
        ] {
            for subject in [
                format!("drover.lab.coord.{key}"),
                format!("drover.lab.coord.{key}.h2"),
            ] {
                let _ = h2
                    .publish_with_reply(subject, reply.clone(), "\u{1b}]52;c;aGk=\u{7}".into())
                    .await;
            }
        }
        h2.flush().await.unwrap();
        // A start for h1's job: h1's own delivery, and a made-up one, each
        // saying it is h1.
        for delivered in [1, 2] {
            let body = json!({"op": "start", "job": job, "host": "h1",
                              "stream_seq": 1, "delivered": delivered});
            for r in ask_any(&h2, &key, "h2", &body).await {
                assert_ne!(r["reply"], "started", "h2 was given an attempt: {r}");
            }
        }
        // A finish of h1's attempt, as h1.
        let body = json!({"op": "finish", "job": job, "host": "h1", "attempt": attempt,
                          "finished": {"result": "failed", "status": "failed", "reason": "h2 says so"}});
        for r in ask_any(&h2, &key, "h2", &body).await {
            assert_ne!(r["reply"], "accepted", "h2 finished h1's attempt: {r}");
        }
        // Listen on h1's deliveries.
        let _spy = h2.subscribe("drover.lab.deliver.h1.claude").await;
        h2.flush().await.unwrap();
    });
    assert!(
        wait_until(Duration::from_secs(10), || {
            violations(&nats)
                .iter()
                .any(|v| v.contains("drover.lab.deliver.h1.claude"))
        }),
        "h2 listened on h1's deliveries: {:#?}",
        violations(&nats)
    );
    // h1's item is on the queue still (h1 works it).
    let held = crt.block_on(async {
        let mut s = cjs.get_stream("drover-lab-work").await.unwrap();
        s.info().await.unwrap().state.messages
    });
    assert!(held >= 1, "h2 emptied the queue");
    let (ok, err) = finish(run);
    assert!(ok, "loop run: {err}\nh1: {}", w1.said());
    assert_eq!(
        at_integration(&repo, "TASK-1.txt").as_deref(),
        Some("written on a fleet host\n")
    );
    assert_eq!(commits_touching(&repo, "TASK-1.txt"), 1);
    assert!(all_starts_by(&c, "h2").is_empty(), "{:#?}", record(&c));
    // h1's one attempt was never superseded: its finish was taken.
    assert!(
        record(&c).iter().any(|e| e["event"] == "finish"
            && e["host"] == "h1"
            && e["attempt"] == attempt
            && e["reply"]["reply"] == "accepted"),
        "{:#?}",
        record(&c)
    );
    // Nothing was stored as h1's event.
    let stored = crt.block_on(async {
        cjs.get_stream("drover-lab-events")
            .await
            .unwrap()
            .get_last_raw_message_by_subject("drover.lab.events.h1")
            .await
            .is_ok()
    });
    assert!(!stored, "the coordinator answered on h1's events subject");
}

/// A patch against any tree that makes `path` a symlink to `target`.
pub(crate) fn symlink_patch(d: &Drover, path: &str, target: &Path) -> Vec<u8> {
    let dir = d.scratch().join("evil");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    std::os::unix::fs::symlink(target, dir.join(path)).unwrap();
    git(&dir, &["add", "-A"]);
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&dir)
        .args(["diff", "--cached", "--binary", "--full-index"])
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_candidate_whose_symlink_points_outside_the_tree_is_refused_where_it_is_applied() {
    let c = Drover::new();
    let nats = fleet_with_coordinator(&c);
    let h1 = joined(&nats, "h1");
    // h2 joined as any host: its presence is listed.
    let _h2 = joined(&nats, "h2");
    let outside = c.scratch().join("precious.txt");
    std::fs::write(&outside, "precious\n").unwrap();
    let patch = symlink_patch(&c, "TASK-1.txt", &outside);
    let (repo, charter) = board(&c, 1);
    let (imp, rev) = scripts(&c, 300);
    let run = loop_run(&c, &repo, &charter, &imp, &rev);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // h2 takes the step as any host may (its pull is what the coordinator
    // sees waiting), then sends the symlink as its candidate.
    let reply = rt.block_on(async {
        let h2 = hostile(&nats, "h2").await;
        let js = async_nats::jetstream::new(h2.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let consumer = loop {
            assert!(
                std::time::Instant::now() < deadline,
                "the work stream's consumer never appeared"
            );
            if let Ok(mut s) = js.get_stream("drover-lab-work").await
                && let Ok(cons) = s
                    .get_consumer::<async_nats::jetstream::consumer::pull::Config>("hosts-claude")
                    .await
            {
                let _ = s.info().await;
                break cons;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        // Deliveries come where the server config lets h2 listen: its own
        // delivery subject, or (a config without one) its inbox.
        let own_subject = std::fs::read_to_string(nats.dir.path().join("nats.conf"))
            .unwrap()
            .contains("drover.lab.deliver.h2");
        let (payload, ack) = if own_subject {
            let deliver = "drover.lab.deliver.h2.claude";
            let mut sub = h2.subscribe(deliver).await.unwrap();
            let pull = json!({"batch": 1, "expires": 25_000_000_000u64}).to_string();
            h2.publish_with_reply(
                "$JS.API.CONSUMER.MSG.NEXT.drover-lab-work.hosts-claude",
                deliver,
                pull.into(),
            )
            .await
            .unwrap();
            let m = tokio::time::timeout(Duration::from_secs(30), sub.next())
                .await
                .unwrap()
                .unwrap();
            (m.payload.to_vec(), m.reply.unwrap().to_string())
        } else {
            let mut got = None;
            for _ in 0..12 {
                let mut batch = consumer
                    .fetch()
                    .max_messages(1)
                    .expires(Duration::from_secs(5))
                    .messages()
                    .await
                    .unwrap();
                if let Some(Ok(m)) = batch.next().await {
                    got = Some((m.payload.to_vec(), m.reply.clone().unwrap().to_string()));
                    break;
                }
            }
            got.expect("no delivery to h2 within a minute")
        };
        let item: Value = serde_json::from_slice(&payload).unwrap();
        let t: Vec<&str> = ack.split('.').collect();
        let (delivered, seq): (i64, u64) = (t[4].parse().unwrap(), t[5].parse().unwrap());
        let key = item["run"].as_str().unwrap().to_string();
        let body = json!({"op": "start", "job": item["job"], "host": "h2",
                          "stream_seq": seq, "delivered": delivered});
        let started = ask_any(&h2, &key, "h2", &body).await;
        let attempt = started
            .iter()
            .find_map(|r| r["attempt"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("h2's own delivery got no attempt: {started:?}"));
        // Written as drover writes an object, into h2's own bucket (the
        // one its user may write): a chunk, then the meta record (base64url
        // of its name) without a rollup.
        let name = "evil";
        let _ = js
            .publish("$O.drover-lab-objects-h2.C.evilnuid", patch.clone().into())
            .await
            .unwrap()
            .await
            .unwrap();
        let meta = json!({"name": name, "bucket": "drover-lab-objects-h2", "nuid": "evilnuid",
                          "size": patch.len(), "chunks": 1});
        let _ = js
            .publish("$O.drover-lab-objects-h2.M.ZXZpbA==", meta.to_string().into())
            .await
            .unwrap()
            .await
            .unwrap();
        let sha: String = sha2::Sha256::digest(&patch)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let body = json!({"op": "finish", "job": item["job"], "host": "h2", "attempt": attempt,
                          "finished": {"result": "implemented",
                                       "patch": {"name": name, "sha256": sha, "size": patch.len()}}});
        ask_any(&h2, &key, "h2", &body).await
    });
    assert!(
        reply.iter().all(|r| r["reply"] == "refused"
            && r["why"].as_str().unwrap_or("").contains("symlink")),
        "the symlink was taken: {reply:?}"
    );
    // The honest host takes the step once h2's delivery lapses.
    let w1 = Worker::start(&h1);
    let (ok, err) = finish(run);
    assert!(ok, "loop run: {err}\nh1: {}", w1.said());
    assert_eq!(
        at_integration(&repo, "TASK-1.txt").as_deref(),
        Some("written on a fleet host\n"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_step_is_delivered_again_after_its_holder_dies_however_many_partitions_came_before() {
    let nats = Nats::start(&users());
    let (c, h1, h2) = trio(&nats);
    let (repo, charter) = board(&c, 1);
    let (imp, rev) = scripts(&c, 10000);
    let w1 = Worker::start(&h1);
    let run = loop_run(&c, &repo, &charter, &imp, &rev);
    assert!(
        wait_until(Duration::from_secs(60), || !starts_by(&c, "h1").is_empty()),
        "h1 never started: {}\n{:#?}",
        w1.said(),
        record(&c)
    );
    // First partition: h1 frozen past AckWait, the step goes to h2.
    w1.signal("-STOP");
    let w2 = Worker::start(&h2);
    assert!(
        wait_until(Duration::from_secs(60), || !starts_by(&c, "h2").is_empty()),
        "the step was not delivered again to h2: {}",
        w2.said()
    );
    // h1 comes back (its superseded lane still runs); then h2 dies.
    w1.signal("-CONT");
    w2.signal("-KILL");
    let killed = std::time::Instant::now();
    // Delivered again within AckWait (3 s) and a pull or two: to h1.
    assert!(
        wait_until(Duration::from_secs(20), || starts_by(&c, "h1").len() >= 2),
        "the step was not delivered again after its holder died: {:#?}\nh1: {}",
        record(&c),
        w1.said()
    );
    eprintln!("delivered again {:?} after the kill", killed.elapsed());
    let (ok, err) = finish(run);
    assert!(ok, "loop run: {err}\nh1: {}", w1.said());
    assert_eq!(commits_touching(&repo, "TASK-1.txt"), 1, "landed once");
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn one_hostile_request_neither_stalls_the_coordinator_nor_grows_its_record() {
    let c = Drover::new();
    let nats = fleet_with_coordinator(&c);
    let h1 = joined(&nats, "h1");
    let w1 = Worker::start(&h1);
    let (repo, charter) = board(&c, 1);
    let (imp, rev) = scripts(&c, 4000);
    let run = loop_run(&c, &repo, &charter, &imp, &rev);
    wait_started(&c, "h1", &w1);
    let key = run_key(&c);
    let log = c.state.join("fleet").join(format!("{key}.jsonl"));
    let before = std::fs::metadata(&log).unwrap().len();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let h2 = hostile(&nats, "h2").await;
        // A finish of a job that does not exist, naming a missing object:
        // answered at once, not after a minute of fetching.
        let missing = json!({"op": "finish", "job": "nope", "host": "h2", "attempt": "a",
            "finished": {"result": "implemented",
                         "patch": {"name": "missing", "sha256": "00", "size": 10}}});
        let t = std::time::Instant::now();
        let r = h2
            .request(
                format!("drover.lab.coord.{key}.h2"),
                missing.to_string().into(),
            )
            .await;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "answered after {:?}",
            t.elapsed()
        );
        let r: Value = serde_json::from_slice(&r.unwrap().payload).unwrap();
        assert_eq!(r["reply"], "refused", "{r}");
        // Twenty requests with 900 KB job names: refused unread.
        let big = "j".repeat(900_000);
        for _ in 0..20 {
            let body = json!({"op": "start", "job": big, "host": "h2",
                              "stream_seq": 1, "delivered": 1});
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                h2.request(
                    format!("drover.lab.coord.{key}.h2"),
                    body.to_string().into(),
                ),
            )
            .await;
        }
    });
    let grown = std::fs::metadata(&log).unwrap().len() - before;
    assert!(grown < 64 * 1024, "the record grew by {grown} bytes");
    let (ok, err) = finish(run);
    assert!(ok, "loop run: {err}\nh1: {}", w1.said());
    assert_eq!(commits_touching(&repo, "TASK-1.txt"), 1);
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn two_coordinators_on_one_fleet_each_land_their_own_run() {
    let nats = Nats::start(&users());
    let (c1, h1, c2) = trio(&nats);
    let w1 = Worker::start(&h1);
    let (repo1, charter1) = board(&c1, 1);
    let (imp1, rev1) = scripts(&c1, 300);
    let (repo2, charter2) = board(&c2, 1);
    let (imp2, rev2) = scripts(&c2, 300);
    let r1 = loop_run(&c1, &repo1, &charter1, &imp1, &rev1);
    let r2 = loop_run(&c2, &repo2, &charter2, &imp2, &rev2);
    let (ok1, err1) = finish(r1);
    let (ok2, err2) = finish(r2);
    assert!(ok1 && ok2, "c1: {err1}\nc2: {err2}\nh1: {}", w1.said());
    for (c, repo) in [(&c1, &repo1), (&c2, &repo2)] {
        assert_eq!(commits_touching(repo, "TASK-1.txt"), 1, "{:#?}", record(c));
        // Each step ran on the host, not parked or run locally.
        assert!(!starts_by(c, "h1").is_empty(), "{:#?}", record(c));
    }
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn another_hosts_escapes_never_reach_the_fleet_followers_terminal() {
    let c = Drover::new();
    let nats = fleet_with_coordinator(&c);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let h2 = hostile(&nats, "h2").await;
        let js = async_nats::jetstream::new(h2);
        let ev = json!({"seq": 1, "at": "\u{1b}[2J", "kind": "pane.\u{1b}]0;title\u{7}",
                        "pane": "\u{1b}]52;c;aGk=\u{7}", "job": "x\u{1b}[10A\u{9b}2J"});
        js.publish("drover.lab.events.h2", ev.to_string().into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    let out = c
        .cmd()
        .args(["events", "--follow", "--fleet", "lab", "--since", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = out;
    let text = crate::common::collect_output(Box::new(out.stdout.take().unwrap()));
    let seen = wait_until(Duration::from_secs(20), || {
        String::from_utf8_lossy(&text.lock().unwrap()).contains("title")
    });
    let _ = out.kill();
    let _ = out.wait();
    let got = text.lock().unwrap().clone();
    assert!(seen, "{}", String::from_utf8_lossy(&got));
    let s = String::from_utf8_lossy(&got);
    assert!(
        !s.chars()
            .any(|ch| (ch < ' ' && ch != '\n' && ch != '\t') || ('\u{7f}'..'\u{a0}').contains(&ch)),
        "a control character reached the terminal: {s:?}"
    );
}

#[test]
fn join_help_says_what_a_shared_token_gives_every_holder() {
    let d = Drover::new();
    let out = d.cmd().args(["fleet", "join", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("shared token"), "{help}");
    assert!(help.contains("one NATS user per host"), "{help}");
}
