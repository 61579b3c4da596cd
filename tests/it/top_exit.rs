//! `drover top` when its supervisor goes away, in a PTY this test owns (the
//! operator's terminal, rendered by vt100): top says so, exits 5 and gives
//! the terminal back (line discipline, alternate screen, cursor). It does
//! not reconnect (docs/operators.md).

use crate::common;
use common::*;
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, SlavePty, native_pty_system};
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// The operator's terminal with `drover top` running in it.
struct Operator {
    master: Box<dyn MasterPty + Send>,
    _slave: Box<dyn SlavePty + Send>,
    child: Box<dyn Child + Send + Sync>,
    screen: Arc<Mutex<vt100::Parser>>,
}

impl Operator {
    fn top(d: &Drover) -> Operator {
        let size = PtySize {
            rows: 24,
            cols: 80,
            pixel_width: 0,
            pixel_height: 0,
        };
        let pair = native_pty_system().openpty(size).unwrap();
        let mut cmd = CommandBuilder::new(BIN);
        cmd.args(["--no-autostart", "top"]);
        cmd.env("DROVER_STATE_DIR", &d.state);
        cmd.env("TERM", "xterm-256color");
        cmd.cwd(d.scratch());
        let child = pair.slave.spawn_command(cmd).unwrap();
        let mut reader = pair.master.try_clone_reader().unwrap();
        let nz = |v| std::num::NonZeroU16::new(v).unwrap();
        let screen = Arc::new(Mutex::new(vt100::Parser::new(nz(24), nz(80), 0)));
        let s2 = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s2.lock().unwrap().process(&buf[..n]);
            }
        });
        Operator {
            master: pair.master,
            _slave: pair.slave,
            child,
            screen,
        }
    }

    fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    fn wait_screen(&self, what: &str, ok: impl Fn(&str) -> bool) {
        let held = wait_until(T, || ok(&self.text()));
        assert!(held, "never saw {what}; screen:\n{}", self.text());
    }

    /// The terminal's line discipline: (canonical, echo).
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

    fn exit_code(&mut self) -> u32 {
        let mut code = None;
        let ok = wait_until(T, || {
            code = self.child.try_wait().unwrap().map(|s| s.exit_code());
            code.is_some()
        });
        assert!(ok, "top did not exit; screen:\n{}", self.text());
        code.unwrap()
    }
}

/// Guards: a supervisor that stops (kill-server) or dies (SIGKILL) under a
/// running `top` ends it with exit 5, a one-line reason on the restored
/// terminal, and the terminal as it was (canonical mode with echo, main
/// screen, cursor shown); nothing hangs.
#[test]
fn top_exits_5_with_the_terminal_restored_when_the_supervisor_goes_away() {
    for how in ["kill-server", "SIGKILL"] {
        // Native: a tmux server outlives a SIGKILLed supervisor, and the
        // panes' backend is not what this test is about.
        let d = Drover::new().native();
        d.sim("s1", "claude", None);
        assert_eq!(d.wait_state(&["s1"], "idle", 30_000).status.code(), Some(0));
        let mut op = Operator::top(&d);
        op.wait_screen("top's rows", |s| s.contains("drover top  1 rows"));
        assert_eq!(op.modes(), (false, false), "{how}: top is not in raw mode");
        assert!(op.screen.lock().unwrap().screen().alternate_screen());
        match how {
            "kill-server" => {
                d.ok(&["kill-server"]);
            }
            _ => {
                let pid = d.server_pid().unwrap();
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
            }
        }
        assert_eq!(
            op.exit_code(),
            5,
            "{how}: exit code; screen:\n{}",
            op.text()
        );
        assert_eq!(op.modes(), (true, true), "{how}: terminal not restored");
        op.wait_screen("the reason", |s| s.contains("the supervisor stopped"));
        let p = op.screen.lock().unwrap();
        assert!(
            !p.screen().alternate_screen(),
            "{how}: alternate screen left on"
        );
        assert!(!p.screen().hide_cursor(), "{how}: cursor left hidden");
    }
}
