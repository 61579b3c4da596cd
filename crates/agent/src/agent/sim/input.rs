//! Keys from raw terminal input: bracketed paste, Enter, Esc, a few controls,
//! and UTF-8 text. Unknown sequences are skipped; no input can make it panic.

/// A key or paste the sim reacts to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A typed character.
    Char(char),
    /// A bracketed paste (`ESC [200~ … ESC [201~`), line ends normalised to `\n`.
    Paste(String),
    /// Enter (CR or LF outside a paste).
    Enter,
    /// A lone Esc.
    Esc,
    /// Backspace or DEL.
    Backspace,
    /// Ctrl-C.
    CtrlC,
    /// Ctrl-D.
    CtrlD,
}

/// A paste larger than this is delivered as it stands, end marker or not.
const MAX_PASTE: usize = 4 << 20;
const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

/// Incremental decoder; keeps incomplete sequences for the next read.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// Append bytes and return the complete keys they finish.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        self.buf.extend_from_slice(bytes);
        let mut keys = Vec::new();
        let mut i = 0;
        let b = &self.buf;
        while i < b.len() {
            let rest = &b[i..];
            if rest.starts_with(PASTE_START) {
                let body = &rest[PASTE_START.len()..];
                match find(body, PASTE_END) {
                    Some(end) => {
                        keys.push(Key::Paste(normalise(&body[..end])));
                        i += PASTE_START.len() + end + PASTE_END.len();
                        continue;
                    }
                    None if body.len() > MAX_PASTE => {
                        keys.push(Key::Paste(normalise(body)));
                        i = b.len();
                        continue;
                    }
                    None => break,
                }
            }
            match rest[0] {
                0x1b => {
                    if rest.len() == 1 {
                        // Maybe the start of a sequence: wait (see `flush_esc`).
                        break;
                    }
                    match rest[1] {
                        b'[' => match csi_len(rest) {
                            Some(n) => i += n,
                            None if PASTE_START.starts_with(rest) => break,
                            None if rest.len() < 32 => break,
                            None => i += 2,
                        },
                        b'O' => {
                            if rest.len() < 3 {
                                break;
                            }
                            i += 3;
                        }
                        0x1b => {
                            keys.push(Key::Esc);
                            i += 1;
                        }
                        _ => i += 2, // Alt+key: ignored
                    }
                }
                b'\r' | b'\n' => {
                    keys.push(Key::Enter);
                    // CR LF is one Enter.
                    i += if rest.starts_with(b"\r\n") { 2 } else { 1 };
                }
                0x7f | 0x08 => {
                    keys.push(Key::Backspace);
                    i += 1;
                }
                0x03 => {
                    keys.push(Key::CtrlC);
                    i += 1;
                }
                0x04 => {
                    keys.push(Key::CtrlD);
                    i += 1;
                }
                c if c < 0x20 => i += 1,
                _ => match utf8_char(rest) {
                    Utf8::Char(c, n) => {
                        keys.push(Key::Char(c));
                        i += n;
                    }
                    Utf8::Incomplete => break,
                    Utf8::Invalid => i += 1,
                },
            }
        }
        self.buf.drain(..i);
        keys
    }

    /// True when the only thing pending is a lone ESC byte.
    pub fn esc_pending(&self) -> bool {
        self.buf == [0x1b]
    }

    /// Called when no byte followed a lone ESC in time: it was the Esc key.
    pub fn flush_esc(&mut self) -> Option<Key> {
        if self.esc_pending() {
            self.buf.clear();
            Some(Key::Esc)
        } else {
            None
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn normalise(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .replace("\r\n", "\n")
        .replace('\r', "\n")
}

/// Length of a complete CSI sequence at the start of `b`, if complete.
fn csi_len(b: &[u8]) -> Option<usize> {
    b.iter()
        .enumerate()
        .skip(2)
        .find(|(_, c)| (0x40..=0x7e).contains(*c))
        .map(|(i, _)| i + 1)
}

enum Utf8 {
    Char(char, usize),
    Incomplete,
    Invalid,
}

fn utf8_char(b: &[u8]) -> Utf8 {
    let n = match b[0] {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return Utf8::Invalid,
    };
    if b.len() < n {
        // Only incomplete if what we have so far could still be valid.
        return match std::str::from_utf8(b) {
            Err(e) if e.error_len().is_none() => Utf8::Incomplete,
            _ => Utf8::Invalid,
        };
    }
    match std::str::from_utf8(&b[..n]) {
        Ok(s) => s.chars().next().map_or(Utf8::Invalid, |c| Utf8::Char(c, n)),
        Err(_) => Utf8::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paste_enter_and_text() {
        let mut d = Decoder::default();
        let k = d.feed(b"\x1b[200~line one\r\nline two\x1b[201~\r");
        assert_eq!(k, vec![Key::Paste("line one\nline two".into()), Key::Enter]);
        let k = d.feed("hé❯\x7f\x03\x04".as_bytes());
        assert_eq!(
            k,
            vec![
                Key::Char('h'),
                Key::Char('é'),
                Key::Char('❯'),
                Key::Backspace,
                Key::CtrlC,
                Key::CtrlD
            ]
        );
    }

    #[test]
    fn split_sequences_wait_for_the_rest() {
        let mut d = Decoder::default();
        assert!(d.feed(b"\x1b").is_empty());
        assert!(d.esc_pending());
        assert!(d.feed(b"[20").is_empty());
        assert!(d.feed(b"0~ab").is_empty());
        assert_eq!(d.feed(b"c\x1b[201~"), vec![Key::Paste("abc".into())]);
        let snow = "☃".as_bytes();
        assert!(d.feed(&snow[..1]).is_empty());
        assert_eq!(d.feed(&snow[1..]), vec![Key::Char('☃')]);
    }

    #[test]
    fn lone_esc_and_arrows() {
        let mut d = Decoder::default();
        assert!(d.feed(b"\x1b").is_empty());
        assert_eq!(d.flush_esc(), Some(Key::Esc));
        assert_eq!(d.feed(b"\x1b[A\x1bOBx"), vec![Key::Char('x')]);
        assert_eq!(d.feed(b"\x1b\x1b"), vec![Key::Esc]);
        assert_eq!(d.flush_esc(), Some(Key::Esc));
    }

    #[test]
    fn garbage_never_panics() {
        let mut d = Decoder::default();
        let mut x: u32 = 12345;
        for _ in 0..20_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let b = [(x >> 16) as u8, (x >> 8) as u8, x as u8];
            let _ = d.feed(&b);
            let _ = d.flush_esc();
        }
        let _ = d.feed(&[0xff, 0xfe, 0x1b, b'[', 0xc3]);
    }

    proptest::proptest! {
        /// However the bytes are split across reads, the same keys come out.
        #[test]
        fn chunking_does_not_matter(
            tokens in proptest::collection::vec(0usize..7, 0..40),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let mut bytes = Vec::new();
            for t in &tokens {
                bytes.extend_from_slice(match t {
                    0 => "a".as_bytes(),
                    1 => "☃".as_bytes(),
                    2 => b"\r",
                    3 => b"\x1b[200~pa\x1bste\r\n\x1b[201~",
                    4 => b"\x7f",
                    5 => b"\x1b[A",
                    _ => "é".as_bytes(),
                });
            }
            let whole = Decoder::default().feed(&bytes);
            let mut d = Decoder::default();
            let mut got = Vec::new();
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c < bytes.len()).collect();
            cuts.sort_unstable();
            let mut at = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                got.extend(d.feed(&bytes[at..c]));
                at = c;
            }
            proptest::prop_assert_eq!(got, whole);
        }
    }
}
