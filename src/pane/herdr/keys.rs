//! drover's key names → herdr's key-combo names (`pane send-keys`).

/// One key as herdr's `send-keys` names it, or `None` for a key sent as
/// its bytes instead: a single character (herdr spells some punctuation
/// with names of its own), and the keys herdr 0.8 has no name for (Home,
/// End, PageUp, PageDown, Insert, Delete). The name must already be valid
/// for drover (`key_bytes`).
pub fn herdr_key(key: &str) -> Option<String> {
    let mut chars = key.chars();
    if let (Some(_), None) = (chars.next(), chars.next()) {
        return None;
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
        assert_eq!(herdr_key("x"), None);
    }
}
