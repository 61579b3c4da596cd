//! Small formatting helpers shared by the human-readable outputs.

/// How long ago `ms` (ms since the epoch) was, for people: `4s ago`,
/// `3m ago`, `2h ago`, `5d ago`; `-` for no time.
pub fn ago(ms: u64) -> String {
    if ms == 0 {
        return "-".into();
    }
    let secs = drover::paths::now_ms().saturating_sub(ms) / 1000;
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// [`ago`] for an RFC 3339 time; the text itself when it does not parse.
pub fn ago_rfc3339(at: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(at) {
        Ok(t) => ago(u64::try_from(t.timestamp_millis()).unwrap_or(0)),
        Err(_) => at.to_string(),
    }
}

/// Break `text` into lines of at most `width` characters, at spaces where
/// it can (a longer word gets a line of its own).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(20);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

nix::ioctl_read_bad!(tiocgwinsz, nix::libc::TIOCGWINSZ, nix::libc::winsize);

/// The width of the terminal stdout is, else `$COLUMNS`; `None` when stdout
/// is not a terminal and `$COLUMNS` is unset (then nothing is wrapped).
pub fn terminal_cols() -> Option<usize> {
    let mut ws = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we own.
    let r = unsafe { tiocgwinsz(nix::libc::STDOUT_FILENO, &mut ws) };
    if r.is_ok() && ws.ws_col > 0 {
        return Some(usize::from(ws.ws_col));
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|c: &usize| *c > 0)
}

/// The candidate closest to a mistyped `input`, when one is close enough to
/// be what was meant (as clap suggests for subcommands).
pub fn did_you_mean<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(input, c), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// "unknown WHAT "x"; did you mean y?" or "… is one of a, b, c".
pub fn unknown(what: &str, input: &str, candidates: &[&str]) -> String {
    match did_you_mean(input, candidates) {
        Some(c) => format!("unknown {what} {input:?}; did you mean {c}?"),
        None => format!(
            "unknown {what} {input:?}: it is one of {}",
            candidates.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces_and_keeps_every_word() {
        let t = "the pane went quiet after the report was written and the attempt matched";
        let lines = wrap(t, 24);
        assert!(lines.iter().all(|l| l.chars().count() <= 24));
        assert_eq!(lines.join(" "), t);
    }

    #[test]
    fn ages_read_like_people_say_them() {
        let now = drover::paths::now_ms();
        assert_eq!(ago(now - 3_000), "3s ago");
        assert_eq!(ago(now - 180_000), "3m ago");
        assert_eq!(ago(now - 2 * 3_600_000), "2h ago");
        assert_eq!(ago(0), "-");
    }

    #[test]
    fn a_near_miss_is_suggested_and_a_far_one_is_not() {
        let c = ["pause", "resume", "close-out", "emergency-stop"];
        assert_eq!(did_you_mean("pasue", &c), Some("pause"));
        assert_eq!(did_you_mean("closeout", &c), Some("close-out"));
        assert_eq!(did_you_mean("xyz", &c), None);
    }
}
