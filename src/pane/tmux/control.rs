//! One control-mode client (`tmux -C attach` over plain pipes): commands are
//! written to its stdin one per line and answered in order inside
//! `%begin … %end` blocks; `%output` and the other notifications arrive
//! unasked and are routed by the reader thread.

use super::codec::{Line, classify, decode_output};
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
    /// Decoded output of pane `%N`; `burst_end` when nothing more is
    /// waiting in the pipe right now.
    fn output(&self, pane: &str, bytes: &[u8], burst_end: bool);
    /// Window `@W` closed.
    fn window_closed(&self, window: &str);
    /// The client ended (`%exit` or EOF); `reason` as tmux gave it.
    fn disconnected(&self, reason: &str);
}

/// A live control client.
pub struct Control {
    pid: u32,
    stdin: Mutex<Option<ChildStdin>>,
    pending: Mutex<VecDeque<std::sync::mpsc::Sender<Reply>>>,
    alive: AtomicBool,
    child: Mutex<Option<Child>>,
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

    /// Send command lines (each without a newline) and wait for every reply;
    /// the replies in order. Lines are written under one lock, so they run
    /// back to back.
    pub fn commands(&self, lines: &[String]) -> Result<Vec<Reply>, String> {
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
            for l in lines {
                debug_assert!(!l.contains('\n'));
                buf.extend_from_slice(l.as_bytes());
                buf.push(b'\n');
            }
            {
                let mut pending = lock(&self.pending);
                for _ in lines {
                    let (tx, rx) = std::sync::mpsc::channel();
                    pending.push_back(tx);
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
    let mut decoded = Vec::with_capacity(READ_BUF);
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
            Line::Output { pane, payload } => {
                decoded.clear();
                decode_output(payload, &mut decoded);
                sink.output(pane, &decoded, rd.buffer().is_empty());
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
                    if let Some(tx) = lock(&c.pending).pop_front() {
                        let _ = tx.send(reply);
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
        for tx in lock(&c.pending).drain(..) {
            let _ = tx.send(Err("the tmux control client ended".into()));
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
