//! The screen model: a vt100 grid fed with a pane's bytes, plus the signals a
//! grid does not keep — the terminal title, Codex's OSC 7501 state, whether a
//! synchronized-output block is open — and the answers to terminal queries.
//!
//! vt100 (pinned 0.18.1) renders full-screen TUIs the way tmux does; what it
//! does not implement reaches us through its callbacks (docs/architecture.md).

pub mod grid;
mod hooks;
mod render;
mod sanitize;

pub use hooks::Hooks;
pub use render::Renderer;
pub use sanitize::sanitize_line;

/// Scrollback kept per pane: enough to read a turn, small enough that idle
/// panes stay cheap (docs/performance.md: RSS ≤ 64 MB + 1 MB per pane).
pub const SCROLLBACK_ROWS: usize = 1000;

/// A pane's terminal as drover sees it.
pub struct Screen {
    parser: vt100::Parser<Hooks>,
    bytes: u64,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.parser.screen().size();
        f.debug_struct("Screen")
            .field("rows", &rows)
            .field("cols", &cols)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Screen {
    /// An empty screen of `cols` × `rows`.
    pub fn new(cols: u16, rows: u16) -> Self {
        Screen {
            parser: vt100::Parser::new_with_callbacks(
                nz(rows),
                nz(cols),
                SCROLLBACK_ROWS,
                Hooks::default(),
            ),
            bytes: 0,
        }
    }

    /// Feed output bytes from the pane.
    pub fn process(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        self.parser.process(bytes);
    }

    /// Draw bytes that are not the app's output (a repaint drover makes
    /// from its backend's copy of the screen): not counted in [`Self::bytes`].
    pub fn redraw(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// Total bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// (cols, rows).
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols.get(), rows.get())
    }

    /// Resize the grid.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.parser.set_size(nz(rows), nz(cols));
    }

    /// Signals captured from sequences the grid does not keep.
    pub fn hooks(&self) -> &Hooks {
        self.parser.callbacks()
    }

    /// Take the replies to terminal queries seen since the last call, with the
    /// cursor position filled in for DSR 6.
    pub fn take_replies(&mut self) -> Vec<u8> {
        let (row, col) = self.parser.screen().cursor_position();
        let modes = ModeView::of(self.parser.screen());
        self.parser
            .callbacks_mut()
            .take_replies(row + 1, col + 1, &modes)
    }

    /// Take the queries seen since the last call as canonical requests for
    /// an attached terminal to answer (see [`Renderer`]).
    pub fn take_terminal_queries(&mut self) -> Vec<u8> {
        self.parser.callbacks_mut().take_queries()
    }

    /// Whether the application enabled bracketed paste (mode 2004).
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// Whether the application switched to application cursor keys (DECCKM).
    pub fn application_cursor(&self) -> bool {
        self.parser.screen().application_cursor()
    }

    /// Whether the alternate screen is active.
    pub fn alternate_screen(&self) -> bool {
        self.parser.screen().alternate_screen()
    }

    /// The visible rows as plain text, trailing spaces trimmed, control
    /// characters removed (what `tmux capture-pane -p` prints).
    pub fn rows(&self) -> Vec<String> {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        screen
            .rows(0, cols.get())
            .map(|r| sanitize_line(r.trim_end()))
            .collect()
    }

    /// The visible screen as text, one line per row, trailing blank rows dropped.
    pub fn text(&self) -> String {
        join_rows(&self.rows())
    }

    /// Up to `n` rows of scrollback above the visible screen, oldest first.
    pub fn scrollback_rows(&mut self, n: usize) -> Vec<String> {
        if n == 0 {
            return Vec::new();
        }
        let screen = self.parser.screen_mut();
        screen.set_scrollback(n);
        let mut off = screen.scrollback();
        let (height, cols) = screen.size();
        let height = usize::from(height.get());
        let mut rows = Vec::with_capacity(off);
        // The view shows `height` rows starting `off` rows above the screen;
        // page through it from the oldest requested row down.
        while off > 0 {
            screen.set_scrollback(off);
            let take = off.min(height);
            rows.extend(
                screen
                    .rows(0, cols.get())
                    .take(take)
                    .map(|r| sanitize_line(r.trim_end())),
            );
            off -= take;
        }
        screen.set_scrollback(0);
        rows
    }

    /// The visible rows with SGR attributes (for `read --raw`).
    pub fn rows_formatted(&self) -> Vec<Vec<u8>> {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        screen
            .rows_formatted(0, cols.get())
            .map(String::into_bytes)
            .collect()
    }

    /// Bytes that redraw this screen from scratch on a real terminal: used to
    /// replay the screen to an attaching client.
    pub fn repaint(&self) -> Vec<u8> {
        let screen = self.parser.screen();
        let mut out = Vec::new();
        if screen.alternate_screen() {
            out.extend_from_slice(b"\x1b[?1049h");
        } else {
            out.extend_from_slice(b"\x1b[?1049l");
        }
        out.extend_from_slice(b"\x1b[H\x1b[2J");
        out.extend_from_slice(screen.state_formatted().as_bytes());
        out
    }
}

fn nz(v: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(v).unwrap_or(std::num::NonZeroU16::MIN)
}

/// Join rows with newlines, dropping trailing blank rows.
pub fn join_rows(rows: &[String]) -> String {
    let end = rows
        .iter()
        .rposition(|r| !r.is_empty())
        .map(|i| i + 1)
        .unwrap_or(0);
    let mut s = rows[..end].join("\n");
    if end > 0 {
        s.push('\n');
    }
    s
}

/// The modes a DECRQM query can ask about, read off the grid.
#[derive(Debug, Default, Clone, Copy)]
pub struct ModeView {
    pub bracketed_paste: bool,
    pub alternate_screen: bool,
    pub hide_cursor: bool,
    pub application_cursor: bool,
}

impl ModeView {
    fn of(s: &vt100::Screen) -> Self {
        ModeView {
            bracketed_paste: s.bracketed_paste(),
            alternate_screen: s.alternate_screen(),
            hide_cursor: s.hide_cursor(),
            application_cursor: s.application_cursor(),
        }
    }
}

#[cfg(test)]
mod tests;
