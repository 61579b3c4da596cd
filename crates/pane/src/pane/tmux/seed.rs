//! What a re-seeded screen is drawn from: tmux's grids (`capture-pane`)
//! and the terminal state the app set that tmux reports in formats — the
//! alternate screen, cursor keys, keypad, mouse tracking, cursor
//! visibility, the scroll region and the title. Without them a pane re-seeded
//! after a reconnect or a supervisor restart looked like a fresh terminal:
//! keys were encoded for the wrong cursor mode, an attached terminal got no
//! mouse tracking, leaving the alternate screen left the app's frame behind,
//! and Claude's title (one of its state signals) was gone until it changed.
//! tmux 3.3a has no format for bracketed paste: drover notes that mode in
//! the state dir when the app changes it (`state::save_paste_mode`).

/// The `display-message` format whose answer [`parse_modes`] reads.
pub(super) const MODES_FORMAT: &str = "#{alternate_on} #{alternate_saved_x} #{alternate_saved_y} \
#{keypad_cursor_flag} #{keypad_flag} #{cursor_flag} #{mouse_standard_flag} #{mouse_button_flag} \
#{mouse_all_flag} #{mouse_sgr_flag} #{mouse_utf8_flag} #{scroll_region_upper} #{scroll_region_lower} \
#{pane_width} #{pane_height}";

/// The pane's title as the app set it; empty when it never did (tmux's
/// default title is the host name).
pub(super) const TITLE_FORMAT: &str =
    "#{?#{||:#{==:#{pane_title},#{host}},#{==:#{pane_title},#{host_short}}},,#{pane_title}}";

/// The terminal state tmux reports for a pane.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Modes {
    pub alternate: bool,
    /// The primary screen's cursor, saved when the app entered the alternate one.
    pub saved_cursor: (u16, u16),
    pub app_cursor: bool,
    pub app_keypad: bool,
    pub cursor_hidden: bool,
    /// DEC private mouse modes to set: 1000, 1002, 1003, 1005, 1006.
    pub mouse: Vec<u16>,
    /// The scroll region, rows top..=bottom (0-based).
    pub region: Option<(u16, u16)>,
    /// Bracketed paste (mode 2004), as drover last noted it.
    pub bracketed_paste: bool,
    /// The pane's size in tmux (cols, rows): a pane resized before a
    /// supervisor restart is not the size it was created at.
    pub size: Option<(u16, u16)>,
}

/// Read [`MODES_FORMAT`]'s answer; a field that is missing or not a number
/// reads as the terminal's default.
pub(super) fn parse_modes(line: &str) -> Modes {
    let f: Vec<&str> = line.split(' ').collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<u16>().ok());
    let on = |i: usize| num(i) == Some(1);
    let mouse = [(6, 1000), (7, 1002), (8, 1003), (10, 1005), (9, 1006)]
        .iter()
        .filter(|(i, _)| on(*i))
        .map(|(_, m)| *m)
        .collect();
    Modes {
        alternate: on(0),
        saved_cursor: (num(1).unwrap_or(0), num(2).unwrap_or(0)),
        app_cursor: on(3),
        app_keypad: on(4),
        cursor_hidden: num(5) == Some(0),
        mouse,
        region: num(11).zip(num(12)),
        bracketed_paste: false,
        size: num(13).zip(num(14)).filter(|&(c, r)| c > 0 && r > 0),
    }
}

/// The bytes that draw a re-seeded screen of `rows` rows: the primary grid
/// (when the app is in the alternate screen), the visible grid, the scroll
/// region, the cursor, the input modes (bracketed paste included) and the title.
pub(super) fn seed_bytes(
    primary: &[String],
    visible: &[String],
    rows: u16,
    cursor: (u16, u16),
    modes: &Modes,
    title: &str,
) -> Vec<u8> {
    let mut buf = Vec::new();
    let draw = |buf: &mut Vec<u8>, lines: &[String]| {
        for (i, l) in lines.iter().take(rows as usize).enumerate() {
            if i > 0 {
                buf.extend_from_slice(b"\r\n");
            }
            buf.extend_from_slice(l.as_bytes());
            buf.extend_from_slice(b"\x1b[0m");
        }
    };
    let cup = |buf: &mut Vec<u8>, (x, y): (u16, u16)| {
        buf.extend_from_slice(format!("\x1b[{};{}H", y + 1, x + 1).as_bytes());
    };
    if modes.alternate {
        draw(&mut buf, primary);
        cup(&mut buf, modes.saved_cursor);
        // 1049 saves that cursor for the app's own return to the primary screen.
        buf.extend_from_slice(b"\x1b[?1049h\x1b[H");
    }
    draw(&mut buf, visible);
    if let Some((top, bottom)) = modes.region
        && (top > 0 || bottom + 1 < rows)
        && top < bottom
    {
        buf.extend_from_slice(format!("\x1b[{};{}r", top + 1, bottom + 1).as_bytes());
    }
    cup(&mut buf, cursor);
    if modes.app_cursor {
        buf.extend_from_slice(b"\x1b[?1h");
    }
    if modes.app_keypad {
        buf.extend_from_slice(b"\x1b=");
    }
    for m in &modes.mouse {
        buf.extend_from_slice(format!("\x1b[?{m}h").as_bytes());
    }
    if modes.bracketed_paste {
        buf.extend_from_slice(b"\x1b[?2004h");
    }
    if modes.cursor_hidden {
        buf.extend_from_slice(b"\x1b[?25l");
    }
    let title: String = title.chars().filter(|c| !c.is_control()).collect();
    if !title.is_empty() && !is_kitty_graphics(&title) {
        buf.extend_from_slice(format!("\x1b]0;{title}\x07").as_bytes());
    }
    buf
}

/// tmux takes an APC string (`ESC _ … ESC \\`, screen's title sequence) as
/// the pane's title, so a kitty graphics query (`ESC _ G i=31,…;AAAA ESC
/// \\`, which Claude Code 2.1.332 sends at start) becomes tmux's title. It is
/// not one the app set.
fn is_kitty_graphics(title: &str) -> bool {
    title.strip_prefix('G').is_some_and(|rest| {
        let keys = rest.split(';').next().unwrap_or_default();
        !keys.is_empty()
            && keys
                .split(',')
                .all(|kv| kv.split_once('=').is_some_and(|(k, _)| !k.is_empty()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::screen::Screen;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_the_modes_tmux_reports() {
        let m = parse_modes("1 4 2 1 0 0 1 1 0 1 0 0 20 90 30");
        assert_eq!(m.size, Some((90, 30)));
        assert!(m.alternate && m.app_cursor && !m.app_keypad && m.cursor_hidden);
        assert_eq!(m.saved_cursor, (4, 2));
        assert_eq!(m.mouse, vec![1000, 1002, 1006]);
        assert_eq!(m.region, Some((0, 20)));
        assert_eq!(parse_modes(""), Modes::default());
    }

    /// Guards: a re-seeded pane kept none of the app's terminal state (a
    /// fresh screen drew tmux's capture): the alternate screen, cursor keys,
    /// mouse, cursor visibility and title are restored, and the app leaving
    /// the alternate screen shows its primary screen again.
    #[test]
    fn reseeded_screen_keeps_the_apps_terminal_state() {
        let mut m = parse_modes("1 0 1 1 0 0 1 1 0 1 0 0 23");
        m.bracketed_paste = true;
        let bytes = seed_bytes(
            &lines(&["primary one", "$ app"]),
            &lines(&["the app's frame"]),
            24,
            (3, 0),
            &m,
            "✳ Claude Code",
        );
        let mut s = Screen::new(80, 24);
        s.process(&bytes);
        assert!(s.text().contains("the app's frame"));
        assert!(!s.text().contains("primary one"));
        assert!(s.application_cursor() && s.alternate_screen() && s.bracketed_paste());
        assert_eq!(s.hooks().title(), Some("✳ Claude Code"));
        s.process(b"\x1b[?1049l");
        assert!(s.text().contains("primary one"), "{}", s.text());
        assert!(!s.text().contains("the app's frame"));
    }

    #[test]
    fn a_primary_screen_pane_is_drawn_as_before() {
        let bytes = seed_bytes(
            &[],
            &lines(&["$ echo hi", "hi"]),
            24,
            (0, 2),
            &Modes::default(),
            "",
        );
        assert_eq!(bytes, b"$ echo hi\x1b[0m\r\nhi\x1b[0m\x1b[3;1H".to_vec());
    }

    /// Guards: Claude Code 2.1.332's kitty graphics query, which tmux keeps
    /// as the pane's title, came back as the title of a re-seeded screen.
    #[test]
    fn kitty_graphics_query_tmux_took_as_a_title_is_not_restored() {
        let seeded = |title: &str| {
            let bytes = seed_bytes(&[], &[], 24, (0, 0), &Modes::default(), title);
            let mut s = Screen::new(80, 24);
            s.process(&bytes);
            s.hooks().title().map(str::to_string)
        };
        assert_eq!(seeded("Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA"), None);
        assert_eq!(seeded("Git status"), Some("Git status".into()));
        assert_eq!(seeded("✳ Claude Code"), Some("✳ Claude Code".into()));
    }
}
