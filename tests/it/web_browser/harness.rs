//! What the browser tests stand on: `drover web` as a child process of the
//! test (its URL read from what it prints), a sim run on a real board, and
//! a second local HTTP server: another origin serving one page.

use crate::common::{Drover, T, wait_until};
use crate::loop_common;
use crate::webdriver::{Browser, free_port};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Bound for a run's lane or a page to get somewhere (loaded machines).
pub const LONG: Duration = Duration::from_secs(120);

/// Phone and desktop windows.
pub const PHONE: (u32, u32) = (390, 844);
pub const DESKTOP: (u32, u32) = (1280, 800);

/// `drover web` on a loopback port, stopped when dropped.
pub struct Web {
    child: Child,
    pub port: u16,
    /// The URL it printed, with its token.
    pub url: String,
}

impl Web {
    /// `drover web --listen 127.0.0.1:<port> FLAGS…`, waited for until it
    /// prints its URL.
    pub fn start(d: &Drover, port: u16, flags: &[&str]) -> Web {
        let listen = format!("127.0.0.1:{port}");
        let mut child = d
            .cmd()
            .args(["web", "--listen", &listen])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("drover web starts");
        let out = child.stdout.take().expect("its stdout");
        let mut err = child.stderr.take().expect("its stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let errors = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut url = None;
        let deadline = std::time::Instant::now() + T;
        while url.is_none() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    url = line
                        .strip_prefix("drover web: ")
                        .filter(|u| u.contains("?token="))
                        .map(|u| u.trim().to_string());
                }
                Err(_) => break,
            }
        }
        let Some(url) = url else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "drover web {flags:?} printed no URL; stderr:\n{}",
                errors.join().unwrap_or_default()
            );
        };
        Web { child, port, url }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The token in the URL it printed.
    pub fn token(&self) -> &str {
        self.url.split("?token=").nth(1).unwrap_or_default()
    }

    /// Stop it (and wait until its port is free).
    pub fn stop(mut self) -> u16 {
        self.kill();
        self.port
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free port for `drover web`.
pub fn port() -> u16 {
    free_port()
}

/// The browser signed in to `web` (the token URL, then its redirect), the
/// pane rows drawn.
pub fn signed_in(web: &Web, size: (u32, u32)) -> Browser {
    let b = Browser::start(size.0, size.1);
    b.goto(&web.url);
    b.wait_find("[data-testid=pane-row]", LONG);
    b
}

/// The CSS selector of a pane's row, or of something in it.
pub fn pane_sel(name: &str, inner: &str) -> String {
    format!("[data-testid=pane-row][data-pane=\"{name}\"] {inner}")
}

/// The text of pane `name`'s state on the page, if drawn.
pub fn page_state(b: &Browser, name: &str) -> Option<String> {
    b.find(&pane_sel(name, "[data-testid=pane-state]"))
        .and_then(|e| b.try_text(&e))
}

/// A sim pane `name` whose turn asks a permission first; sent a prompt it
/// blocks on the dialog until answered.
pub fn asking_sim(d: &Drover, name: &str) {
    let script = d.scratch().join(format!("{name}-ask.toml"));
    std::fs::write(
        &script,
        "[[turn]]\nsteps = [{ work = 300 }, { ask = \"touch made.txt\" }, { write = { path = \"made.txt\", content = \"x\" } }, \"finish\"]\n",
    )
    .expect("the sim's script");
    d.sim(name, "claude", Some(&script));
    d.ok(&["wait", name, "--until", "idle", "--timeout-ms", "20000"]);
}

/// Pane `name` sent a prompt and waited until its permission dialog shows.
pub fn block(d: &Drover, name: &str) {
    d.ok(&["send", name, "make the file"]);
    d.ok(&[
        "wait",
        name,
        "--until",
        "blocked:permission",
        "--timeout-ms",
        "20000",
    ]);
}

/// Pane `name`'s state word from `pane ls`.
pub fn state(d: &Drover, name: &str) -> String {
    d.pane(name)
        .and_then(|p| p["observation"]["state"].as_str().map(String::from))
        .unwrap_or_default()
}

/// A sim loop run, killed when dropped.
pub struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A sim run over a fresh board of `titles` (TASK-1…), its implementer
/// working a minute on each (so the run stays live), 1 lane at a time.
pub fn sim_run(d: &Drover, titles: &[&str]) -> Run {
    let (repo, charter) = loop_common::board_repo(d, 0, "- lanes: 2\n- pool: 1\n- gate: `true`\n");
    let tasks = repo.join("backlog").join("tasks");
    for (k, title) in titles.iter().enumerate() {
        task_file(&tasks, k as u32 + 1, title);
    }
    let (child, log) = crate::top_loop::spawn_sim_run(
        d,
        &repo,
        &charter,
        "[[turn]]\nsteps = [{ work = 60000 }, \"finish\"]\n",
    );
    let run = Run(child);
    let implementing = wait_until(LONG, || {
        loop_common::in_phase(&loop_common::run_json(d), "implementing").len() == 1
    });
    assert!(
        implementing,
        "the run never started a task: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    run
}

/// A Backlog.md task whose title is any text (YAML double-quoted, so
/// markup and escapes stay what they are).
fn task_file(dir: &std::path::Path, n: u32, title: &str) {
    let quoted = serde_json::to_string(title).expect("a JSON string is YAML");
    let text = format!(
        "---\nid: TASK-{n}\ntitle: {quoted}\nstatus: To Do\nassignee: []\nlabels: []\ndependencies: []\nmodified_files:\n  - f{n}.txt\npriority: medium\n---\n\n## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\nTask {n}.\n<!-- SECTION:DESCRIPTION:END -->\n\n## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 Task {n} is done\n<!-- AC:END -->\n"
    );
    std::fs::write(dir.join(format!("task-{n} - Task-{n}.md")), text).expect("a task file");
}

/// Another origin: a local HTTP server answering every GET with `html`.
pub struct Foreign {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Foreign {
    pub fn serve(html: String) -> Foreign {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(c) = conn {
                    answer(c, &html);
                }
            }
        });
        Foreign { port, stop }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn answer(mut c: TcpStream, html: &str) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (code, body) = if head.starts_with(b"GET / ") {
        ("200 OK", html)
    } else {
        ("404 Not Found", "")
    };
    let _ = write!(
        c,
        "HTTP/1.1 {code}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
