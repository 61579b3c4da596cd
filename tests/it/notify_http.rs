//! `--notify-url` through the HTTP client against local servers: HTTPS with a
//! self-signed CA (trusted only when given as `--notify-ca`), a redirect that
//! is refused, a server that never answers, and proxies from the environment.

use drover::loopctl::night::notify::{self, Note, Targets, intent_id};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// One request a server read: its first line, its headers, its body.
#[derive(Debug)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How a test server answers.
#[derive(Clone, Copy)]
enum Answer {
    Ok,
    Redirect(u16),
    Never,
    /// A proxy: a CONNECT is answered 200 and the tunneled request read too.
    Proxy,
}

fn read_request(s: &mut impl Read) -> Option<Seen> {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(Seen {
        line: line.trim_end().to_string(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn respond(s: &mut impl Write, answer: Answer) {
    let reply = match answer {
        Answer::Ok => {
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_string()
        }
        Answer::Redirect(port) => format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{port}/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        Answer::Never => {
            std::thread::sleep(Duration::from_secs(30));
            return;
        }
        Answer::Proxy => "HTTP/1.1 200 Connection established\r\n\r\n".to_string(),
    };
    let _ = s.write_all(reply.as_bytes());
    let _ = s.flush();
}

/// A plain HTTP server on loopback: its port and what it reads.
fn http_server(answer: Answer) -> (u16, Receiver<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                if let Some(seen) = read_request(&mut s) {
                    let tunnel = seen.line.starts_with("CONNECT ");
                    let _ = tx.send(seen);
                    respond(&mut s, answer);
                    if tunnel && let Some(inner) = read_request(&mut s) {
                        let _ = tx.send(inner);
                        respond(&mut s, Answer::Ok);
                    }
                }
            });
        }
    });
    (port, rx)
}

/// A test CA and an HTTPS server on loopback whose certificate it signed:
/// the server's URL, the CA's PEM file, what the server reads and how many
/// TLS handshakes failed.
struct Tls {
    url: String,
    ca: PathBuf,
    seen: Receiver<Seen>,
    refused: Receiver<()>,
    _dir: tempfile::TempDir,
}

fn https_server(answer: Answer) -> Tls {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "drover test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
    let config = Arc::new(config);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "https://127.0.0.1:{}/drover-topic",
        l.local_addr().unwrap().port()
    );
    let (tx, seen) = mpsc::channel();
    let (refused_tx, refused) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(tcp) = conn else { continue };
            let (tx, refused_tx, config) = (tx.clone(), refused_tx.clone(), config.clone());
            std::thread::spawn(move || {
                let Ok(server) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut s = rustls::StreamOwned::new(server, tcp);
                match read_request(&mut s) {
                    Some(seen) => {
                        let _ = tx.send(seen);
                        respond(&mut s, answer);
                    }
                    None => {
                        let _ = refused_tx.send(());
                    }
                }
            });
        }
    });
    Tls {
        url,
        ca: ca_file,
        seen,
        refused,
        _dir: dir,
    }
}

fn note() -> Note {
    Note {
        intent_id: intent_id("loop1", "landed", "TASK-1"),
        event: "landed".into(),
        run: "loop1".into(),
        task: Some("TASK-1".into()),
        text: "TASK-1 landed".into(),
        at: "2026-12-03T00:00:00Z".into(),
    }
}

fn targets(ca: Option<&Path>) -> Targets {
    Targets {
        ca_file: ca.map(Path::to_path_buf),
        http_timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    }
}

/// Guards TLS with a private CA: given as `--notify-ca`, the POST arrives
/// with its title and intent headers and the message as its body.
#[test]
fn https_with_the_given_ca_is_delivered() {
    let srv = https_server(Answer::Ok);
    let agent = notify::http_agent(&targets(Some(&srv.ca))).unwrap();
    notify::post(&agent, &srv.url, &note()).unwrap();
    let seen = srv.seen.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(seen.line, "POST /drover-topic HTTP/1.1");
    assert_eq!(seen.header("Title"), Some("drover loop1 landed"));
    assert_eq!(
        seen.header("X-Drover-Intent"),
        Some(note().intent_id.as_str())
    );
    assert!(
        seen.body.starts_with("TASK-1 landed (intent "),
        "{}",
        seen.body
    );
}

/// Guards TLS verification: a server whose CA is not trusted (the system's
/// store, or another bundle) gets no request, and the POST fails.
#[test]
fn https_with_an_untrusted_certificate_is_refused() {
    let srv = https_server(Answer::Ok);
    let agent = notify::http_agent(&targets(None)).unwrap();
    assert!(notify::post(&agent, &srv.url, &note()).is_err());
    let other = https_server(Answer::Ok);
    let agent = notify::http_agent(&targets(Some(&other.ca))).unwrap();
    assert!(notify::post(&agent, &srv.url, &note()).is_err());
    assert!(srv.refused.recv_timeout(Duration::from_secs(5)).is_ok());
    assert!(
        srv.seen.try_recv().is_err(),
        "no request over an unverified TLS"
    );
}

/// Guards redirects: a 302 is not a delivery and is not followed (the note
/// goes nowhere it was not sent).
#[test]
fn a_redirect_is_refused_not_followed() {
    let (elsewhere, elsewhere_seen) = http_server(Answer::Ok);
    let srv = https_server(Answer::Redirect(elsewhere));
    let agent = notify::http_agent(&targets(Some(&srv.ca))).unwrap();
    let e = notify::post(&agent, &srv.url, &note()).unwrap_err();
    assert!(e.contains("302"), "{e}");
    assert!(srv.seen.recv_timeout(Duration::from_secs(5)).is_ok());
    assert!(
        elsewhere_seen
            .recv_timeout(Duration::from_millis(300))
            .is_err(),
        "the redirect was followed"
    );
}

/// Guards the delivery timeout: a server that takes the request and never
/// answers costs one timeout, not a hung notifier.
#[test]
fn a_server_that_never_answers_times_out() {
    let (port, seen) = http_server(Answer::Never);
    let t = Targets {
        http_timeout: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    let agent = notify::http_agent(&t).unwrap();
    let started = Instant::now();
    let url = format!("http://127.0.0.1:{port}/t");
    assert!(notify::post(&agent, &url, &note()).is_err());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(seen.recv_timeout(Duration::from_secs(1)).is_ok());
}

/// Guards bad input: an unreadable or empty CA bundle is an error naming it.
#[test]
fn a_bad_ca_bundle_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.pem");
    let e = notify::http_agent(&targets(Some(&missing))).unwrap_err();
    assert!(e.contains("none.pem"), "{e}");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let e = notify::http_agent(&targets(Some(&empty))).unwrap_err();
    assert!(
        e.contains("empty.pem") && e.contains("no PEM certificate"),
        "{e}"
    );
}

/// Guards proxies from the environment (read when the client is built, so
/// through `drover loop notify-test` in a process of its own): with
/// `HTTP_PROXY` set the request goes through the proxy (a CONNECT tunnel); a
/// host in `NO_PROXY` goes direct.
#[test]
fn http_proxy_from_the_environment_is_used() {
    let (proxy, proxy_seen) = http_server(Answer::Proxy);
    let (direct, direct_seen) = http_server(Answer::Ok);
    let notify_test = |url: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["loop", "notify-test", "--notify-url", url])
            .env("HTTP_PROXY", format!("http://127.0.0.1:{proxy}"))
            .env("NO_PROXY", "localhost")
            .env_remove("http_proxy")
            .env_remove("no_proxy")
            .env_remove("ALL_PROXY")
            .output()
            .unwrap()
    };
    let out = notify_test("http://drover.invalid/topic");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let via = proxy_seen.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(via.line, "CONNECT drover.invalid:80 HTTP/1.1");
    let inner = proxy_seen.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        inner.line, "POST /topic HTTP/1.1",
        "through the proxy's tunnel"
    );
    let out = notify_test(&format!("http://localhost:{direct}/direct"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = direct_seen.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(seen.line, "POST /direct HTTP/1.1", "NO_PROXY goes direct");
    // Guards issue 42 item 10: its title was `drover test test`.
    assert_eq!(seen.header("Title"), Some("drover test notification"));
    assert!(proxy_seen.try_recv().is_err());
}

/// Guards `notify-test`'s answer: not delivered is exit 1 with the reason.
#[test]
fn notify_test_says_when_it_was_not_delivered() {
    let srv = https_server(Answer::Ok);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["loop", "notify-test", "--json", "--notify-url", &srv.url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["delivered"], false);
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    let ca = srv.ca.to_str().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "loop",
            "notify-test",
            "--notify-url",
            &srv.url,
            "--notify-ca",
            ca,
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(srv.seen.recv_timeout(Duration::from_secs(5)).is_ok());
}
