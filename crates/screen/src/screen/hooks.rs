use super::ModeView;

/// Largest title kept; a title flood cannot grow memory.
const MAX_TITLE: usize = 256;
/// Largest pending reply buffer; a query flood cannot grow memory.
const MAX_REPLIES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Query {
    Da1,
    DsrStatus,
    DsrCursor,
    DecRqmPrivate(u16),
    DecRqmAnsi(u16),
}

/// Callbacks for what vt100 does not implement itself.
#[derive(Debug, Default)]
pub struct Hooks {
    title: Option<String>,
    osc7501: Option<String>,
    osc7501_count: u64,
    sync_output: bool,
    queries: Vec<Query>,
}

impl Hooks {
    /// The last OSC 0/2 title.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Payload of the last OSC 7501 sequence (e.g. `state=working:app=codex`).
    pub fn osc7501(&self) -> Option<&str> {
        self.osc7501.as_deref()
    }

    /// How many OSC 7501 sequences were seen.
    pub fn osc7501_count(&self) -> u64 {
        self.osc7501_count
    }

    /// True while a synchronized-output block (mode 2026) is open: the frame
    /// on the grid may be torn and must not be classified.
    pub fn in_sync_block(&self) -> bool {
        self.sync_output
    }

    /// Whether any query is waiting for an answer.
    pub fn has_queries(&self) -> bool {
        !self.queries.is_empty()
    }

    pub(super) fn take_replies(&mut self, row: u16, col: u16, modes: &ModeView) -> Vec<u8> {
        let mut out = Vec::new();
        for q in self.queries.drain(..) {
            match q {
                // VT220 with ANSI colour: what most emulators claim.
                Query::Da1 => out.extend_from_slice(b"\x1b[?62;22c"),
                Query::DsrStatus => out.extend_from_slice(b"\x1b[0n"),
                Query::DsrCursor => out.extend_from_slice(format!("\x1b[{row};{col}R").as_bytes()),
                Query::DecRqmPrivate(mode) => {
                    let state = match mode {
                        2004 => set_reset(modes.bracketed_paste),
                        1049 | 47 | 1047 => set_reset(modes.alternate_screen),
                        25 => set_reset(!modes.hide_cursor),
                        1 => set_reset(modes.application_cursor),
                        2026 => set_reset(self.sync_output),
                        _ => 0,
                    };
                    out.extend_from_slice(format!("\x1b[?{mode};{state}$y").as_bytes());
                }
                Query::DecRqmAnsi(mode) => {
                    out.extend_from_slice(format!("\x1b[{mode};0$y").as_bytes());
                }
            }
            if out.len() > MAX_REPLIES {
                break;
            }
        }
        self.queries.clear();
        out
    }

    /// Take the queries seen since the last call as canonical requests, to
    /// pass on to an attached terminal (which answers them instead).
    pub(super) fn take_queries(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for q in self.queries.drain(..) {
            match q {
                Query::Da1 => out.extend_from_slice(b"\x1b[c"),
                Query::DsrStatus => out.extend_from_slice(b"\x1b[5n"),
                Query::DsrCursor => out.extend_from_slice(b"\x1b[6n"),
                Query::DecRqmPrivate(m) => out.extend_from_slice(format!("\x1b[?{m}$p").as_bytes()),
                Query::DecRqmAnsi(m) => out.extend_from_slice(format!("\x1b[{m}$p").as_bytes()),
            }
        }
        out
    }

    /// The pending queries, canonical form, taken (for the differential
    /// test, which compares what each model saw).
    #[cfg(test)]
    pub(crate) fn take_terminal_queries_for_test(&mut self) -> Vec<u8> {
        self.take_queries()
    }

    fn push_query(&mut self, q: Query) {
        if self.queries.len() < 64 {
            self.queries.push(q);
        }
    }
}

fn set_reset(on: bool) -> u8 {
    if on { 1 } else { 2 }
}

fn first(params: &[&[u16]]) -> Option<u16> {
    params.first().and_then(|p| p.first().copied())
}

impl Hooks {
    /// OSC 0 or 2 with exactly one argument.
    pub(super) fn on_title(&mut self, title: &[u8]) {
        let t = String::from_utf8_lossy(&title[..title.len().min(MAX_TITLE)]);
        self.title = Some(super::sanitize_line(&t));
    }

    /// Any other OSC; only 7501 is kept.
    pub(super) fn on_osc(&mut self, params: &[&[u8]]) {
        if params.first() == Some(&&b"7501"[..]) {
            let payload: Vec<u8> = params[1..].join(&b';');
            let p = String::from_utf8_lossy(&payload[..payload.len().min(MAX_TITLE)]);
            self.osc7501 = Some(super::sanitize_line(&p));
            self.osc7501_count += 1;
        }
    }

    /// A CSI the grid does not handle: queries and the sync mode.
    pub(super) fn on_csi(&mut self, i1: Option<u8>, i2: Option<u8>, params: &[&[u16]], c: char) {
        match (i1, i2, c) {
            (None, None, 'c') if first(params).unwrap_or(0) == 0 => self.push_query(Query::Da1),
            (None, None, 'n') => match first(params) {
                Some(5) => self.push_query(Query::DsrStatus),
                Some(6) => self.push_query(Query::DsrCursor),
                _ => {}
            },
            (Some(b'?'), Some(b'$'), 'p') => {
                if let Some(m) = first(params) {
                    self.push_query(Query::DecRqmPrivate(m));
                }
            }
            (Some(b'$'), None, 'p') => {
                if let Some(m) = first(params) {
                    self.push_query(Query::DecRqmAnsi(m));
                }
            }
            (Some(b'?'), None, 'h' | 'l') if params.iter().any(|p| p.first() == Some(&2026)) => {
                self.sync_output = c == 'h';
            }
            _ => {}
        }
    }
}

/// The reference terminal model reports the same sequences through its
/// callbacks (the differential test runs it beside drover's grid).
#[cfg(test)]
impl vt100::Callbacks for Hooks {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.on_title(title);
    }

    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        self.on_osc(params);
    }

    fn unhandled_csi(
        &mut self,
        _: &mut vt100::Screen,
        i1: Option<u8>,
        i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        self.on_csi(i1, i2, params, c);
    }
}
