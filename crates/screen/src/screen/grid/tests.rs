//! The referee: vt100 0.18.1 and this model fed the same bytes must agree
//! on every cell, wrap flag, cursor, mode, scrollback row and hook.

use super::{Color, Model, MouseEncoding, MouseMode};
use crate::screen::Hooks;
use proptest::prelude::*;
use std::num::NonZeroU16;

type Ref = vt100::Parser<Hooks>;

fn reference(rows: u16, cols: u16, sb: usize) -> Ref {
    vt100::Parser::new_with_callbacks(
        NonZeroU16::new(rows).unwrap(),
        NonZeroU16::new(cols).unwrap(),
        sb,
        Hooks::default(),
    )
}

fn color(c: vt100::Color) -> Color {
    match c {
        vt100::Color::Default => Color::Default,
        vt100::Color::Idx(i) => Color::Idx(i),
        vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

fn mouse(m: vt100::MouseProtocolMode) -> MouseMode {
    match m {
        vt100::MouseProtocolMode::None => MouseMode::None,
        vt100::MouseProtocolMode::Press => MouseMode::Press,
        vt100::MouseProtocolMode::PressRelease => MouseMode::PressRelease,
        vt100::MouseProtocolMode::ButtonMotion => MouseMode::ButtonMotion,
        vt100::MouseProtocolMode::AnyMotion => MouseMode::AnyMotion,
    }
}

fn encoding(e: vt100::MouseProtocolEncoding) -> MouseEncoding {
    match e {
        vt100::MouseProtocolEncoding::Default => MouseEncoding::Default,
        vt100::MouseProtocolEncoding::Utf8 => MouseEncoding::Utf8,
        vt100::MouseProtocolEncoding::Sgr => MouseEncoding::Sgr,
    }
}

fn style(s: vt100::CursorStyle) -> u8 {
    use vt100::CursorStyle::*;
    match s {
        Default => 0,
        BlinkBlock => 1,
        SteadyBlock => 2,
        BlinkUnderline => 3,
        SteadyUnderline => 4,
        BlinkVerticalBar => 5,
        SteadyVerticalBar => 6,
    }
}

/// Every visible cell and row flag, as `(row, col)` → description.
fn view_of_ref(s: &vt100::Screen) -> Vec<String> {
    let (rows, cols) = s.size();
    let mut out = Vec::new();
    for r in 0..rows.get() {
        out.push(format!("row {r} wrapped={}", s.row_wrapped(r)));
        for c in 0..cols.get() + 1 {
            match s.cell(r, c) {
                None => out.push(format!("{r},{c} none")),
                Some(cell) => out.push(format!(
                    "{r},{c} {:?} w={} cont={} fg={:?} bg={:?} b={} d={} i={} u={} inv={}",
                    cell.contents(),
                    cell.is_wide(),
                    cell.is_wide_continuation(),
                    color(cell.fgcolor()),
                    color(cell.bgcolor()),
                    cell.bold(),
                    cell.dim(),
                    cell.italic(),
                    cell.underline(),
                    cell.inverse()
                )),
            }
        }
    }
    out
}

fn view_of_model(m: &Model) -> Vec<String> {
    use super::cell::{BOLD, DIM, INVERSE, ITALIC, UNDERLINE};
    let (_, cols) = m.size();
    let mut out = Vec::new();
    for (r, row) in m.visible_rows().enumerate() {
        out.push(format!("row {r} wrapped={}", row.wrapped()));
        for c in 0..cols + 1 {
            match row.get(c) {
                None => out.push(format!("{r},{c} none")),
                Some(cell) => {
                    let a = cell.attrs();
                    out.push(format!(
                        "{r},{c} {:?} w={} cont={} fg={:?} bg={:?} b={} d={} i={} u={} inv={}",
                        row.contents(usize::from(c)),
                        cell.is_wide(),
                        cell.is_wide_continuation(),
                        a.fg,
                        a.bg,
                        a.has(BOLD),
                        a.has(DIM),
                        a.has(ITALIC),
                        a.has(UNDERLINE),
                        a.has(INVERSE)
                    ))
                }
            }
        }
    }
    out
}

fn state_of_ref(p: &Ref) -> Vec<String> {
    let s = p.screen();
    let h = p.callbacks();
    let (rows, cols) = s.size();
    vec![
        format!("size {}x{}", rows, cols),
        format!("cursor {:?}", s.cursor_position()),
        format!(
            "modes alt={} bp={} ac={} kp={} hide={} mouse={:?} enc={:?} style={}",
            s.alternate_screen(),
            s.bracketed_paste(),
            s.application_cursor(),
            s.application_keypad(),
            s.hide_cursor(),
            mouse(s.mouse_protocol_mode()),
            encoding(s.mouse_protocol_encoding()),
            style(s.cursor_style())
        ),
        format!(
            "attrs fg={:?} bg={:?} b={} d={} i={} u={} inv={}",
            color(s.fgcolor()),
            color(s.bgcolor()),
            s.bold(),
            s.dim(),
            s.italic(),
            s.underline(),
            s.inverse()
        ),
        format!("scrollback {} at {}", s.scrollback_len(), s.scrollback()),
        format!(
            "hooks title={:?} osc={:?} n={} sync={} queries={}",
            h.title(),
            h.osc7501(),
            h.osc7501_count(),
            h.in_sync_block(),
            h.has_queries()
        ),
        format!("rows {:?}", s.rows(0, cols.get()).collect::<Vec<_>>()),
    ]
}

fn state_of_model(m: &Model) -> Vec<String> {
    use super::cell::{BOLD, DIM, INVERSE, ITALIC, UNDERLINE};
    let h = m.hooks();
    let (rows, cols) = m.size();
    let a = m.attrs();
    vec![
        format!("size {}x{}", rows, cols),
        format!("cursor {:?}", m.cursor_position()),
        format!(
            "modes alt={} bp={} ac={} kp={} hide={} mouse={:?} enc={:?} style={}",
            m.alternate_screen(),
            m.bracketed_paste(),
            m.application_cursor(),
            m.application_keypad(),
            m.hide_cursor(),
            m.mouse_mode(),
            m.mouse_encoding(),
            m.cursor_style()
        ),
        format!(
            "attrs fg={:?} bg={:?} b={} d={} i={} u={} inv={}",
            a.fg,
            a.bg,
            a.has(BOLD),
            a.has(DIM),
            a.has(ITALIC),
            a.has(UNDERLINE),
            a.has(INVERSE)
        ),
        format!("scrollback {} at {}", m.scrollback_len(), m.scrollback()),
        format!(
            "hooks title={:?} osc={:?} n={} sync={} queries={}",
            h.title(),
            h.osc7501(),
            h.osc7501_count(),
            h.in_sync_block(),
            h.has_queries()
        ),
        format!("rows {:?}", m.rows_text()),
    ]
}

/// Compare everything; on a difference, the first differing line.
fn compare(p: &mut Ref, m: &mut Model, ctx: &str) -> Result<(), String> {
    let first_diff = |a: Vec<String>, b: Vec<String>, what: &str| -> Result<(), String> {
        if a.len() != b.len() {
            return Err(format!("{ctx}: {what}: {} lines vs {}", a.len(), b.len()));
        }
        for (x, y) in a.iter().zip(&b) {
            if x != y {
                return Err(format!("{ctx}: {what}:\n  vt100: {x}\n  grid:  {y}"));
            }
        }
        Ok(())
    };
    first_diff(state_of_ref(p), state_of_model(m), "state")?;
    first_diff(view_of_ref(p.screen()), view_of_model(m), "cells")?;
    let (_, cols) = p.screen().size();
    let f1: Vec<String> = p.screen().rows_formatted(0, cols.get()).collect();
    if f1 != m.rows_formatted() {
        return Err(format!(
            "{ctx}: rows_formatted\n  vt100: {f1:?}\n  grid:  {:?}",
            m.rows_formatted()
        ));
    }
    let (s1, s2) = (p.screen().state_formatted(), m.state_formatted());
    if s1 != s2 {
        return Err(format!(
            "{ctx}: state_formatted\n  vt100: {s1:?}\n  grid:  {s2:?}"
        ));
    }
    let q1 = p.callbacks_mut().take_terminal_queries_for_test();
    let q2 = m.hooks_mut().take_terminal_queries_for_test();
    if q1 != q2 {
        return Err(format!("{ctx}: queries {q1:?} vs {q2:?}"));
    }
    // The scrollback, a page at a time (as Screen::scrollback_rows reads it).
    let n = p.screen().scrollback_len();
    let mut off = n;
    while off > 0 {
        p.screen_mut().set_scrollback(off);
        m.set_scrollback(off);
        first_diff(
            view_of_ref(p.screen()),
            view_of_model(m),
            &format!("scrollback at {off}"),
        )?;
        off = off.saturating_sub(usize::from(p.screen().size().0.get()));
    }
    p.screen_mut().set_scrollback(0);
    m.set_scrollback(0);
    Ok(())
}

/// Feed both; false when vt100 itself panicked (it does on a few inputs,
/// e.g. a combining mark after a widened cell on a one-column screen):
/// there is no reference to compare with then, but this model must not
/// panic on the same bytes.
fn feed_both(p: &mut Ref, m: &mut Model, bytes: &[u8]) -> bool {
    m.process(bytes);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.process(bytes))).is_ok()
}

/// A `script(1)` typescript without its header and trailer lines (the
/// replay suite reads recordings the same way; `screen` cannot use
/// `rehearse`, a layer above it).
fn program_output(raw: &[u8]) -> &[u8] {
    let mut body = raw;
    if body.starts_with(b"Script started on ")
        && let Some(nl) = body.iter().position(|&b| b == b'\n')
    {
        body = &body[nl + 1..];
    }
    let trailer: &[u8] = b"\nScript done on ";
    if let Some(at) = body.windows(trailer.len()).rposition(|w| w == trailer) {
        body = &body[..at];
    }
    body
}

fn fixtures() -> Vec<(String, u16, u16, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut out = Vec::new();
    let rec = root.join("recordings");
    for e in std::fs::read_dir(&rec).expect("recordings dir").flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("bin") {
            continue;
        }
        let raw = std::fs::read(&path).expect("recording");
        let labels = std::fs::read_to_string(path.with_extension("labels.tsv")).unwrap_or_default();
        let (mut cols, mut rows) = (120, 40);
        if let Some(size) = labels
            .split_whitespace()
            .find_map(|w| w.strip_prefix("size="))
        {
            let mut it = size.split('x');
            cols = it.next().and_then(|v| v.parse().ok()).unwrap_or(cols);
            rows = it.next().and_then(|v| v.parse().ok()).unwrap_or(rows);
        }
        let body = program_output(&raw).to_vec();
        out.push((path.display().to_string(), rows, cols, body));
    }
    let mut stack = vec![root.join("screens")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("screens dir").flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().and_then(|x| x.to_str()) == Some("txt") {
                let text = std::fs::read_to_string(&path).expect("screen fixture");
                let bytes = text.replace('\n', "\r\n").into_bytes();
                out.push((path.display().to_string(), 40, 120, bytes));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_renders_as_vt100_does() {
    let all = fixtures();
    assert!(all.len() > 20, "fixtures found: {}", all.len());
    for (name, rows, cols, bytes) in all {
        for chunk in [bytes.len().max(1), 4096, 7] {
            let mut p = reference(rows, cols, crate::screen::SCROLLBACK_ROWS);
            let mut m = Model::new(rows, cols, crate::screen::SCROLLBACK_ROWS);
            for (i, part) in bytes.chunks(chunk).enumerate() {
                assert!(feed_both(&mut p, &mut m, part), "vt100 panicked on {name}");
                if chunk == 4096
                    && let Err(e) = compare(&mut p, &mut m, &format!("{name} chunk {i}"))
                {
                    panic!("{e}");
                }
            }
            if let Err(e) = compare(&mut p, &mut m, &format!("{name} (chunks of {chunk})")) {
                panic!("{e}");
            }
        }
    }
}

/// One piece of terminal output for the property test.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let text = prop_oneof![
        "[a-z ]{1,12}",
        "[ -~]{1,6}",
        Just("中文字".to_string()),
        Just("日本".to_string()),
        Just("😀".to_string()),
        Just("❤\u{fe0f}".to_string()),
        Just("e\u{301}".to_string()),
        Just("\u{301}\u{302}".to_string()),
        Just("a\u{fe0f}".to_string()),
        Just("\u{200b}".to_string()),
        Just("\u{fffd}\u{85}".to_string()),
    ]
    .prop_map(String::into_bytes);
    let ctl = prop_oneof![
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\x08".to_vec()),
        Just(b"\t".to_vec()),
        Just(b"\x0b\x0c\x07\x0e".to_vec()),
        Just(b"\x1b7".to_vec()),
        Just(b"\x1b8".to_vec()),
        Just(b"\x1bM".to_vec()),
        Just(b"\x1b=".to_vec()),
        Just(b"\x1b>".to_vec()),
        Just(b"\x1bc".to_vec()),
        Just(b"\x1b(B".to_vec()),
    ];
    let csi = (
        prop::sample::select(vec![
            "@", "A", "B", "C", "D", "E", "F", "G", "H", "f", "J", "K", "L", "M", "P", "S", "T",
            "X", "`", "b", "d", "r", "m", "c", "n", "t", " q", "$p", "?J", "?K", "?$p",
        ]),
        prop::collection::vec(0u16..30, 0..3),
    )
        .prop_map(|(f, ps)| {
            let (inter, fin) = f.split_at(f.len() - 1);
            let (pre, mid) = match inter {
                "?" => ("?", ""),
                "?$" => ("?", "$"),
                other => ("", other),
            };
            let ps: Vec<String> = ps.iter().map(u16::to_string).collect();
            format!("\x1b[{pre}{}{mid}{fin}", ps.join(";")).into_bytes()
        });
    let sgr = prop::collection::vec(
        prop_oneof![
            (0u16..110).prop_map(|n| n.to_string()),
            (0u16..300).prop_map(|n| format!("38;5;{n}")),
            (0u16..256, 0u16..256, 0u16..300).prop_map(|(r, g, b)| format!("48;2;{r};{g};{b}")),
            Just("38:2:1:2:3".to_string()),
            Just("38;7".to_string()),
            Just("48".to_string()),
        ],
        0..4,
    )
    .prop_map(|v| format!("\x1b[{}m", v.join(";")).into_bytes());
    let mode = (
        prop::sample::select(vec![
            1u16, 6, 9, 25, 47, 1000, 1002, 1003, 1005, 1006, 1049, 2004, 2026, 7,
        ]),
        any::<bool>(),
    )
        .prop_map(|(m, on)| format!("\x1b[?{m}{}", if on { 'h' } else { 'l' }).into_bytes());
    let osc = prop_oneof![
        Just(b"\x1b]0;title one\x07".to_vec()),
        Just(b"\x1b]2;t2\x1b\\".to_vec()),
        Just(b"\x1b]1;icon\x07".to_vec()),
        Just(b"\x1b]0;a;b\x07".to_vec()),
        Just(b"\x1b]7501;state=working:app=codex\x07".to_vec()),
        Just(b"\x1b]52;c;aGVsbG8=\x07".to_vec()),
        Just(b"\x1bP+q544e\x1b\\".to_vec()),
    ];
    // What the model reads without vte (`Model::process`) next to what
    // it must leave to vte: long and empty parameter lists, saturating
    // values, a C0 or ESC inside a CSI, subparameters, DEL, invalid and
    // cut UTF-8.
    let params = prop::collection::vec(
        prop::sample::select(vec!["", "0", "1", "4", "31", "65535", "65567", "70000"]),
        0..40,
    )
    .prop_map(|v| format!("\x1b[{}m", v.join(";")).into_bytes());
    let edge = prop_oneof![
        Just(b"\x1b[1\r;2H".to_vec()),
        Just(b"\x1b[3\x1b[4m".to_vec()),
        Just(b"\x1b[1\x7fC".to_vec()),
        Just(b"\x1b[12:3m".to_vec()),
        Just(b"\x7f".to_vec()),
        Just(b"\xe2\x82A".to_vec()),
        Just(b"\xe2\x82\x1b[m".to_vec()),
        Just(b"\xff\xc3".to_vec()),
        Just(b"\xc3".to_vec()),
        Just(b"\x18\x1a".to_vec()),
    ];
    prop_oneof![4 => text, 2 => ctl, 3 => csi, 1 => sgr, 1 => mode, 1 => osc, 1 => params, 1 => edge]
}

#[derive(Debug, Clone)]
enum Step {
    Bytes(Vec<u8>),
    Resize(u16, u16),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            30 => piece().prop_map(Step::Bytes),
            1 => (1u16..12, 1u16..20).prop_map(|(r, c)| Step::Resize(r, c)),
        ],
        1..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn random_output_renders_as_vt100_does(
        rows in 1u16..10,
        cols in 1u16..16,
        sb in prop::sample::select(vec![0usize, 3, 50]),
        steps in steps(),
        // Small cuts split sequences; whole pieces are read without vte.
        cut in prop_oneof![1usize..9, Just(4096usize)],
    ) {
        let mut p = reference(rows, cols, sb);
        let mut m = Model::new(rows, cols, sb);
        let mut referee = true;
        // What an attached terminal shows, in each model (the renderer's
        // `shown`), and the previous step's state.
        let mut shown_p = reference(rows, cols, 0);
        let mut shown_m = Model::new(rows, cols, 0);
        let mut before_p = p.screen().clone();
        let mut before_m = m.driver.term.clone();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Bytes(b) => {
                    for part in b.chunks(cut) {
                        if referee {
                            referee = feed_both(&mut p, &mut m, part);
                        } else {
                            m.process(part);
                        }
                    }
                }
                Step::Resize(r, c) => {
                    p.set_size(NonZeroU16::new(*r).unwrap(), NonZeroU16::new(*c).unwrap());
                    m.set_size(*r, *c);
                }
            }
            if !referee {
                continue;
            }
            if let Err(e) = compare(&mut p, &mut m, &format!("step {i} {step:?}")) {
                prop_assert!(false, "{}", e);
            }
            let (d1, d2) = (p.screen().state_diff(&before_p), m.driver.term.state_diff(&before_m));
            prop_assert_eq!(d1, d2, "state_diff from the previous step, step {} {:?}", i, step);
            before_p = p.screen().clone();
            before_m = m.driver.term.clone();
            if shown_p.screen().size() != p.screen().size() {
                let (r, c) = p.screen().size();
                shown_p = reference(r.get(), c.get(), 0);
                shown_m = Model::new(r.get(), c.get(), 0);
            }
            let (f1, f2) = (p.screen().state_diff(shown_p.screen()), m.state_diff(&shown_m));
            prop_assert_eq!(&f1, &f2, "renderer frame, step {} {:?}", i, step);
            if !feed_both(&mut shown_p, &mut shown_m, f1.as_bytes()) {
                break;
            }
        }
    }
}

/// 400 cases, or `PROPTEST_CASES` for a longer search.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

#[test]
fn a_printable_run_ends_at_the_first_byte_outside_0x20_to_0x7e() {
    let naive = |b: &[u8]| {
        b.iter()
            .position(|c| !(0x20..=0x7e).contains(c))
            .unwrap_or(b.len())
    };
    // Every byte value at every position of a 17-byte run of printables,
    // with every byte above it either printable or that same value.
    for stop in 0..=255u8 {
        for at in 0..17 {
            for fill in [b'a', stop, 0xff, 0x00] {
                let mut b = vec![b'x'; 17];
                b[at] = stop;
                for c in &mut b[at + 1..] {
                    *c = fill;
                }
                assert_eq!(super::printable_run(&b), naive(&b), "{b:02x?}");
            }
        }
    }
    assert_eq!(super::printable_run(b""), 0);
}
