//! The screen model: drover's grid (src/screen/grid) fed with a pane's bytes
//! through the `vte` parser, plus the signals a grid does not keep — the
//! terminal title, Codex's OSC 7501 state, whether a synchronized-output
//! block is open — and the answers to terminal queries.
//!
//! The grid renders full-screen TUIs exactly as vt100 0.18.1 does (which
//! renders them the way tmux does): detection rules and recordings are
//! checked against that rendering, and a differential test holds the grid
//! to it cell for cell (docs/architecture.md).

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
    model: grid::Model,
    bytes: u64,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.model.size();
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
            model: grid::Model::new(rows, cols, SCROLLBACK_ROWS),
            bytes: 0,
        }
    }

    /// Feed output bytes from the pane.
    pub fn process(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        self.model.process(bytes);
    }

    /// Draw bytes that are not the app's output (a repaint drover makes
    /// from its backend's copy of the screen): not counted in [`Self::bytes`].
    pub fn redraw(&mut self, bytes: &[u8]) {
        self.model.process(bytes);
    }

    /// Total bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// (cols, rows).
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.model.size();
        (cols, rows)
    }

    /// Resize the grid.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.model.set_size(rows, cols);
    }

    /// Signals captured from sequences the grid does not keep.
    pub fn hooks(&self) -> &Hooks {
        self.model.hooks()
    }

    /// Take the replies to terminal queries seen since the last call, with the
    /// cursor position filled in for DSR 6.
    pub fn take_replies(&mut self) -> Vec<u8> {
        let (row, col) = self.model.cursor_position();
        let modes = ModeView::of(&self.model);
        self.model
            .hooks_mut()
            .take_replies(row + 1, col + 1, &modes)
    }

    /// Take the queries seen since the last call as canonical requests for
    /// an attached terminal to answer (see [`Renderer`]).
    pub fn take_terminal_queries(&mut self) -> Vec<u8> {
        self.model.hooks_mut().take_queries()
    }

    /// Whether the application enabled bracketed paste (mode 2004).
    pub fn bracketed_paste(&self) -> bool {
        self.model.bracketed_paste()
    }

    /// Whether the application switched to application cursor keys (DECCKM).
    pub fn application_cursor(&self) -> bool {
        self.model.application_cursor()
    }

    /// Whether the alternate screen is active.
    pub fn alternate_screen(&self) -> bool {
        self.model.alternate_screen()
    }

    /// The visible rows as plain text, trailing spaces trimmed, control
    /// characters removed (what `tmux capture-pane -p` prints).
    pub fn rows(&self) -> Vec<String> {
        self.model
            .rows_text()
            .iter()
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
        let model = &mut self.model;
        model.set_scrollback(n);
        let mut off = model.scrollback();
        let height = usize::from(model.size().0);
        let mut rows = Vec::with_capacity(off);
        // The view shows `height` rows starting `off` rows above the screen;
        // page through it from the oldest requested row down.
        while off > 0 {
            model.set_scrollback(off);
            let take = off.min(height);
            rows.extend(
                model
                    .rows_text()
                    .iter()
                    .take(take)
                    .map(|r| sanitize_line(r.trim_end())),
            );
            off -= take;
        }
        model.set_scrollback(0);
        rows
    }

    /// The visible rows with SGR attributes (for `read --raw`).
    pub fn rows_formatted(&self) -> Vec<Vec<u8>> {
        self.model
            .rows_formatted()
            .into_iter()
            .map(String::into_bytes)
            .collect()
    }

    /// Bytes that redraw this screen from scratch on a real terminal: used to
    /// replay the screen to an attaching client.
    pub fn repaint(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.model.alternate_screen() {
            out.extend_from_slice(b"\x1b[?1049h");
        } else {
            out.extend_from_slice(b"\x1b[?1049l");
        }
        out.extend_from_slice(b"\x1b[H\x1b[2J");
        out.extend_from_slice(self.model.state_formatted().as_bytes());
        out
    }
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
    fn of(s: &grid::Model) -> Self {
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
