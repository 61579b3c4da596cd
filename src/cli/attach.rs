//! `drover attach`: this terminal becomes the pane's terminal until detach.
//!
//! The terminal is put in raw mode and restored on every way out: detach,
//! pane exit, being kicked by another attach, SIGTERM/SIGHUP, and panic.

use super::{Ctx, client_err, fail};
use drover::daemon::protocol::{FrameKind, read_frame, write_frame};
use drover::exit;
use drover::proto::{AttachControl, AttachEvent};
use nix::sys::termios::{self, SetArg, Termios};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    /// The pane to attach to.
    pub name: String,
    /// The key that detaches (a control key such as C-\ or C-b).
    #[arg(long, default_value = "C-\\", value_name = "KEY")]
    pub detach_key: String,
    /// Watch only: send no input and leave the pane's size and its attached
    /// writer alone.
    #[arg(short = 'r', long)]
    pub read_only: bool,
}

/// Modes a pane may have left on; switched off when we give the terminal back.
const RESET_TERMINAL: &[u8] =
    b"\x1b[0m\x1b[?25h\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1049l\r\n";

static SAVED: OnceLock<Mutex<Option<Termios>>> = OnceLock::new();

fn restore_terminal() {
    if let Some(m) = SAVED.get()
        && let Ok(mut saved) = m.lock()
        && let Some(t) = saved.take()
    {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &t);
        let mut out = std::io::stdout();
        let _ = out.write_all(RESET_TERMINAL);
        let _ = out.flush();
    }
}

struct RawGuard;

impl RawGuard {
    fn enter() -> Option<RawGuard> {
        let stdin = std::io::stdin();
        let orig = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = orig.clone();
        termios::cfmakeraw(&mut raw);
        SAVED.get_or_init(|| Mutex::new(None));
        if let Some(m) = SAVED.get()
            && let Ok(mut s) = m.lock()
        {
            *s = Some(orig);
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            prev(info);
        }));
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).ok()?;
        Some(RawGuard)
    }
}

impl Drop for RawGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

nix::ioctl_read_bad!(tiocgwinsz, nix::libc::TIOCGWINSZ, nix::libc::winsize);

/// The detach control, as sent.
fn detach_msg() -> Vec<u8> {
    serde_json::to_vec(&AttachControl::Detach).unwrap_or_default()
}

fn terminal_size() -> Option<(u16, u16)> {
    let mut ws = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we own.
    let r = unsafe { tiocgwinsz(nix::libc::STDOUT_FILENO, &mut ws) };
    (r.is_ok() && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
}

fn send(w: &Arc<Mutex<UnixStream>>, kind: FrameKind, payload: &[u8]) -> bool {
    match w.lock() {
        Ok(mut s) => write_frame(&mut *s, kind, payload).is_ok(),
        Err(_) => false,
    }
}

/// How the detach key reads for people: `C-\` → `Ctrl-\`.
fn detach_hint(key: &str) -> String {
    match key.strip_prefix("C-") {
        Some(k) => format!("Ctrl-{k}"),
        None => key.to_string(),
    }
}

pub fn run(a: AttachArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    let detach_byte = match drover::pane::key_bytes(&a.detach_key, false) {
        Ok(b) if b.len() == 1 => b[0],
        _ => {
            return Err(fail(
                exit::USAGE,
                format!(
                    "--detach-key {:?}: use one control key such as C-\\ or C-b",
                    a.detach_key
                ),
            ));
        }
    };
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return Err(fail(
            exit::USAGE,
            format!(
                "attach needs a terminal on stdin; from a script use `drover pane read {0}` and `drover pane send {0}`",
                a.name
            ),
        ));
    }
    let mut client = ctx.client()?;
    let size = (!a.read_only).then(terminal_size).flatten();
    client
        .call(drover::proto::args::Attach {
            pane: a.name.clone(),
            cols: size.map(|(c, _)| u64::from(c)),
            rows: size.map(|(_, r)| u64::from(r)),
            read_only: a.read_only,
        })
        .map_err(client_err)?;
    eprint!(
        "[attached to {}{} · detach: {}]\r\n",
        a.name,
        if a.read_only { ", read-only" } else { "" },
        detach_hint(&a.detach_key)
    );
    let stream = client.into_stream();
    let writer = Arc::new(Mutex::new(stream.try_clone()?));
    let mut reader = stream;

    let guard = RawGuard::enter();

    // Input: stdin → pane, until the detach key (read-only: only the key).
    let w = writer.clone();
    let read_only = a.read_only;
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 4096];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) | Err(_) => {
                    send(&w, FrameKind::Json, &detach_msg());
                    return;
                }
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            if let Some(i) = chunk.iter().position(|b| *b == detach_byte) {
                if i > 0 {
                    send(&w, FrameKind::Input, &chunk[..i]);
                }
                send(&w, FrameKind::Json, &detach_msg());
                return;
            }
            if !read_only && !send(&w, FrameKind::Input, chunk) {
                return;
            }
        }
    });

    // Signals: resize on SIGWINCH; give the terminal back on SIGTERM/SIGHUP.
    let w = writer.clone();
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGWINCH,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ]) {
        std::thread::spawn(move || {
            for sig in signals.forever() {
                if sig == signal_hook::consts::SIGWINCH {
                    if read_only {
                        continue;
                    }
                    if let Some((cols, rows)) = terminal_size() {
                        let msg = serde_json::to_string(&AttachControl::Resize {
                            cols: u64::from(cols),
                            rows: u64::from(rows),
                        })
                        .unwrap_or_default();
                        send(&w, FrameKind::Json, msg.as_bytes());
                    }
                } else {
                    send(&w, FrameKind::Json, &detach_msg());
                    restore_terminal();
                    std::process::exit(0);
                }
            }
        });
    }

    // Output: pane → stdout, until an event ends the session.
    let mut out = std::io::stdout().lock();
    let (code, message) = loop {
        match read_frame(&mut reader) {
            Ok(Some(f)) if f.kind == FrameKind::Output => {
                if out
                    .write_all(&f.payload)
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    break (
                        exit::ERROR,
                        "[detached: cannot write to the terminal]".to_string(),
                    );
                }
            }
            Ok(Some(f)) if f.kind == FrameKind::Json => {
                match serde_json::from_slice::<AttachEvent>(&f.payload) {
                    Ok(AttachEvent::Detached) => {
                        break (exit::OK, format!("[detached from {}]", a.name));
                    }
                    Ok(AttachEvent::Kicked) => {
                        break (
                            exit::OK,
                            format!("[detached from {}: another client attached]", a.name),
                        );
                    }
                    Ok(AttachEvent::Exited { exit }) => {
                        let how = match exit.as_ref().and_then(|e| e.code) {
                            Some(code) => format!("code {code}"),
                            None => format!(
                                "signal {}",
                                exit.and_then(|e| e.signal).as_deref().unwrap_or("?")
                            ),
                        };
                        break (exit::OK, format!("[pane {} exited ({how})]", a.name));
                    }
                    Err(_) => {}
                }
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                break (
                    exit::TRANSPORT,
                    "[detached: the supervisor closed the connection]".to_string(),
                );
            }
        }
    };
    drop(out);
    drop(guard);
    eprintln!("{message}");
    Ok(code)
}
