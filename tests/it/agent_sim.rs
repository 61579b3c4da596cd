//! The sim agent in a real PTY, its output rendered by vt100 and classified by
//! the real classifier: idle → working → blocked{permission} → done, for both
//! profiles, plus interrupt, exit codes and SIGHUP.

use drover::agent::{AgentKind, BlockedKind, Classifier, Observation, Signals, State};
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Cb {
    title: Option<String>,
    osc7501: Option<String>,
}

impl vt100::Callbacks for Cb {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = Some(String::from_utf8_lossy(title).into_owned());
    }
    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        if params.first() == Some(&&b"7501"[..]) {
            let rest: Vec<String> = params[1..]
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            self.osc7501 = Some(rest.join(";"));
        }
    }
}

struct Sim {
    parser: vt100::Parser<Cb>,
    rx: Receiver<Vec<u8>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn Child + Send + Sync>,
    _master: Box<dyn MasterPty + Send>,
    spawned: Instant,
    last_output: Instant,
    eof: bool,
    classifier: Classifier,
}

impl Sim {
    fn spawn(profile: &str, script: Option<&str>, cwd: &Path) -> Sim {
        let pty = native_pty_system();
        let pair = pty
            .openpty(PtySize {
                rows: 40,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_drover"));
        cmd.args(["sim-agent", "--profile", profile]);
        if let Some(s) = script {
            let p = cwd.join("script.toml");
            std::fs::write(&p, s).unwrap();
            cmd.arg("--script");
            cmd.arg(&p);
        }
        cmd.cwd(cwd);
        // Taken before the spawn: the child may start its clock before
        // `spawn_command` returns.
        let spawned = Instant::now();
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Sim {
            parser: vt100::Parser::new_with_callbacks(
                std::num::NonZeroU16::new(40).unwrap(),
                std::num::NonZeroU16::new(120).unwrap(),
                0,
                Cb::default(),
            ),
            rx,
            writer,
            child,
            _master: pair.master,
            spawned,
            last_output: Instant::now(),
            eof: false,
            classifier: Classifier::builtin().unwrap(),
        }
    }

    fn rows(&self) -> Vec<String> {
        self.parser
            .screen()
            .rows(0, 120)
            .map(|r| r.trim_end_matches(' ').to_string())
            .collect()
    }

    fn observe(&self, exited: Option<Option<i32>>) -> Observation {
        let rows = self.rows();
        let cb = self.parser.callbacks();
        let s = Signals {
            rows: &rows,
            cols: self.parser.screen().size().1.get(),
            title: cb.title.as_deref(),
            osc7501: cb.osc7501.as_deref(),
            exited,
            quiet_ms: self.last_output.elapsed().as_millis() as u64,
            foreground_job: None,
            shell_child: false,
            since_spawn_ms: self.spawned.elapsed().as_millis() as u64,
        };
        self.classifier.classify(AgentKind::Sim, &s)
    }

    /// Feed output into the screen until `cond` holds; panics with the screen on timeout.
    fn wait_until(&mut self, what: &str, timeout: Duration, cond: impl Fn(&Sim) -> bool) {
        let end = Instant::now() + timeout;
        loop {
            if cond(self) {
                return;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!(
                    "timed out waiting for {what}; last observation {:?}\n{}",
                    self.observe(None),
                    self.rows().join("\n")
                );
            }
            // Bounded waits so quiet-time conditions are re-checked.
            match self.rx.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(b) => {
                    self.parser.process(&b);
                    self.last_output = Instant::now();
                    while let Ok(b) = self.rx.try_recv() {
                        self.parser.process(&b);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.eof = true;
                    if cond(self) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10).min(left));
                }
            }
        }
    }

    fn wait_state(&mut self, state: State, kind: Option<BlockedKind>) {
        self.wait_until(&format!("{state}/{kind:?}"), WAIT, |s| {
            let o = s.observe(None);
            o.state == state && o.kind == kind
        });
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    fn screen_has(&self, text: &str) -> bool {
        self.rows().iter().any(|r| r.contains(text))
    }

    fn wait_exit(&mut self) -> u32 {
        let end = Instant::now() + WAIT;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.exit_code();
            }
            assert!(Instant::now() < end, "sim did not exit");
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(20)) {
                self.parser.process(&b);
                self.last_output = Instant::now();
            }
        }
    }
}

const TURN: &str = r#"
[[turn]]
steps = [
  { work = 700 },
  { ask = "touch made.txt" },
  { write = { path = "made.txt", content = "made by sim\n" } },
  { report = { path = "report.json" } },
  "finish",
]
"#;

fn full_turn(profile: &str, approve: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::spawn(profile, Some(TURN), dir.path());
    sim.wait_state(State::Idle, None);
    assert!(
        sim.parser.screen().bracketed_paste(),
        "bracketed paste enabled"
    );
    assert_eq!(sim.parser.screen().alternate_screen(), profile == "codex");

    sim.send(b"\x1b[200~fix the bug attempt=A1 nonce=N9\nsecond line\x1b[201~");
    sim.wait_until("pasted prompt visible", WAIT, |s| {
        s.screen_has("fix the bug")
    });
    assert_eq!(sim.observe(None).state, State::Idle, "pasted, not sent");
    sim.send(b"\r");
    sim.wait_state(State::Working, None);
    assert!(
        sim.screen_has("fix the bug attempt=A1"),
        "prompt's first line on screen"
    );
    if profile == "claude" {
        let t = sim.parser.callbacks().title.clone().unwrap_or_default();
        assert!(
            t.starts_with('⠂') || t.starts_with('⠐'),
            "spinner title {t:?}"
        );
    } else {
        assert_eq!(
            sim.parser.callbacks().osc7501.as_deref(),
            Some("state=working:app=codex")
        );
    }

    sim.wait_state(State::Blocked, Some(BlockedKind::Permission));
    assert!(
        !dir.path().join("made.txt").exists(),
        "nothing written before approval"
    );
    sim.send(approve);
    sim.wait_state(State::Done, None);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("made.txt")).unwrap(),
        "made by sim\n"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(report["attempt_id"], "A1");
    assert_eq!(report["nonce"], "N9");
    assert_eq!(report["state"], "finalized");
    if profile == "codex" {
        assert_eq!(
            sim.parser.callbacks().osc7501.as_deref(),
            Some("state=done:app=codex")
        );
    } else {
        assert_eq!(
            sim.parser.callbacks().title.as_deref(),
            Some("✳ Claude Code")
        );
    }

    // Typed text (not pasted) + Enter starts the next turn (default steps: the last turn repeats).
    sim.send(b"again");
    sim.wait_until("typed text", WAIT, |s| s.screen_has("again"));
    sim.send(b"\r");
    sim.wait_state(State::Working, None);

    sim.send(b"\x04");
    let _ = sim.child.kill();
}

#[test]
fn claude_profile_idle_working_blocked_done() {
    full_turn("claude", b"1");
}

#[test]
fn codex_profile_idle_working_blocked_done() {
    full_turn("codex", b"y");
}

#[test]
fn enter_approves_and_esc_denies() {
    let dir = tempfile::tempdir().unwrap();
    let script =
        "[[turn]]\nsteps = [ { ask = \"ls\" }, { write = { path = \"a\", content = \"\" } } ]\n";
    let mut sim = Sim::spawn("claude", Some(script), dir.path());
    sim.wait_state(State::Idle, None);
    sim.send(b"one");
    sim.send(b"\r");
    sim.wait_state(State::Blocked, Some(BlockedKind::Permission));
    sim.send(b"\r");
    sim.wait_state(State::Done, None);
    assert!(dir.path().join("a").exists());
    std::fs::remove_file(dir.path().join("a")).unwrap();

    sim.send(b"\x1b[200~two\x1b[201~");
    sim.send(b"\r");
    sim.wait_state(State::Blocked, Some(BlockedKind::Permission));
    sim.send(b"\x1b");
    sim.wait_state(State::Idle, None);
    assert!(sim.screen_has("Interrupted"));
    assert!(!dir.path().join("a").exists(), "denied: the turn stopped");
    let _ = sim.child.kill();
}

#[test]
fn esc_interrupts_work_codex() {
    let dir = tempfile::tempdir().unwrap();
    let script = "[[turn]]\nsteps = [ { work = 60000 } ]\n";
    let mut sim = Sim::spawn("codex", Some(script), dir.path());
    sim.wait_state(State::Idle, None);
    sim.send(b"\x1b[200~long job\x1b[201~");
    sim.send(b"\r");
    sim.wait_state(State::Working, None);
    sim.send(b"\x1b");
    sim.wait_state(State::Idle, None);
    assert!(sim.screen_has("Conversation interrupted"));
    assert_eq!(
        sim.parser.callbacks().osc7501.as_deref(),
        Some("state=idle:app=codex")
    );
    let _ = sim.child.kill();
}

#[test]
fn default_script_works_then_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::spawn("claude", None, dir.path());
    sim.wait_state(State::Idle, None);
    sim.send(b"hello");
    sim.send(b"\r");
    sim.wait_state(State::Working, None);
    sim.wait_state(State::Done, None);
    assert!(sim.screen_has("✻ Worked for"));
    let _ = sim.child.kill();
}

#[test]
fn startup_delay_is_starting_then_idle() {
    // Failed now and then: the spawn instant was taken after the child had
    // started its clock, and a loaded machine could use up a short delay
    // before the first look.
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::spawn("codex", Some("startup_ms = 1500\n"), dir.path());
    assert_eq!(sim.observe(None).state, State::Starting);
    sim.wait_state(State::Idle, None);
    assert!(sim.spawned.elapsed() >= Duration::from_millis(1500));
    let _ = sim.child.kill();
}

#[test]
fn exit_step_exits_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let script = "[[turn]]\nsteps = [ { say = \"bye\" }, { exit = 7 } ]\n";
    let mut sim = Sim::spawn("codex", Some(script), dir.path());
    sim.wait_state(State::Idle, None);
    sim.send(b"quit\r");
    let code = sim.wait_exit();
    assert_eq!(code, 7);
    let o = sim.observe(Some(Some(code as i32)));
    assert_eq!((o.state, o.exit_code), (State::Exited, Some(7)));
    sim.wait_until("alt screen left", WAIT, |s| {
        !s.parser.screen().alternate_screen()
    });
    assert_eq!(
        sim.parser.callbacks().osc7501.as_deref(),
        Some("state=clear:app=codex")
    );
}

#[test]
fn sighup_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::spawn("claude", None, dir.path());
    sim.wait_state(State::Idle, None);
    let pid = sim.child.process_id().unwrap() as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGHUP).unwrap();
    assert_eq!(sim.wait_exit(), 129);
}

#[test]
fn garbage_input_does_not_kill_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::spawn("codex", None, dir.path());
    sim.wait_state(State::Idle, None);
    let mut junk = Vec::new();
    for i in 0..4096u32 {
        let b = (i.wrapping_mul(2_654_435_761) >> 13) as u8;
        // Keep Ctrl-C/Ctrl-D/CR out: they are meaningful keys, not garbage.
        if ![0x03, 0x04, b'\r', b'\n'].contains(&b) {
            junk.push(b);
        }
    }
    sim.send(&junk);
    sim.send(b"\x1b[201~\x1b[A\x1b[999;999R");
    // Still alive and responsive: Ctrl-C clears the composer, Ctrl-D exits 0.
    sim.send(b"\x03");
    sim.wait_until("composer cleared", WAIT, |s| {
        s.screen_has("Ask Codex to do anything")
    });
    assert!(sim.child.try_wait().unwrap().is_none(), "still running");
    sim.send(b"\x04");
    assert_eq!(sim.wait_exit(), 0);
}

#[test]
fn eof_on_stdin_exits_cleanly() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["sim-agent", "--profile", "codex"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "sim did not exit on EOF");
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Ask Codex to do anything"));
    assert!(stdout.ends_with("\x1b[?1049l"), "alt screen left");
}

#[test]
fn bad_script_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad-script.toml");
    std::fs::write(&p, "[[turn]]\nsteps = [ { dance = 1 } ]\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["sim-agent", "--profile", "claude", "--script"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad-script.toml"));
}

/// Real Codex sends OSC `blocked` ~0.8 s before it draws the dialog; meanwhile
/// the screen says working, so the pane is `unknown`, then `blocked`.
#[test]
fn codex_early_osc_blocked_is_unknown_then_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let script = "osc_blocked_lead_ms = 800\n[[turn]]\nsteps = [ { work = 200 }, { ask = \"ls\" }, \"finish\" ]\n";
    let mut sim = Sim::spawn("codex", Some(script), dir.path());
    sim.wait_state(State::Idle, None);
    sim.send(b"go\r");
    sim.wait_until("disagreement", WAIT, |s| {
        let o = s.observe(None);
        o.state == State::Unknown && o.evidence.iter().any(|e| e.starts_with("disagree:"))
    });
    sim.wait_state(State::Blocked, Some(BlockedKind::Permission));
    sim.send(b"y");
    sim.wait_state(State::Done, None);
    let _ = sim.child.kill();
}
