//! The grid written back as escape sequences, byte for byte as vt100
//! 0.18.1 writes it: a row with its attributes (`rows_formatted`), the
//! whole screen (`state_formatted`, a repaint) and the difference between
//! two screens (`state_diff`, the attach renderer's frames).

use super::cell::{Attrs, BOLD, Cell, Color, DIM, INTENSITY, INVERSE, ITALIC, UNDERLINE};
use super::grid::{Grid, Pos};
use super::row::Row;
use std::fmt::Write as _;

pub(crate) fn move_to(out: &mut String, p: Pos) {
    if p.row == 0 && p.col == 0 {
        out.push_str("\x1b[H");
    } else {
        let _ = write!(out, "\x1b[{};{}H", p.row + 1, p.col + 1);
    }
}

pub(crate) fn move_from_to(out: &mut String, from: Pos, to: Pos) {
    if to.row == from.row + 1 && to.col == 0 {
        out.push_str("\r\n");
    } else if from.row == to.row && from.col < to.col {
        match to.col - from.col {
            1 => out.push_str("\x1b[C"),
            n => {
                let _ = write!(out, "\x1b[{n}C");
            }
        }
    } else if to != from {
        move_to(out, to);
    }
}

pub(crate) fn erase_char(out: &mut String, n: u16) {
    match n {
        0 => {}
        1 => out.push_str("\x1b[X"),
        n => {
            let _ = write!(out, "\x1b[{n}X");
        }
    }
}

fn color_params(params: &mut Vec<u16>, c: Color, base: u16, bright: u16, ext: u16) {
    match c {
        Color::Default => params.push(base + 9),
        Color::Idx(i) if i < 8 => params.push(u16::from(i) + base),
        Color::Idx(i) if i < 16 => params.push(u16::from(i) + bright),
        Color::Idx(i) => params.extend([ext, 5, u16::from(i)]),
        Color::Rgb(r, g, b) => params.extend([ext, 2, u16::from(r), u16::from(g), u16::from(b)]),
    }
}

/// The SGR that turns `old` into `new` (vt100's `write_escape_code_diff`).
pub(crate) fn sgr_diff(out: &mut String, new: &Attrs, old: &Attrs) {
    if new != old && *new == Attrs::DEFAULT {
        out.push_str("\x1b[m");
        return;
    }
    let mut p: Vec<u16> = Vec::new();
    if new.fg != old.fg {
        color_params(&mut p, new.fg, 30, 82, 38);
    }
    if new.bg != old.bg {
        color_params(&mut p, new.bg, 40, 92, 48);
    }
    if new.mode & INTENSITY != old.mode & INTENSITY {
        p.push(match new.mode & INTENSITY {
            BOLD => 1,
            DIM => 2,
            _ => 22,
        });
    }
    for (bit, on, off) in [(ITALIC, 3, 23), (UNDERLINE, 4, 24), (INVERSE, 7, 27)] {
        if new.has(bit) != old.has(bit) {
            p.push(if new.has(bit) { on } else { off });
        }
    }
    if p.is_empty() {
        return;
    }
    out.push_str("\x1b[");
    for (i, v) in p.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        let _ = write!(out, "{v}");
    }
    out.push('m');
}

/// Reaching `new_pos` for an erase, from just past the end of a wrapped
/// previous row when that is where the cursor is.
fn goto_erase(out: &mut String, wrapping: bool, prev: Pos, new: Pos, cols: u16) {
    if wrapping && prev.row + 1 == new.row && prev.col >= cols {
        if new.col > 0 {
            out.push_str(&" ".repeat(usize::from(new.col)));
        } else {
            out.push_str(" \x08");
        }
    } else {
        move_from_to(out, prev, new);
    }
}

/// What a row draws: `diff` is the previous row when writing a difference.
struct RowJob<'a> {
    row: &'a Row,
    prev: Option<&'a Row>,
    start: u16,
    width: u16,
    index: u16,
    wrapping: bool,
}

impl RowJob<'_> {
    /// The cells' text and attributes (and, for a diff, only the changed
    /// cells); returns where the cursor and the attributes end.
    fn write(&self, out: &mut String, mut prev_pos: Pos, mut prev_attrs: Attrs) -> (Pos, Attrs) {
        let row = self.row;
        let cols = row.cols();
        let mut skip = false;
        let mut erase: Option<(u16, Attrs)> = None;
        let n = match self.prev {
            Some(p) => row.cells.len().min(p.cells.len()),
            None => row.cells.len(),
        };
        let end = n.min(usize::from(self.start) + usize::from(self.width));
        for col in usize::from(self.start)..end {
            let cell = &row.cells[col];
            if skip {
                skip = false;
                continue;
            }
            skip = cell.is_wide();
            let col16 = col as u16;
            let pos = Pos {
                row: self.index,
                col: col16,
            };
            if let Some((ecol, eattrs)) = erase
                && (cell.has_contents() || cell.attrs != eattrs)
            {
                let new_pos = Pos {
                    row: self.index,
                    col: ecol,
                };
                goto_erase(out, self.wrapping, prev_pos, new_pos, cols);
                prev_pos = new_pos;
                if prev_attrs != eattrs {
                    sgr_diff(out, &eattrs, &prev_attrs);
                    prev_attrs = eattrs;
                }
                erase_char(out, pos.col - ecol);
                erase = None;
            }
            let changed = match self.prev {
                Some(p) => !row.same_cell(col, p, col),
                None => *cell != Cell::DEFAULT,
            };
            if !changed {
                continue;
            }
            if cell.has_contents() {
                if pos != prev_pos {
                    if !self.wrapping
                        || prev_pos.row + 1 != pos.row
                        || prev_pos.col < cols - u16::from(cell.is_wide())
                        || pos.col != 0
                    {
                        move_from_to(out, prev_pos, pos);
                    }
                    prev_pos = pos;
                }
                if prev_attrs != cell.attrs {
                    sgr_diff(out, &cell.attrs, &prev_attrs);
                    prev_attrs = cell.attrs;
                }
                prev_pos.col += if cell.is_wide() { 2 } else { 1 };
                row.push_contents(col, out);
            } else if erase.is_none() {
                erase = Some((pos.col, cell.attrs));
            }
        }
        if let Some((ecol, eattrs)) = erase {
            let new_pos = Pos {
                row: self.index,
                col: ecol,
            };
            goto_erase(out, self.wrapping, prev_pos, new_pos, cols);
            prev_pos = new_pos;
            if prev_attrs != eattrs {
                sgr_diff(out, &eattrs, &prev_attrs);
                prev_attrs = eattrs;
            }
            out.push_str("\x1b[K");
        }
        (prev_pos, prev_attrs)
    }
}

/// A row from scratch (vt100's `Row::write_contents_formatted`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn row_formatted(
    out: &mut String,
    row: &Row,
    start: u16,
    width: u16,
    index: u16,
    wrapping: bool,
    prev_pos: Option<Pos>,
    prev_attrs: Option<Attrs>,
) -> (Pos, Attrs) {
    let mut prev_pos = prev_pos.unwrap_or(if wrapping {
        Pos {
            row: index.wrapping_sub(1),
            col: row.cols(),
        }
    } else {
        Pos {
            row: index,
            col: start,
        }
    });
    let mut prev_attrs = prev_attrs.unwrap_or_default();
    if wrapping && row.cells.get(usize::from(start)) == Some(&Cell::DEFAULT) {
        if prev_attrs != Attrs::DEFAULT {
            sgr_diff(out, &Attrs::DEFAULT, &prev_attrs);
            prev_attrs = Attrs::DEFAULT;
        }
        out.push_str(" \x08");
        erase_char(out, 1);
        prev_pos = Pos { row: index, col: 0 };
    }
    let job = RowJob {
        row,
        prev: None,
        start,
        width,
        index,
        wrapping,
    };
    job.write(out, prev_pos, prev_attrs)
}

/// The difference from `prev` to `row` (vt100's `Row::write_contents_diff`
/// over the full width).
#[allow(clippy::too_many_arguments)]
fn row_diff(
    out: &mut String,
    row: &Row,
    prev: &Row,
    index: u16,
    wrapping: bool,
    prev_wrapping: bool,
    mut prev_pos: Pos,
    mut prev_attrs: Attrs,
    width: u16,
) -> (Pos, Attrs) {
    let cols = row.cols();
    let (Some(first), Some(prev_first)) = (row.cells.first(), prev.cells.first()) else {
        return (prev_pos, prev_attrs);
    };
    if wrapping
        && !prev_wrapping
        && row.same_cell(0, prev, 0)
        && prev_pos.row + 1 == index
        && prev_pos.col >= cols - u16::from(prev_first.is_wide())
    {
        if prev_attrs != first.attrs {
            sgr_diff(out, &first.attrs, &prev_attrs);
            prev_attrs = first.attrs;
        }
        let text = prev.contents(0);
        let need_erase = text.is_empty();
        out.push_str(if need_erase { " " } else { &text });
        out.push('\x08');
        if prev_first.is_wide() {
            out.push('\x08');
        }
        if need_erase {
            erase_char(out, 1);
        }
        prev_pos = Pos { row: index, col: 0 };
    }
    let job = RowJob {
        row,
        prev: Some(prev),
        start: 0,
        width,
        index,
        wrapping,
    };
    let (mut prev_pos, mut prev_attrs) = job.write(out, prev_pos, prev_attrs);
    if row.wrapped() != prev.wrapped() {
        let last = usize::from(cols - 1);
        let end = Pos {
            row: index,
            col: if row.cells[last].is_wide_continuation() {
                cols.saturating_sub(2)
            } else {
                cols - 1
            },
        };
        move_from_to(out, prev_pos, end);
        prev_pos = end;
        if !row.wrapped() {
            erase_char(out, 1);
        }
        let end_cell = &row.cells[usize::from(end.col)];
        if end_cell.has_contents() {
            if prev_attrs != end_cell.attrs {
                sgr_diff(out, &end_cell.attrs, &prev_attrs);
                prev_attrs = end_cell.attrs;
            }
            row.push_contents(usize::from(end.col), out);
            prev_pos.col += if end_cell.is_wide() { 2 } else { 1 };
        }
    }
    (prev_pos, prev_attrs)
}

impl Grid {
    /// The whole visible screen from a cleared terminal; the attributes it
    /// leaves set.
    pub(crate) fn write_formatted(&self, out: &mut String) -> Attrs {
        out.push_str("\x1b[m\x1b[H\x1b[J");
        let mut prev_attrs = Attrs::DEFAULT;
        let mut prev_pos = Pos::default();
        let mut wrapping = false;
        for (i, row) in self.visible_rows().enumerate() {
            let (p, a) = row_formatted(
                out,
                row,
                0,
                self.cols,
                i as u16,
                wrapping,
                Some(prev_pos),
                Some(prev_attrs),
            );
            prev_pos = p;
            prev_attrs = a;
            wrapping = row.wrapped();
        }
        self.write_cursor(out, Some(prev_pos), Some(prev_attrs));
        prev_attrs
    }

    /// The visible difference from `prev`; the attributes it leaves set.
    pub(crate) fn write_diff(&self, out: &mut String, prev: &Grid, mut prev_attrs: Attrs) -> Attrs {
        let mut prev_pos = prev.pos;
        let (mut wrapping, mut prev_wrapping) = (false, false);
        for (i, (row, prow)) in self.visible_rows().zip(prev.visible_rows()).enumerate() {
            let (p, a) = row_diff(
                out,
                row,
                prow,
                i as u16,
                wrapping,
                prev_wrapping,
                prev_pos,
                prev_attrs,
                self.cols,
            );
            prev_pos = p;
            prev_attrs = a;
            wrapping = row.wrapped();
            prev_wrapping = prow.wrapped();
        }
        self.write_cursor(out, Some(prev_pos), Some(prev_attrs));
        prev_attrs
    }

    /// Put the terminal's cursor where this grid's is, including the
    /// pending-wrap position just past a row's last column.
    fn write_cursor(&self, out: &mut String, prev_pos: Option<Pos>, prev_attrs: Option<Attrs>) {
        let prev_attrs = prev_attrs.unwrap_or_default();
        let go = |out: &mut String, to: Pos| match prev_pos {
            Some(p) => move_from_to(out, p, to),
            None => move_to(out, to),
        };
        if prev_pos == Some(self.pos) || self.pos.col < self.cols {
            go(out, self.pos);
            return;
        }
        let cols = self.cols;
        let last_of = |r: u16| {
            let row = &self.rows[usize::from(r)];
            let mut col = cols - 1;
            if row.cells[usize::from(col)].is_wide_continuation() {
                col = cols.saturating_sub(2);
            }
            Pos { row: r, col }
        };
        let pos = last_of(self.pos.row);
        let row = &self.rows[usize::from(pos.row)];
        let cell = &row.cells[usize::from(pos.col)];
        if cell.has_contents() {
            go(out, pos);
            sgr_diff(out, &cell.attrs, &prev_attrs);
            row.push_contents(usize::from(pos.col), out);
            sgr_diff(out, &prev_attrs, &cell.attrs);
            return;
        }
        for i in (0..self.pos.row).rev() {
            let pos = last_of(i);
            let row = &self.rows[usize::from(i)];
            let cell = &row.cells[usize::from(pos.col)];
            if !cell.has_contents() {
                continue;
            }
            match prev_pos {
                Some(p) => {
                    if p.row != i || p.col < cols {
                        move_from_to(out, p, pos);
                        sgr_diff(out, &cell.attrs, &prev_attrs);
                        row.push_contents(usize::from(pos.col), out);
                        sgr_diff(out, &prev_attrs, &cell.attrs);
                    }
                }
                None => {
                    move_to(out, pos);
                    sgr_diff(out, &cell.attrs, &prev_attrs);
                    row.push_contents(usize::from(pos.col), out);
                    sgr_diff(out, &prev_attrs, &cell.attrs);
                }
            }
            out.push_str(&"\n".repeat(usize::from(self.pos.row - i)));
            return;
        }
        let pos = Pos {
            row: self.pos.row,
            col: cols - 1,
        };
        go(out, pos);
        out.push(' ');
        let end = self.rows[usize::from(pos.row)].cells[usize::from(pos.col)];
        sgr_diff(out, &end.attrs, &prev_attrs);
        out.push_str("\x1b7\x08");
        erase_char(out, 1);
        out.push_str("\x1b8");
        sgr_diff(out, &prev_attrs, &end.attrs);
    }
}

use super::term::{MouseEncoding, MouseMode, Term};

fn flag(out: &mut String, on: bool, set: &str, reset: &str) {
    out.push_str(if on { set } else { reset });
}

fn mouse_mode(out: &mut String, m: MouseMode, prev: MouseMode) {
    if m == prev {
        return;
    }
    out.push_str(match (m, prev) {
        (MouseMode::None, MouseMode::None) => "",
        (MouseMode::None, MouseMode::Press) => "\x1b[?9l",
        (MouseMode::None, MouseMode::PressRelease) => "\x1b[?1000l",
        (MouseMode::None, MouseMode::ButtonMotion) => "\x1b[?1002l",
        (MouseMode::None, MouseMode::AnyMotion) => "\x1b[?1003l",
        (MouseMode::Press, _) => "\x1b[?9h",
        (MouseMode::PressRelease, _) => "\x1b[?1000h",
        (MouseMode::ButtonMotion, _) => "\x1b[?1002h",
        (MouseMode::AnyMotion, _) => "\x1b[?1003h",
    });
}

fn mouse_encoding(out: &mut String, e: MouseEncoding, prev: MouseEncoding) {
    if e == prev {
        return;
    }
    out.push_str(match (e, prev) {
        (MouseEncoding::Default, MouseEncoding::Utf8) => "\x1b[?1005l",
        (MouseEncoding::Default, MouseEncoding::Sgr) => "\x1b[?1006l",
        (MouseEncoding::Default, MouseEncoding::Default) => "",
        (MouseEncoding::Utf8, _) => "\x1b[?1005h",
        (MouseEncoding::Sgr, _) => "\x1b[?1006h",
    });
}

fn cursor_style(out: &mut String, s: u8, prev: u8) {
    if s != prev {
        let _ = write!(out, "\x1b[{s} q");
    }
}

impl Term {
    /// vt100's `Screen::state_formatted`.
    pub(crate) fn state_formatted(&self) -> String {
        use super::term::{APP_CURSOR, APP_KEYPAD, BRACKETED_PASTE, HIDE_CURSOR};
        let mut out = String::new();
        flag(&mut out, self.mode(HIDE_CURSOR), "\x1b[?25l", "\x1b[?25h");
        let left = self.grid().write_formatted(&mut out);
        sgr_diff(&mut out, &self.attrs, &left);
        flag(&mut out, self.mode(APP_KEYPAD), "\x1b=", "\x1b>");
        flag(&mut out, self.mode(APP_CURSOR), "\x1b[?1h", "\x1b[?1l");
        flag(
            &mut out,
            self.mode(BRACKETED_PASTE),
            "\x1b[?2004h",
            "\x1b[?2004l",
        );
        mouse_mode(&mut out, self.mouse_mode, MouseMode::None);
        mouse_encoding(&mut out, self.mouse_encoding, MouseEncoding::Default);
        cursor_style(&mut out, self.cursor_style, 0);
        out
    }

    /// vt100's `Screen::state_diff`.
    pub(crate) fn state_diff(&self, prev: &Term) -> String {
        use super::term::{APP_CURSOR, APP_KEYPAD, BRACKETED_PASTE, HIDE_CURSOR};
        let mut out = String::new();
        if self.mode(HIDE_CURSOR) != prev.mode(HIDE_CURSOR) {
            flag(&mut out, self.mode(HIDE_CURSOR), "\x1b[?25l", "\x1b[?25h");
        }
        let left = self.grid().write_diff(&mut out, prev.grid(), prev.attrs);
        sgr_diff(&mut out, &self.attrs, &left);
        if self.mode(APP_KEYPAD) != prev.mode(APP_KEYPAD) {
            flag(&mut out, self.mode(APP_KEYPAD), "\x1b=", "\x1b>");
        }
        if self.mode(APP_CURSOR) != prev.mode(APP_CURSOR) {
            flag(&mut out, self.mode(APP_CURSOR), "\x1b[?1h", "\x1b[?1l");
        }
        if self.mode(BRACKETED_PASTE) != prev.mode(BRACKETED_PASTE) {
            flag(
                &mut out,
                self.mode(BRACKETED_PASTE),
                "\x1b[?2004h",
                "\x1b[?2004l",
            );
        }
        mouse_mode(&mut out, self.mouse_mode, prev.mouse_mode);
        mouse_encoding(&mut out, self.mouse_encoding, prev.mouse_encoding);
        cursor_style(&mut out, self.cursor_style, prev.cursor_style);
        out
    }

    /// vt100's `Screen::rows_formatted(0, cols)`.
    pub(crate) fn rows_formatted(&self) -> Vec<String> {
        let grid = self.grid();
        let mut wrapping = false;
        grid.visible_rows()
            .enumerate()
            .map(|(i, row)| {
                let mut out = String::new();
                row_formatted(&mut out, row, 0, grid.cols, i as u16, wrapping, None, None);
                wrapping = row.wrapped();
                out
            })
            .collect()
    }
}
