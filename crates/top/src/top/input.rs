//! Keys from the terminal's bytes (raw mode). `top` reads its terminal itself
//! rather than through a second event loop, so one poll(2) covers the
//! terminal, the event feed and signals, and no key waits in another buffer.

use super::ui::Key;

/// The keys in one read from the terminal. A lone ESC is Esc; an escape
/// sequence `top` has no use for is skipped whole.
pub fn parse(bytes: &[u8]) -> Vec<Key> {
    let mut out = Vec::new();
    let text = String::from_utf8_lossy(bytes);
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\x1b' => match it.peek() {
                Some('[') | Some('O') => {
                    it.next();
                    // Parameters, then one final byte in @..~.
                    let mut fin = None;
                    for n in it.by_ref() {
                        if ('@'..='~').contains(&n) {
                            fin = Some(n);
                            break;
                        }
                    }
                    match fin {
                        Some('A') => out.push(Key::Up),
                        Some('B') => out.push(Key::Down),
                        _ => {}
                    }
                }
                _ => out.push(Key::Esc),
            },
            '\r' | '\n' => out.push(Key::Enter),
            '\x7f' | '\x08' => out.push(Key::Backspace),
            '\x03' => out.push(Key::Interrupt),
            '\t' => out.push(Key::Tab),
            c if !c.is_control() => out.push(Key::Char(c)),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_arrows_and_escape_sequences() {
        assert_eq!(
            parse(b"a\r\x1b[A\x1b[B\x1bq\x7f\x03"),
            [
                Key::Char('a'),
                Key::Enter,
                Key::Up,
                Key::Down,
                Key::Esc,
                Key::Char('q'),
                Key::Backspace,
                Key::Interrupt
            ]
        );
        assert_eq!(parse(b"\x1b[1;5C\x1bOB"), [Key::Down]);
        assert_eq!(parse("é".as_bytes()), [Key::Char('é')]);
        assert_eq!(parse(b"\x1b"), [Key::Esc]);
    }
}
