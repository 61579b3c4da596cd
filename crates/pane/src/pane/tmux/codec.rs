//! The text of tmux's control mode: decoding `%output`, quoting arguments so
//! tmux's command parser passes them through unchanged, encoding input bytes
//! for `send-keys -H`, and reading `tmux -V`.

/// Decode the payload of a `%output` line: tmux writes every byte below 32
/// and `\` as a backslash and three octal digits; everything else is raw.
/// A malformed escape is kept as it stands (never a panic).
pub fn decode_output(src: &[u8], out: &mut Vec<u8>) {
    out.reserve(src.len());
    let mut i = 0;
    while i < src.len() {
        // Copy runs without a backslash in one go: the common case.
        let run = src[i..]
            .iter()
            .position(|b| *b == b'\\')
            .unwrap_or(src.len() - i);
        out.extend_from_slice(&src[i..i + run]);
        i += run;
        if i >= src.len() {
            break;
        }
        let digits = src.get(i + 1..i + 4);
        match digits {
            Some(d) if d.iter().all(|b| (b'0'..=b'7').contains(b)) => {
                let v = u32::from(d[0] - b'0') * 64
                    + u32::from(d[1] - b'0') * 8
                    + u32::from(d[2] - b'0');
                out.push((v & 0xff) as u8);
                i += 4;
            }
            _ => {
                out.push(b'\\');
                i += 1;
            }
        }
    }
}

/// Quote one argument for tmux's command parser so that it arrives exactly
/// as given: single quotes (tmux expands `$NAME` and `~` in double quotes and
/// bare words, never in single quotes), with `'` written as `'\''`. Bytes a
/// single line cannot carry (control characters) force a double-quoted form
/// where every byte that is not plainly safe is an octal escape, `$` and `~`
/// included.
///
/// Not [`crate::shell::quote`]: tmux's command language is not a shell's. A
/// tmux line ends at a newline even inside single quotes, so a word with
/// control bytes needs tmux's double-quoted octal escapes, which `sh` does
/// not read; and no word is left bare (tmux expands `~` and `$NAME` in a
/// bare word, and a trailing `;` ends its command).
pub fn quote(arg: &str) -> String {
    if !arg.bytes().any(|b| b < 0x20 || b == 0x7f) {
        let mut s = String::with_capacity(arg.len() + 2);
        s.push('\'');
        s.push_str(&arg.replace('\'', r"'\''"));
        s.push('\'');
        return s;
    }
    let mut s = String::with_capacity(arg.len() * 2 + 2);
    s.push('"');
    for b in arg.bytes() {
        if b.is_ascii_alphanumeric() || b"-_./:,=+@%".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\{b:03o}"));
        }
    }
    s.push('"');
    s
}

/// Input bytes as the arguments of `send-keys -H` (each byte a hex key,
/// written to the pane as is).
pub fn hex_keys(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Parse `tmux -V` output (`tmux 3.3a`, `tmux next-3.4`, `tmux 3.2-rc2`)
/// into (major, minor).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = text.trim().strip_prefix("tmux ")?;
    let v = v.strip_prefix("next-").unwrap_or(v);
    let (major, rest) = v.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// One line of the control client's output, classified.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// `%output %N payload` (payload still escaped).
    Output { pane: &'a str, payload: &'a [u8] },
    /// `%begin TIME NUM FLAGS`: flags bit 1 marks a reply to our command.
    Begin { ours: bool },
    /// `%end …` / `%error …`.
    End { ok: bool, ours: bool },
    /// `%window-close @W` / `%unlinked-window-close @W`.
    WindowClose { window: &'a str },
    /// `%exit [reason]`.
    Exit { reason: &'a str },
    /// Another notification (`%window-add`, `%layout-change`, …).
    Notice,
    /// Anything else: a line of a reply's body.
    Body(&'a [u8]),
}

fn flags_ours(rest: &[u8]) -> bool {
    // TIME NUM FLAGS
    std::str::from_utf8(rest)
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse::<u32>().ok())
        .is_some_and(|f| f & 1 == 1)
}

/// Classify one line (without its `\n`). `in_reply` says whether we are
/// between a `%begin` and its `%end`: there every line is body text, even
/// one that starts with `%`.
pub fn classify(line: &[u8], in_reply: bool) -> Line<'_> {
    if let Some(rest) = line.strip_prefix(b"%end ") {
        return Line::End {
            ok: true,
            ours: flags_ours(rest),
        };
    }
    if let Some(rest) = line.strip_prefix(b"%error ") {
        return Line::End {
            ok: false,
            ours: flags_ours(rest),
        };
    }
    if in_reply {
        return Line::Body(line);
    }
    if let Some(rest) = line.strip_prefix(b"%output ") {
        let sp = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
        let pane = std::str::from_utf8(&rest[..sp]).unwrap_or("");
        let payload = rest.get(sp + 1..).unwrap_or(&[]);
        return Line::Output { pane, payload };
    }
    if let Some(rest) = line.strip_prefix(b"%begin ") {
        return Line::Begin {
            ours: flags_ours(rest),
        };
    }
    for prefix in [&b"%window-close "[..], b"%unlinked-window-close "] {
        if let Some(rest) = line.strip_prefix(prefix) {
            let w = std::str::from_utf8(rest).unwrap_or("").trim();
            return Line::WindowClose { window: w };
        }
    }
    if line == b"%exit" {
        return Line::Exit { reason: "" };
    }
    if let Some(rest) = line.strip_prefix(b"%exit ") {
        return Line::Exit {
            reason: std::str::from_utf8(rest).unwrap_or("").trim(),
        };
    }
    if line.starts_with(b"%") {
        return Line::Notice;
    }
    Line::Body(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        decode_output(s, &mut v);
        v
    }

    #[test]
    fn decodes_octal_escapes() {
        assert_eq!(dec(br"hi\015\012\033[1m\134x"), b"hi\r\n\x1b[1m\\x");
        assert_eq!(dec("é plain".as_bytes()), "é plain".as_bytes());
        // Malformed escapes are kept, never a panic.
        assert_eq!(dec(br"a\9"), br"a\9");
        assert_eq!(dec(br"a\01"), br"a\01");
        assert_eq!(dec(b"\\"), b"\\");
    }

    #[test]
    fn quotes_single_and_escaped() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("$HOME ~"), "'$HOME ~'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("a\nb$~"), r#""a\012b\044\176""#);
    }

    #[test]
    fn hex_and_versions() {
        assert_eq!(hex_keys(b"a\r"), "61 0d");
        assert_eq!(parse_version("tmux 3.3a\n"), Some((3, 3)));
        assert_eq!(parse_version("tmux next-3.4"), Some((3, 4)));
        assert_eq!(parse_version("tmux 3.2-rc2"), Some((3, 2)));
        assert_eq!(parse_version("tmux 2.9"), Some((2, 9)));
        assert_eq!(parse_version("screen"), None);
    }

    #[test]
    fn classifies_lines() {
        assert_eq!(
            classify(br"%output %3 a\015", false),
            Line::Output {
                pane: "%3",
                payload: br"a\015"
            }
        );
        assert_eq!(classify(b"%begin 1 2 1", false), Line::Begin { ours: true });
        assert_eq!(
            classify(b"%begin 1 2 0", false),
            Line::Begin { ours: false }
        );
        assert_eq!(
            classify(b"%error 1 2 1", true),
            Line::End {
                ok: false,
                ours: true
            }
        );
        assert_eq!(classify(b"%output %1 x", true), Line::Body(b"%output %1 x"));
        assert_eq!(
            classify(b"%window-close @4", false),
            Line::WindowClose { window: "@4" }
        );
        assert_eq!(classify(b"%exit", false), Line::Exit { reason: "" });
        assert_eq!(classify(b"%window-add @1", false), Line::Notice);
    }
}
