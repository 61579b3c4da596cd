//! The charter: a markdown file naming the run's aim, the `lanes:` cap, the
//! `exclude:` tasks, the `gate:` command (run in the integration worktree;
//! exit 0 is green), `guarded-paths:` and optionally the task `pool:`. Its
//! sha256 is recorded at launch and printed in the close-out.
//!
//! A key is a line `key: value`, optionally as a list item (`- lanes: 2`) or in
//! bold (`**lanes:** 2`); the first occurrence counts. The aim is `aim:`, else
//! the first `# ` heading.

use crate::loopctl::{LoopError, sha256};
use std::path::{Path, PathBuf};

/// Largest charter read.
const MAX_CHARTER_BYTES: u64 = 256 * 1024;
/// The `lanes:` cap when the charter names none.
pub const DEFAULT_LANES: usize = 4;

/// A parsed charter.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Charter {
    pub path: PathBuf,
    pub sha256: String,
    pub aim: String,
    /// Most live lanes at once (counted from the live pane listing).
    pub lanes: usize,
    pub exclude: Vec<String>,
    /// The gate command (a shell command line); `None` means no gate command,
    /// and landing refuses.
    pub gate: Option<String>,
    pub guarded_paths: Vec<String>,
    /// The raw `pool:` value, interpreted by [`crate::loopctl::board::ready::pool_size`].
    pub pool: Option<String>,
    /// Longest one gate run may take (`gate-timeout:`, seconds or `90s`,
    /// `20m`, `1h`); `None`: the default of the landing.
    pub gate_timeout: Option<std::time::Duration>,
    /// The command run in each new worktree before its agent or gate starts
    /// (`setup:`, [`crate::loopctl::land::setup`]); `None`: none.
    pub setup: Option<String>,
    /// Longest one setup run may take (`setup-timeout:`, like `gate-timeout:`).
    pub setup_timeout: Option<std::time::Duration>,
}

/// A duration as the charter writes one: seconds, or a number with `s`,
/// `m` or `h` (pure). `None` when it is not one, or zero.
pub fn parse_duration(v: &str) -> Option<std::time::Duration> {
    let v = v.trim();
    let (num, unit) = match v.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => v.split_at(i),
        None => (v, "s"),
    };
    let n: u64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "s" | "sec" | "secs" => n,
        "m" | "min" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        _ => return None,
    };
    (secs > 0).then(|| std::time::Duration::from_secs(secs))
}

fn key_value(line: &str) -> Option<(String, String)> {
    let l = line.trim();
    let l = l
        .strip_prefix("- ")
        .or_else(|| l.strip_prefix("* "))
        .unwrap_or(l);
    // `**key:** value`: only the bold around the key goes.
    let l = match l.strip_prefix("**").and_then(|r| r.split_once("**")) {
        Some((k, v)) => format!("{k}{v}"),
        None => l.to_string(),
    };
    let (k, v) = l.split_once(':')?;
    let k = k.trim().to_ascii_lowercase();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'-' || b == b'_')
    {
        return None;
    }
    Some((k, v.trim().trim_matches('`').trim().to_string()))
}

fn split_list(v: &str) -> Vec<String> {
    v.split([',', ' '])
        .map(|s| s.trim().trim_matches('`'))
        .filter(|s| !s.is_empty() && *s != "none" && *s != "-")
        .map(str::to_string)
        .collect()
}

/// Parse a charter's text (pure).
pub fn parse(text: &str, path: &Path) -> Result<Charter, LoopError> {
    let get = |key: &str| {
        text.lines()
            .filter_map(key_value)
            .find(|(k, _)| k == key || k.replace('_', "-") == key)
            .map(|(_, v)| v)
    };
    let heading = text
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|h| h.trim().to_string());
    let aim = get("aim")
        .or(heading)
        .ok_or_else(|| LoopError::parse(path, "no `aim:` line and no `# ` heading"))?;
    let lanes = match get("lanes") {
        None => DEFAULT_LANES,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(LoopError::parse(
                    path,
                    format!("`lanes:` must be a number ≥ 1, not {v:?}"),
                ));
            }
        },
    };
    let gate = get("gate").filter(|g| !g.is_empty());
    let timeout = |key: &str| match get(key) {
        None => Ok(None),
        Some(v) => parse_duration(&v).map(Some).ok_or_else(|| {
            LoopError::parse(
                path,
                format!("`{key}:` must be a duration (600, 90s, 20m, 1h), not {v:?}"),
            )
        }),
    };
    let gate_timeout = timeout("gate-timeout")?;
    Ok(Charter {
        path: path.to_path_buf(),
        sha256: sha256::hex(text.as_bytes()),
        aim,
        lanes,
        exclude: get("exclude").map(|v| split_list(&v)).unwrap_or_default(),
        gate,
        guarded_paths: get("guarded-paths")
            .map(|v| split_list(&v))
            .unwrap_or_default(),
        pool: get("pool"),
        gate_timeout,
        setup: get("setup").filter(|s| !s.is_empty()),
        setup_timeout: timeout("setup-timeout")?,
    })
}

/// Read and parse a charter file.
pub fn load(path: &Path) -> Result<Charter, LoopError> {
    let meta = std::fs::metadata(path).map_err(|e| LoopError::io(path, e))?;
    if meta.len() > MAX_CHARTER_BYTES {
        return Err(LoopError::parse(path, "larger than 256 KiB"));
    }
    let bytes = std::fs::read(path).map_err(|e| LoopError::io(path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| LoopError::parse(path, "not UTF-8"))?;
    parse(&text, path)
}

impl Charter {
    /// Whether a task is excluded (case-insensitive id).
    pub fn excludes(&self, id: &str) -> bool {
        self.exclude.iter().any(|x| x.eq_ignore_ascii_case(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_in_their_forms() {
        let text = "# Tidy the greeter\n\n- lanes: 3\n- **exclude:** TASK-4, task-9\ngate: `sh -c 'test -f hello.txt'`\nguarded-paths: src/auth/**, deploy/\n";
        let c = parse(text, Path::new("c.md")).unwrap();
        assert_eq!(c.aim, "Tidy the greeter");
        assert_eq!(c.lanes, 3);
        assert_eq!(c.exclude, vec!["TASK-4", "task-9"]);
        assert!(c.excludes("task-4") && c.excludes("TASK-9") && !c.excludes("TASK-1"));
        assert_eq!(c.gate.as_deref(), Some("sh -c 'test -f hello.txt'"));
        assert_eq!(c.guarded_paths, vec!["src/auth/**", "deploy/"]);
        assert_eq!(c.sha256, sha256::hex(text.as_bytes()));
        assert_eq!(c.pool, None);
    }

    #[test]
    fn defaults_and_errors() {
        let c = parse("aim: ship it\n", Path::new("c.md")).unwrap();
        assert_eq!((c.lanes, c.gate.clone()), (DEFAULT_LANES, None));
        assert!(c.exclude.is_empty());
        let e = parse("lanes: 0\naim: x\n", Path::new("c.md")).unwrap_err();
        assert!(e.to_string().contains("lanes"), "{e}");
        let e = parse("nothing here\n", Path::new("c.md")).unwrap_err();
        assert!(e.to_string().contains("aim"), "{e}");
    }

    /// Guards issue 24 item 5: the gate's timeout comes from the charter.
    #[test]
    fn gate_timeout_is_a_duration() {
        let c = |t: &str| parse(&format!("aim: x\n- gate-timeout: {t}\n"), Path::new("c.md"));
        let secs = |t: &str| c(t).unwrap().gate_timeout.map(|d| d.as_secs());
        assert_eq!(secs("600"), Some(600));
        assert_eq!(secs("90s"), Some(90));
        assert_eq!(secs("20m"), Some(1200));
        assert_eq!(secs("1h"), Some(3600));
        assert_eq!(
            parse("aim: x\n", Path::new("c.md")).unwrap().gate_timeout,
            None
        );
        for bad in ["0", "soon", "5d", "-3"] {
            let e = c(bad).unwrap_err().to_string();
            assert!(e.contains("gate-timeout"), "{bad}: {e}");
        }
    }

    /// Issue 42 item 11: `setup:` and its own timeout.
    #[test]
    fn setup_and_its_timeout() {
        let c = parse(
            "aim: x\n- setup: `python3 -m venv .venv`\nsetup-timeout: 5m\n",
            Path::new("c.md"),
        )
        .unwrap();
        assert_eq!(c.setup.as_deref(), Some("python3 -m venv .venv"));
        assert_eq!(c.setup_timeout.map(|d| d.as_secs()), Some(300));
        let e = parse("aim: x\nsetup-timeout: later\n", Path::new("c.md")).unwrap_err();
        assert!(e.to_string().contains("setup-timeout"), "{e}");
        assert_eq!(parse("aim: x\n", Path::new("c.md")).unwrap().setup, None);
    }
}
