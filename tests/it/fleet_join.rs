//! `drover fleet join|ls|leave` against a real nats-server (docs/fleet.md):
//! hosts are separate supervisors with their own state dirs on this machine.

use crate::common::{self, Drover, wait_until};
use crate::nats_common::{Nats, Setup, pki};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

const NEEDS: &str = "needs nats-server: scripts/install-nats.sh";

/// Users of the test servers: one per host.
pub(crate) fn users() -> Setup {
    Setup {
        users: vec![
            ("h1".into(), "pw-h1-Xq7".into()),
            ("h2".into(), "pw-h2-Zr9".into()),
        ],
        tls: None,
    }
}

/// A 0600 file holding `secret`, beside `d`'s state dir.
pub(crate) fn secret_file(d: &Drover, name: &str, secret: &str) -> PathBuf {
    let p = d.scratch().join(name);
    std::fs::write(&p, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

pub(crate) fn run(d: &Drover, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = d.cmd();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// `fleet join` as user `user` with its password in a file; asserts success.
pub(crate) fn join(d: &Drover, nats: &Nats, host: &str, user: &str, pw: &str, extra: &[&str]) {
    join_env(d, nats, host, user, pw, extra, &[]);
}

/// [`join`] with `env` set for the command (and so for the supervisor it
/// starts: the PATH its lanes find their agents on).
pub(crate) fn join_env(
    d: &Drover,
    nats: &Nats,
    host: &str,
    user: &str,
    pw: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) {
    let f = secret_file(d, "nats.pw", pw);
    let url = nats.url("nats");
    let mut args = vec![
        "fleet",
        "join",
        "lab",
        "--nats",
        &url,
        "--host",
        host,
        "--user",
        user,
        "--password-file",
        f.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(d, &args, env);
    assert!(
        out.status.success(),
        "join {host}: {}",
        common::stderr(&out)
    );
}

/// The hosts `fleet ls --json` lists from `d`, by id.
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
fn two_hosts_join_and_are_listed_and_one_that_leaves_is_gone() {
    let _ = NEEDS;
    let nats = Nats::start(&users());
    let (d1, d2) = (Drover::new(), Drover::new());
    join(&d1, &nats, "h1", "h1", "pw-h1-Xq7", &["--slots", "3"]);
    // The second host's password comes from the environment.
    let url = nats.url("nats");
    let out = run(
        &d2,
        &[
            "fleet", "join", "lab", "--nats", &url, "--host", "h2", "--user", "h2",
        ],
        &[("DROVER_NATS_PASSWORD", "pw-h2-Zr9")],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(common::stdout(&out).contains("joined fleet lab as host h2"));

    let out = run(&d1, &["fleet", "ls", "--json"], &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fleet"], "lab");
    let hs = v["hosts"].as_array().unwrap();
    assert_eq!(hs.len(), 2, "{v}");
    assert_eq!(hs[0]["host"], "h1");
    assert_eq!(hs[0]["slots"], 3);
    assert_eq!(hs[0]["this"], true);
    assert_eq!(hs[0]["state"], "up");
    assert_eq!(hs[0]["pid"], d1.server_pid().unwrap());
    assert_eq!(hs[1]["host"], "h2");
    assert_eq!(hs[1]["this"], false);
    assert_eq!(hs[1]["version"], env!("CARGO_PKG_VERSION"));
    let table = common::stdout(&run(&d1, &["fleet", "ls"], &[]));
    assert!(table.starts_with("HOST"), "{table}");
    assert!(table.contains("h1*") && table.contains("h2"), "{table}");

    // The joined state: private, and naming the secret's source, not the secret.
    let f = d1.state.join("fleet.json");
    assert_eq!(
        std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(
        text.contains("nats.pw") && !text.contains("pw-h1-Xq7"),
        "{text}"
    );

    // Leaving removes the host at once, and its config.
    let out = run(&d2, &["fleet", "leave"], &[]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(hosts(&d1), ["h1"]);
    assert!(!d2.state.join("fleet.json").exists());
    let out = run(&d2, &["fleet", "ls"], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("not joined a fleet"));
    // Leaving again is a no-op that says so.
    let out = run(&d2, &["fleet", "leave"], &[]);
    assert!(out.status.success());
    assert!(common::stdout(&out).contains("in no fleet"));
}

/// A server and hosts `h1` and `h2` joined with 300 ms heartbeats.
pub(crate) fn two_fast_hosts() -> (Nats, Drover, Drover) {
    let nats = Nats::start(&users());
    let (d1, d2) = (Drover::new(), Drover::new());
    join(
        &d1,
        &nats,
        "h1",
        "h1",
        "pw-h1-Xq7",
        &["--heartbeat-ms", "300"],
    );
    join(
        &d2,
        &nats,
        "h2",
        "h2",
        "pw-h2-Zr9",
        &["--heartbeat-ms", "300"],
    );
    (nats, d1, d2)
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_host_killed_with_sigkill_disappears_within_the_ttl_and_rejoins_on_restart() {
    // 300 ms heartbeats: the bucket's TTL is 900 ms.
    let (_nats, d1, d2) = two_fast_hosts();
    assert_eq!(hosts(&d1), ["h1", "h2"]);
    // Alive past several TTLs: the heartbeat keeps it.
    let t = Instant::now();
    assert!(!wait_until(Duration::from_millis(2500), || hosts(&d1)
        .len()
        != 2));
    assert!(t.elapsed() >= Duration::from_millis(2500));

    d2.kill_supervisor();
    let killed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(10), || hosts(&d1) == ["h1"]),
        "h2 still listed 10 s after kill -9"
    );
    let gone = killed.elapsed();
    // TTL 900 ms plus the server's expiry tick and one ls round trip.
    assert!(gone < Duration::from_secs(4), "h2 took {gone:?} to expire");
    eprintln!("a killed host disappeared after {gone:?}");

    // A supervisor that starts with a fleet config rejoins by itself.
    d2.serve();
    assert!(
        wait_until(Duration::from_secs(10), || hosts(&d1) == ["h1", "h2"]),
        "h2 did not rejoin after a restart"
    );
    // A clean stop takes the host down at once, not after the TTL.
    d1.ok(&["kill-server"]);
    assert_eq!(hosts(&d2), ["h2"]);
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_server_without_authentication_is_refused_without_insecure() {
    let nats = Nats::start(&Setup::default());
    let d = Drover::new();
    let url = nats.url("nats");
    // No credentials at all: refused before connecting.
    let out = run(&d, &["fleet", "join", "lab", "--nats", &url], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("no credentials"));
    // Credentials the server does not ask for: refused once it says so.
    let f = secret_file(&d, "pw", "whatever-pw");
    let out = run(
        &d,
        &[
            "fleet",
            "join",
            "lab",
            "--nats",
            &url,
            "--user",
            "u",
            "--password-file",
            f.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(
        common::stderr(&out).contains("asks no authentication"),
        "{}",
        common::stderr(&out)
    );
    assert!(!d.state.join("fleet.json").exists());
    // --insecure joins.
    let out = run(
        &d,
        &[
            "fleet",
            "join",
            "lab",
            "--nats",
            &url,
            "--insecure",
            "--host",
            "solo",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert_eq!(hosts(&d), ["solo"]);
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_wrong_password_is_a_clear_error_naming_no_secret() {
    let nats = Nats::start(&users());
    let d = Drover::new();
    let url = nats.url("nats");
    let f = secret_file(&d, "pw", "wrong-pw-Kd3");
    let args = [
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
        f.to_str().unwrap(),
    ];
    let out = run(&d, &args, &[]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("refused the credentials"), "{err}");
    assert!(
        !err.contains("wrong-pw-Kd3") && !err.contains("pw-h1-Xq7"),
        "{err}"
    );
    assert!(!d.state.join("fleet.json").exists());
    let log = std::fs::read_to_string(d.state.join("logs/supervisor.log")).unwrap_or_default();
    assert!(!log.contains("wrong-pw-Kd3"), "{log}");

    // A password file others may read is refused before anything is sent.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&d, &args, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("chmod 600"));
    // A URL with credentials in it is refused without repeating them.
    let bad = format!("nats://h1:pw-h1-Xq7@127.0.0.1:{}", nats.port);
    let out = run(
        &d,
        &["fleet", "join", "lab", "--nats", &bad, "--insecure"],
        &[],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(!common::stderr(&out).contains("pw-h1-Xq7"));
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn tls_with_the_fleets_ca_works_and_a_wrong_ca_is_refused() {
    let certs = tempfile::tempdir().unwrap();
    let good = pki(certs.path(), "good");
    let other = pki(certs.path(), "other");
    let nats = Nats::start(&Setup {
        tls: Some((good.cert.clone(), good.key.clone())),
        ..users()
    });
    let (d1, d2) = (Drover::new(), Drover::new());
    let ca = good.ca.to_str().unwrap();
    join(&d1, &nats, "h1", "h1", "pw-h1-Xq7", &["--tls-ca", ca]);
    assert_eq!(hosts(&d1), ["h1"]);

    let f = secret_file(&d2, "pw", "pw-h2-Zr9");
    let url = nats.url("tls");
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
            "--tls-ca",
            other.ca.to_str().unwrap(),
        ],
        &[],
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("TLS"), "{err}");
    assert!(!err.contains("pw-h2-Zr9"), "{err}");
    assert_eq!(hosts(&d1), ["h1"]);
}

#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_password_never_reaches_argv_logs_errors_or_panes() {
    let nats = Nats::start(&users());
    let (d1, d2) = (Drover::new(), Drover::new());
    join(&d1, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    let url = nats.url("nats");
    let out = run(
        &d2,
        &[
            "-vvv", "fleet", "join", "lab", "--nats", &url, "--host", "h2", "--user", "h2",
        ],
        &[("DROVER_NATS_PASSWORD", "pw-h2-Zr9")],
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let mut seen = String::from_utf8_lossy(&out.stdout).into_owned();
    seen += &common::stderr(&out);
    // A pane of the supervisor that join started with the password in its env.
    let pane = run(
        &d2,
        &["pane", "new", "p", "--json", "--", "sh", "-c", "sleep 60"],
        &[("DROVER_NATS_PASSWORD", "pw-h2-Zr9")],
    );
    assert!(pane.status.success(), "{}", common::stderr(&pane));
    let pv: Value = serde_json::from_slice(&pane.stdout).unwrap();
    let pane_pid = common::pid_of(&pv);
    if common::on_native() {
        let env = std::fs::read(format!("/proc/{pane_pid}/environ")).unwrap();
        let env = String::from_utf8_lossy(&env);
        assert!(
            !env.contains("pw-h2-Zr9"),
            "the pane sees the NATS password"
        );
    }
    assert_eq!(hosts(&d1), ["h1", "h2"]);
    d2.ok(&["fleet", "leave"]);
    for d in [&d1, &d2] {
        let pid = d.server_pid().unwrap();
        seen += &common::cmdline(pid).unwrap().join(" ");
        for f in ["logs/supervisor.log", "fleet.json"] {
            seen += &std::fs::read_to_string(d.state.join(f)).unwrap_or_default();
        }
    }
    assert!(
        seen.contains("joined the fleet"),
        "the log was not read: {seen}"
    );
    for pw in ["pw-h1-Xq7", "pw-h2-Zr9"] {
        assert!(!seen.contains(pw), "{pw} leaked: {seen}");
    }
}

/// A presence bucket an older drover made (a client-made KV bucket, which
/// allows `Nats-Rollup`) is turned to refuse rollups in place when a host
/// that may (here any user) joins: no host can then erase every host's key.
#[test]
#[ignore = "needs nats-server: scripts/install-nats.sh"]
fn a_presence_bucket_that_allows_rollups_is_turned_to_refuse_them() {
    let nats = Nats::start(&users());
    let (rt, js) = crate::nats_common::js_as(&nats, "h1", "pw-h1-Xq7");
    let allows = |js: &async_nats::jetstream::Context| {
        rt.block_on(async {
            let mut s = js.get_stream("KV_drover-lab-hosts").await.unwrap();
            s.info().await.unwrap().config.allow_rollup
        })
    };
    rt.block_on(async {
        js.create_key_value(async_nats::jetstream::kv::Config {
            bucket: "drover-lab-hosts".into(),
            history: 1,
            max_age: Duration::from_secs(15),
            ..Default::default()
        })
        .await
        .unwrap();
    });
    assert!(allows(&js), "a client-made bucket allows rollups");
    let d = Drover::new();
    join(&d, &nats, "h1", "h1", "pw-h1-Xq7", &[]);
    assert!(!allows(&js), "the join turned rollups off");
    assert_eq!(hosts(&d), vec!["h1".to_string()]);
}
