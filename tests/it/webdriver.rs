//! A small W3C WebDriver client for the browser tests (tests/it/web_browser.rs):
//! one `chromedriver` per [`Browser`], one headless Chromium session on it,
//! the few commands the tests use (navigate, find by CSS, text, click, run a
//! script, screenshot). Dropping the browser deletes the session and kills
//! the driver.
#![allow(dead_code)]

use crate::common::wait_until;
use serde_json::{Value, json};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The key W3C gives an element reference in a JSON answer.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long the driver may take to say it is ready.
const DRIVER_START: Duration = Duration::from_secs(20);

/// Narrower than this, the browser is a phone (touch, mobile viewport).
const PHONE_WIDTH: u32 = 600;

/// Bound on one WebDriver call (a new session starts a browser).
const CALL: Duration = Duration::from_secs(60);

/// The Chromium and chromedriver binaries: `$DROVER_CHROMIUM` and
/// `$DROVER_CHROMEDRIVER`, else Debian's (`chromium`, `chromium-driver`).
pub fn binaries() -> (PathBuf, PathBuf) {
    let pick = |var: &str, default: &str| {
        std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
    };
    (
        pick("DROVER_CHROMIUM", "/usr/bin/chromium"),
        pick("DROVER_CHROMEDRIVER", "/usr/bin/chromedriver"),
    )
}

/// A free loopback TCP port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A WebDriver error answer: its `error` code and `message`.
#[derive(Debug)]
pub struct WdError {
    pub error: String,
    pub message: String,
}

impl std::fmt::Display for WdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.message)
    }
}

/// A headless Chromium driven over WebDriver.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: ureq::Agent,
}

/// An element reference of the browser's current page.
#[derive(Clone, Debug)]
pub struct Element(pub String);

impl Browser {
    /// Start chromedriver on a free port and a headless session with a
    /// `width`×`height` window and a fresh profile (no cookies).
    pub fn start(width: u32, height: u32) -> Browser {
        let (chromium, chromedriver) = binaries();
        assert!(
            chromedriver.exists() && chromium.exists(),
            "needs Chromium and chromedriver ({} and {}): apt-get install chromium chromium-driver",
            chromium.display(),
            chromedriver.display()
        );
        let port = free_port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(CALL))
            .http_status_as_error(false)
            .build()
            .into();
        let mut b = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            http,
        };
        let ready = wait_until(DRIVER_START, || {
            b.call("GET", "/status", None)
                .is_ok_and(|v| v["ready"] == true)
        });
        assert!(ready, "chromedriver on port {port} never became ready");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--hide-scrollbars",
                    format!("--window-size={width},{height}"),
                ],
                // The viewport itself at this size (a headless window is
                // at least 500 wide and counts its frame); a phone is one.
                "mobileEmulation": {"deviceMetrics": {
                    "width": width, "height": height, "pixelRatio": 1.0,
                    "mobile": width < PHONE_WIDTH, "touch": width < PHONE_WIDTH,
                }},
            },
        }}});
        let v = b
            .call("POST", "/session", Some(caps))
            .unwrap_or_else(|e| panic!("a Chromium session: {e}"));
        b.session = v["sessionId"]
            .as_str()
            .expect("the new session's id")
            .to_string();
        b
    }

    /// One WebDriver call: its `value`, or the error it answered.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, WdError> {
        let url = format!("{}{path}", self.base);
        let transport = |e: ureq::Error| WdError {
            error: "transport".into(),
            message: e.to_string(),
        };
        let mut answer = match (method, body) {
            ("GET", _) => self.http.get(&url).call().map_err(transport)?,
            ("DELETE", _) => self.http.delete(&url).call().map_err(transport)?,
            (_, body) => self
                .http
                .post(&url)
                .content_type("application/json")
                .send(body.unwrap_or_else(|| json!({})).to_string().as_bytes())
                .map_err(transport)?,
        };
        let mut text = String::new();
        answer
            .body_mut()
            .as_reader()
            .read_to_string(&mut text)
            .map_err(|e| WdError {
                error: "transport".into(),
                message: e.to_string(),
            })?;
        let v: Value = serde_json::from_str(&text).map_err(|e| WdError {
            error: "bad answer".into(),
            message: format!("{e}: {text}"),
        })?;
        let value = v.get("value").cloned().unwrap_or(Value::Null);
        if let Some(error) = value.get("error").and_then(Value::as_str) {
            return Err(WdError {
                error: error.to_string(),
                message: value["message"].as_str().unwrap_or("").to_string(),
            });
        }
        Ok(value)
    }

    /// A call on this session; a failure is the test's failure.
    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let p = format!("/session/{}{path}", self.session);
        self.call(method, &p, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// Navigate to `url` (returns once the page has loaded).
    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url })));
    }

    /// The current page's URL.
    pub fn url(&self) -> String {
        self.cmd("GET", "/url", None)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Every element matching the CSS `selector` now (maybe none).
    pub fn find_all(&self, selector: &str) -> Vec<Element> {
        let p = format!("/session/{}/elements", self.session);
        let found = self.call(
            "POST",
            &p,
            Some(json!({"using": "css selector", "value": selector})),
        );
        match found {
            Ok(Value::Array(els)) => els
                .iter()
                .filter_map(|e| e[ELEMENT_KEY].as_str().map(|id| Element(id.to_string())))
                .collect(),
            // The page is being replaced under us: nothing found yet.
            _ => Vec::new(),
        }
    }

    /// The first element matching `selector` now, if any.
    pub fn find(&self, selector: &str) -> Option<Element> {
        self.find_all(selector).into_iter().next()
    }

    /// The first element matching `selector`, waited for up to `timeout`.
    pub fn wait_find(&self, selector: &str, timeout: Duration) -> Element {
        let mut found = None;
        let held = wait_until(timeout, || {
            found = self.find(selector);
            found.is_some()
        });
        assert!(
            held,
            "no element {selector:?} within {timeout:?}; page text:\n{}",
            self.body_text()
        );
        found.expect("found")
    }

    /// An element's rendered text (what a user sees), or None when it went
    /// stale (the page redrew it).
    pub fn try_text(&self, el: &Element) -> Option<String> {
        let p = format!("/session/{}/element/{}/text", self.session, el.0);
        self.call("GET", &p, None)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
    }

    /// An element's rendered text; panics when it went stale.
    pub fn text(&self, el: &Element) -> String {
        self.try_text(el).expect("the element is still on the page")
    }

    /// An attribute of an element, if set.
    pub fn attr(&self, el: &Element, name: &str) -> Option<String> {
        let p = format!(
            "/session/{}/element/{}/attribute/{name}",
            self.session, el.0
        );
        self.call("GET", &p, None)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
    }

    /// Click an element; an error (stale, hidden) comes back to the caller.
    pub fn try_click(&self, el: &Element) -> Result<(), WdError> {
        let p = format!("/session/{}/element/{}/click", self.session, el.0);
        self.call("POST", &p, Some(json!({}))).map(|_| ())
    }

    /// Click the first element matching `selector`, waiting up to `timeout`
    /// for one that takes the click (the page may redraw between).
    pub fn click(&self, selector: &str, timeout: Duration) {
        let mut last = String::from("none found");
        let held = wait_until(timeout, || match self.find(selector) {
            Some(el) => match self.try_click(&el) {
                Ok(()) => true,
                Err(e) => {
                    last = e.to_string();
                    false
                }
            },
            None => false,
        });
        assert!(
            held,
            "could not click {selector:?} within {timeout:?} ({last}); page text:\n{}",
            self.body_text()
        );
    }

    /// Run `script` (a function body; `arguments` holds `args`) in the page
    /// and return what it returns.
    pub fn exec(&self, script: &str, args: Vec<Value>) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// The whole page's visible text (for failure messages and checks).
    pub fn body_text(&self) -> String {
        let p = format!("/session/{}/execute/sync", self.session);
        self.call(
            "POST",
            &p,
            Some(json!({"script": "return document.body ? document.body.innerText : '';", "args": []})),
        )
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
    }

    /// Wait until the page's visible text satisfies `ok`; returns it.
    pub fn wait_text(&self, what: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let held = wait_until(timeout, || {
            last = self.body_text();
            ok(&last)
        });
        assert!(held, "the page never showed {what}; page text:\n{last}");
        last
    }

    /// A PNG of the viewport, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        let b64 = self.cmd("GET", "/screenshot", None);
        let png = decode_base64(b64.as_str().unwrap_or_default()).expect("a base64 PNG");
        std::fs::write(path, png).expect("the screenshot written");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let p = format!("/session/{}", self.session);
            let _ = self.call("DELETE", &p, None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (with padding, no line breaks), as WebDriver sends PNGs.
pub fn decode_base64(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|c| **c == b'=').count();
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            let v = if i >= 4 - pad { 0 } else { val(*c)? };
            n = (n << 6) | v;
        }
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    Some(out)
}

#[test]
fn base64_decodes_what_webdriver_sends() {
    assert_eq!(decode_base64("aGVsbG8=").as_deref(), Some(&b"hello"[..]));
    assert_eq!(decode_base64("aGk=").as_deref(), Some(&b"hi"[..]));
    assert_eq!(decode_base64("YWJj").as_deref(), Some(&b"abc"[..]));
    assert_eq!(decode_base64("a*=="), None);
}
