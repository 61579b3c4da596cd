//! Raw PTY recordings of real agent runs, made with `script(1)`, and their
//! labels (`tests/fixtures/recordings/labels.tsv`).

/// Remove the `Script started on …` header line and the `Script done on …`
/// trailer that `script(1)` adds, leaving only the program's output bytes.
pub fn strip_typescript(raw: &[u8]) -> &[u8] {
    let mut body = raw;
    if body.starts_with(b"Script started on ")
        && let Some(nl) = body.iter().position(|&b| b == b'\n')
    {
        body = &body[nl + 1..];
    }
    const TRAILER: &[u8] = b"\nScript done on ";
    if let Some(at) = body.windows(TRAILER.len()).rposition(|w| w == TRAILER) {
        body = &body[..at];
    }
    body
}

/// One labelled recording: file, agent, size, expected state and screen markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub file: String,
    pub agent: String,
    pub cols: u16,
    pub rows: u16,
    /// The agent state at the end of the recording (`idle`, `blocked:permission`, …).
    pub state: String,
    /// Texts the final screen must contain.
    pub markers: Vec<String>,
}

/// Parse `labels.tsv`: `file  agent  COLSxROWS  state  marker|marker…`, `#` comments.
pub fn parse_labels(text: &str) -> Result<Vec<Label>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 5 {
            return Err(format!("line {}: expected 5 tab-separated fields", n + 1));
        }
        let (cols, rows) =
            crate::pane::parse_size(f[2]).map_err(|e| format!("line {}: size: {e}", n + 1))?;
        out.push(Label {
            file: f[0].to_string(),
            agent: f[1].to_string(),
            cols,
            rows,
            state: f[3].to_string(),
            markers: f[4].split('|').map(str::to_string).collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_header_and_trailer_only() {
        let raw = b"Script started on 2026 [COMMAND=\"x\"]\nhello\r\nworld\nScript done on 2026 [COMMAND_EXIT_CODE=\"0\"]\n";
        assert_eq!(strip_typescript(raw), b"hello\r\nworld");
        assert_eq!(strip_typescript(b"plain"), b"plain");
    }

    #[test]
    fn labels_parse_and_reject_short_lines() {
        let l =
            parse_labels("# c\na.bin\tclaude\t120x40\tidle\t? for shortcuts|\u{276f}\n").unwrap();
        assert_eq!(l[0].markers.len(), 2);
        assert_eq!((l[0].cols, l[0].rows), (120, 40));
        assert!(parse_labels("a\tb\n").is_err());
    }
}
