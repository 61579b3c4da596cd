//! Raw PTY recordings of real agent runs, made with `script(1)`, and their
//! labels (`tests/fixtures/recordings/labels.tsv`).

use crate::proto::state::Until;

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

/// A point in a recording where the agent's state was checked live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// How many bytes of the recording the screen had seen.
    pub bytes: usize,
    /// The agent state there (`idle`, `done`, `blocked:permission`, …),
    /// written in the labels file as `wait --until` names it.
    pub state: Until,
    /// Texts the screen contains there; a leading `!` means it must not.
    pub markers: Vec<String>,
}

/// The labels of one recording (`<name>.labels.tsv` beside `<name>.bin`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    pub agent: String,
    pub cols: u16,
    pub rows: u16,
    /// In byte order; the last one is the state at the end of the recording.
    pub checkpoints: Vec<Checkpoint>,
}

impl Labels {
    /// The file form: `# agent=A size=COLSxROWS`, then `bytes<TAB>state<TAB>m1|m2…`.
    pub fn render(&self) -> String {
        let mut out = format!(
            "# agent={} size={}x{}\n# bytes\tstate\tmarkers (| between, ! = must not contain)\n",
            self.agent, self.cols, self.rows
        );
        for c in &self.checkpoints {
            out.push_str(&format!(
                "{}\t{}\t{}\n",
                c.bytes,
                c.state,
                c.markers.join("|")
            ));
        }
        out
    }

    /// Parse the file form.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut agent = None;
        let mut size = None;
        let mut checkpoints = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if let Some(head) = line.strip_prefix("# agent=") {
                let (a, sz) = head
                    .split_once(" size=")
                    .ok_or_else(|| format!("line {}: expected `# agent=A size=CxR`", n + 1))?;
                agent = Some(a.to_string());
                size =
                    Some(crate::pane::parse_size(sz).map_err(|e| format!("line {}: {e}", n + 1))?);
                continue;
            }
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != 3 {
                return Err(format!("line {}: expected 3 tab-separated fields", n + 1));
            }
            checkpoints.push(Checkpoint {
                bytes: f[0]
                    .parse()
                    .map_err(|e| format!("line {}: bytes: {e}", n + 1))?,
                state: f[1]
                    .parse()
                    .map_err(|e| format!("line {}: state: {e}", n + 1))?,
                markers: f[2]
                    .split('|')
                    .filter(|m| !m.is_empty())
                    .map(str::to_string)
                    .collect(),
            });
        }
        let (cols, rows) = size.ok_or("missing `# agent=A size=CxR` line")?;
        Ok(Labels {
            agent: agent.unwrap_or_default(),
            cols,
            rows,
            checkpoints,
        })
    }
}

/// The markers a screen text fails: present `!x` or absent `x`.
pub fn failed_markers<'a>(text: &str, markers: &'a [String]) -> Vec<&'a str> {
    markers
        .iter()
        .filter(|m| match m.strip_prefix('!') {
            Some(not) => text.contains(not),
            None => !text.contains(m.as_str()),
        })
        .map(String::as_str)
        .collect()
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
    fn labels_round_trip_and_reject_short_lines() {
        let l = Labels {
            agent: "claude".into(),
            cols: 120,
            rows: 40,
            checkpoints: vec![Checkpoint {
                bytes: 42,
                state: "blocked:permission".parse().unwrap(),
                markers: vec!["Do you want".into(), "!esc to interrupt".into()],
            }],
        };
        assert_eq!(Labels::parse(&l.render()).unwrap(), l);
        assert!(Labels::parse("# agent=a size=80x24\n1\tidle\n").is_err());
    }

    #[test]
    fn negated_markers_must_be_absent() {
        let m = vec!["idle".to_string(), "!working".to_string()];
        assert!(failed_markers("idle here", &m).is_empty());
        assert_eq!(failed_markers("idle working", &m), ["!working"]);
    }
}
