//! What each control function, escape and CSI/OSC sequence the parser
//! reports does to the terminal state; what the grid does not keep goes to
//! the hooks (title, OSC 7501, sync blocks, queries).

use super::cell::{Attrs, BOLD, Color, DIM, INVERSE, ITALIC, UNDERLINE};
use super::grid::Pos;
use super::term::{
    APP_CURSOR, APP_KEYPAD, BRACKETED_PASTE, HIDE_CURSOR, MouseEncoding, MouseMode, Term,
};
use crate::screen::Hooks;

/// The terminal state and the hooks, driven by the parser.
#[derive(Debug)]
pub struct Driver {
    pub term: Term,
    pub hooks: Hooks,
    /// Set when a sequence ended that leaves the parser in its ground
    /// state (a CSI, an ESC, a BEL-ended OSC dispatched); the caller
    /// clears it before handing the parser bytes.
    pub landed: bool,
}

/// A CSI's parameters as vte gives them: each parameter with its
/// subparameters.
pub trait Params {
    fn each(&self) -> impl Iterator<Item = &[u16]>;
    fn is_empty(&self) -> bool;
}

impl Params for vte::Params {
    fn each(&self) -> impl Iterator<Item = &[u16]> {
        self.iter()
    }
    fn is_empty(&self) -> bool {
        vte::Params::is_empty(self)
    }
}

/// Parameters without subparameters (what `Model::process` reads itself).
impl Params for [u16] {
    fn each(&self) -> impl Iterator<Item = &[u16]> {
        self.chunks(1)
    }
    fn is_empty(&self) -> bool {
        <[u16]>::is_empty(self)
    }
}

fn p1<P: Params + ?Sized>(params: &P, default: u16) -> u16 {
    let first = params
        .each()
        .next()
        .map_or(0, |x| x.first().copied().unwrap_or(0));
    if first == 0 { default } else { first }
}

fn p2<P: Params + ?Sized>(params: &P, d1: u16, d2: u16) -> (u16, u16) {
    let mut it = params.each();
    let a = it.next().map_or(0, |x| x.first().copied().unwrap_or(0));
    let b = it.next().map_or(0, |x| x.first().copied().unwrap_or(0));
    (if a == 0 { d1 } else { a }, if b == 0 { d2 } else { b })
}

impl Driver {
    /// Hand a CSI the grid does not handle to the hooks (they read only
    /// the few final bytes of queries and the sync mode).
    fn unhandled_csi<P: Params + ?Sized>(
        &mut self,
        i1: Option<u8>,
        i2: Option<u8>,
        params: &P,
        c: char,
    ) {
        if matches!(c, 'c' | 'n' | 'p' | 'h' | 'l') {
            let list: Vec<&[u16]> = params.each().collect();
            self.hooks.on_csi(i1, i2, &list, c);
        }
    }

    fn ed(&mut self, mode: u16) -> bool {
        let attrs = self.term.attrs;
        let g = self.term.grid_mut();
        match mode {
            0 => g.erase_all_forward(attrs),
            1 => g.erase_all_backward(attrs),
            2 => g.erase_all(attrs),
            3 => g.erase_all_scrollback(),
            _ => return false,
        }
        true
    }

    fn el(&mut self, mode: u16) -> bool {
        let attrs = self.term.attrs;
        let g = self.term.grid_mut();
        match mode {
            0 => g.erase_row_forward(attrs),
            1 => g.erase_row_backward(attrs),
            2 => g.erase_row(attrs),
            _ => return false,
        }
        true
    }

    fn decset<P: Params + ?Sized>(&mut self, params: &P, on: bool, i2: Option<u8>, c: char) {
        for param in params.each() {
            let t = &mut self.term;
            match param {
                [1] => t.set_mode(APP_CURSOR, on),
                [6] => t.grid_mut().set_origin_mode(on),
                [9] => t.set_mouse_mode(MouseMode::Press, on),
                [25] => t.set_mode(HIDE_CURSOR, !on),
                [47] => {
                    if on {
                        t.enter_alternate();
                    } else {
                        t.exit_alternate();
                    }
                }
                [1000] => t.set_mouse_mode(MouseMode::PressRelease, on),
                [1002] => t.set_mouse_mode(MouseMode::ButtonMotion, on),
                [1003] => t.set_mouse_mode(MouseMode::AnyMotion, on),
                [1005] => t.set_mouse_encoding(MouseEncoding::Utf8, on),
                [1006] => t.set_mouse_encoding(MouseEncoding::Sgr, on),
                [1049] => {
                    if on {
                        t.save_cursor();
                        t.alt.clear();
                        t.enter_alternate();
                    } else {
                        t.exit_alternate();
                        t.restore_cursor();
                    }
                }
                [2004] => t.set_mode(BRACKETED_PASTE, on),
                _ => self.unhandled_csi(Some(b'?'), i2, params, c),
            }
        }
    }

    /// SGR; stops at the first parameter it cannot read, as the reference
    /// model does.
    pub(super) fn sgr<P: Params + ?Sized>(&mut self, params: &P) {
        if params.is_empty() {
            self.term.attrs = Attrs::DEFAULT;
            return;
        }
        let mut it = params.each();
        let u8_of = |n: u16| u8::try_from(n).ok();
        fn next_u8<'a>(it: &mut impl Iterator<Item = &'a [u16]>) -> Option<u8> {
            match it.next() {
                Some(&[n]) => u8::try_from(n).ok(),
                _ => None,
            }
        }
        while let Some(param) = it.next() {
            let a = &mut self.term.attrs;
            match param {
                [0] => *a = Attrs::DEFAULT,
                [1] => a.set_intensity(BOLD),
                [2] => a.set_intensity(DIM),
                [3] => a.set_bit(ITALIC, true),
                [4] => a.set_bit(UNDERLINE, true),
                [7] => a.set_bit(INVERSE, true),
                [22] => a.set_intensity(0),
                [23] => a.set_bit(ITALIC, false),
                [24] => a.set_bit(UNDERLINE, false),
                [27] => a.set_bit(INVERSE, false),
                [n @ 30..=37] => a.fg = Color::Idx((*n - 30) as u8),
                [38, 2, r, g, b] | [48, 2, r, g, b] => {
                    let (Some(r), Some(g), Some(b)) = (u8_of(*r), u8_of(*g), u8_of(*b)) else {
                        return;
                    };
                    if param[0] == 38 {
                        a.fg = Color::Rgb(r, g, b);
                    } else {
                        a.bg = Color::Rgb(r, g, b);
                    }
                }
                [38, 5, i] | [48, 5, i] => {
                    let Some(i) = u8_of(*i) else { return };
                    if param[0] == 38 {
                        a.fg = Color::Idx(i);
                    } else {
                        a.bg = Color::Idx(i);
                    }
                }
                [k @ (38 | 48)] => {
                    let fg = *k == 38;
                    let color = match it.next() {
                        Some([2]) => {
                            let Some(r) = next_u8(&mut it) else { return };
                            let Some(g) = next_u8(&mut it) else { return };
                            let Some(b) = next_u8(&mut it) else { return };
                            Color::Rgb(r, g, b)
                        }
                        Some([5]) => {
                            let Some(i) = next_u8(&mut it) else { return };
                            Color::Idx(i)
                        }
                        Some(_) => return,
                        None => return,
                    };
                    let a = &mut self.term.attrs;
                    if fg {
                        a.fg = color;
                    } else {
                        a.bg = color;
                    }
                }
                [39] => a.fg = Color::Default,
                [n @ 40..=47] => a.bg = Color::Idx((*n - 40) as u8),
                [49] => a.bg = Color::Default,
                [n @ 90..=97] => a.fg = Color::Idx((*n - 82) as u8),
                [n @ 100..=107] => a.bg = Color::Idx((*n - 92) as u8),
                _ => {}
            }
        }
    }
}

impl vte::Perform for Driver {
    #[inline]
    fn print(&mut self, c: char) {
        if (' '..='~').contains(&c) {
            self.term.ascii(c);
        } else if c == '\u{fffd}' || ('\u{80}'..'\u{a0}').contains(&c) {
        } else {
            self.term.text(c);
        }
    }

    fn execute(&mut self, b: u8) {
        let g = self.term.grid_mut();
        match b {
            8 => g.col_dec(1),
            9 => g.col_tab(),
            10..=12 => {
                g.row_inc_scroll(1);
            }
            13 => g.col_set(0),
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, b: u8) {
        self.landed = true;
        if !intermediates.is_empty() {
            return;
        }
        match b {
            b'7' => self.term.save_cursor(),
            b'8' => self.term.restore_cursor(),
            b'=' => self.term.set_mode(APP_KEYPAD, true),
            b'>' => self.term.set_mode(APP_KEYPAD, false),
            b'M' => self.term.grid_mut().row_dec_scroll(1),
            b'c' => {
                let (rows, cols) = self.term.size();
                let cap = self.term.grid.scrollback_capacity();
                self.term = Term::new(rows, cols, cap);
            }
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &vte::Params, intermediates: &[u8], _ignore: bool, c: char) {
        self.csi(
            params,
            intermediates.first().copied(),
            intermediates.get(1).copied(),
            c,
        );
        self.landed = true;
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], bell_terminated: bool) {
        match params {
            [b"0" | b"2", title] => self.hooks.on_title(title),
            [b"1", _] => {}
            _ => self.hooks.on_osc(params),
        }
        // Ended by ESC the parser is in its escape state, not ground.
        self.landed = bell_terminated;
    }

    fn terminated(&self) -> bool {
        self.landed
    }
}

impl Driver {
    /// A CSI with its first two intermediates.
    pub fn csi<P: Params + ?Sized>(&mut self, params: &P, i1: Option<u8>, i2: Option<u8>, c: char) {
        match i1 {
            None => {
                let g = self.term.grid_mut();
                match c {
                    '@' => g.insert_cells(p1(params, 1)),
                    'A' => g.row_dec_clamp(p1(params, 1)),
                    'B' => g.row_inc_clamp(p1(params, 1)),
                    'C' => g.col_inc_clamp(p1(params, 1)),
                    'D' => g.col_dec(p1(params, 1)),
                    'E' => {
                        g.col_set(0);
                        g.row_inc_clamp(p1(params, 1));
                    }
                    'F' => {
                        g.col_set(0);
                        g.row_dec_clamp(p1(params, 1));
                    }
                    'G' | '`' => g.col_set(p1(params, 1) - 1),
                    'H' | 'f' => {
                        let (r, c) = p2(params, 1, 1);
                        g.set_pos(Pos {
                            row: r - 1,
                            col: c - 1,
                        });
                    }
                    'J' => {
                        if !self.ed(p1(params, 0)) {
                            self.unhandled_csi(None, i2, params, c);
                        }
                    }
                    'K' => {
                        if !self.el(p1(params, 0)) {
                            self.unhandled_csi(None, i2, params, c);
                        }
                    }
                    'L' => g.insert_lines(p1(params, 1)),
                    'M' => g.delete_lines(p1(params, 1)),
                    'P' => g.delete_cells(p1(params, 1)),
                    'S' => g.scroll_up(p1(params, 1)),
                    'T' => g.scroll_down(p1(params, 1)),
                    'X' => {
                        let attrs = self.term.attrs;
                        self.term.grid_mut().erase_cells(p1(params, 1), attrs);
                    }
                    'b' => {
                        if let Some(ch) = self.term.last_char {
                            for _ in 0..p1(params, 1) {
                                self.term.text(ch);
                            }
                        }
                    }
                    'd' => g.row_set(p1(params, 1) - 1),
                    'm' => self.sgr(params),
                    'r' => {
                        let rows = g.rows_n;
                        let (top, bottom) = p2(params, 1, rows);
                        g.set_scroll_region(top - 1, bottom - 1);
                    }
                    't' => {}
                    _ => self.unhandled_csi(None, None, params, c),
                }
            }
            Some(b' ') => {
                let style = p1(params, 0);
                if c != 'q' {
                    self.unhandled_csi(None, None, params, c);
                } else if style <= 6 {
                    self.term.cursor_style = style as u8;
                }
            }
            Some(b'?') => match c {
                'J' => {
                    if !self.ed(p1(params, 0)) {
                        self.unhandled_csi(Some(b'?'), i2, params, c);
                    }
                }
                'K' => {
                    if !self.el(p1(params, 0)) {
                        self.unhandled_csi(Some(b'?'), i2, params, c);
                    }
                }
                'h' => self.decset(params, true, i2, c),
                'l' => self.decset(params, false, i2, c),
                _ => self.unhandled_csi(Some(b'?'), i2, params, c),
            },
            Some(i) => self.unhandled_csi(Some(i), i2, params, c),
        }
    }
}
