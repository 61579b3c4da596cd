//! One screen's rows, cursor and scroll region, and (for the main screen)
//! its scrollback: a ring of rows whose evicted rows are reused as the new
//! blank lines, so scrolling allocates nothing once the ring is full.

use super::cell::{Attrs, Cell};
use super::row::Row;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    pub row: u16,
    pub col: u16,
}

#[derive(Debug, Clone)]
struct Scrollback {
    rows: VecDeque<Row>,
    capacity: usize,
    offset: usize,
    /// Rows there would be with no capacity limit.
    unbounded_len: usize,
}

#[derive(Debug, Clone)]
pub struct Grid {
    pub(crate) rows_n: u16,
    pub(crate) cols: u16,
    pub(crate) pos: Pos,
    saved_pos: Pos,
    pub(crate) rows: Vec<Row>,
    scroll_top: u16,
    scroll_bottom: u16,
    origin_mode: bool,
    saved_origin_mode: bool,
    scrollback: Option<Scrollback>,
    /// Rows evicted from the scrollback, kept for reuse.
    spare: Vec<Row>,
}

impl Grid {
    pub fn new(rows: u16, cols: u16, scrollback: Option<usize>) -> Grid {
        Grid {
            rows_n: rows,
            cols,
            pos: Pos::default(),
            saved_pos: Pos::default(),
            rows: Vec::new(),
            scroll_top: 0,
            scroll_bottom: rows - 1,
            origin_mode: false,
            saved_origin_mode: false,
            scrollback: scrollback.map(|capacity| Scrollback {
                rows: VecDeque::new(),
                capacity,
                offset: 0,
                unbounded_len: 0,
            }),
            spare: Vec::new(),
        }
    }

    pub fn allocate_rows(&mut self) {
        if self.rows.is_empty() {
            self.rows = (0..self.rows_n).map(|_| Row::new(self.cols)).collect();
        }
    }

    pub fn clear(&mut self) {
        self.pos = Pos::default();
        self.saved_pos = Pos::default();
        for row in &mut self.rows {
            row.reset();
        }
        self.scroll_top = 0;
        self.scroll_bottom = self.rows_n - 1;
        self.origin_mode = false;
        self.saved_origin_mode = false;
    }

    pub fn set_size(&mut self, rows: u16, cols: u16) {
        if rows == self.rows_n && cols == self.cols {
            return;
        }
        self.scroll_top = 0;
        self.scroll_bottom = self.rows_n - 1;
        if let Some(sb) = &mut self.scrollback {
            sb.offset = 0;
        }
        let diff = self.rows_n.abs_diff(rows);
        let is_empty = self.rows.is_empty();
        let pos_diff = if is_empty {
            0
        } else if rows < self.rows_n {
            let excess_bottom = self.rows_n - self.pos.row - 1;
            let pushed = diff.saturating_sub(excess_bottom);
            self.scroll_up(pushed);
            self.rows.truncate(usize::from(rows));
            pushed
        } else if let Some(sb) = &mut self.scrollback {
            let pulled = u16::try_from(sb.unbounded_len)
                .unwrap_or(u16::MAX)
                .min(diff);
            let from_sb = sb.rows.len().min(usize::from(pulled));
            let blank = usize::from(pulled) - from_sb;
            let start = sb.rows.len() - from_sb;
            let mut top: Vec<Row> = (0..blank).map(|_| Row::new(cols)).collect();
            top.extend(sb.rows.drain(start..));
            sb.unbounded_len -= usize::from(pulled);
            self.rows.splice(0..0, top);
            self.rows.resize_with(usize::from(rows), || Row::new(cols));
            pulled
        } else {
            self.rows.resize_with(usize::from(rows), || Row::new(cols));
            0
        };
        if let Some(last) = self.rows.last_mut() {
            last.wrap(false);
        }
        for row in &mut self.rows {
            row.resize(cols);
        }
        if rows < self.rows_n {
            self.pos.row = self.pos.row.saturating_sub(pos_diff);
            self.saved_pos.row = self.saved_pos.row.saturating_sub(pos_diff).min(rows - 1);
        } else {
            self.pos.row += pos_diff;
            self.saved_pos.row += pos_diff;
        }
        self.pos.col = self.pos.col.min(cols - 1);
        self.saved_pos.col = self.saved_pos.col.min(cols - 1);
        self.scroll_bottom = rows - 1;
        self.rows_n = rows;
        self.cols = cols;
    }

    pub fn set_pos(&mut self, mut pos: Pos) {
        if self.origin_mode {
            pos.row = pos.row.saturating_add(self.scroll_top);
        }
        self.pos = pos;
        self.row_clamp_top(self.origin_mode);
        self.row_clamp_bottom(self.origin_mode);
        self.col_clamp();
    }

    pub fn save_cursor(&mut self) {
        self.saved_pos = self.pos;
        self.saved_origin_mode = self.origin_mode;
    }

    pub fn restore_cursor(&mut self) {
        self.pos = self.saved_pos;
        self.origin_mode = self.saved_origin_mode;
    }

    /// The rows in view: the scrollback's last `offset` rows, then the
    /// screen, `rows_n` in all.
    pub fn visible_rows(&self) -> impl Iterator<Item = &Row> {
        self.scrollback
            .as_ref()
            .map(|s| s.rows.iter().skip(s.rows.len() - s.offset))
            .into_iter()
            .flatten()
            .chain(&self.rows)
            .take(self.rows.len())
    }

    pub fn scrollback_len(&self) -> usize {
        self.scrollback.as_ref().map_or(0, |s| s.rows.len())
    }

    pub fn scrollback_capacity(&self) -> usize {
        self.scrollback.as_ref().map_or(0, |s| s.capacity)
    }

    pub fn scrollback(&self) -> usize {
        self.scrollback.as_ref().map_or(0, |s| s.offset)
    }

    fn grow_visible(sb: &mut Scrollback, rows: u16, cols: u16) {
        let len = sb.rows.len();
        for row in sb
            .rows
            .iter_mut()
            .skip(len - sb.offset)
            .take(usize::from(rows))
        {
            row.grow(cols);
        }
    }

    pub fn set_scrollback(&mut self, rows: usize) {
        let (n, cols) = (self.rows_n, self.cols);
        if let Some(sb) = &mut self.scrollback {
            sb.offset = rows.min(sb.rows.len());
            Self::grow_visible(sb, n, cols);
        }
    }

    #[inline]
    pub fn row_mut(&mut self, row: u16) -> &mut Row {
        &mut self.rows[usize::from(row)]
    }

    #[inline]
    pub fn cell(&self, pos: Pos) -> Option<&Cell> {
        self.rows.get(usize::from(pos.row))?.get(pos.col)
    }

    pub fn erase_all(&mut self, attrs: Attrs) {
        for row in &mut self.rows {
            row.clear(attrs);
        }
    }

    pub fn erase_all_forward(&mut self, attrs: Attrs) {
        let from = usize::from(self.pos.row) + 1;
        for row in self.rows.iter_mut().skip(from) {
            row.clear(attrs);
        }
        self.erase_row_forward(attrs);
    }

    pub fn erase_all_backward(&mut self, attrs: Attrs) {
        let to = usize::from(self.pos.row);
        for row in self.rows.iter_mut().take(to) {
            row.clear(attrs);
        }
        self.erase_row_backward(attrs);
    }

    pub fn erase_all_scrollback(&mut self) {
        if let Some(sb) = &mut self.scrollback {
            self.spare.extend(sb.rows.drain(..));
            sb.unbounded_len = 0;
            sb.offset = 0;
        }
    }

    pub fn erase_row(&mut self, attrs: Attrs) {
        let r = self.pos.row;
        self.row_mut(r).clear(attrs);
    }

    pub fn erase_row_forward(&mut self, attrs: Attrs) {
        let (pos, cols) = (self.pos, self.cols);
        self.row_mut(pos.row).erase_range(pos.col, cols, attrs);
    }

    pub fn erase_row_backward(&mut self, attrs: Attrs) {
        let (pos, cols) = (self.pos, self.cols);
        self.row_mut(pos.row)
            .erase_range(0, pos.col.min(cols - 1) + 1, attrs);
    }

    pub fn insert_cells(&mut self, count: u16) {
        let pos = self.pos;
        self.row_mut(pos.row).insert(pos.col, count);
    }

    pub fn delete_cells(&mut self, count: u16) {
        let (pos, cols) = (self.pos, self.cols);
        let end = pos.col.saturating_add(count).min(cols);
        self.row_mut(pos.row).remove(pos.col, end);
    }

    pub fn erase_cells(&mut self, count: u16, attrs: Attrs) {
        let (pos, cols) = (self.pos, self.cols);
        let end = pos.col.saturating_add(count).min(cols);
        self.row_mut(pos.row).erase_range(pos.col, end, attrs);
    }

    fn in_region(&self) -> bool {
        (self.scroll_top..=self.scroll_bottom).contains(&self.pos.row)
    }

    pub fn insert_lines(&mut self, count: u16) {
        if count == 0 || !self.in_region() {
            return;
        }
        let between = &mut self.rows[usize::from(self.pos.row)..=usize::from(self.scroll_bottom)];
        let n = usize::from(count).min(between.len());
        between.rotate_right(n);
        for row in &mut between[..n] {
            row.reset();
        }
        let b = self.scroll_bottom;
        self.row_mut(b).wrap(false);
    }

    pub fn delete_lines(&mut self, count: u16) {
        if !self.in_region() {
            return;
        }
        let between = &mut self.rows[usize::from(self.pos.row)..=usize::from(self.scroll_bottom)];
        let n = usize::from(count).min(between.len());
        for row in &mut between[..n] {
            row.reset();
        }
        between.rotate_left(n);
    }

    pub fn scroll_up(&mut self, count: u16) {
        let to_scrollback = self.scroll_top == 0;
        let (top, bottom) = (
            usize::from(self.scroll_top),
            usize::from(self.scroll_bottom),
        );
        let n = usize::from(count).min(bottom - top + 1);
        match self.scrollback.as_mut().filter(|_| to_scrollback) {
            Some(sb) => {
                sb.unbounded_len = sb.unbounded_len.saturating_add(n);
                let pushed = n.min(sb.capacity);
                let overflow = (sb.rows.len() + pushed).saturating_sub(sb.capacity);
                self.spare.extend(sb.rows.drain(..overflow));
                let reset = n - pushed;
                for row in &mut self.rows[top..top + reset] {
                    row.reset();
                }
                for i in top + reset..top + n {
                    let fresh = match self.spare.pop() {
                        Some(mut r) => {
                            r.recycle(self.cols);
                            r
                        }
                        None => Row::new(self.cols),
                    };
                    let mut old = std::mem::replace(&mut self.rows[i], fresh);
                    old.trim();
                    sb.rows.push_back(old);
                }
                if sb.offset > 0 {
                    sb.offset = sb.offset.saturating_add(n).min(sb.rows.len());
                }
                Self::grow_visible(sb, self.rows_n, self.cols);
            }
            None => {
                for row in &mut self.rows[top..top + n] {
                    row.reset();
                }
            }
        }
        self.rows[top..=bottom].rotate_left(n);
    }

    pub fn scroll_down(&mut self, count: u16) {
        if count == 0 {
            return;
        }
        let between =
            &mut self.rows[usize::from(self.scroll_top)..=usize::from(self.scroll_bottom)];
        let n = usize::from(count).min(between.len());
        between.rotate_right(n);
        for row in &mut between[..n] {
            row.reset();
        }
        let b = self.scroll_bottom;
        self.row_mut(b).wrap(false);
    }

    pub fn set_scroll_region(&mut self, top: u16, bottom: u16) {
        let bottom = bottom.min(self.rows_n - 1);
        if top < bottom {
            self.scroll_top = top;
            self.scroll_bottom = bottom;
        } else {
            self.scroll_top = 0;
            self.scroll_bottom = self.rows_n - 1;
        }
        self.pos = Pos {
            row: self.scroll_top,
            col: 0,
        };
    }

    pub fn set_origin_mode(&mut self, on: bool) {
        self.origin_mode = on;
        self.set_pos(Pos::default());
    }

    pub fn row_inc_clamp(&mut self, count: u16) {
        let in_region = self.in_region();
        self.pos.row = self.pos.row.saturating_add(count);
        self.row_clamp_bottom(in_region);
    }

    pub fn row_inc_scroll(&mut self, count: u16) -> u16 {
        let in_region = self.in_region();
        self.pos.row = self.pos.row.saturating_add(count);
        let lines = self.row_clamp_bottom(in_region);
        if in_region {
            self.scroll_up(lines);
            lines
        } else {
            0
        }
    }

    pub fn row_dec_clamp(&mut self, count: u16) {
        let in_region = self.in_region();
        self.pos.row = self.pos.row.saturating_sub(count);
        self.row_clamp_top(in_region);
    }

    pub fn row_dec_scroll(&mut self, count: u16) {
        let in_region = self.in_region();
        let extra = count.saturating_sub(self.pos.row);
        self.pos.row = self.pos.row.saturating_sub(count);
        let lines = self.row_clamp_top(in_region);
        self.scroll_down(lines + extra);
    }

    pub fn row_set(&mut self, i: u16) {
        self.pos.row = i.min(self.rows_n - 1);
    }

    pub fn col_inc(&mut self, count: u16) {
        self.pos.col = self.pos.col.saturating_add(count);
    }

    pub fn col_inc_clamp(&mut self, count: u16) {
        self.pos.col = self.pos.col.saturating_add(count);
        self.col_clamp();
    }

    pub fn col_dec(&mut self, count: u16) {
        self.pos.col = self.pos.col.saturating_sub(count);
    }

    pub fn col_tab(&mut self) {
        self.pos.col -= self.pos.col % 8;
        self.pos.col = self.pos.col.saturating_add(8);
        self.col_clamp();
    }

    pub fn col_set(&mut self, i: u16) {
        self.pos.col = i;
        self.col_clamp();
    }

    /// Move to the next line when a character `width` wide does not fit;
    /// mark the row left as wrapped when `wrap`.
    #[inline]
    pub fn col_wrap(&mut self, width: u16, wrap: bool) {
        if self.pos.col <= self.cols - width {
            return;
        }
        let mut prev = self.pos;
        self.pos.col = 0;
        let scrolled = self.row_inc_scroll(1);
        if prev.row == 0 && scrolled > 0 {
            return;
        }
        prev.row -= scrolled;
        let next = self.pos.row;
        self.row_mut(prev.row).wrap(wrap && prev.row + 1 == next);
    }

    fn row_clamp_top(&mut self, limit: bool) -> u16 {
        if limit && self.pos.row < self.scroll_top {
            let n = self.scroll_top - self.pos.row;
            self.pos.row = self.scroll_top;
            n
        } else {
            0
        }
    }

    fn row_clamp_bottom(&mut self, limit: bool) -> u16 {
        let bottom = if limit {
            self.scroll_bottom
        } else {
            self.rows_n - 1
        };
        if self.pos.row > bottom {
            let n = self.pos.row - bottom;
            self.pos.row = bottom;
            n
        } else {
            0
        }
    }

    fn col_clamp(&mut self) {
        if self.pos.col > self.cols - 1 {
            self.pos.col = self.cols - 1;
        }
    }
}
