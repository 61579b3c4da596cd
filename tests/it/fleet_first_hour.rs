//! The fleet's first hour (issue 42 item 8): the server's version checked
//! at join, a supervisor that cannot rejoin saying why once instead of
//! retrying forever, `fleet work` handing it the password, and `fleet work`
//! before any run saying what it waits for.

use crate::common::{self, Drover, wait_until};
use crate::fleet_events::Follower;
use crate::fleet_join::{join, run, secret_file, users};
use crate::fleet_work::{self, Worker, assert_landed_once, board, finish, loop_run, scripts, trio};
use crate::nats_common::{Nats, oldest_bin};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::time::Duration;

/// The hosts `fleet ls --json` lists from `d`, by id.
fn hosts(d: &Drover) -> Vec<String> {
    let out = run(d, &["fleet", "ls", "--json"], &[]);
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
        return Vec::new();
    };
    v["hosts"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .filter_map(|h| h["host"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `fleet work` of `d` running, its stderr piped.
fn work(d: &Drover, env: &[(&str, &str)]) -> Child {
    let mut c = d.cmd();
    c.args(["fleet", "work", "--agent", "claude"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

/// The first stderr line of `child` that holds `needle` (read on a thread,
/// bounded by `within`); None when it ended or the time ran out first.
fn line_with(child: &mut Child, needle: &'static str, within: Duration) -> Option<String> {
    let err = child.stderr.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains(needle) {
                let _ = tx.send(line);
                return;
            }
        }
    });
    rx.recv_timeout(within).ok()
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A server that says it is nats-server 2.8.4 in its INFO and answers the
/// client's first PING: the one thing a real old server would show the
/// check (no 2.8 build is installable here). Returns its port.
fn old_server() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { return };
            std::thread::spawn(move || {
                let info = r#"INFO {"server_id":"OLD","server_name":"old","version":"2.8.4","proto":1,"go":"go1.19","host":"127.0.0.1","port":4222,"headers":true,"auth_required":true,"max_payload":1048576,"jetstream":true}"#;
                if s.write_all(format!("{info}\r\n").as_bytes()).is_err() {
                    return;
                }
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if seen.windows(6).any(|w| w == b"PING\r\n") {
                        seen.clear();
                        if s.write_all(b"PONG\r\n").is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

#[test]
fn a_server_older_than_2_9_is_refused_at_join_naming_its_version() {
    let port = old_server();
    let d = Drover::new();
    let pw = secret_file(&d, "nats.pw", "pw-old");
    let url = format!("nats://127.0.0.1:{port}");
    let out = run(
        &d,
        &[
            "fleet",
            "join",
            "lab",
            "--nats",
            &url,
            "--host",
            "h1",
            "--user",
            "h1",
            "--password-file",
            pw.to_str().unwrap(),
        ],
        &[],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("is nats-server 2.8.4: the fleet needs 2.9.0 or newer")
            && err.contains("direct get"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!d.state.join("fleet.json").exists(), "nothing recorded");
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn fleet_work_before_any_run_says_it_waits_for_loop_run_to_start() {
    let nats = Nats::start(&users());
    let d = Drover::new();
    join(&d, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    let mut w = work(&d, &[]);
    let line = line_with(&mut w, "waiting", Duration::from_secs(20));
    stop(w);
    assert_eq!(
        line.as_deref(),
        Some("fleet work: waiting for `loop run --fleet lab` to start")
    );
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_host_whose_password_is_only_in_the_env_stops_retrying_and_fleet_work_with_it_rejoins() {
    let nats = Nats::start(&users());
    let (d1, d2) = (Drover::new(), Drover::new());
    join(&d1, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    let pw = [("DROVER_NATS_PASSWORD", "pw-h2-Zr9")];
    let url = nats.url("nats");
    let out = run(
        &d2,
        &[
            "fleet", "join", "lab", "--nats", &url, "--host", "h2", "--user", "h2",
        ],
        &pw,
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(hosts(&d1), ["h1", "h2"]);
    d2.ok(&["kill-server"]);
    assert_eq!(hosts(&d1), ["h1"]);

    // A supervisor started without the variable says once that it does
    // not rejoin, and why, instead of retrying forever.
    d2.serve();
    let log = d2.state.join("logs/supervisor.log");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(10), || text()
            .contains("not rejoining the fleet")),
        "{}",
        text()
    );
    assert!(
        text().contains("DROVER_NATS_PASSWORD is not set"),
        "{}",
        text()
    );
    assert!(!text().contains("cannot rejoin the fleet"), "{}", text());
    // `fleet work` without it says what is missing.
    let out = run(&d2, &["fleet", "work", "--agent", "claude"], &[]);
    let err = common::stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("DROVER_NATS_PASSWORD is not set"), "{err}");
    assert_eq!(hosts(&d1), ["h1"]);

    // With it: the supervisor already running gets it and rejoins.
    let mut w = work(&d2, &pw);
    let back = wait_until(Duration::from_secs(15), || hosts(&d1) == ["h1", "h2"]);
    let waiting = line_with(&mut w, "waiting", Duration::from_secs(10));
    stop(w);
    assert!(back, "h2 is not listed again: {:?}", hosts(&d1));
    assert!(waiting.is_some(), "fleet work did not start");
    assert!(!text().contains("pw-h2"), "no password in the log");
}

/// docs/fleet.md's local recipe, the first `sh` block under its heading.
fn recipe() -> String {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fleet.md")).unwrap();
    let from = doc.find("## Try it with a local nats-server").unwrap();
    let rest = &doc[from..];
    let start = rest.find("```sh\n").unwrap() + "```sh\n".len();
    let end = start + rest[start..].find("```\n").unwrap();
    rest[start..end].to_string()
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn the_local_recipe_runs_as_written_twice_at_once_as_on_a_shared_machine() {
    let script = recipe();
    assert!(
        !script.contains("/tmp") && !script.contains("4222"),
        "{script}"
    );
    // drover and the nats-server the tests use come first on PATH.
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        crate::nats_common::server_bin(),
        bin.path().join("nats-server"),
    )
    .unwrap();
    std::os::unix::fs::symlink(common::BIN, bin.path().join("drover")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Run to its end, then stop what it started and say where it ran.
    let full = format!(
        "set -eu\n{script}\ndrover --state-dir \"$dir/h1\" kill-server\nkill %1\nwait\necho \"DIR=$dir\"\n"
    );
    let runs: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new("bash")
                .arg("-c")
                .arg(&full)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("PATH", &path)
                .env_remove("PORT")
                .env_remove("DROVER_STATE_DIR")
                .env_remove("DROVER_NATS_PASSWORD")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut dirs = Vec::new();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        let text = common::stdout(&out);
        if let Some(d) = text.lines().find_map(|l| l.strip_prefix("DIR=")) {
            dirs.push(d.to_string());
        }
        assert!(out.status.success(), "{text}\n{}", common::stderr(&out));
        assert!(
            text.contains("joined fleet lab as host h1")
                && text.contains("joined fleet lab as host h2"),
            "{text}"
        );
        let listed: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("h1*") || l.starts_with("h2 "))
            .collect();
        assert_eq!(listed.len(), 2, "{text}");
    }
    assert_eq!(dirs.len(), 2);
    assert_ne!(dirs[0], dirs[1]);
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
#[ignore = "needs nats-server 2.9: scripts/install-nats.sh --oldest"]
fn the_oldest_server_the_docs_claim_carries_join_ls_a_follower_and_a_sim_fleet_run() {
    let nats = Nats::start_bin(&oldest_bin(), &fleet_work::users(), "", &[]);
    let (c, h1, h2) = trio(&nats);
    assert_eq!(hosts(&c), ["c", "h1", "h2"]);
    let follow = Follower::start(&h1, Some("0"));
    let (w1, w2) = (Worker::start(&h1), Worker::start(&h2));
    let (repo, charter) = board(&c, 2);
    let (imp, rev) = scripts(&c, 200);
    let (ok, err) = finish(loop_run(&c, &repo, &charter, &imp, &rev));
    assert!(ok, "loop run: {err}\nh1: {}\nh2: {}", w1.said(), w2.said());
    // Each task's patch came back through its host's own object bucket.
    assert_landed_once(&repo, 2, &err);
    assert!(
        wait_until(Duration::from_secs(20), || follow
            .events()
            .iter()
            .any(|e| e["host"] == "c" && e["kind"].as_str().is_some())),
        "{:?}",
        follow.events()
    );
}
