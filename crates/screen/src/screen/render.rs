//! Drawing a pane on an operator's terminal from the screen model, as tmux
//! draws from its grid: what reaches the terminal is the grid's cells, its
//! cursor and the input modes the app set (bracketed paste, mouse, cursor
//! keys, keypad, alternate screen, cursor visibility) — never the app's own
//! bytes. Clipboard access (OSC 52), colour and title queries, titles, DCS
//! and window reports therefore cannot reach the terminal: the grid does
//! not keep them. The only requests passed on are the terminal queries the
//! supervisor answers itself while nobody is attached (DA1, DSR, DECRQM),
//! re-issued in their canonical form.

use super::Screen;
use super::grid::Model;

/// Modes switched to a known state before the first frame, so the terminal
/// matches the blank model the frames are computed against.
const RESET_MODES: &[u8] =
    b"\x1b[0m\x1b[?25h\x1b[?2004l\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l";

/// What an attached terminal shows, as a model of its own: each frame is the
/// difference between it and the pane's screen.
pub struct Renderer {
    /// The terminal as the frames so far left it (no scrollback).
    shown: Model,
    started: bool,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("started", &self.started)
            .finish()
    }
}

impl Default for Renderer {
    fn default() -> Self {
        Self::new()
    }
}

impl Renderer {
    pub fn new() -> Self {
        Renderer {
            shown: Model::new(1, 1, 0),
            started: false,
        }
    }

    /// The bytes that bring the terminal from what it shows to `screen`
    /// (everything, the first time and after a resize); empty when nothing
    /// changed.
    pub fn frame(&mut self, screen: &Screen) -> Vec<u8> {
        let cur = &screen.model;
        let mut out = Vec::new();
        if !self.started || self.shown.size() != cur.size() {
            let (rows, cols) = cur.size();
            self.shown = Model::new(rows, cols, 0);
            out.extend_from_slice(RESET_MODES);
            // Follow the app onto (or off) the alternate screen, so its
            // last screen stays on the terminal after a detach.
            if cur.alternate_screen() {
                out.extend_from_slice(b"\x1b[?1049h");
                self.shown.process(b"\x1b[?1049h");
            } else {
                out.extend_from_slice(b"\x1b[?1049l");
            }
            out.extend_from_slice(b"\x1b[H\x1b[2J");
            self.started = true;
        } else if cur.alternate_screen() != self.shown.alternate_screen() {
            let seq: &[u8] = if cur.alternate_screen() {
                b"\x1b[?1049h"
            } else {
                b"\x1b[?1049l"
            };
            out.extend_from_slice(seq);
            self.shown.process(seq);
        }
        let diff = cur.state_diff(&self.shown);
        self.shown.process(diff.as_bytes());
        out.extend_from_slice(diff.as_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `frames` to a terminal model; its contents.
    fn term(frames: &[Vec<u8>], cols: u16, rows: u16) -> vt100::Parser {
        let mut p = vt100::Parser::new(
            std::num::NonZeroU16::new(rows).unwrap(),
            std::num::NonZeroU16::new(cols).unwrap(),
            0,
        );
        for f in frames {
            p.process(f);
        }
        p
    }

    /// The terminal's rows as `Screen::rows` gives a screen's.
    fn shown_rows(t: &vt100::Parser) -> Vec<String> {
        let (_, cols) = t.screen().size();
        t.screen()
            .rows(0, cols.get())
            .map(|r| crate::screen::sanitize_line(r.trim_end()))
            .collect()
    }

    #[test]
    fn frames_reproduce_the_screen_and_carry_no_hostile_sequence() {
        let mut s = Screen::new(40, 10);
        let mut r = Renderer::new();
        let mut frames = vec![r.frame(&s)];
        s.process(b"\x1b]52;c;aGVsbG8=\x07\x1b]0;pwned\x07\x1bP+q544e\x1b\\\x1b[21t\x1b]10;?\x07");
        s.process(b"\x1b[31mred\x1b[0m plain\r\n\x1b[?2004h\x1b[?1000h\x1b[?1hline two");
        frames.push(r.frame(&s));
        let all: Vec<u8> = frames.concat();
        for bad in [&b"\x1b]"[..], b"\x1bP", b"[21t", b"52;"] {
            assert!(
                !all.windows(bad.len()).any(|w| w == bad),
                "{:?} reached the terminal",
                String::from_utf8_lossy(bad)
            );
        }
        let t = term(&frames, 40, 10);
        assert_eq!(shown_rows(&t), s.rows());
        assert!(t.screen().bracketed_paste());
        assert!(t.screen().application_cursor());
        assert_eq!(t.screen().cursor_position(), s.model.cursor_position());
        // Nothing changed: nothing to draw.
        assert!(r.frame(&s).is_empty());
    }

    #[test]
    fn alternate_screen_and_resize_are_followed() {
        let mut s = Screen::new(30, 8);
        let mut r = Renderer::new();
        s.process(b"main text");
        let mut frames = vec![r.frame(&s)];
        s.process(b"\x1b[?1049h\x1b[Hfull screen app");
        frames.push(r.frame(&s));
        let t = term(&frames, 30, 8);
        assert!(t.screen().alternate_screen());
        assert!(t.screen().contents().contains("full screen app"));
        s.process(b"\x1b[?1049l");
        frames.push(r.frame(&s));
        let t = term(&frames, 30, 8);
        assert!(!t.screen().alternate_screen());
        assert!(t.screen().contents().contains("main text"));
        s.resize(20, 5);
        let f = r.frame(&s);
        let t = term(&[f], 20, 5);
        assert_eq!(shown_rows(&t), s.rows());
    }
}
