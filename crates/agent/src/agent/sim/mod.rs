//! The simulated agent behind `drover sim-agent --profile claude|codex`.
//!
//! A small TUI that draws screens like the real agents (so the classifier's
//! rules apply to it), enables bracketed paste, accepts a pasted or typed prompt
//! plus Enter, and follows a [`Script`] of steps per prompt. The Claude profile
//! draws inline and sets OSC 0 titles; the Codex profile draws in the alternate
//! screen inside synchronized-output blocks and reports OSC 7501.
//!
//! Single-threaded: one `poll` over stdin and a signal self-pipe, with the
//! model's next deadline as the timeout. Idle costs nothing.

mod draw;
mod input;
mod model;
mod resolve;
mod script;
mod trace;
mod usage;

pub use draw::{Frame, frame, paint};
pub use input::{Decoder, Key};
pub use model::{Mode, Model, Osc};
pub use resolve::{Keep, resolve};
pub use script::{Script, Step, Turn};
pub use trace::TRACE_ENV;

use super::AgentError;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{self, SetArg, Termios};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Which real agent the sim imitates.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Claude Code: inline screen, OSC 0 titles.
    Claude,
    /// Codex: alternate screen, synchronized output, OSC 7501.
    Codex,
}

impl Profile {
    /// The lowercase name used on the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Claude => "claude",
            Profile::Codex => "codex",
        }
    }
}

/// Spinner frame interval while working.
const SPIN_MS: u64 = 150;
/// How long a lone ESC byte waits for the rest of a sequence before it is the Esc key.
const ESC_WAIT_MS: u64 = 30;
/// Terminal size when the output is not a terminal.
const DEFAULT_SIZE: (u16, u16) = (120, 40);

nix::ioctl_read_bad!(tiocgwinsz, nix::libc::TIOCGWINSZ, nix::libc::winsize);

fn term_size() -> (u16, u16) {
    let mut ws = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    for fd in [1, 0] {
        // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we own; a bad
        // fd only makes the call fail.
        if unsafe { tiocgwinsz(fd, &mut ws) }.is_ok() && ws.ws_col > 0 && ws.ws_row > 0 {
            return (ws.ws_col, ws.ws_row);
        }
    }
    DEFAULT_SIZE
}

/// Puts stdin in raw mode while alive, restores it on drop.
struct RawMode {
    saved: Option<Termios>,
}

impl RawMode {
    fn enter() -> Self {
        let stdin = std::io::stdin();
        if !nix::unistd::isatty(stdin.as_fd()).unwrap_or(false) {
            return RawMode { saved: None };
        }
        let Ok(saved) = termios::tcgetattr(stdin.as_fd()) else {
            return RawMode { saved: None };
        };
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        if termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).is_err() {
            return RawMode { saved: None };
        }
        RawMode { saved: Some(saved) }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, t);
        }
    }
}

struct SignalFlags {
    hup: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
    winch: Arc<AtomicBool>,
    wake: UnixStream,
}

fn register_signals() -> Result<SignalFlags, std::io::Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGWINCH};
    let (wake, notify) = UnixStream::pair()?;
    wake.set_nonblocking(true)?;
    let flags = SignalFlags {
        hup: Arc::new(AtomicBool::new(false)),
        term: Arc::new(AtomicBool::new(false)),
        winch: Arc::new(AtomicBool::new(false)),
        wake,
    };
    for (sig, flag) in [
        (SIGHUP, &flags.hup),
        (SIGTERM, &flags.term),
        (SIGINT, &flags.term),
        (SIGWINCH, &flags.winch),
    ] {
        signal_hook::flag::register(sig, Arc::clone(flag))?;
        signal_hook::low_level::pipe::register(sig, notify.try_clone()?)?;
    }
    Ok(flags)
}

/// Run the sim on stdin/stdout until it exits; returns the exit code.
pub fn run(profile: Profile, script: Script) -> Result<u8, AgentError> {
    let io = |source| AgentError::Io {
        path: "<terminal>".into(),
        source,
    };
    let cwd = std::env::current_dir().map_err(io)?;
    let signals = register_signals().map_err(io)?;
    let trace = trace::Trace::from_env().map_err(|source| AgentError::Io {
        path: std::env::var_os(TRACE_ENV).unwrap_or_default().into(),
        source,
    })?;
    let _raw = RawMode::enter();
    let mut out = std::io::stdout().lock();
    let code = Term {
        profile,
        model: Model::new(profile, script, cwd, Instant::now()),
        size: term_size(),
        prev: None,
        last_osc: None,
        tick: 0,
        trace,
    }
    .event_loop(&mut out, &signals);
    // Leave the terminal as we found it, whatever happened.
    let mut bye = String::from("\x1b[?2004l");
    if profile == Profile::Codex {
        bye.push_str("\x1b]7501;state=clear:app=codex\x1b\\\x1b[?1049l");
    }
    let _ = out.write_all(bye.as_bytes());
    let _ = out.flush();
    Ok(code)
}

struct Term {
    profile: Profile,
    model: Model,
    size: (u16, u16),
    prev: Option<Frame>,
    last_osc: Option<Osc>,
    tick: u64,
    trace: Option<trace::Trace>,
}

impl Term {
    fn draw(&mut self, out: &mut impl Write, now: Instant) -> std::io::Result<()> {
        let f = frame(&self.model, now, self.tick, self.size.0, self.size.1);
        let osc = (self.profile == Profile::Codex
            && !matches!(self.model.mode, Mode::Starting { .. })
            && self.last_osc != Some(self.model.osc))
        .then_some(self.model.osc);
        if self.prev.as_ref() == Some(&f) && osc.is_none() {
            return Ok(());
        }
        let bytes = paint(self.profile, &f, self.prev.as_ref(), osc.map(Osc::payload));
        // Stamped just before the write, so a measured latency includes the write.
        let at = self.trace.is_some().then(SystemTime::now);
        out.write_all(&bytes)?;
        out.flush()?;
        if let (Some(t), Some(at)) = (self.trace.as_mut(), at) {
            t.record(self.model.shown_state(), at);
        }
        if osc.is_some() {
            self.last_osc = osc;
        }
        self.prev = Some(f);
        Ok(())
    }

    /// Returns the exit code.
    fn event_loop(&mut self, out: &mut impl Write, sig: &SignalFlags) -> u8 {
        let mut setup = String::from("\x1b[?2004h");
        if self.profile == Profile::Codex {
            setup.insert_str(0, "\x1b[?1049h");
        }
        setup.push_str("\x1b[H\x1b[2J");
        if out
            .write_all(setup.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return 0;
        }
        let mut decoder = Decoder::default();
        let stdin = std::io::stdin();
        let mut buf = vec![0u8; 64 * 1024];
        let mut next_spin = Instant::now();
        loop {
            let now = Instant::now();
            if let Some(code) = self.model.exit {
                return code;
            }
            if sig.hup.load(Ordering::Relaxed) {
                return 129;
            }
            if sig.term.load(Ordering::Relaxed) {
                return 143;
            }
            if sig.winch.swap(false, Ordering::Relaxed) {
                self.size = term_size();
                self.prev = None;
                let _ = out.write_all(b"\x1b[H\x1b[2J");
            }
            self.model.tick(now);
            if self.model.exit.is_some() {
                continue;
            }
            let working = matches!(self.model.mode, Mode::Working { .. });
            if working && now >= next_spin {
                self.tick = self.tick.wrapping_add(1);
                next_spin = now + Duration::from_millis(SPIN_MS);
            }
            if self.draw(out, now).is_err() {
                // The terminal went away (EIO/EPIPE): nobody to draw for.
                return 0;
            }
            // Sleep until input, a signal, or the next thing to do.
            let mut wait: Option<Duration> = self
                .model
                .deadline()
                .map(|d| d.saturating_duration_since(now));
            if working {
                let spin = next_spin.saturating_duration_since(now);
                wait = Some(wait.map_or(spin, |w| w.min(spin)));
            }
            if decoder.esc_pending() {
                let esc = Duration::from_millis(ESC_WAIT_MS);
                wait = Some(wait.map_or(esc, |w| w.min(esc)));
            }
            let timeout = match wait {
                Some(d) => PollTimeout::try_from(d.as_millis().clamp(1, 60_000) as u64)
                    .unwrap_or(PollTimeout::MAX),
                None => PollTimeout::NONE,
            };
            let mut fds = [
                PollFd::new(sig.wake.as_fd(), PollFlags::POLLIN),
                PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            ];
            let n = match poll(&mut fds, timeout) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return 1,
            };
            let sig_ready = fds[0].any().unwrap_or(false);
            let in_ready = fds[1].revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            });
            if fds[1]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLNVAL))
            {
                // No stdin at all: nothing will ever come; like EOF.
                return 0;
            }
            if sig_ready {
                let mut sink = [0u8; 64];
                while matches!((&sig.wake).read(&mut sink), Ok(k) if k > 0) {}
            }
            let now = Instant::now();
            if n == 0 {
                if let Some(k) = decoder.flush_esc() {
                    self.model.key(k, now);
                }
                continue;
            }
            if in_ready {
                match nix::unistd::read(stdin.as_fd(), &mut buf) {
                    Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
                    // EOF, or the PTY hung up: exit cleanly.
                    Ok(0) | Err(_) => return 0,
                    Ok(k) => {
                        for key in decoder.feed(&buf[..k]) {
                            self.model.key(key, now);
                            if self.model.exit.is_some() {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}
