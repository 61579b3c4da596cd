//! `drover web` over real HTTP on TCP: a real supervisor with sim panes,
//! `drover web` as the binary runs it, requests written by hand (every
//! header under the test's control). Each security property of docs/web.md
//! has a test here that fails when the property is removed.

use crate::common::{BIN, Drover, wait_until};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(30);

/// A running `drover web`, stopped when dropped.
struct Web {
    child: Child,
    port: u16,
    token: String,
    /// Its second line: `read-only` or `actions allowed`.
    mode: String,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
struct Resp {
    status: u16,
    head: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn start_web(d: &Drover, flags: &[&str]) -> Web {
    start_web_tls(d, flags, None)
}

fn start_web_tls(d: &Drover, flags: &[&str], tls: Option<Arc<rustls::ClientConfig>>) -> Web {
    let mut child = d
        .cmd()
        .args(["web", "--listen", "127.0.0.1:0"])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut url, mut mode) = (String::new(), String::new());
    out.read_line(&mut url).unwrap();
    out.read_line(&mut mode).unwrap();
    // Keep its stdout drained (it prints nothing more).
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = url
        .trim()
        .strip_prefix("drover web: ")
        .unwrap_or_else(|| panic!("no URL printed: {url:?}"))
        .to_string();
    let (addr, token) = url.split_once("/?token=").unwrap();
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    Web {
        child,
        port,
        token: token.to_string(),
        mode: mode.trim().to_string(),
        tls,
    }
}

fn parse(raw: &str) -> Resp {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let head = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        head,
        body: body.to_string(),
    }
}

impl Web {
    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn cookie(&self) -> String {
        format!("drover_web={}", self.token)
    }

    /// Send `req` (a whole HTTP/1.0 request: the answer ends with the
    /// connection) and read the answer.
    fn raw(&self, req: &str) -> Resp {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        tcp.set_read_timeout(Some(LONG)).unwrap();
        let mut buf = Vec::new();
        match &self.tls {
            None => {
                let mut s = tcp;
                s.write_all(req.as_bytes()).unwrap();
                let _ = s.read_to_end(&mut buf);
            }
            Some(cfg) => {
                let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
                let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
                let mut s = rustls::StreamOwned::new(conn, tcp);
                s.write_all(req.as_bytes()).unwrap();
                let _ = s.read_to_end(&mut buf);
            }
        }
        parse(&String::from_utf8_lossy(&buf))
    }

    /// A request with the default Host and these extra headers.
    fn call(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        let mut req = format!("{method} {path} HTTP/1.0\r\nHost: {}\r\n", self.host());
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.raw(&req)
    }

    fn get(&self, path: &str) -> Resp {
        let c = self.cookie();
        self.call("GET", path, &[("Cookie", &c)], "")
    }

    fn post(&self, path: &str, body: &Value) -> Resp {
        let c = self.cookie();
        let b = body.to_string();
        self.call(
            "POST",
            path,
            &[("Cookie", &c), ("Content-Type", "application/json")],
            &b,
        )
    }

    fn view(&self) -> Value {
        let r = self.get("/api/view");
        assert_eq!(r.status, 200, "{r:?}");
        serde_json::from_str(&r.body).unwrap()
    }

    /// Follow `/api/events`: each `view` event's JSON on the channel.
    fn events(&self) -> mpsc::Receiver<(Instant, Value)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let req = format!(
            "GET /api/events HTTP/1.0\r\nHost: {}\r\nCookie: {}\r\n\r\n",
            self.host(),
            self.cookie()
        );
        s.write_all(req.as_bytes()).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(s);
            let mut line = String::new();
            let mut view = false;
            while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
                let l = line.trim_end();
                if l == "event: view" {
                    view = true;
                } else if let Some(data) = l.strip_prefix("data: ").filter(|_| view) {
                    let v: Value = serde_json::from_str(data).unwrap_or_default();
                    if tx.send((Instant::now(), v)).is_err() {
                        return;
                    }
                    view = false;
                }
                line.clear();
            }
        });
        rx
    }
}

fn pane_of<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["panes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .unwrap_or(&Value::Null)
}

/// Every route answers 401 without the cookie; the right `?token=` trades
/// for an `HttpOnly`, `SameSite=Strict` cookie (not `Secure` over plain
/// HTTP) and a redirect to `/`; every answer carries the CSP (no inline
/// script) and no CORS header, an OPTIONS included.
#[test]
fn no_cookie_no_page_and_the_token_trades_for_a_strict_cookie() {
    let d = Drover::new();
    d.serve();
    let w = start_web(&d, &[]);
    assert_eq!(w.mode, "read-only");
    let mut all = Vec::new();
    for path in [
        "/",
        "/app.js",
        "/app.css",
        "/api/view",
        "/api/events",
        "/api/screen?pane=x",
        "/?token=0123",
    ] {
        let r = w.call("GET", path, &[], "");
        assert_eq!(r.status, 401, "GET {path}: {r:?}");
        assert!(!r.body.contains("panes"), "{r:?}");
        all.push(r);
    }
    let r = w.call(
        "POST",
        "/api/answer",
        &[("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(r.status, 401, "{r:?}");
    all.push(r);

    let r = w.call("GET", &format!("/?token={}", w.token), &[], "");
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header("location"), Some("/"));
    let cookie = r.header("set-cookie").unwrap_or_default().to_string();
    assert!(
        cookie.starts_with(&format!("drover_web={};", w.token)),
        "{cookie}"
    );
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains("Secure"), "{cookie}");
    all.push(r);

    for (path, ctype) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
        ("/api/view", "application/json"),
    ] {
        let r = w.get(path);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert!(
            r.header("content-type")
                .unwrap_or_default()
                .starts_with(ctype),
            "{path}: {r:?}"
        );
        all.push(r);
    }
    let r = w.call(
        "OPTIONS",
        "/api/view",
        &[
            ("Origin", "http://evil.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
        "",
    );
    assert!(r.status == 403 || r.status == 405, "{r:?}");
    all.push(r);
    for r in &all {
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("script-src 'self'"), "{r:?}");
        assert!(csp.contains("frame-ancestors 'none'"), "{r:?}");
        assert!(!csp.contains("unsafe-inline"), "{r:?}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert!(r.header("access-control-allow-origin").is_none(), "{r:?}");
    }
}

/// `--new-token` makes the URL printed before useless; the token's file is
/// 0600 in a 0700 dir.
#[test]
fn a_stale_token_is_refused_and_the_token_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = Drover::new();
    d.serve();
    let old = start_web(&d, &[]).token.clone();
    let dir = d.state.join("web");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("token")), 0o600);
    let again = start_web(&d, &[]);
    assert_eq!(again.token, old, "the token is kept across restarts");
    drop(again);
    let w = start_web(&d, &["--new-token"]);
    assert_ne!(w.token, old);
    let r = w.call("GET", &format!("/?token={old}"), &[], "");
    assert_eq!(r.status, 401, "{r:?}");
    let r = w.call(
        "GET",
        "/api/view",
        &[("Cookie", &format!("drover_web={old}"))],
        "",
    );
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(w.get("/api/view").status, 200);
    assert_eq!(mode(&dir.join("token")), 0o600);
}

/// A foreign `Host` (DNS rebinding), a foreign `Origin` and a cross-site
/// fetch are refused even with the cookie; a missing Host is a bad request.
#[test]
fn foreign_host_origin_and_site_are_refused() {
    let d = Drover::new();
    d.serve();
    let w = start_web(&d, &["--allow-host", "box.lan"]);
    let c = w.cookie();
    let with_host = |host: &str| {
        w.raw(&format!(
            "GET /api/view HTTP/1.0\r\nHost: {host}\r\nCookie: {c}\r\n\r\n"
        ))
    };
    assert_eq!(with_host("evil.example").status, 403);
    assert_eq!(with_host(&format!("evil.example:{}", w.port)).status, 403);
    assert!(with_host("evil.example").body.contains("unknown Host"));
    assert_eq!(with_host(&format!("localhost:{}", w.port)).status, 200);
    assert_eq!(with_host("[::1]:1").status, 200);
    assert_eq!(with_host("box.lan").status, 200);
    let r = w.raw(&format!("GET /api/view HTTP/1.0\r\nCookie: {c}\r\n\r\n"));
    assert_eq!(r.status, 400, "{r:?}");
    let evil = w.call(
        "GET",
        "/api/view",
        &[("Cookie", &c), ("Origin", "http://evil.example")],
        "",
    );
    assert_eq!(evil.status, 403, "{evil:?}");
    let cross = w.call(
        "GET",
        "/api/view",
        &[("Cookie", &c), ("Sec-Fetch-Site", "cross-site")],
        "",
    );
    assert_eq!(cross.status, 403, "{cross:?}");
    let own = format!("http://{}", w.host());
    let same = w.call(
        "GET",
        "/api/view",
        &[
            ("Cookie", &c),
            ("Origin", &own),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        "",
    );
    assert_eq!(same.status, 200, "{same:?}");
    let post = w.call(
        "POST",
        "/api/answer",
        &[
            ("Cookie", &c),
            ("Origin", "http://evil.example"),
            ("Content-Type", "application/json"),
        ],
        "{}",
    );
    assert_eq!(post.status, 403, "{post:?}");
    assert!(post.header("access-control-allow-origin").is_none());
}

/// A non-loopback address without TLS is a usage error that says what to do.
#[test]
fn a_lan_address_without_tls_is_a_usage_error() {
    let d = Drover::new();
    let out = d.run(&["web", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--tls-cert") && err.contains("--insecure-http"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // The fleet's hosts are not built yet: said, not ignored.
    let out = d.run(&["web", "--fleet"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// With the operator's certificate it serves HTTPS, and its cookie is `Secure`.
#[test]
fn tls_with_the_operators_cert_serves_https_with_a_secure_cookie() {
    let d = Drover::new();
    d.serve();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let (cert_pem, key_pem) = (d.scratch().join("cert.pem"), d.scratch().join("key.pem"));
    std::fs::write(&cert_pem, leaf.pem()).unwrap();
    std::fs::write(&key_pem, key.serialize_pem()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let (c, k) = (
        cert_pem.display().to_string(),
        key_pem.display().to_string(),
    );
    let w = start_web_tls(
        &d,
        &["--tls-cert", &c, "--tls-key", &k],
        Some(Arc::new(cfg)),
    );
    let r = w.call("GET", &format!("/?token={}", w.token), &[], "");
    assert_eq!(r.status, 303, "{r:?}");
    let cookie = r.header("set-cookie").unwrap_or_default();
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    assert_eq!(w.get("/api/view").status, 200);
    // The origin a browser sends over TLS is https.
    let own = format!("https://{}", w.host());
    let ok = w.call(
        "GET",
        "/api/view",
        &[("Cookie", &w.cookie()), ("Origin", &own)],
        "",
    );
    assert_eq!(ok.status, 200, "{ok:?}");
    // Plain HTTP to the TLS port gets no page.
    let mut tcp = TcpStream::connect(("127.0.0.1", w.port)).unwrap();
    tcp.set_read_timeout(Some(LONG)).unwrap();
    let req = format!(
        "GET /api/view HTTP/1.0\r\nHost: {}\r\nCookie: {}\r\n\r\n",
        w.host(),
        w.cookie()
    );
    tcp.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let _ = tcp.read_to_end(&mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("panes"));
}

/// A sim agent that asks permission, then says ok and finishes.
fn ask_script(d: &Drover) -> std::path::PathBuf {
    let p = d.scratch().join("ask.toml");
    std::fs::write(
        &p,
        "[[turn]]\nsteps = [{ask = \"touch x\"}, {say = \"ok\"}, \"finish\"]\n",
    )
    .unwrap();
    p
}

/// Read-only: an action is refused with 403 and audited; the snapshot says
/// read-only.
#[test]
fn a_read_only_page_refuses_actions() {
    let d = Drover::new();
    d.serve();
    let w = start_web(&d, &[]);
    assert_eq!(w.view()["read_only"], true);
    let r = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "p", "action": "approve", "choice": null, "since_ms": 1}),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let e: Value = serde_json::from_str(&r.body).unwrap();
    assert!(
        e["error"]
            .as_str()
            .unwrap_or_default()
            .contains("--allow-actions"),
        "{e}"
    );
    let r = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "pause", "state": "running"}),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = w.call(
        "POST",
        "/api/answer",
        &[("Cookie", &w.cookie()), ("Content-Type", "text/plain")],
        "{}",
    );
    assert_eq!(r.status, 415, "{r:?}");
    let audit = std::fs::read_to_string(d.state.join("web/audit.jsonl")).unwrap();
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{audit}");
    assert_eq!(lines[0]["outcome"], "refused");
    assert_eq!(lines[0]["action"], "approve");
    assert_eq!(lines[1]["target"], "loop1");
    assert_eq!(lines[0]["token_id"], w.view()["token_id"]);
}

/// With `--allow-actions`: an answer for a state the page no longer shows
/// (a stale `since_ms`) is refused with 409; with the one it shows, the
/// blocked sim lane is approved and goes on; both are audited.
#[test]
fn an_answer_to_a_state_that_moved_on_is_refused_and_a_fresh_one_approves() {
    let d = Drover::new();
    let script = ask_script(&d);
    d.sim("asker", "claude", Some(&script));
    assert_eq!(
        d.wait_state(&["asker"], "idle", 30_000).status.code(),
        Some(0)
    );
    let w = start_web(&d, &["--allow-actions"]);
    assert_eq!(w.mode, "actions allowed");
    d.ok(&["send", "asker", "make it"]);
    assert_eq!(
        d.wait_state(&["asker"], "blocked", 30_000).status.code(),
        Some(0)
    );
    let mut since = 0;
    assert!(
        wait_until(LONG, || {
            let v = w.view();
            let p = pane_of(&v, "asker");
            since = p["since_ms"].as_u64().unwrap_or(0);
            p["state"] == "blocked"
        }),
        "the page never saw the pane blocked"
    );
    let v = w.view();
    let p = pane_of(&v, "asker");
    assert_eq!(p["attention"], "blocked");
    assert_eq!(v["panes"][0]["name"], "asker", "blocked first");
    let stale = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "asker", "action": "approve", "choice": null, "since_ms": since - 1}),
    );
    assert_eq!(stale.status, 409, "{stale:?}");
    assert!(
        stale
            .body
            .contains("the state moved on: asker is now blocked"),
        "{stale:?}"
    );
    let ok = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "asker", "action": "approve", "choice": null, "since_ms": since}),
    );
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(ok.body.contains("answered the permission dialog"), "{ok:?}");
    assert_eq!(
        d.wait_state(&["asker"], "done", 30_000).status.code(),
        Some(0)
    );
    let again = w.post(
        "/api/answer",
        &serde_json::json!({"pane": "asker", "action": "approve", "choice": null, "since_ms": since}),
    );
    assert_eq!(again.status, 409, "{again:?}");
    let audit = std::fs::read_to_string(d.state.join("web/audit.jsonl")).unwrap();
    let outcomes: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["outcome"].to_string())
        .collect();
    assert_eq!(
        outcomes,
        ["\"refused\"", "\"ok\"", "\"refused\""],
        "{audit}"
    );
}

/// A sim lane's state change reaches a client of `/api/events` (the delay
/// from the change to the event is printed).
#[test]
fn a_state_change_reaches_the_event_stream() {
    let d = Drover::new();
    let script = ask_script(&d);
    d.sim("live", "claude", Some(&script));
    assert_eq!(
        d.wait_state(&["live"], "idle", 30_000).status.code(),
        Some(0)
    );
    let w = start_web(&d, &[]);
    let rx = w.events();
    let (_, first) = rx.recv_timeout(LONG).unwrap();
    assert_eq!(pane_of(&first, "live")["state"], "idle", "{first}");
    let t0 = Instant::now();
    d.ok(&["send", "live", "make it"]);
    // The change: the supervisor says blocked…
    let out = d.run(&[
        "wait",
        "live",
        "--until",
        "blocked",
        "--timeout-ms",
        "30000",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let changed = Instant::now();
    // …and the page hears it.
    let deadline = Instant::now() + LONG;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (at, v) = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no event showed the pane blocked"));
        if pane_of(&v, "live")["state"] == "blocked" {
            eprintln!(
                "web event: {:?} after the send, {:?} after `wait` saw it",
                at - t0,
                at.saturating_duration_since(changed)
            );
            break;
        }
    }
}

/// A pane started with a secret in its env: the value reaches neither the
/// snapshot nor its screen's answer.
#[test]
fn the_snapshot_carries_no_env_value() {
    let d = Drover::new();
    let secret = "s3cr3t-value-7f2e9";
    d.ok(&[
        "pane",
        "new",
        "withenv",
        "--agent",
        "sim",
        "--env",
        &format!("WEB_TEST_TOKEN={secret}"),
        "--",
        BIN,
        "sim-agent",
        "--profile",
        "claude",
    ]);
    assert_eq!(
        d.wait_state(&["withenv"], "idle", 30_000).status.code(),
        Some(0)
    );
    let w = start_web(&d, &[]);
    let v = w.get("/api/view");
    assert_eq!(v.status, 200);
    assert!(v.body.contains("withenv"), "{v:?}");
    assert!(!v.body.contains(secret), "{v:?}");
    assert!(!v.body.contains("WEB_TEST_TOKEN"), "{v:?}");
    let s = w.get("/api/screen?pane=withenv");
    assert_eq!(s.status, 200, "{s:?}");
    let sv: Value = serde_json::from_str(&s.body).unwrap();
    assert_eq!(sv["pane"], "withenv");
    assert!(sv["lines"].is_array());
    assert!(!s.body.contains(secret));
    assert_eq!(w.get("/api/screen?pane=nope").status, 404);
}

/// With `--allow-actions`, a real sim loop run: its tasks with their titles
/// on the page; a pause for a state the page no longer shows is refused
/// with 409; a pause and a resume for the state it shows are `loop
/// control`'s (recorded in DECISIONS.md as `drover web <token id>`), and
/// the run goes on to close.
#[test]
fn run_controls_check_the_state_the_page_saw() {
    use crate::loop_common::{run_json, wait_exit};
    let d = Drover::new().native();
    let (mut child, _log) = crate::top_loop::start_sim_run(&d, 3, crate::top_loop::IMPLEMENTER);
    let task2 = |v: &Value| {
        v["tasks"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["id"] == "TASK-2"))
            .cloned()
            .unwrap_or_default()
    };
    let long = Duration::from_secs(180);
    assert!(
        wait_until(long, || task2(&run_json(&d))["phase"] == "implementing"),
        "TASK-2 never started"
    );
    let w = start_web(&d, &["--allow-actions"]);
    let mut run = Value::Null;
    assert!(
        wait_until(long, || {
            run = w.view()["runs"][0].clone();
            run["state"] == "running" && run["live"] == true
        }),
        "the page never showed the run running: {run}"
    );
    let t = run["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["id"] == "TASK-2"))
        .cloned()
        .unwrap_or_default();
    assert!(!t["title"].as_str().unwrap_or_default().is_empty(), "{run}");
    let stale = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "pause", "state": "paused"}),
    );
    assert_eq!(stale.status, 409, "{stale:?}");
    assert!(
        stale
            .body
            .contains("the state moved on: loop1 is now running"),
        "{stale:?}"
    );
    let pause = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "pause", "state": "running"}),
    );
    assert_eq!(pause.status, 200, "{pause:?}");
    let status = || {
        let v: Value =
            serde_json::from_str(&d.ok(&["loop", "status", "1", "--json"])).unwrap_or_default();
        v["state"].as_str().unwrap_or_default().to_string()
    };
    assert!(wait_until(long, || status() == "paused"), "never paused");
    let id = w.view()["token_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let decisions = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap();
    assert!(
        decisions.contains(&format!("control: pause: drover web {id}")),
        "{decisions}"
    );
    let resume = w.post(
        "/api/control",
        &serde_json::json!({"run": 1, "control": "resume", "state": "paused"}),
    );
    assert_eq!(resume.status, 200, "{resume:?}");
    assert!(wait_exit(&mut child, long).is_some(), "the run never ended");
    let audit = std::fs::read_to_string(d.state.join("web/audit.jsonl")).unwrap();
    let outcomes: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["outcome"].to_string())
        .collect();
    assert_eq!(outcomes, ["\"refused\"", "\"ok\"", "\"ok\""], "{audit}");
}
