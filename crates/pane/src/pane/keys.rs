//! Named keys → the bytes a terminal sends for them.

/// A key name drover does not know.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown key {0:?}: use a single character or a name such as Enter, Esc, Tab, BTab, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, Backspace, Space, F1-F12, C-<x>, M-<x>"
)]
pub struct KeyError(pub String);

/// The bytes for one key. `app_cursor` selects the application cursor-key
/// encoding (DECCKM), which full-screen apps enable.
pub fn key_bytes(key: &str, app_cursor: bool) -> Result<Vec<u8>, KeyError> {
    let err = || KeyError(key.to_string());
    let mut chars = key.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        let mut b = [0u8; 4];
        return Ok(c.encode_utf8(&mut b).as_bytes().to_vec());
    }
    let cursor = |c: u8| {
        if app_cursor {
            vec![0x1b, b'O', c]
        } else {
            vec![0x1b, b'[', c]
        }
    };
    let lower = key.to_ascii_lowercase();
    let bytes = match lower.as_str() {
        "enter" | "return" | "cr" => b"\r".to_vec(),
        "esc" | "escape" => b"\x1b".to_vec(),
        "tab" => b"\t".to_vec(),
        "btab" | "s-tab" | "backtab" => b"\x1b[Z".to_vec(),
        "up" => cursor(b'A'),
        "down" => cursor(b'B'),
        "right" => cursor(b'C'),
        "left" => cursor(b'D'),
        "home" => cursor(b'H'),
        "end" => cursor(b'F'),
        "pageup" | "ppage" | "pgup" => b"\x1b[5~".to_vec(),
        "pagedown" | "npage" | "pgdn" => b"\x1b[6~".to_vec(),
        "insert" | "ic" => b"\x1b[2~".to_vec(),
        "delete" | "dc" | "del" => b"\x1b[3~".to_vec(),
        "backspace" | "bspace" | "bs" => b"\x7f".to_vec(),
        "space" => b" ".to_vec(),
        f if f.starts_with('f') && f.len() <= 3 => {
            let n: u8 = f[1..].parse().map_err(|_| err())?;
            match n {
                1 => b"\x1bOP".to_vec(),
                2 => b"\x1bOQ".to_vec(),
                3 => b"\x1bOR".to_vec(),
                4 => b"\x1bOS".to_vec(),
                5 => b"\x1b[15~".to_vec(),
                6 => b"\x1b[17~".to_vec(),
                7 => b"\x1b[18~".to_vec(),
                8 => b"\x1b[19~".to_vec(),
                9 => b"\x1b[20~".to_vec(),
                10 => b"\x1b[21~".to_vec(),
                11 => b"\x1b[23~".to_vec(),
                12 => b"\x1b[24~".to_vec(),
                _ => return Err(err()),
            }
        }
        _ => {
            if let Some(rest) = key.strip_prefix("C-").or_else(|| key.strip_prefix("c-")) {
                let mut cs = rest.chars();
                match (cs.next(), cs.next()) {
                    (Some(c), None) => vec![ctrl(c).ok_or_else(err)?],
                    _ => return Err(err()),
                }
            } else if let Some(rest) = key.strip_prefix("M-").or_else(|| key.strip_prefix("m-")) {
                let mut inner = key_bytes(rest, app_cursor).map_err(|_| err())?;
                inner.insert(0, 0x1b);
                inner
            } else {
                return Err(err());
            }
        }
    };
    Ok(bytes)
}

fn ctrl(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c as u8 - b'A' + 1),
        '@' | ' ' => Some(0),
        '[' => Some(0x1b),
        '\\' => Some(0x1c),
        ']' => Some(0x1d),
        '^' => Some(0x1e),
        '_' => Some(0x1f),
        '?' => Some(0x7f),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_keys() {
        assert_eq!(key_bytes("Enter", false).unwrap(), b"\r");
        assert_eq!(key_bytes("esc", false).unwrap(), b"\x1b");
        assert_eq!(key_bytes("C-c", false).unwrap(), b"\x03");
        assert_eq!(key_bytes("Up", false).unwrap(), b"\x1b[A");
        assert_eq!(key_bytes("Up", true).unwrap(), b"\x1bOA");
        assert_eq!(key_bytes("M-x", false).unwrap(), b"\x1bx");
        assert_eq!(key_bytes("F5", false).unwrap(), b"\x1b[15~");
        assert_eq!(key_bytes("y", false).unwrap(), b"y");
        assert_eq!(key_bytes("1", false).unwrap(), b"1");
        assert_eq!(key_bytes("é", false).unwrap(), "é".as_bytes());
    }

    #[test]
    fn unknown_keys_are_errors() {
        for k in ["Foo", "C-", "C-ab", "F13", "", "M-Foo"] {
            assert!(key_bytes(k, false).is_err(), "{k}");
        }
    }
}
