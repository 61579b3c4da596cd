//! The terminal state over two grids (main with scrollback, alternate
//! without) and the text path: where a printed character lands, how it
//! wraps, and how wide characters and combining marks settle.

use super::cell::{Attrs, Cell};
use super::grid::{Grid, Pos};
use unicode_width::UnicodeWidthChar as _;

pub(crate) const APP_KEYPAD: u8 = 0b0000_0001;
pub(crate) const APP_CURSOR: u8 = 0b0000_0010;
pub(crate) const HIDE_CURSOR: u8 = 0b0000_0100;
pub(crate) const ALT_SCREEN: u8 = 0b0000_1000;
pub(crate) const BRACKETED_PASTE: u8 = 0b0001_0000;

/// Mouse reporting the app asked for (xterm modes 9, 1000, 1002, 1003).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MouseMode {
    #[default]
    None,
    Press,
    PressRelease,
    ButtonMotion,
    AnyMotion,
}

/// Mouse report encoding (modes 1005, 1006).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MouseEncoding {
    #[default]
    Default,
    Utf8,
    Sgr,
}

#[derive(Debug, Clone)]
pub struct Term {
    pub(crate) grid: Grid,
    pub(crate) alt: Grid,
    pub(crate) attrs: Attrs,
    saved_attrs: Attrs,
    pub(crate) modes: u8,
    pub(crate) mouse_mode: MouseMode,
    pub(crate) mouse_encoding: MouseEncoding,
    /// DECSCUSR's parameter (0–6).
    pub(crate) cursor_style: u8,
    pub(crate) last_char: Option<char>,
}

impl Term {
    pub fn new(rows: u16, cols: u16, scrollback: usize) -> Term {
        let mut grid = Grid::new(rows, cols, Some(scrollback));
        grid.allocate_rows();
        Term {
            grid,
            alt: Grid::new(rows, cols, None),
            attrs: Attrs::DEFAULT,
            saved_attrs: Attrs::DEFAULT,
            modes: 0,
            mouse_mode: MouseMode::None,
            mouse_encoding: MouseEncoding::Default,
            cursor_style: 0,
            last_char: None,
        }
    }

    pub fn mode(&self, m: u8) -> bool {
        self.modes & m != 0
    }

    pub fn set_mode(&mut self, m: u8, on: bool) {
        if on {
            self.modes |= m;
        } else {
            self.modes &= !m;
        }
    }

    #[inline]
    pub fn grid(&self) -> &Grid {
        if self.mode(ALT_SCREEN) {
            &self.alt
        } else {
            &self.grid
        }
    }

    #[inline]
    pub fn grid_mut(&mut self) -> &mut Grid {
        if self.mode(ALT_SCREEN) {
            &mut self.alt
        } else {
            &mut self.grid
        }
    }

    pub fn size(&self) -> (u16, u16) {
        (self.grid.rows_n, self.grid.cols)
    }

    pub fn set_size(&mut self, rows: u16, cols: u16) {
        self.grid.set_size(rows, cols);
        self.alt.set_size(rows, cols);
    }

    pub fn enter_alternate(&mut self) {
        self.grid_mut().set_scrollback(0);
        self.set_mode(ALT_SCREEN, true);
        self.alt.allocate_rows();
    }

    pub fn exit_alternate(&mut self) {
        self.set_mode(ALT_SCREEN, false);
    }

    pub fn save_cursor(&mut self) {
        self.grid_mut().save_cursor();
        self.saved_attrs = self.attrs;
    }

    pub fn restore_cursor(&mut self) {
        self.grid_mut().restore_cursor();
        self.attrs = self.saved_attrs;
    }

    pub fn set_mouse_mode(&mut self, m: MouseMode, on: bool) {
        if on {
            self.mouse_mode = m;
        } else if self.mouse_mode == m {
            self.mouse_mode = MouseMode::None;
        }
    }

    pub fn set_mouse_encoding(&mut self, e: MouseEncoding, on: bool) {
        if on {
            self.mouse_encoding = e;
        } else if self.mouse_encoding == e {
            self.mouse_encoding = MouseEncoding::Default;
        }
    }

    /// A printable ASCII character: one column, no cluster, no width
    /// lookup — the hot path.
    #[inline]
    pub fn ascii(&mut self, c: char) {
        debug_assert!((' '..='~').contains(&c));
        self.ascii_run(&[c as u8]);
    }

    /// A run of printable ASCII: the part that fits the row is written at
    /// once (a cell a byte), then the wrap as one character's would be.
    pub fn ascii_run(&mut self, run: &[u8]) {
        self.narrow_run(run, char::from);
    }

    /// Whether `c` takes one column and can go in a run ([`Self::chars_run`]):
    /// [`Self::text`] would write it as [`Self::ascii_run`] writes a byte.
    pub fn is_narrow(c: char) -> bool {
        c >= '\u{a0}' && c != '\u{fffd}' && c.width() == Some(1)
    }

    /// A run of chars that are each [`Self::is_narrow`], as one
    /// [`Self::text`] after another would write them.
    pub fn chars_run(&mut self, run: &[char]) {
        debug_assert!(run.iter().all(|c| Self::is_narrow(*c)));
        self.narrow_run(run, |c| c);
    }

    /// Characters one column wide each: the part that fits the row is
    /// written at once (a cell a character), then the wrap as one
    /// character's would be.
    fn narrow_run<T: Copy>(&mut self, mut run: &[T], char_of: impl Fn(T) -> char) {
        let Some(&last) = run.last() else { return };
        let attrs = self.attrs;
        let grid = self.grid_mut();
        while !run.is_empty() {
            let cols = grid.cols;
            if grid.pos.col >= cols {
                let last = grid.rows[usize::from(grid.pos.row)].cells[usize::from(cols - 1)];
                let wrap = last.has_contents() || last.is_wide_continuation();
                grid.col_wrap(1, wrap);
            }
            let Pos { row, col } = grid.pos;
            let col = usize::from(col);
            let n = run.len().min(usize::from(cols) - col);
            let cells = &mut grid.rows[usize::from(row)].cells;
            // Only the first cell can follow a wide character and only the
            // last can be followed by one's other half: the cells between
            // are overwritten by the run itself.
            if col > 0 && cells[col - 1].is_wide() {
                let a = cells[col - 1].attrs;
                cells[col - 1].clear(a);
            }
            let last_was_wide = cells[col + n - 1].is_wide();
            for (cell, &b) in cells[col..col + n].iter_mut().zip(&run[..n]) {
                *cell = Cell::plain(char_of(b), attrs, false);
            }
            if last_was_wide && let Some(next) = cells.get_mut(col + n) {
                *next = Cell::plain(' ', attrs, false);
            }
            grid.pos.col += n as u16;
            run = &run[n..];
        }
        self.last_char = Some(char_of(last));
    }

    fn width_of(&self, c: char) -> Option<u16> {
        let w = c.width();
        if w.is_none() && u32::from(c) < 256 {
            return None;
        }
        let w = u16::try_from(w.unwrap_or(1)).unwrap_or(1).min(2);
        let grid = self.grid();
        if w > grid.cols || (w == 0 && grid.pos.col == 0) {
            return None;
        }
        Some(w)
    }

    /// Any printed character.
    pub fn text(&mut self, c: char) {
        if (' '..='~').contains(&c) {
            return self.ascii(c);
        }
        let Some(width) = self.width_of(c) else {
            return;
        };
        let attrs = self.attrs;
        let pos = self.grid().pos;
        let mut base;
        let was_wide;
        if width > 0 {
            let wrap = self.should_wrap(width);
            let grid = self.grid_mut();
            grid.col_wrap(width, wrap);
            base = grid.pos;
            let row = grid.row_mut(base.row);
            was_wide = row.cells[usize::from(base.col)].is_wide();
            // `width` is the char's own width capped at 2 (width_of).
            row.cells[usize::from(base.col)] = Cell::plain(c, attrs, width > 1);
            self.last_char = Some(c);
            self.grid_mut().col_inc(width);
        } else {
            base = Pos {
                row: pos.row,
                col: pos.col - 1,
            };
            let grid = self.grid_mut();
            // Past the row's end (a one-column screen after a widened
            // cell): nothing to attach the mark to. vt100 panics here.
            let Some(cell) = grid.cell(base) else {
                return;
            };
            if cell.is_wide_continuation() {
                base.col = pos.col - 2;
            }
            let row = grid.row_mut(base.row);
            was_wide = row.cells[usize::from(base.col)].is_wide();
            row.append(usize::from(base.col), c);
            let is_wide = row.cells[usize::from(base.col)].is_wide();
            if !was_wide && is_wide {
                grid.col_wrap(1, false);
                let new_pos = grid.pos;
                self.wrap_widened(base, new_pos);
                if new_pos.col == 0 {
                    base = new_pos;
                }
            }
        }
        let is_wide = self.grid().cell(base).is_some_and(Cell::is_wide);
        self.cleanup(base, was_wide, is_wide);
    }

    fn should_wrap(&self, width: u16) -> bool {
        let grid = self.grid();
        if grid.pos.col + width > grid.cols {
            let last = grid.rows[usize::from(grid.pos.row)].cells[usize::from(grid.cols - 1)];
            return last.has_contents() || last.is_wide_continuation();
        }
        false
    }

    fn wrap_widened(&mut self, old: Pos, new: Pos) {
        if new.col == 0 {
            let attrs = self.attrs;
            let grid = self.grid_mut();
            let text = grid.rows[usize::from(old.row)].contents(usize::from(old.col));
            grid.row_mut(new.row)
                .set_contents(usize::from(new.col), &text, attrs);
            grid.row_mut(old.row).cells[usize::from(old.col)].clear(attrs);
            grid.col_inc(2);
        } else {
            self.grid_mut().col_inc(1);
        }
    }

    fn cleanup(&mut self, base: Pos, was_wide: bool, is_wide: bool) {
        let attrs = self.attrs;
        let grid = self.grid_mut();
        let cols = grid.cols;
        let row = grid.row_mut(base.row);
        let col = usize::from(base.col);
        if col > 0 && row.cells[col - 1].is_wide() {
            let a = row.cells[col - 1].attrs;
            row.cells[col - 1].clear(a);
        }
        if was_wide
            && !is_wide
            && let Some(next) = row.cells.get_mut(col + 1)
        {
            *next = Cell::plain(' ', attrs, false);
        }
        if !was_wide && is_wide && col + 1 < row.cells.len() {
            let next_was_wide = row.cells[col + 1].is_wide();
            row.cells[col + 1].clear(Attrs::DEFAULT);
            row.cells[col + 1].set_wide_continuation(true);
            if next_was_wide && col + 2 < row.cells.len() {
                row.cells[col + 2].clear(attrs);
                if base.col + 2 == cols - 1 {
                    row.wrap(false);
                }
            }
        }
    }
}
