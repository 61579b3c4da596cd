/// Remove control characters (C0 except tab, DEL, C1) from a rendered line so
/// nothing an application printed can drive the reader's terminal.
pub fn sanitize_line(s: &str) -> String {
    s.chars()
        .filter(|c| {
            let u = *c as u32;
            !(u < 0x20 && *c != '\t' || u == 0x7f || (0x80..0xa0).contains(&u))
        })
        .collect()
}
