//! `drover web` over real HTTP on TCP: a real supervisor with sim panes,
//! `drover web` as the binary runs it, requests written by hand (every
//! header under the test's control). Each security property of docs/web.md
//! has a test here that fails when the property is removed.

use crate::common::{BIN, Drover};
use crate::web_common::{LONG, ask_script, pane_of, start_web, start_web_tls};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

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
