//! `drover attach`, driven for real: the attach client runs inside a PTY this
//! test owns (the operator's terminal), whose output feeds a vt100 screen.

use crate::common;
use common::*;
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, SlavePty, native_pty_system};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// The operator's terminal with `drover attach NAME` running in it.
struct Operator {
    master: Box<dyn MasterPty + Send>,
    // Held open so the terminal (and its modes) outlive the attach client.
    _slave: Box<dyn SlavePty + Send>,
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    log: Arc<Mutex<Vec<u8>>>,
}

fn nz(v: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(v).unwrap()
}

fn size(cols: u16, rows: u16) -> PtySize {
    PtySize {
        rows,
        cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

impl Operator {
    fn attach(d: &Drover, pane: &str, cols: u16, rows: u16) -> Operator {
        Operator::attach_args(d, &[pane], cols, rows)
    }

    /// `drover attach ARGS…` on an operator's terminal of its own.
    fn attach_args(d: &Drover, args: &[&str], cols: u16, rows: u16) -> Operator {
        let pair = native_pty_system().openpty(size(cols, rows)).unwrap();
        let mut cmd = CommandBuilder::new(BIN);
        cmd.arg("attach");
        cmd.args(args);
        cmd.env("DROVER_STATE_DIR", &d.state);
        cmd.env("TERM", "xterm-256color");
        cmd.cwd(d.scratch());
        let child = pair.slave.spawn_command(cmd).unwrap();
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let screen = Arc::new(Mutex::new(vt100::Parser::new(nz(rows), nz(cols), 0)));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (s2, l2) = (screen.clone(), log.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s2.lock().unwrap().process(&buf[..n]);
                l2.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Operator {
            master: pair.master,
            _slave: pair.slave,
            child,
            writer,
            screen,
            log,
        }
    }

    /// Resize the operator's terminal (the attach client gets SIGWINCH).
    fn resize(&self, cols: u16, rows: u16) {
        self.screen.lock().unwrap().set_size(nz(rows), nz(cols));
        self.master.resize(size(cols, rows)).unwrap();
    }

    fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap()).into_owned()
    }

    fn wait_screen(&self, needle: &str) {
        let ok = wait_until(T, || self.text().contains(needle));
        assert!(
            ok,
            "operator never saw {needle:?}; screen:\n{}",
            self.text()
        );
    }

    fn wait_log(&self, needle: &str) {
        let ok = wait_until(T, || self.log().contains(needle));
        assert!(
            ok,
            "operator never got {needle:?}; bytes:\n{:?}",
            self.log()
        );
    }

    fn type_(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    /// Wait for the attach client to end; its exit code.
    fn exit_code(&mut self) -> u32 {
        let mut code = None;
        let ok = wait_until(T, || {
            code = self.child.try_wait().unwrap().map(|s| s.exit_code());
            code.is_some()
        });
        assert!(ok, "attach did not exit; screen:\n{}", self.text());
        code.unwrap()
    }

    fn still_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The operator terminal's line discipline: (canonical, echo).
    fn modes(&self) -> (bool, bool) {
        use nix::sys::termios::LocalFlags;
        let fd = self.master.as_raw_fd().unwrap();
        // SAFETY: the master fd stays open for as long as `self` lives.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let t = nix::sys::termios::tcgetattr(fd).unwrap();
        (
            t.local_flags.contains(LocalFlags::ICANON),
            t.local_flags.contains(LocalFlags::ECHO),
        )
    }

    fn assert_raw(&self) {
        assert_eq!(
            self.modes(),
            (false, false),
            "attach did not enter raw mode"
        );
    }

    fn assert_restored(&self) {
        assert_eq!(self.modes(), (true, true), "terminal not restored");
    }
}

fn shell_pane(d: &Drover, name: &str) {
    d.new_pane(name, &["--env", "PS1=$ "], &["sh"]);
    d.ok(&["pane", "send", name, "echo before-$((1+1))"]);
    d.wait_text(name, "before-2", T);
}

fn pane_size(d: &Drover, name: &str) -> (u64, u64) {
    let p = d.pane(name).unwrap();
    (p["cols"].as_u64().unwrap(), p["rows"].as_u64().unwrap())
}

/// The whole operator flow: replay, typing, output, resize, detach with
/// Ctrl-\, terminal restored, pane still running at its own size.
#[test]
fn attach_replays_types_resizes_and_detaches() {
    let d = Drover::new();
    shell_pane(&d, "work");
    let mut op = Operator::attach(&d, "work", 100, 30);
    op.wait_screen("before-2");
    op.assert_raw();
    assert_eq!(d.pane("work").unwrap()["attached"], true);
    assert_eq!(pane_size(&d, "work"), (100, 30));

    op.type_(b"echo typed-$((6*7))\r");
    op.wait_screen("typed-42");
    d.wait_text("work", "typed-42", T);

    op.resize(90, 25);
    assert!(
        wait_until(T, || pane_size(&d, "work") == (90, 25)),
        "pane size did not follow: {:?}",
        pane_size(&d, "work")
    );
    op.type_(b"stty size\r");
    op.wait_screen("25 90");

    op.type_(b"\x1c");
    assert_eq!(op.exit_code(), 0);
    op.wait_log("[detached from work]");
    op.assert_restored();
    let p = d.pane("work").unwrap();
    assert!(p["exit"].is_null(), "pane stopped: {p}");
    assert_eq!(p["attached"], false);
    assert!(
        wait_until(T, || pane_size(&d, "work") == (120, 40)),
        "size not given back: {:?}",
        pane_size(&d, "work")
    );
    d.ok(&["pane", "send", "work", "echo still-$((2+3))"]);
    d.wait_text("work", "still-5", T);
}

/// A configurable detach key works the same way.
#[test]
fn custom_detach_key() {
    let d = Drover::new();
    shell_pane(&d, "ck");
    let pair = native_pty_system().openpty(size(80, 24)).unwrap();
    let mut cmd = CommandBuilder::new(BIN);
    cmd.args(["attach", "ck", "--detach-key", "C-b"]);
    cmd.env("DROVER_STATE_DIR", &d.state);
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    let mut w = pair.master.take_writer().unwrap();
    assert!(wait_until(T, || d.pane("ck").unwrap()["attached"] == true));
    w.write_all(b"\x02").unwrap();
    w.flush().unwrap();
    let mut status = None;
    assert!(wait_until(T, || {
        status = child.try_wait().unwrap();
        status.is_some()
    }));
    assert_eq!(status.unwrap().exit_code(), 0);
    assert!(d.pane("ck").unwrap()["exit"].is_null());
    let bad = d.run(&["attach", "ck", "--detach-key", "Enterprise"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

/// A second attach kicks the first, which exits 0 with a message and gives
/// its terminal back; the second keeps working.
#[test]
fn second_attach_kicks_the_first() {
    let d = Drover::new();
    shell_pane(&d, "shared");
    let mut first = Operator::attach(&d, "shared", 100, 30);
    first.wait_screen("before-2");
    let mut second = Operator::attach(&d, "shared", 80, 24);
    second.wait_screen("before-2");
    assert_eq!(first.exit_code(), 0);
    first.wait_log("another client attached");
    first.assert_restored();
    assert!(second.still_running());
    assert!(wait_until(T, || pane_size(&d, "shared") == (80, 24)));
    second.type_(b"echo from-second\r");
    second.wait_screen("from-second");
    second.type_(b"\x1c");
    assert_eq!(second.exit_code(), 0);
    second.assert_restored();
}

/// The pane's exit ends the attach with its code; the terminal is restored.
#[test]
fn pane_exit_ends_the_attach() {
    let d = Drover::new();
    shell_pane(&d, "ending");
    let mut op = Operator::attach(&d, "ending", 100, 30);
    op.wait_screen("before-2");
    op.type_(b"exit 3\r");
    assert_eq!(op.exit_code(), 0);
    op.wait_log("[pane ending exited (code 3)]");
    op.assert_restored();
    let out = d.wait_state(&["ending"], "exited", 5000);
    assert!(stdout(&out).contains("\"exit_code\":3"));
}

/// Attaching to a pane that already exited shows its last screen and ends.
#[test]
fn attach_to_an_exited_pane_replays_and_ends() {
    let d = Drover::new();
    d.new_pane("gone", &[], &["sh", "-c", "echo last-words; exit 4"]);
    assert_eq!(
        d.wait_state(&["gone"], "exited", 5000).status.code(),
        Some(0)
    );
    let mut op = Operator::attach(&d, "gone", 100, 30);
    assert_eq!(op.exit_code(), 0);
    op.wait_screen("last-words");
    op.wait_log("exited (code 4)");
    op.assert_restored();
}

/// SIGTERM to the attach client gives the terminal back and detaches; the
/// pane keeps running.
#[test]
fn sigterm_to_attach_restores_the_terminal() {
    let d = Drover::new();
    shell_pane(&d, "term");
    let mut op = Operator::attach(&d, "term", 100, 30);
    op.wait_screen("before-2");
    op.assert_raw();
    let pid = op.child.process_id().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(op.exit_code(), 0);
    op.assert_restored();
    assert!(wait_until(T, || d.pane("term").unwrap()["attached"] == false));
    assert!(d.pane("term").unwrap()["exit"].is_null());
}

/// While a client is attached its terminal answers the app's queries, not
/// the supervisor: the app gets the operator's reply, exactly once.
#[test]
fn attached_terminal_answers_queries() {
    let d = Drover::new();
    // On tmux, tmux is the app's terminal and answers its queries itself:
    // this is about drover's native PTY handing them to the operator.
    let d = d.native();
    let script = r#"stty -echo -icanon; echo waiting
IFS= read -r go
printf '\033[6n'; IFS= read -r -d R pos; echo "POS=${pos#*[}"
sleep 1000"#;
    d.new_pane("qa", &[], &["bash", "--norc", "--noprofile", "-c", script]);
    d.wait_text("qa", "waiting", T);
    let mut op = Operator::attach(&d, "qa", 100, 30);
    op.wait_screen("waiting");
    op.type_(b"go\r");
    op.wait_log("\x1b[6n");
    op.type_(b"\x1b[7;7R");
    op.wait_screen("POS=7;7");
    op.type_(b"\x1c");
    assert_eq!(op.exit_code(), 0);
}

#[test]
fn attach_to_a_missing_pane_is_transport_error() {
    let d = Drover::new();
    d.serve();
    let mut op = Operator::attach(&d, "nope", 80, 24);
    assert_eq!(op.exit_code(), 5, "{}", op.log());
    // The exit can be seen before the PTY reader has the error line: wait for it.
    op.wait_log("nope");
}

/// Guards: `attach` from a script (stdin not a terminal) put a pipe in raw
/// mode; it is a usage error that points at `pane read`/`pane send`.
#[test]
fn attach_refuses_a_stdin_that_is_not_a_terminal() {
    let d = Drover::new();
    shell_pane(&d, "scripted");
    let out = d.run(&["attach", "scripted"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("pane read"), "{}", stderr(&out));
}

/// The detach key is shown once, when the attach begins.
#[test]
fn attach_shows_the_detach_key_once() {
    let d = Drover::new();
    shell_pane(&d, "hint");
    let mut op = Operator::attach(&d, "hint", 100, 30);
    op.wait_log("detach: Ctrl-\\");
    op.type_(b"\x1c");
    assert_eq!(op.exit_code(), 0);
    assert_eq!(op.log().matches("detach: Ctrl-").count(), 1, "{}", op.log());
}

/// `pane kill` of the attached pane ends the attach; the terminal comes back.
#[test]
fn pane_kill_ends_the_attach() {
    let d = Drover::new();
    shell_pane(&d, "doomed");
    let mut op = Operator::attach(&d, "doomed", 100, 30);
    op.wait_screen("before-2");
    d.ok(&["pane", "kill", "doomed"]);
    assert_eq!(op.exit_code(), 0);
    op.wait_log("[pane doomed exited");
    op.assert_restored();
}

/// The supervisor stopping under an attached client: the client reports it
/// (exit 5, transport) and still gives the terminal back.
#[test]
fn supervisor_stop_ends_the_attach_and_restores_the_terminal() {
    let d = Drover::new();
    shell_pane(&d, "host");
    let mut op = Operator::attach(&d, "host", 100, 30);
    op.wait_screen("before-2");
    op.assert_raw();
    d.ok(&["kill-server"]);
    let code = op.exit_code();
    // Either the pane's exit (its group is killed first) or the closed
    // connection reaches the client first; both are reported and clean.
    // The client's last line may still be on its way through the operator's
    // PTY when its exit is seen: wait for it.
    match code {
        0 => op.wait_log("[pane host exited"),
        5 => op.wait_log("supervisor closed the connection"),
        _ => panic!("exit {code}: {:?}", op.log()),
    }
    op.assert_restored();
}

/// Guards: attach draws from the screen model, so nothing an app prints can
/// drive the operator's terminal — no clipboard write or read (OSC 52), no
/// title flood (OSC 0), no colour query (OSC 10/11 ?), no DCS (`+q`), no
/// window report request (`CSI 21t`, `CSI 14t`). They used to be forwarded raw.
#[test]
fn hostile_output_never_reaches_the_attached_terminal() {
    let d = Drover::new();
    let script = r#"stty -echo; echo ready
IFS= read -r go
printf '\033]52;c;aGVsbG8gY2xpcGJvYXJk\007\033]52;c;?\007\033]52;p;?\033\\'
i=0; while [ $i -lt 300 ]; do printf '\033]0;title %d\007\033]2;t%d\007' $i $i; i=$((i+1)); done
printf '\033P+q544e\033\\\033P$qm\033\\\033[21t\033[14t\033[18t'
printf '\033]10;?\007\033]11;?\033\\\033]4;1;?\007\033]12;?\007'
printf '\033[31mred\033[0m after-%d\n' $((2+3))
sleep 1000"#;
    d.new_pane(
        "hostile",
        &[],
        &["bash", "--norc", "--noprofile", "-c", script],
    );
    d.wait_text("hostile", "ready", T);
    let mut op = Operator::attach(&d, "hostile", 100, 30);
    op.wait_screen("ready");
    op.type_(b"go\r");
    op.wait_screen("after-5");
    let log = op.log.lock().unwrap().clone();
    for (what, seq) in [
        ("an OSC (clipboard, title, colour query)", &b"\x1b]"[..]),
        ("a C1 OSC", b"\x9d"),
        ("a DCS", b"\x1bP"),
        ("a C1 DCS", b"\x90"),
        ("a window report request", b"t\x1b"),
        ("CSI 21t", b"\x1b[21t"),
        ("CSI 14t", b"\x1b[14t"),
        ("CSI 18t", b"\x1b[18t"),
    ] {
        assert!(
            !log.windows(seq.len()).any(|w| w == seq),
            "{what} reached the operator's terminal: {:?}",
            String::from_utf8_lossy(&log)
        );
    }
    // The text and its colour did arrive, drawn from the screen.
    let row = op
        .text()
        .lines()
        .position(|l| l.contains("after-5"))
        .unwrap() as u16;
    let red = op
        .screen
        .lock()
        .unwrap()
        .screen()
        .cell(row, 0)
        .map(|c| c.fgcolor());
    assert_eq!(red, Some(vt100::Color::Idx(1)), "colour lost");
    op.type_(b"\x1c");
    assert_eq!(op.exit_code(), 0);
    op.assert_restored();
}

/// Guards: `attach -r` watches without displacing the attached writer, and
/// what is typed into it (or its size) never reaches the pane.
#[test]
fn read_only_attach_neither_kicks_nor_types() {
    let d = Drover::new();
    shell_pane(&d, "watched");
    let mut writer = Operator::attach(&d, "watched", 100, 30);
    writer.wait_screen("before-2");
    let mut watcher = Operator::attach_args(&d, &["-r", "watched"], 90, 20);
    watcher.wait_screen("before-2");
    assert!(
        writer.still_running(),
        "the read-only attach kicked the writer"
    );
    // Typed into the watcher: dropped (the marker never runs).
    watcher.type_(b"echo from-$((6*7))-watcher\r");
    // The writer still drives the pane at its own size, and the watcher sees it.
    writer.type_(b"echo from-writer-$((2+3))\r");
    watcher.wait_screen("from-writer-5");
    writer.wait_screen("from-writer-5");
    assert_eq!(pane_size(&d, "watched"), (100, 30));
    let text = d.ok(&["pane", "read", "watched"]);
    assert!(!text.contains("from-42-watcher"), "{text}");
    // The watcher ends on the pane's exit like any attach.
    writer.type_(b"exit 4\r");
    assert_eq!(watcher.exit_code(), 0);
    watcher.wait_log("[pane watched exited (code 4)]");
    watcher.assert_restored();
    assert_eq!(writer.exit_code(), 0);
}
