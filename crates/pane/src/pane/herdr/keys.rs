//! drover's key names → herdr's key-combo names (`pane send-keys`), and
//! raw input bytes (an attached operator's typing, a delivery's writes) →
//! herdr keys and text. herdr's `pane.send_text` pastes — bracketed when
//! the app enabled bracketed paste — so a keystroke sent as text would
//! reach such an app as a paste (an Enter as a pasted newline): keys go by
//! `pane.send_keys`, and only text by `pane.send_text`.

/// One character as a herdr key name: herdr names `+` and space; every
/// other character is its own name.
fn char_key(c: char) -> String {
    match c {
        ' ' => "space".into(),
        '+' => "plus".into(),
        c => c.to_string(),
    }
}

/// One key as herdr's `send-keys` names it, or `None` for a key sent as
/// its bytes instead: the keys herdr 0.8 has no name for (Home, End,
/// PageUp, PageDown, Insert, Delete). The name must already be valid for
/// drover (`key_bytes`).
pub fn herdr_key(key: &str) -> Option<String> {
    let mut chars = key.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Some(char_key(c));
    }
    let lower = key.to_ascii_lowercase();
    let name = match lower.as_str() {
        "enter" | "return" | "cr" => "enter".to_string(),
        "esc" | "escape" => "esc".to_string(),
        "tab" => "tab".to_string(),
        "btab" | "s-tab" | "backtab" => "shift+tab".to_string(),
        "up" | "down" | "left" | "right" | "space" => lower,
        "home" | "end" | "insert" | "ic" | "delete" | "dc" | "del" | "pageup" | "ppage"
        | "pgup" | "pagedown" | "npage" | "pgdn" => return None,
        "backspace" | "bspace" | "bs" => "backspace".to_string(),
        f if f.starts_with('f') && f.len() <= 3 => f.to_string(),
        m if m.starts_with("c-") => format!("ctrl+{}", &m[2..]),
        m if m.starts_with("m-") => format!("alt+{}", &m[2..]),
        other => other.to_string(),
    };
    Some(name)
}

/// A run of raw input, as herdr takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Keys for `pane.send_keys` (herdr encodes them for the app's modes).
    Keys(Vec<String>),
    /// Text for `pane.send_text` (herdr pastes it).
    Text(String),
}

/// The key a control byte or escape sequence at the start of `b` is, and
/// its length; `None` for bytes that are text (or a sequence herdr has no
/// name for, sent as it stands).
fn key_at(b: &[u8]) -> Option<(String, usize)> {
    let named = |n: &str, len: usize| Some((n.to_string(), len));
    match b {
        [b'\r', ..] => named("enter", 1),
        [b'\t', ..] => named("tab", 1),
        [0x7f, ..] => named("backspace", 1),
        [0x1b, b'[' | b'O', d @ (b'A' | b'B' | b'C' | b'D'), ..] => {
            let n = match d {
                b'A' => "up",
                b'B' => "down",
                b'C' => "right",
                _ => "left",
            };
            named(n, 3)
        }
        [0x1b, b'[', b'Z', ..] => named("shift+tab", 3),
        [0x1b] | [0x1b, 0x1b, ..] => named("esc", 1),
        [0x1b, c, ..] if c.is_ascii_alphanumeric() => Some((format!("alt+{}", *c as char), 2)),
        [c @ 0x01..=0x1a, ..] if *c != b'\n' => {
            Some((format!("ctrl+{}", (b'a' + c - 1) as char), 1))
        }
        _ => None,
    }
}

/// Length of the escape sequence at the start of `b` (CSI or SS3), so it
/// is kept whole in the text; 1 for a lone byte.
fn sequence_len(b: &[u8]) -> usize {
    match b {
        [0x1b, b'[', rest @ ..] => rest
            .iter()
            .position(|c| (0x40..=0x7e).contains(c))
            .map_or(b.len(), |i| i + 3),
        [0x1b, b'O', _, ..] => 3,
        _ => 1,
    }
}

/// Split raw input into herdr keys and text, in order. Paste markers are
/// dropped (herdr brackets text itself, by the app's mode); a lone
/// character is a key, a longer run of characters is text.
pub fn split_input(bytes: &[u8]) -> Vec<Input> {
    const PASTE_MARKS: [&[u8]; 2] = [b"\x1b[200~", b"\x1b[201~"];
    let mut out: Vec<Input> = Vec::new();
    let mut text: Vec<u8> = Vec::new();
    let flush = |text: &mut Vec<u8>, out: &mut Vec<Input>| {
        if text.is_empty() {
            return;
        }
        let t = String::from_utf8_lossy(&std::mem::take(text)).into_owned();
        let mut chars = t.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if !c.is_control() => push_key(out, char_key(c)),
            _ => out.push(Input::Text(t)),
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if let Some(m) = PASTE_MARKS.iter().find(|m| rest.starts_with(m)) {
            i += m.len();
            continue;
        }
        if let Some((key, len)) = key_at(rest) {
            flush(&mut text, &mut out);
            push_key(&mut out, key);
            i += len;
            continue;
        }
        let len = if rest[0] == 0x1b {
            sequence_len(rest)
        } else {
            1
        };
        text.extend_from_slice(&rest[..len]);
        i += len;
    }
    flush(&mut text, &mut out);
    out
}

fn push_key(out: &mut Vec<Input>, key: String) {
    match out.last_mut() {
        Some(Input::Keys(k)) => k.push(key),
        _ => out.push(Input::Keys(vec![key])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_herdr_combos() {
        assert_eq!(herdr_key("Enter").as_deref(), Some("enter"));
        assert_eq!(herdr_key("Esc").as_deref(), Some("esc"));
        assert_eq!(herdr_key("C-c").as_deref(), Some("ctrl+c"));
        assert_eq!(herdr_key("M-x").as_deref(), Some("alt+x"));
        assert_eq!(herdr_key("BTab").as_deref(), Some("shift+tab"));
        assert_eq!(herdr_key("PageUp"), None);
        assert_eq!(herdr_key("Delete"), None);
        assert_eq!(herdr_key("x").as_deref(), Some("x"));
        assert_eq!(herdr_key("+").as_deref(), Some("plus"));
    }

    #[test]
    fn input_splits_into_keys_and_text() {
        let keys = |k: &[&str]| Input::Keys(k.iter().map(|s| s.to_string()).collect());
        assert_eq!(split_input(b"\r"), vec![keys(&["enter"])]);
        assert_eq!(split_input(b"y"), vec![keys(&["y"])]);
        assert_eq!(
            split_input(b"hello world\r"),
            vec![Input::Text("hello world".into()), keys(&["enter"])]
        );
        assert_eq!(
            split_input(b"\x1b[200~pasted\nlines\x1b[201~"),
            vec![Input::Text("pasted\nlines".into())]
        );
        assert_eq!(
            split_input(b"\x1b[A\x03\x1b"),
            vec![keys(&["up", "ctrl+c", "esc"])]
        );
        assert_eq!(split_input(b"\x1b[5~"), vec![Input::Text("\x1b[5~".into())]);
        assert_eq!(split_input(b"\x1bx"), vec![keys(&["alt+x"])]);
    }
}
