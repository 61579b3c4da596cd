//! The fleet's objects under a hostile host (docs/fleet.md, "The threat
//! model"), against a real nats-server whose users are what `fleet
//! server-config` prints: each host writes only its own bucket, which no
//! other host's user may write, roll up or delete; the coordinator's store
//! no host may write; a store an older drover made with rollups is refused;
//! and a host's lane refuses a candidate whose symlink points outside its
//! tree.

use crate::common::{Drover, git};
use crate::fleet_hostile::{fleet_with_coordinator, hostile, symlink_patch};
use crate::fleet_work::{
    Worker, at_integration, board, finish, joined, loop_run, scripts, users, violations,
};
use crate::nats_common::{Nats, js_as_host};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

/// Whether `js` got `body` stored on `subject` (with a `Nats-Rollup: all`
/// header when `rollup`): false when the server refused it or never
/// answered (a publish the user may not make is dropped).
async fn stored(
    js: &async_nats::jetstream::Context,
    subject: &str,
    body: &str,
    rollup: bool,
) -> bool {
    let mut headers = async_nats::HeaderMap::new();
    if rollup {
        headers.insert("Nats-Rollup", "all");
    }
    match js
        .publish_with_headers(subject.to_string(), headers, body.to_string().into())
        .await
    {
        Ok(ack) => ack.await.is_ok(),
        Err(_) => false,
    }
}

/// Whether the JetStream API call on `subject` succeeded for `client`.
async fn api_ok(client: &async_nats::Client, subject: &str, body: Value) -> bool {
    match tokio::time::timeout(
        Duration::from_secs(2),
        client.request(subject.to_string(), body.to_string().into()),
    )
    .await
    {
        Ok(Ok(m)) => serde_json::from_slice::<Value>(&m.payload)
            .map(|v| v.get("error").is_none() && v["success"] != false)
            .unwrap_or(false),
        _ => false,
    }
}

/// Messages in stream `stream`, asked as the coordinator's user.
fn messages(nats: &Nats, stream: &str) -> u64 {
    let (rt, js) = js_as_host(nats, "c", "pw-c-Kp3");
    rt.block_on(async {
        let mut s = js
            .get_stream(stream)
            .await
            .unwrap_or_else(|e| panic!("{stream}: {e}"));
        s.info().await.unwrap().state.messages
    })
}

/// Guards issue 36 item 6: a host's user could publish on the fleet's
/// whole object store (it stored its patches there), so it could replace
/// another host's patch or roll the store up. Each host now writes only its
/// own bucket, which the coordinator makes and reads a step's candidate from.
#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_hosts_user_cannot_write_roll_up_or_delete_another_hosts_objects() {
    let c = Drover::new();
    let nats = fleet_with_coordinator(&c);
    let h1 = joined(&nats, "h1");
    // h2 joined: its own bucket is made for it.
    let _h2 = joined(&nats, "h2");
    let w1 = Worker::start(&h1);
    let (repo, charter) = board(&c, 1);
    let (imp, rev) = scripts(&c, 300);
    let (ok, err) = finish(loop_run(&c, &repo, &charter, &imp, &rev));
    assert!(ok, "loop run: {err}\nh1: {}", w1.said());
    assert_eq!(
        at_integration(&repo, "TASK-1.txt").as_deref(),
        Some("written on a fleet host\n"),
        "{err}"
    );
    // h1's candidate is in h1's own bucket (a chunk and its meta record).
    let h1_before = messages(&nats, "OBJ_drover-lab-objects-h1");
    assert!(h1_before >= 2, "h1's patch is in its bucket: {h1_before}");
    let shared_before = messages(&nats, "OBJ_drover-lab-objects");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (wrote, api, own, own_rollup) = rt.block_on(async {
        let h2 = hostile(&nats, "h2").await;
        let mut js = async_nats::jetstream::new(h2.clone());
        js.set_timeout(Duration::from_secs(2));
        let mut wrote = Vec::new();
        for (subject, rollup) in [
            // A chunk and a meta record (deleted, or naming h2's chunks)
            // into h1's bucket, and a rollup of it.
            ("$O.drover-lab-objects-h1.C.evil", false),
            ("$O.drover-lab-objects-h1.M.ZXZpbA==", false),
            ("$O.drover-lab-objects-h1.C.x", true),
            // The coordinator's store: written, or rolled up.
            ("$O.drover-lab-objects.C.evil", false),
            ("$O.drover-lab-objects.C.x", true),
        ] {
            let body = json!({"name": "evil", "deleted": true}).to_string();
            if stored(&js, subject, &body, rollup).await {
                wrote.push(subject);
            }
        }
        let mut api = Vec::new();
        for (subject, body) in [
            ("$JS.API.STREAM.PURGE.OBJ_drover-lab-objects-h1", json!({})),
            ("$JS.API.STREAM.DELETE.OBJ_drover-lab-objects-h1", json!({})),
            (
                "$JS.API.STREAM.MSG.DELETE.OBJ_drover-lab-objects-h1",
                json!({"seq": 1}),
            ),
            ("$JS.API.STREAM.UPDATE.OBJ_drover-lab-objects-h1", json!({})),
        ] {
            if api_ok(&h2, subject, body).await {
                api.push(subject);
            }
        }
        // Another host's patches are not its to read.
        let read = js.get_object_store("drover-lab-objects-h1").await.is_ok();
        assert!(!read, "h2 read h1's bucket");
        // Its own bucket is its to write, never to roll up.
        let own = stored(&js, "$O.drover-lab-objects-h2.C.mine", "mine", false).await;
        let own_rollup = stored(&js, "$O.drover-lab-objects-h2.C.x", "x", true).await;
        (wrote, api, own, own_rollup)
    });
    assert!(wrote.is_empty(), "h2 stored on {wrote:?}");
    assert!(api.is_empty(), "h2's API calls succeeded: {api:?}");
    assert!(own, "h2 could not write its own bucket");
    assert!(!own_rollup, "h2 rolled its own bucket up");
    assert_eq!(messages(&nats, "OBJ_drover-lab-objects-h1"), h1_before);
    assert_eq!(messages(&nats, "OBJ_drover-lab-objects"), shared_before);
    let refused = violations(&nats);
    assert!(
        refused.iter().any(|l| l.contains("drover-lab-objects-h1")),
        "{refused:?}"
    );
}

/// Guards issue 36 item 6: a store an older drover made (the client's
/// object store allows rollups) was used as it was. The coordinator's
/// user may not update it: the run is refused, saying how to remake it.
#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn an_object_store_made_with_rollups_is_refused_saying_how_to_remake_it() {
    let c = Drover::new();
    let nats = fleet_with_coordinator(&c);
    let (rt, js) = js_as_host(&nats, "c", "pw-c-Kp3");
    rt.block_on(
        js.create_object_store(async_nats::jetstream::object_store::Config {
            bucket: "drover-lab-objects".into(),
            ..Default::default()
        }),
    )
    .unwrap();
    let (repo, charter) = board(&c, 1);
    let (imp, rev) = scripts(&c, 300);
    let out = loop_run(&c, &repo, &charter, &imp, &rev)
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("allows rollups") && err.contains("nats stream rm OBJ_drover-lab-objects"),
        "{err}"
    );
}

/// The same store where the coordinator's user may update streams (one
/// user for every host): it is turned to refuse rollups, and the run goes on.
#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn an_object_store_made_with_rollups_is_turned_to_refuse_them_where_the_user_may() {
    let nats = Nats::start(&users());
    let c = joined(&nats, "c");
    let (rt, js) = js_as_host(&nats, "c", "pw-c-Kp3");
    let allows = || {
        rt.block_on(async {
            let mut s = js.get_stream("OBJ_drover-lab-objects").await.unwrap();
            s.info().await.unwrap().config.allow_rollup
        })
    };
    rt.block_on(
        js.create_object_store(async_nats::jetstream::object_store::Config {
            bucket: "drover-lab-objects".into(),
            ..Default::default()
        }),
    )
    .unwrap();
    assert!(allows());
    let (repo, charter) = board(&c, 1);
    let (imp, rev) = scripts(&c, 300);
    let (ok, err) = finish(loop_run(&c, &repo, &charter, &imp, &rev));
    assert!(ok, "loop run: {err}");
    assert!(!allows(), "the store still allows rollups");
}

/// The symlink check where a candidate is applied on a host (issue 36
/// item 2): a coordinator that sends one (the real one refuses them, so a
/// stand-in answers here, as the fleet's creator user) gets the step
/// failed, naming the symlink, and the host's lane never runs: nothing is
/// written through it.
#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_hosts_lane_refuses_a_candidate_whose_symlink_points_outside_the_tree() {
    let c = Drover::new();
    let nats = fleet_with_coordinator(&c);
    let h1 = joined(&nats, "h1");
    let outside_dir = h1.scratch().join("home");
    std::fs::create_dir_all(&outside_dir).unwrap();
    let outside = outside_dir.join("precious.txt");
    std::fs::write(&outside, "precious\n").unwrap();
    let patch = symlink_patch(&c, "TASK-1.txt", &outside);
    let (repo, _) = board(&c, 1);
    let base = String::from_utf8(
        std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let refname = format!("refs/drover/base/{base}");
    git(&repo, &["update-ref", &refname, &base]);
    let file = c.scratch().join("base.bundle");
    git(
        &repo,
        &["bundle", "create", "-q", file.to_str().unwrap(), &refname],
    );
    let bundle = std::fs::read(&file).unwrap();
    // The implementer would write the claimed file: through the symlink.
    let (imp, _) = scripts(&c, 100);
    let script = std::fs::read_to_string(&imp).unwrap();
    let (rt, js) = js_as_host(&nats, "c", "pw-c-Kp3");
    let names = drover::fleet::Names::new("lab").unwrap();
    let run = "c-stand-in1";
    let mut sub = rt.block_on(async {
        use drover::fleet::work;
        work::consumers(&js, &names, Duration::from_secs(30))
            .await
            .unwrap();
        work::host_objects(&js, &names, "h1").await.unwrap();
        let store = work::objects(&js, &names).await.unwrap();
        let bucket = names.objects_bucket();
        let b = work::put_bytes(&js, &bucket, &store, "base.bundle", &bundle)
            .await
            .unwrap();
        let p = work::put_bytes(&js, &bucket, &store, "cand.patch", &patch)
            .await
            .unwrap();
        let sub = js
            .client()
            .subscribe(names.coord_subject(run, "h1"))
            .await
            .unwrap();
        let item = json!({"run": run, "job": "stand-in-task-1-i2", "lane": "stand-in-task-1",
                          "step": "implement", "agent": "claude", "task": "TASK-1",
                          "base": base, "bundle": b, "candidate": p,
                          "report_files": ["TASK-1.txt"], "sim_script": script,
                          "board": "backlog", "round": 2, "turn_timeout_s": 60,
                          "report_grace_s": 10});
        js.publish(names.work_subject(run, "claude"), item.to_string().into())
            .await
            .unwrap()
            .await
            .unwrap();
        sub
    });
    let w1 = Worker::start(&h1);
    let client = rt.block_on(async { js.client() });
    let finished = rt.block_on(async {
        let until = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let m = tokio::time::timeout_at(until, sub.next())
                .await
                .unwrap_or_else(|_| panic!("no finish from h1: {}", w1.said()))
                .unwrap();
            let req: Value = serde_json::from_slice(&m.payload).unwrap();
            let reply = if req["op"] == "start" {
                json!({"reply": "started", "attempt": "stand-in-attempt-1"})
            } else {
                json!({"reply": "accepted"})
            };
            client
                .publish(m.reply.unwrap(), reply.to_string().into())
                .await
                .unwrap();
            if req["op"] == "finish" {
                return req;
            }
        }
    });
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "precious\n",
        "written through the symlink: {finished}"
    );
    let left: Vec<_> = std::fs::read_dir(&outside_dir).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "written beside it: {left:?}");
    let f = &finished["finished"];
    assert_eq!(f["result"], "failed", "{finished}\nh1: {}", w1.said());
    assert!(
        f["reason"].as_str().unwrap_or("").contains("symlink"),
        "{finished}"
    );
}
