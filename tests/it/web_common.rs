//! Shared by the `drover web` tests (`web_http`, `web_actions`): `drover
//! web` started as the binary runs it on a free loopback port, and requests
//! written by hand over TCP (or TLS), every header under the test's control.
#![allow(dead_code)]

use crate::common::Drover;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

pub(crate) const LONG: Duration = Duration::from_secs(30);

/// A running `drover web`, stopped when dropped.
pub(crate) struct Web {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) token: String,
    /// Its second line: `read-only` or `actions allowed`.
    pub(crate) mode: String,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) head: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Resp {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) fn start_web(d: &Drover, flags: &[&str]) -> Web {
    start_web_tls(d, flags, None)
}

pub(crate) fn start_web_tls(
    d: &Drover,
    flags: &[&str],
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Web {
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

pub(crate) fn parse(raw: &str) -> Resp {
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
    pub(crate) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn cookie(&self) -> String {
        format!("drover_web={}", self.token)
    }

    /// Send `req` (a whole HTTP/1.0 request: the answer ends with the
    /// connection) and read the answer.
    pub(crate) fn raw(&self, req: &str) -> Resp {
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
    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Resp {
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

    pub(crate) fn get(&self, path: &str) -> Resp {
        let c = self.cookie();
        self.call("GET", path, &[("Cookie", &c)], "")
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Resp {
        let c = self.cookie();
        let b = body.to_string();
        self.call(
            "POST",
            path,
            &[("Cookie", &c), ("Content-Type", "application/json")],
            &b,
        )
    }

    pub(crate) fn view(&self) -> Value {
        let r = self.get("/api/view");
        assert_eq!(r.status, 200, "{r:?}");
        serde_json::from_str(&r.body).unwrap()
    }

    /// Follow `/api/events`: each `view` event's JSON on the channel.
    pub(crate) fn events(&self) -> mpsc::Receiver<(Instant, Value)> {
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

pub(crate) fn pane_of<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["panes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .unwrap_or(&Value::Null)
}

/// A sim lane `asker` blocked on a permission dialog, and `drover web`
/// (started with `flags`) once its page sees it blocked: the web and the
/// pane's `since_ms` as the page saw it.
pub(crate) fn blocked_asker(d: &Drover, flags: &[&str]) -> (Web, u64) {
    let script = ask_script(d);
    d.sim("asker", "claude", Some(&script));
    assert_eq!(
        d.wait_state(&["asker"], "idle", 30_000).status.code(),
        Some(0)
    );
    let w = start_web(d, flags);
    d.ok(&["send", "asker", "make it"]);
    assert_eq!(
        d.wait_state(&["asker"], "blocked", 30_000).status.code(),
        Some(0)
    );
    let mut since = 0;
    assert!(
        crate::common::wait_until(LONG, || {
            let v = w.view();
            let p = pane_of(&v, "asker");
            since = p["since_ms"].as_u64().unwrap_or(0);
            p["state"] == "blocked"
        }),
        "the page never saw the pane blocked"
    );
    (w, since)
}

/// A sim agent that asks permission, then says ok and finishes.
pub(crate) fn ask_script(d: &Drover) -> std::path::PathBuf {
    let p = d.scratch().join("ask.toml");
    std::fs::write(
        &p,
        "[[turn]]\nsteps = [{ask = \"touch x\"}, {say = \"ok\"}, \"finish\"]\n",
    )
    .unwrap();
    p
}
