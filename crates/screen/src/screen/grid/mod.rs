//! drover's own screen model under the `vte` parser: a grid of compact
//! cells that renders as vt100 0.18.1 does for everything drover reads
//! (visible rows, scrollback, cursor, modes, the hooks), written for the
//! PTY's pace: plain text goes a row's stretch at a time with no width
//! lookup, the common CSIs (SGR, cursor moves, erases) are read without
//! vte, and scrolling reuses the scrollback's evicted rows.
//!
//! The differential test (tests.rs) feeds the same bytes to this model and
//! to vt100 and compares every cell.

mod cell;
mod format;
#[allow(clippy::module_inception)]
mod grid;
mod perform;
mod row;
mod term;

pub use cell::{Attrs, Cell, Color};
pub use grid::Pos;
pub use row::Row;
pub use term::{MouseEncoding, MouseMode};

use super::Hooks;
use perform::Driver;

/// A terminal model: the parser, the grids and the hooks.
pub struct Model {
    parser: vte::Parser,
    driver: Driver,
    /// The parser is in its ground state with no partial UTF-8 character
    /// held: the next bytes may be read here (see [`Model::process`]).
    ground: bool,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.driver.term.size();
        f.debug_struct("Model")
            .field("rows", &rows)
            .field("cols", &cols)
            .finish()
    }
}

impl Model {
    /// An empty model of `rows` × `cols` (each at least 1) keeping
    /// `scrollback` rows.
    pub fn new(rows: u16, cols: u16, scrollback: usize) -> Model {
        Model {
            parser: vte::Parser::new(),
            driver: Driver {
                term: term::Term::new(rows.max(1), cols.max(1), scrollback),
                hooks: Hooks::default(),
                landed: false,
            },
            ground: true,
        }
    }

    /// Take in `bytes` (any split of the stream gives the same screen).
    ///
    /// What a pane's output is mostly made of is read here, as vte would
    /// read it, without the parser: in its ground state printable ASCII
    /// goes to the grid as a run, C0 controls are executed, and a CSI of
    /// digits and `;` only (SGR, cursor moves, erases) whole in `bytes` is
    /// read and dispatched. Everything else — other escapes, OSC, DCS,
    /// UTF-8 text, a sequence cut by the end of `bytes` — goes to vte from
    /// where it starts, and is read here again once vte is back in ground
    /// (a dispatch that lands there: `Driver::landed`).
    pub fn process(&mut self, bytes: &[u8]) {
        let mut csi = OwnCsi {
            params: [0; OWN_CSI_PARAMS],
            len: 0,
            fin: 0,
        };
        let mut i = 0;
        while i < bytes.len() {
            if !self.ground {
                self.driver.landed = false;
                i += self
                    .parser
                    .advance_until_terminated(&mut self.driver, &bytes[i..]);
                self.ground = self.driver.landed;
                continue;
            }
            match bytes[i] {
                0x20..=0x7e => {
                    let run = printable_run(&bytes[i..]);
                    self.driver.term.ascii_run(&bytes[i..i + run]);
                    i += run;
                }
                // `ESC [ 0 m`, SGR's reset, ends nearly every coloured
                // stretch: read at a glance (what `sgr` does with a 0).
                0x1b if bytes.get(i + 1..i + 4) == Some(b"[0m") => {
                    self.driver.term.attrs = Attrs::DEFAULT;
                    i += 4;
                }
                0x1b => match own_csi(&bytes[i..], &mut csi) {
                    Some(n) => {
                        let params = &csi.params[..csi.len];
                        // SGR, the most common by far, as `csi` would
                        // dispatch it.
                        if csi.fin == b'm' {
                            self.driver.sgr(params);
                        } else {
                            self.driver.csi(params, None, None, char::from(csi.fin));
                        }
                        i += n;
                    }
                    None => self.ground = false,
                },
                b @ 0x00..=0x1f => {
                    vte::Perform::execute(&mut self.driver, b);
                    i += 1;
                }
                _ => {
                    // DEL and UTF-8, up to the next byte below DEL. Valid
                    // UTF-8 whole before it is read here as vte's ground
                    // state reads it (C1 controls executed, the rest
                    // printed). Otherwise to vte up to and with that byte,
                    // which ends any character begun, so vte is back in
                    // ground with nothing held. An ESC there, or the end
                    // of `bytes` (a character may be cut), leaves the rest
                    // to vte.
                    match bytes[i..].iter().position(|b| *b < 0x7f) {
                        Some(k) => {
                            if let Ok(text) = std::str::from_utf8(&bytes[i..i + k]) {
                                self.utf8_text(text);
                                i += k;
                            } else if bytes[i + k] != 0x1b {
                                self.parser.advance(&mut self.driver, &bytes[i..i + k + 1]);
                                i += k + 1;
                            } else {
                                self.ground = false;
                            }
                        }
                        None => self.ground = false,
                    }
                }
            }
        }
    }

    /// Whole, valid UTF-8 text read in ground, as vte's ground state reads
    /// it: C1 controls executed, the rest printed; a stretch of characters
    /// one column wide each (box drawing, bars, accented letters) written as
    /// one run.
    fn utf8_text(&mut self, text: &str) {
        const RUN: usize = 32;
        let mut run = ['\0'; RUN];
        let mut n = 0;
        // The last character looked up: a bar repeats one (`█████░░░░`).
        let mut last = ('\0', false);
        for c in text.chars() {
            if c != last.0 {
                last = (c, term::Term::is_narrow(c));
            }
            if last.1 {
                run[n] = c;
                n += 1;
                if n == RUN {
                    self.driver.term.chars_run(&run);
                    n = 0;
                }
                continue;
            }
            if n > 0 {
                self.driver.term.chars_run(&run[..n]);
                n = 0;
            }
            match c {
                '\u{80}'..='\u{9f}' => vte::Perform::execute(&mut self.driver, c as u8),
                _ => vte::Perform::print(&mut self.driver, c),
            }
        }
        self.driver.term.chars_run(&run[..n]);
    }

    /// (rows, cols).
    pub fn size(&self) -> (u16, u16) {
        self.driver.term.size()
    }

    pub fn set_size(&mut self, rows: u16, cols: u16) {
        self.driver.term.set_size(rows.max(1), cols.max(1));
    }

    pub fn hooks(&self) -> &Hooks {
        &self.driver.hooks
    }

    pub fn hooks_mut(&mut self) -> &mut Hooks {
        &mut self.driver.hooks
    }

    /// (row, col) of the cursor; col may equal the width (a wrap pending).
    pub fn cursor_position(&self) -> (u16, u16) {
        let p = self.driver.term.grid().pos;
        (p.row, p.col)
    }

    pub fn alternate_screen(&self) -> bool {
        self.driver.term.mode(term::ALT_SCREEN)
    }

    pub fn bracketed_paste(&self) -> bool {
        self.driver.term.mode(term::BRACKETED_PASTE)
    }

    pub fn application_cursor(&self) -> bool {
        self.driver.term.mode(term::APP_CURSOR)
    }

    pub fn application_keypad(&self) -> bool {
        self.driver.term.mode(term::APP_KEYPAD)
    }

    pub fn hide_cursor(&self) -> bool {
        self.driver.term.mode(term::HIDE_CURSOR)
    }

    pub fn mouse_mode(&self) -> MouseMode {
        self.driver.term.mouse_mode
    }

    pub fn mouse_encoding(&self) -> MouseEncoding {
        self.driver.term.mouse_encoding
    }

    /// DECSCUSR's value (0–6).
    pub fn cursor_style(&self) -> u8 {
        self.driver.term.cursor_style
    }

    /// The attributes new text is drawn with.
    pub fn attrs(&self) -> Attrs {
        self.driver.term.attrs
    }

    pub fn scrollback_len(&self) -> usize {
        self.driver.term.grid().scrollback_len()
    }

    /// The view's offset into the scrollback (0: the live screen).
    pub fn scrollback(&self) -> usize {
        self.driver.term.grid().scrollback()
    }

    pub fn set_scrollback(&mut self, rows: usize) {
        self.driver.term.grid_mut().set_scrollback(rows);
    }

    /// Escape sequences that draw the screen from scratch and set its
    /// input modes (vt100's `state_formatted`).
    pub fn state_formatted(&self) -> String {
        self.driver.term.state_formatted()
    }

    /// Escape sequences that turn `prev`'s screen and modes into this one's
    /// (vt100's `state_diff`).
    pub fn state_diff(&self, prev: &Model) -> String {
        self.driver.term.state_diff(&prev.driver.term)
    }

    /// Each visible row with its attributes (vt100's `rows_formatted`).
    pub fn rows_formatted(&self) -> Vec<String> {
        self.driver.term.rows_formatted()
    }

    /// The rows in view, top first.
    pub fn visible_rows(&self) -> impl Iterator<Item = &Row> {
        self.driver.term.grid().visible_rows()
    }

    /// The visible rows as text (columns `0..cols`, blank cells before
    /// text as spaces, wide characters once).
    pub fn rows_text(&self) -> Vec<String> {
        let cols = usize::from(self.size().1);
        self.visible_rows().map(|r| row_text(r, cols)).collect()
    }
}

/// A row's text as vt100's `Screen::rows` gives it.
pub fn row_text(row: &Row, width: usize) -> String {
    let mut out = String::new();
    let mut skip = false;
    let mut at = 0usize;
    for (col, cell) in row.cells.iter().enumerate().take(width) {
        if skip {
            skip = false;
            continue;
        }
        skip = cell.is_wide();
        if cell.has_contents() {
            for _ in at..col {
                out.push(' ');
            }
            row.push_contents(col, &mut out);
            at = col + if cell.is_wide() { 2 } else { 1 };
        }
    }
    out
}

/// The most parameters [`own_csi`] reads; a CSI with more goes to vte.
const OWN_CSI_PARAMS: usize = 16;

/// A CSI read by [`own_csi`], into the caller's (a `Csi` returned by
/// value was copied out with wide loads right after the parameters' narrow
/// stores: a store-forwarding stall that was 13 % of `Model::process`).
struct OwnCsi {
    params: [u16; OWN_CSI_PARAMS],
    len: usize,
    fin: u8,
}

/// How many bytes at the start of `bytes` are printable ASCII (0x20..=0x7e),
/// eight at a time: a byte below 0x20 borrows into its top bit when 0x20 is
/// taken from it, one above 0x7e has or gets its top bit when 1 is added.
/// A borrow or carry runs only upward from a byte that is flagged anyway,
/// so the lowest flag is exact.
fn printable_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut n = 0;
    for w in words.by_ref() {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let below = x.wrapping_sub(ONES * 0x20) & !x & TOPS;
        let above = (x.wrapping_add(ONES) | x) & TOPS;
        let flags = below | above;
        if flags != 0 {
            return n + (flags.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + words
        .remainder()
        .iter()
        .position(|b| !(0x20..=0x7e).contains(b))
        .unwrap_or(words.remainder().len())
}

/// `ESC [` digits and `;` then a final byte (0x40–0x7e), whole at the start
/// of `bytes`: its length and parameters exactly as vte reads them (each
/// `;` and the final byte end a parameter, empty is 0, values saturate at
/// 65535), read into `csi`. `None` for anything else, left to vte (`csi`
/// then holds nothing of use).
fn own_csi(bytes: &[u8], csi: &mut OwnCsi) -> Option<usize> {
    if bytes.get(1) != Some(&b'[') {
        return None;
    }
    csi.len = 0;
    // Saturating at u16::MAX as vte's parameters do; in u32, where one
    // step cannot overflow, the cap is a compare rather than two checked ops.
    let mut param: u32 = 0;
    for (k, &b) in bytes.iter().enumerate().skip(2) {
        match b {
            b'0'..=b'9' => {
                param = (param * 10 + u32::from(b - b'0')).min(u32::from(u16::MAX));
            }
            b';' | 0x40..=0x7e => {
                if csi.len == OWN_CSI_PARAMS {
                    return None;
                }
                csi.params[csi.len] = param as u16;
                csi.len += 1;
                param = 0;
                if b != b';' {
                    csi.fin = b;
                    return Some(k + 1);
                }
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests;
