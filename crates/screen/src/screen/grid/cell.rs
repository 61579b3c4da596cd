//! A cell as a compact value: one code point, its drawing attributes and
//! the wide flags in 16 bytes. A cell holding a base character with
//! combining marks (rare) points into its row's cluster table instead.

/// A colour as the grid keeps it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    /// The terminal's default colour.
    #[default]
    Default,
    /// One of the 256 indexed colours.
    Idx(u8),
    /// A truecolour value.
    Rgb(u8, u8, u8),
}

pub(crate) const BOLD: u8 = 0b0000_0001;
pub(crate) const DIM: u8 = 0b0000_0010;
pub(crate) const INTENSITY: u8 = BOLD | DIM;
pub(crate) const ITALIC: u8 = 0b0000_0100;
pub(crate) const UNDERLINE: u8 = 0b0000_1000;
pub(crate) const INVERSE: u8 = 0b0001_0000;

/// Drawing attributes: colours and the text mode bits.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    pub fg: Color,
    pub bg: Color,
    pub mode: u8,
}

impl Attrs {
    pub const DEFAULT: Attrs = Attrs {
        fg: Color::Default,
        bg: Color::Default,
        mode: 0,
    };

    pub fn set_intensity(&mut self, bits: u8) {
        self.mode = (self.mode & !INTENSITY) | bits;
    }

    pub fn set_bit(&mut self, bit: u8, on: bool) {
        if on {
            self.mode |= bit;
        } else {
            self.mode &= !bit;
        }
    }

    pub fn has(&self, bit: u8) -> bool {
        self.mode & bit != 0
    }
}

pub(crate) const WIDE: u8 = 0b0000_0001;
pub(crate) const CONTINUATION: u8 = 0b0000_0010;
/// `ch` is an index into the row's cluster table.
pub(crate) const CLUSTER: u8 = 0b0000_0100;

/// One cell: `ch` 0 is empty, else a code point (or a cluster index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub(crate) ch: u32,
    pub(crate) attrs: Attrs,
    pub(crate) flags: u8,
}

const _: () = assert!(std::mem::size_of::<Cell>() == 16);

impl Default for Cell {
    fn default() -> Self {
        Cell::DEFAULT
    }
}

impl Cell {
    pub const DEFAULT: Cell = Cell {
        ch: 0,
        attrs: Attrs::DEFAULT,
        flags: 0,
    };

    /// A cell holding `c` alone (not a cluster).
    #[inline]
    pub fn plain(c: char, attrs: Attrs, wide: bool) -> Cell {
        Cell {
            ch: c as u32,
            attrs,
            flags: if wide { WIDE } else { 0 },
        }
    }

    #[inline]
    pub fn has_contents(&self) -> bool {
        self.ch != 0 || self.flags & CLUSTER != 0
    }

    #[inline]
    pub fn is_wide(&self) -> bool {
        self.flags & WIDE != 0
    }

    #[inline]
    pub fn is_wide_continuation(&self) -> bool {
        self.flags & CONTINUATION != 0
    }

    #[inline]
    pub fn is_cluster(&self) -> bool {
        self.flags & CLUSTER != 0
    }

    pub fn attrs(&self) -> &Attrs {
        &self.attrs
    }

    /// An empty cell with `attrs`: what [`Cell::clear`] leaves.
    #[inline]
    pub fn blank(attrs: Attrs) -> Cell {
        Cell {
            ch: 0,
            attrs,
            flags: 0,
        }
    }

    /// Empty the cell, keeping `attrs` (both wide flags drop).
    #[inline]
    pub fn clear(&mut self, attrs: Attrs) {
        *self = Cell::blank(attrs);
    }

    pub fn set_wide(&mut self, wide: bool) {
        if wide {
            self.flags |= WIDE;
        } else {
            self.flags &= !WIDE;
        }
    }

    pub fn set_wide_continuation(&mut self, on: bool) {
        if on {
            self.flags |= CONTINUATION;
        } else {
            self.flags &= !CONTINUATION;
        }
    }
}
