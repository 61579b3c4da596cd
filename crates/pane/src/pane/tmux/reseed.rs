//! Re-seeding a pane after a gap (a reconnect, a re-adoption, a replaced
//! pipe): a new pipe and tmux's rendering of the screen, in one step.

use super::pane::{self, lock};
use super::{Dead, Reply, TmuxHost, TmuxPane, quote, seed, state};
use std::sync::Arc;

impl TmuxHost {
    /// Bring a registered pane's screen and exit state up to date after a
    /// gap (reconnect, adoption, a replaced pipe): check it still exists,
    /// re-seed its screen once from `capture-pane -e -p` as its new pipe
    /// starts, then the pipe continues.
    pub(super) fn resync(&self, pane: &Arc<TmuxPane>) -> Result<(), String> {
        let (generation, gone) = {
            let g = lock(&pane.inner);
            (g.generation, g.gone)
        };
        if gone {
            return Ok(());
        }
        match self.reseed(pane)? {
            None => {
                pane.closed("its tmux pane no longer exists");
            }
            Some(dead) => {
                if let Some((code, signal)) = dead {
                    pane.record_exit(generation, code, signal);
                }
                pane.set_transport(None);
            }
        }
        Ok(())
    }

    /// Give a pane a new pipe and replace its screen with tmux's rendering
    /// of it, in one step: `pipe-pane` and the captures run on one command
    /// line, which tmux runs with no pane output read in between, so all the
    /// new pipe brings came after the capture (held meanwhile, then
    /// replayed). A dead pane gets no pipe (its grid is final). `Ok(None)`
    /// when the pane no longer exists; else its exit, when tmux knows it.
    pub(super) fn reseed(&self, pane: &Arc<TmuxPane>) -> Result<Option<Dead>, String> {
        let _one = lock(&pane.reseed_lock);
        let (pane_id, name) = {
            let g = lock(&pane.inner);
            // Its id may be another pane's now (a pane of a killed server:
            // the new one reuses ids): never re-piped.
            if g.gone {
                return Ok(None);
            }
            (g.pane_id.clone(), g.spec.name.clone())
        };
        let new_pipe = self.new_pipe(&name, &pane_id)?;
        let pipe_line = self.pipe_pane_line(&pane_id, &new_pipe);
        let mut cmds = vec![
            format!(
                "display-message -p -t {pane_id} {}",
                quote(
                    "#{pane_id} #{pane_pid} #{cursor_x} #{cursor_y} #{pane_dead} #{pane_dead_status} #{pane_dead_signal}"
                )
            ),
            format!("capture-pane -e -p -t {pane_id}"),
            // The app's terminal state, and its primary screen while it is
            // in the alternate one (empty otherwise).
            format!(
                "display-message -p -t {pane_id} {}",
                quote(seed::MODES_FORMAT)
            ),
            format!(
                "display-message -p -t {pane_id} {}",
                quote(seed::TITLE_FORMAT)
            ),
            format!("capture-pane -a -q -e -p -t {pane_id}"),
        ];
        cmds.insert(1, pipe_line);
        pane.begin_seed(Some(new_pipe));
        let mut replies = match self.line(&cmds.join(" ; "), cmds.len()) {
            Ok(r) => r,
            Err(e) => {
                pane.end_seed();
                return Err(e);
            }
        };
        let first = |r: &[Reply], i: usize| -> String {
            r.get(i)
                .and_then(|r| r.as_ref().ok())
                .and_then(|b| b.first().cloned())
                .unwrap_or_default()
        };
        let info = first(&replies, 0);
        let f: Vec<&str> = info.split(' ').collect();
        // A missing target prints nothing: check the id, not the status.
        if f.first() != Some(&pane_id.as_str()) {
            pane.set_pipe(None);
            pane.end_seed();
            return Ok(None);
        }
        if replies.len() == cmds.len() {
            let _ = replies.remove(1);
            let open = pane.pipe_opened().is_none_or(|o| o.wait());
            if !open {
                tracing::debug!(pane = %name, pane_id, "the re-made output pipe did not open in time");
            }
        } else if f.get(4) == Some(&"1") {
            // tmux pipes no dead pane: its grid is all there is.
            pane.set_pipe(None);
            cmds.remove(1);
            replies = match self.line(&cmds.join(" ; "), cmds.len()) {
                Ok(r) if r.len() == cmds.len() => r,
                Ok(r) => {
                    pane.end_seed();
                    return Err(format!("tmux could not capture {pane_id}: {:?}", r.last()));
                }
                Err(e) => {
                    pane.end_seed();
                    return Err(e);
                }
            };
        } else {
            pane.set_pipe(None);
            pane.end_seed();
            let why = match replies.last() {
                Some(Err(e)) => e.clone(),
                _ => "no reply".into(),
            };
            return Err(format!("tmux refused the output pipe for {pane_id}: {why}"));
        }
        // From here the replies are: info, capture, modes, title, primary.
        let info = first(&replies, 0);
        let f: Vec<&str> = info.split(' ').collect();
        let cursor = (
            f.get(2).and_then(|s| s.parse().ok()).unwrap_or(0),
            f.get(3).and_then(|s| s.parse().ok()).unwrap_or(0),
        );
        let dead = pane::parse_dead(&f.get(4..).unwrap_or_default().join(" "));
        let mut modes = seed::parse_modes(&first(&replies, 2));
        modes.bracketed_paste = state::paste_mode(&self.state_dir, &name);
        let title = first(&replies, 3);
        let primary = match replies.get(4) {
            Some(Ok(b)) if modes.alternate => b.clone(),
            _ => Vec::new(),
        };
        match replies.get(1) {
            Some(Ok(body)) => {
                let mut body = body.clone();
                if dead.is_some() {
                    strip_dead_notice(&mut body);
                }
                let rows = {
                    let mut g = lock(&pane.inner);
                    // tmux's size wins: the pane may have been resized
                    // since it was saved.
                    if let Some((c, r)) = modes.size
                        && g.screen.size() != (c, r)
                    {
                        g.screen.resize(c, r);
                    }
                    g.screen.size().1
                };
                let frame = seed::seed_bytes(&primary, &body, rows, cursor, &modes, &title);
                pane.seed(&frame)
            }
            _ => pane.end_seed(),
        }
        Ok(Some(dead))
    }
}

/// Drop the "Pane is dead (…)" line tmux draws into a dead pane's grid
/// (and the blank rows after it): it is tmux's, not the app's output.
fn strip_dead_notice(rows: &mut Vec<String>) {
    while rows.last().is_some_and(|r| r.trim().is_empty()) {
        rows.pop();
    }
    if rows.last().is_some_and(|r| r.contains("Pane is dead (")) {
        rows.pop();
    }
}
