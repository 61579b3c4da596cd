use super::*;

#[test]
fn renders_text_and_trims() {
    let mut s = Screen::new(20, 5);
    s.process(b"hello\r\n\x1b[31mred\x1b[0m   ");
    assert_eq!(s.rows()[0], "hello");
    assert_eq!(s.rows()[1], "red");
    assert_eq!(s.text(), "hello\nred\n");
}

#[test]
fn captures_title_and_osc7501_with_st_and_bel() {
    let mut s = Screen::new(40, 5);
    s.process(b"\x1b]0;\xe2\x9c\xb3 my title\x07");
    assert_eq!(s.hooks().title(), Some("✳ my title"));
    s.process(b"\x1b]7501;state=working:app=codex\x1b\\");
    assert_eq!(s.hooks().osc7501(), Some("state=working:app=codex"));
    s.process(b"\x1b]7501;state=blocked:app=codex:kind=permission\x07");
    assert_eq!(
        s.hooks().osc7501(),
        Some("state=blocked:app=codex:kind=permission")
    );
    assert_eq!(s.hooks().osc7501_count(), 2);
}

#[test]
fn answers_da1_dsr_and_decrqm() {
    let mut s = Screen::new(40, 5);
    s.process(b"ab\x1b[c\x1b[5n\x1b[6n\x1b[?2004h\x1b[?2004$p\x1b[?9999$p");
    let r = String::from_utf8(s.take_replies()).unwrap();
    assert_eq!(
        r,
        "\x1b[?62;22c\x1b[0n\x1b[1;3R\x1b[?2004;1$y\x1b[?9999;0$y"
    );
    assert!(s.take_replies().is_empty(), "answered once");
}

#[test]
fn tracks_synchronized_output_blocks() {
    let mut s = Screen::new(40, 5);
    s.process(b"\x1b[?2026h frame");
    assert!(s.hooks().in_sync_block());
    s.process(b"\x1b[?2026l");
    assert!(!s.hooks().in_sync_block());
}

#[test]
fn alternate_screen_program_renders_and_restores() {
    let mut s = Screen::new(20, 4);
    s.process(b"shell$ ");
    s.process(b"\x1b[?1049h\x1b[H\x1b[2Jfull\x1b[4;1Hbottom");
    assert!(s.alternate_screen());
    assert_eq!(s.rows(), vec!["full", "", "", "bottom"]);
    s.process(b"\x1b[?1049l");
    assert_eq!(s.rows()[0], "shell$");
}

#[test]
fn wide_chars_and_hostile_sequences_are_contained() {
    let mut s = Screen::new(20, 3);
    s.process("漢字 ok".as_bytes());
    assert_eq!(s.rows()[0], "漢字 ok");
    // OSC 52 clipboard write, a title flood, C1 controls: no panic, no escapes in text.
    s.process(b"\x1b]52;c;aGVsbG8=\x07");
    let flood = vec![b'x'; 100_000];
    s.process(b"\x1b]0;");
    s.process(&flood);
    s.process(b"\x07");
    assert!(s.hooks().title().unwrap().len() <= 256);
    s.process(b"\xc2\x9b31m\x00\x01\x7f");
    for r in s.rows() {
        assert!(!r.chars().any(|c| (c as u32) < 0x20 || c == '\u{9b}'));
    }
}

#[test]
fn scrollback_returns_rows_above_the_screen() {
    let mut s = Screen::new(10, 2);
    for i in 0..5 {
        s.process(format!("l{i}\r\n").as_bytes());
    }
    // Visible: l4 and the empty row after it.
    assert_eq!(s.rows(), vec!["l4", ""]);
    assert_eq!(s.scrollback_rows(2), vec!["l2", "l3"]);
    assert_eq!(s.scrollback_rows(100), vec!["l0", "l1", "l2", "l3"]);
    assert_eq!(s.rows(), vec!["l4", ""], "view restored");
}

proptest::proptest! {
    /// The screen is the same however the bytes are split.
    #[test]
    fn chunking_does_not_matter(cuts in proptest::collection::vec(0usize..200, 0..8)) {
        let input = "a\x1b[31mb\x1b[0m\r\n漢字\x1b[2K\x1b[1A\x1b]0;t\x07xyz\x1b[?2026h\x1b[?2026l\r\nend".as_bytes();
        let mut whole = Screen::new(20, 5);
        whole.process(input);
        let mut parts = Screen::new(20, 5);
        let mut idx: Vec<usize> = cuts.into_iter().map(|c| c % (input.len() + 1)).collect();
        idx.sort();
        let mut prev = 0;
        for i in idx { parts.process(&input[prev..i]); prev = i; }
        parts.process(&input[prev..]);
        proptest::prop_assert_eq!(whole.rows(), parts.rows());
        proptest::prop_assert_eq!(whole.hooks().title(), parts.hooks().title());
    }
}
