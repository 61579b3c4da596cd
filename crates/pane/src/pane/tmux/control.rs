//! One control-mode client (`tmux -C attach` over plain pipes): commands are
//! written to its stdin one line at a time and answered in order, one
//! `%begin … %end` block per command (a line of several commands joined by
//! ` ; ` gets one block each, and a command that fails ends its line: tmux
//! skips the rest). The client is set to `no-output`, so tmux sends it no
//! `%output` (pane output comes through each pane's pipe, `pipe.rs`); the
//! other notifications arrive unasked and are routed by the reader thread.

use super::codec::{Line, classify};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest line read from the control client; longer ones are cut (the
/// rest of the line is skipped) so a hostile stream cannot grow memory.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// How long a command may take to be answered before it counts as a
/// transport failure.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
const READ_BUF: usize = 256 * 1024;

/// A reply: the body lines, or the `%error` body as one message.
pub type Reply = Result<Vec<String>, String>;

/// What the reader hands to its owner.
pub trait Sink: Send + Sync {
    /// Window `@W` closed.
    fn window_closed(&self, window: &str);
    /// The client ended (`%exit` or EOF); `reason` as tmux gave it.
    fn disconnected(&self, reason: &str);
}

/// A line sent and the replies it still waits for.
struct Pending {
    tx: std::sync::mpsc::Sender<Vec<Reply>>,
    /// Commands on the line.
    commands: usize,
    got: Vec<Reply>,
}

/// A live control client.
pub struct Control {
    pid: u32,
    stdin: Mutex<Option<ChildStdin>>,
    pending: Mutex<VecDeque<Pending>>,
    alive: AtomicBool,
    child: Mutex<Option<Child>>,
    /// Set once tmux has accepted `refresh-client -f no-output`.
    quiet: AtomicBool,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").field("pid", &self.pid).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Control {
    /// Start `tmux … -C attach -t SESSION` and its reader thread.
    pub fn start(mut cmd: Command, sink: Arc<dyn Sink>) -> Result<Arc<Control>, String> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the tmux control client: {e}"))?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the tmux control client has no stdout".into());
        };
        let ctl = Arc::new(Control {
            pid: child.id(),
            stdin: Mutex::new(stdin),
            pending: Mutex::new(VecDeque::new()),
            alive: AtomicBool::new(true),
            child: Mutex::new(Some(child)),
            quiet: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&ctl);
        std::thread::Builder::new()
            .name("tmux-control".into())
            .spawn(move || reader(weak, stdout, sink))
            .map_err(|e| format!("cannot start the tmux reader thread: {e}"))?;
        Ok(ctl)
    }

    /// The control client's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the client is still running.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Send command lines of one command each (without a newline) and wait
    /// for every reply; the replies in order. Lines are written under one
    /// lock, so they run back to back.
    pub fn commands(&self, lines: &[String]) -> Result<Vec<Reply>, String> {
        let sent: Vec<(&str, usize)> = lines.iter().map(|l| (l.as_str(), 1)).collect();
        let replies = self.send(&sent)?;
        Ok(replies
            .into_iter()
            .map(|mut r| r.pop().unwrap_or_else(|| Err("no reply".into())))
            .collect())
    }

    /// Send one line of `commands` commands joined by ` ; `: tmux runs them
    /// one after another with nothing read from any pane in between. The
    /// replies in order; fewer when one failed (its error is the last: tmux
    /// skips the rest of the line).
    pub fn line(&self, line: &str, commands: usize) -> Result<Vec<Reply>, String> {
        Ok(self.send(&[(line, commands)])?.pop().unwrap_or_default())
    }

    fn send(&self, lines: &[(&str, usize)]) -> Result<Vec<Vec<Reply>>, String> {
        let mut rxs = Vec::with_capacity(lines.len());
        {
            let mut stdin = lock(&self.stdin);
            let Some(w) = stdin.as_mut() else {
                return Err("the tmux control client has ended".into());
            };
            if !self.alive() {
                return Err("the tmux control client has ended".into());
            }
            let mut buf = Vec::new();
            for (l, _) in lines {
                debug_assert!(!l.contains('\n'));
                buf.extend_from_slice(l.as_bytes());
                buf.push(b'\n');
            }
            {
                let mut pending = lock(&self.pending);
                for (_, n) in lines {
                    let (tx, rx) = std::sync::mpsc::channel();
                    pending.push_back(Pending {
                        tx,
                        commands: (*n).max(1),
                        got: Vec::new(),
                    });
                    rxs.push(rx);
                }
            }
            if let Err(e) = w.write_all(&buf).and_then(|()| w.flush()) {
                self.alive.store(false, Ordering::Release);
                return Err(format!("writing to the tmux control client: {e}"));
            }
        }
        rxs.into_iter()
            .map(|rx| {
                rx.recv_timeout(REPLY_TIMEOUT)
                    .map_err(|_| "the tmux control client did not answer".to_string())
            })
            .collect()
    }

    /// tmux accepted `refresh-client -f no-output`: a `%output` line from
    /// now on is unexpected (logged once).
    pub fn set_quiet(&self) {
        self.quiet.store(true, Ordering::Release);
    }

    /// One command; its body lines, or the error tmux gave.
    pub fn command(&self, line: String) -> Result<Reply, String> {
        Ok(self
            .commands(&[line])?
            .pop()
            .unwrap_or_else(|| Err("no reply".into())))
    }

    /// Stop the client: close its stdin (it detaches), then make sure.
    pub fn stop(&self) {
        self.alive.store(false, Ordering::Release);
        lock(&self.stdin).take();
        if let Some(mut child) = lock(&self.child).take() {
            let done = (0..50).any(|_| {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(10));
                false
            });
            if !done {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.stop();
    }
}

fn reader(ctl: std::sync::Weak<Control>, stdout: std::process::ChildStdout, sink: Arc<dyn Sink>) {
    let mut rd = BufReader::with_capacity(READ_BUF, stdout);
    let mut line = Vec::with_capacity(4096);
    let mut warned = false;
    let mut in_reply = false;
    let mut reply_ours = false;
    let mut body: Vec<String> = Vec::new();
    let mut exit_reason = String::new();
    loop {
        line.clear();
        match read_line(&mut rd, &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match classify(&line, in_reply) {
            // Pane output comes through each pane's pipe; `%output` only
            // until tmux has taken `no-output` (ignored: the panes are
            // re-seeded after a connect).
            Line::Output { pane, .. } => {
                let Some(c) = ctl.upgrade() else { break };
                if c.quiet.load(Ordering::Acquire) && !warned {
                    warned = true;
                    tracing::warn!(
                        pane,
                        "tmux sent %output to drover's no-output control client"
                    );
                }
            }
            Line::Begin { ours } => {
                in_reply = true;
                reply_ours = ours;
                body.clear();
            }
            Line::End { ok, ours } => {
                in_reply = false;
                if ours || reply_ours {
                    let reply = if ok {
                        Ok(std::mem::take(&mut body))
                    } else {
                        Err(std::mem::take(&mut body).join(" "))
                    };
                    let Some(c) = ctl.upgrade() else { break };
                    let mut pending = lock(&c.pending);
                    if let Some(p) = pending.front_mut() {
                        let failed = reply.is_err();
                        p.got.push(reply);
                        // A failed command ends its line: tmux skips the rest.
                        if (failed || p.got.len() >= p.commands)
                            && let Some(p) = pending.pop_front()
                        {
                            let _ = p.tx.send(p.got);
                        }
                    }
                }
                body.clear();
            }
            Line::Body(b) => {
                if in_reply {
                    body.push(String::from_utf8_lossy(b).into_owned());
                }
            }
            Line::WindowClose { window } => sink.window_closed(window),
            Line::Exit { reason } => exit_reason = reason.to_string(),
            Line::Notice => {}
        }
    }
    if let Some(c) = ctl.upgrade() {
        c.alive.store(false, Ordering::Release);
        for p in lock(&c.pending).drain(..) {
            let mut got = p.got;
            got.push(Err("the tmux control client ended".into()));
            let _ = p.tx.send(got);
        }
        if let Some(mut child) = lock(&c.child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    let reason = if exit_reason.is_empty() {
        "the control client ended".to_string()
    } else {
        exit_reason
    };
    sink.disconnected(&reason);
}

/// Read one line without its `\n` into `out`, at most [`MAX_LINE`] bytes
/// (the rest of a longer line is skipped). Ok(0) at EOF.
fn read_line(rd: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buf = match rd.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = MAX_LINE.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(buf.len());
        total += used;
        rd.consume(used);
        if done.is_some() {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_not_grown() {
        let mut data = vec![b'x'; MAX_LINE + 100];
        data.extend_from_slice(b"\nnext\n");
        let mut rd = BufReader::new(&data[..]);
        let mut line = Vec::new();
        assert!(read_line(&mut rd, &mut line).unwrap() > 0);
        assert_eq!(line.len(), MAX_LINE);
        line.clear();
        read_line(&mut rd, &mut line).unwrap();
        assert_eq!(line, b"next");
        line.clear();
        assert_eq!(read_line(&mut rd, &mut line).unwrap(), 0);
    }
}
