//! A row of cells: its wrap flag and the text of any cell that holds more
//! than one code point. Rows are reused, never reallocated per line.

use super::cell::{Attrs, CLUSTER, Cell};
use unicode_width::UnicodeWidthStr as _;

/// A cell's text stops growing at this many bytes (as the reference
/// terminal model keeps at most 22 bytes and refuses a code point once 18
/// are used).
const CLUSTER_FULL: usize = 18;

#[derive(Debug, Clone, Default)]
pub struct Row {
    pub(crate) cells: Vec<Cell>,
    pub(crate) wrapped: bool,
    clusters: Vec<String>,
}

impl Row {
    pub fn new(cols: u16) -> Row {
        Row {
            cells: vec![Cell::DEFAULT; usize::from(cols)],
            wrapped: false,
            clusters: Vec::new(),
        }
    }

    /// Make this (recycled) row a blank row of `cols` cells; keeps its
    /// allocation.
    pub fn recycle(&mut self, cols: u16) {
        self.cells.clear();
        self.cells.resize(usize::from(cols), Cell::DEFAULT);
        self.wrapped = false;
        self.clusters.clear();
    }

    pub fn cols(&self) -> u16 {
        u16::try_from(self.cells.len()).unwrap_or(u16::MAX)
    }

    pub fn wrapped(&self) -> bool {
        self.wrapped
    }

    pub fn wrap(&mut self, w: bool) {
        self.wrapped = w;
    }

    pub fn get(&self, col: u16) -> Option<&Cell> {
        self.cells.get(usize::from(col))
    }

    /// The text of cell `col` appended to `out`.
    pub fn push_contents(&self, col: usize, out: &mut String) {
        let c = &self.cells[col];
        if c.is_cluster() {
            if let Some(s) = self.clusters.get(c.ch as usize) {
                out.push_str(s);
            }
        } else if c.ch != 0
            && let Some(ch) = char::from_u32(c.ch)
        {
            out.push(ch);
        }
    }

    /// The text of cell `col`.
    pub fn contents(&self, col: usize) -> String {
        let mut s = String::new();
        self.push_contents(col, &mut s);
        s
    }

    /// Whether cell `a` here and cell `b` of `other` are the same value.
    pub fn same_cell(&self, a: usize, other: &Row, b: usize) -> bool {
        let (x, y) = (&self.cells[a], &other.cells[b]);
        if !x.is_cluster() && !y.is_cluster() {
            return x == y;
        }
        x.attrs == y.attrs
            && (x.flags & !CLUSTER) == (y.flags & !CLUSTER)
            && self.contents(a) == other.contents(b)
    }

    pub fn clear(&mut self, attrs: Attrs) {
        self.cells.fill(Cell::blank(attrs));
        self.wrapped = false;
        self.clusters.clear();
    }

    pub fn reset(&mut self) {
        self.cells.fill(Cell::DEFAULT);
        self.wrapped = false;
        self.clusters.clear();
    }

    /// Put `s` (one or more code points) in cell `col` as one cluster.
    fn store_cluster(&mut self, col: usize, s: String) {
        let c = self.cells[col];
        if c.is_cluster()
            && let Some(slot) = self.clusters.get_mut(c.ch as usize)
        {
            *slot = s;
            return;
        }
        if self.clusters.len() >= self.cells.len() + 8 {
            self.compact_clusters();
        }
        let idx = self.clusters.len() as u32;
        self.clusters.push(s);
        let cell = &mut self.cells[col];
        cell.ch = idx;
        cell.flags |= CLUSTER;
    }

    /// Drop cluster texts no cell points at any more.
    fn compact_clusters(&mut self) {
        let mut kept = Vec::new();
        for cell in &mut self.cells {
            if cell.is_cluster() {
                let s = self
                    .clusters
                    .get_mut(cell.ch as usize)
                    .map(std::mem::take)
                    .unwrap_or_default();
                cell.ch = kept.len() as u32;
                kept.push(s);
            }
        }
        self.clusters = kept;
    }

    /// Append a code point to cell `col` (a combining mark or a variation
    /// selector); an empty cell gets a space base first. A cell that
    /// becomes two columns wide through U+FE0F is marked wide.
    pub fn append(&mut self, col: usize, c: char) {
        let mut s = self.contents(col);
        if s.len() >= CLUSTER_FULL {
            return;
        }
        if s.is_empty() {
            s.push(' ');
        }
        s.push(c);
        if c == '\u{FE0F}' {
            let wide = s.width() > 1;
            self.cells[col].set_wide(wide);
        }
        self.store_cluster(col, s);
    }

    /// Set cell `col` to the text `s` (first code point decides the width,
    /// the rest are appended) with `attrs`.
    pub fn set_contents(&mut self, col: usize, s: &str, attrs: Attrs) {
        let mut chars = s.chars();
        let Some(first) = chars.next() else {
            return;
        };
        let wide = unicode_width::UnicodeWidthChar::width(first).unwrap_or(1) > 1;
        self.cells[col] = Cell::plain(first, attrs, wide);
        for c in chars {
            self.append(col, c);
        }
    }

    /// Insert `count` blank cells at `i`; cells pushed off the end drop.
    pub fn insert(&mut self, i: u16, count: u16) {
        let i = usize::from(i);
        let count = usize::from(count).min(self.cells.len().saturating_sub(i));
        if count == 0 {
            self.wrapped = false;
            return;
        }
        let cont = self.cells[i].is_wide_continuation();
        if cont {
            self.cells[i].set_wide_continuation(false);
        }
        let slice = &mut self.cells[i..];
        slice.rotate_right(count);
        slice[..count].fill(Cell::DEFAULT);
        if cont {
            self.cells[i].set_wide_continuation(true);
        }
        self.set_truncated();
    }

    /// Remove the cells in `start..end`; blank cells fill in at the end.
    pub fn remove(&mut self, start: u16, end: u16) {
        self.wrapped = false;
        if start >= end {
            return;
        }
        self.clear_wide(start);
        if end - 1 != start {
            self.clear_wide(end - 1);
        }
        let count = usize::from(end - start);
        let slice = &mut self.cells[usize::from(start)..];
        slice[..count].fill(Cell::DEFAULT);
        slice.rotate_left(count);
    }

    /// [`Self::erase`] of each column of `from..to` in turn, the columns
    /// between the first and the last two as one fill: each of those ends
    /// cleared whatever its neighbours held, and none is among the row's
    /// last two (whose erase clears the wrap). What the last of them does to
    /// the next (a wide character's erase clears its other half first) is
    /// done as the erases in turn would have.
    pub fn erase_range(&mut self, from: u16, to: u16, attrs: Attrs) {
        let (a, b) = (from.saturating_add(1), to.saturating_sub(2));
        if a >= b {
            for col in from..to {
                self.erase(col, attrs);
            }
            return;
        }
        // A column is wide when its turn comes unless the one before it was
        // (that erase cleared it): in a stretch of wide cells, every other
        // one from the stretch's first. So the last filled column was, when
        // the stretch of wide cells that ends there is odd.
        let mut run = 0;
        for cell in self.cells[usize::from(from)..usize::from(b)].iter().rev() {
            if !cell.is_wide() {
                break;
            }
            run += 1;
        }
        let wide = run % 2 == 1;
        self.erase(from, attrs);
        self.cells[usize::from(a)..usize::from(b)].fill(Cell::blank(attrs));
        if wide {
            let next = &mut self.cells[usize::from(b)];
            next.clear(next.attrs);
        }
        for col in b..to {
            self.erase(col, attrs);
        }
    }

    pub fn erase(&mut self, i: u16, attrs: Attrs) {
        let idx = usize::from(i);
        let wide = self.cells[idx].is_wide();
        self.clear_wide(i);
        self.cells[idx].clear(attrs);
        if i == self.cols().saturating_sub(if wide { 2 } else { 1 }) {
            self.wrapped = false;
        }
    }

    pub fn truncate(&mut self, len: u16) {
        self.cells.truncate(usize::from(len));
        self.set_truncated();
    }

    fn set_truncated(&mut self) {
        self.wrapped = false;
        if let Some(last) = self.cells.last_mut()
            && last.is_wide()
        {
            last.clear(last.attrs);
        }
    }

    /// Never shrinks; growing clears the wrap flag.
    pub fn grow(&mut self, len: u16) {
        if self.cells.len() < usize::from(len) {
            self.cells.resize(usize::from(len), Cell::DEFAULT);
            self.wrapped = false;
        }
    }

    pub fn resize(&mut self, len: u16) {
        match usize::from(len).cmp(&self.cells.len()) {
            std::cmp::Ordering::Equal => {}
            std::cmp::Ordering::Less => self.truncate(len),
            std::cmp::Ordering::Greater => self.grow(len),
        }
    }

    /// Drop trailing blank cells (a row going into scrollback); the
    /// allocation stays for the row's reuse.
    pub fn trim(&mut self) {
        let keep = self
            .cells
            .iter()
            .rposition(|c| *c != Cell::DEFAULT)
            .map_or(0, |i| i + 1);
        self.cells.truncate(keep);
    }

    /// Clear the other half of a wide character at `col`, if any.
    pub fn clear_wide(&mut self, col: u16) {
        let idx = usize::from(col);
        let cell = self.cells[idx];
        let other = if cell.is_wide() {
            if idx + 1 >= self.cells.len() {
                self.cells[idx].clear(cell.attrs);
                return;
            }
            idx + 1
        } else if cell.is_wide_continuation() {
            idx - 1
        } else {
            return;
        };
        let a = self.cells[other].attrs;
        self.cells[other].clear(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::screen::grid::cell::{CONTINUATION, Color};

    /// Every row of `cols` cells made of narrow, blank and wide (with its
    /// continuation) cells, each column's attributes its own.
    fn rows(cols: usize) -> Vec<Vec<Cell>> {
        let attrs = |i: usize| Attrs {
            fg: Color::Idx(i as u8),
            ..Attrs::DEFAULT
        };
        if cols == 0 {
            return vec![Vec::new()];
        }
        let mut out = Vec::new();
        for mut head in rows(cols - 1) {
            let i = head.len();
            head.push(Cell::plain('a', attrs(i), false));
            out.push(head.clone());
            head.pop();
            head.push(Cell::blank(attrs(i)));
            out.push(head);
        }
        if cols >= 2 {
            for mut head in rows(cols - 2) {
                let i = head.len();
                head.push(Cell::plain('中', attrs(i), true));
                head.push(Cell {
                    flags: CONTINUATION,
                    ..Cell::blank(attrs(i + 1))
                });
                out.push(head);
            }
        }
        // A wide character's first half alone in the last column too.
        for mut head in rows(cols - 1) {
            head.push(Cell::plain('中', attrs(cols - 1), true));
            out.push(head);
        }
        out
    }

    #[test]
    fn erase_range_is_each_columns_erase_in_turn() {
        let with = Attrs {
            bg: Color::Rgb(1, 2, 3),
            ..Attrs::DEFAULT
        };
        let mut checked = 0;
        for cols in 1..=7u16 {
            for cells in rows(usize::from(cols)) {
                for wrapped in [false, true] {
                    for from in 0..=cols {
                        for to in from..=cols {
                            let start = Row {
                                cells: cells.clone(),
                                wrapped,
                                clusters: Vec::new(),
                            };
                            let (mut one, mut each) = (start.clone(), start);
                            one.erase_range(from, to, with);
                            for col in from..to {
                                each.erase(col, with);
                            }
                            assert_eq!(
                                (&one.cells, one.wrapped),
                                (&each.cells, each.wrapped),
                                "{cells:?} wrapped {wrapped}, {from}..{to}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }
}
